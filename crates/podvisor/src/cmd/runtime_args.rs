//! `--runtime` and `--registry-config` of `serve` and `run`: which runtime class pods without
//! `runtimeClassName` get, and how the `oci` class pulls.

use anyhow::Context;
use podvisor_image::{ImageStore, RegistryConfig};
use podvisor_runtime::oci::executor::RuncMode;
use podvisor_runtime::process::{OciOptions, ProcessRuntime, RuntimeClass};
use podvisor_runtime::sandbox::cni::{NetworkChoice, SYSTEM_CONF_DIR};
use std::path::{Path, PathBuf};

/// The runtime class of pods without `runtimeClassName`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RuntimeChoice {
    /// Host processes on the host's network: `image` is a label, `command` is required.
    #[default]
    Process,
    /// OCI containers from images (runc), each pod with its own network on a CNI bridge.
    Oci,
}

/// How the `oci` class has runc create and start a container.
#[derive(clap::ValueEnum, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum OciExecutorChoice {
    /// `runc create`, then `runc start`: two runc processes per container.
    Runc,
    /// `runc run --detach`: one runc process per container (measured ~15 % faster than
    /// `runc`).
    RuncRun,
    /// youki's `libcontainer`, embedded in podvisor (`podvisor youki`, one single-threaded
    /// helper process per operation): no runc needed; the container's part of a start ~40 %
    /// shorter than `runc-run`'s here.
    #[default]
    Youki,
}

/// The runtime flags.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct RuntimeArgs {
    /// How pods without `runtimeClassName` run (`runtimeClassName: process|oci` picks per pod).
    #[arg(long, value_enum, default_value_t = RuntimeChoice::Process)]
    pub runtime: RuntimeChoice,
    /// Registry credentials for pulls (docker config.json: `auths` with `auth` or
    /// `username`/`password`).
    #[arg(long)]
    pub registry_config: Option<PathBuf>,
    /// Keep this many `oci` pod sandboxes (namespaces on the CNI bridge) ready ahead of the
    /// pods that take them: a pod without hostNetwork, hostIPC or hostPorts then starts
    /// without waiting for the CNI plugins. On podvisor's own network, or a configured one
    /// made of the CNI reference plugins only (bridge, host-local, portmap, firewall,
    /// tuning, ...: none reads the pod's name); 0: none.
    #[arg(long, default_value_t = 0)]
    pub warm_sandboxes: usize,
    /// The OCI runtime of `oci` containers: `youki` (youki's libcontainer embedded in
    /// podvisor, the default: no runc needed, the fastest), `runc-run` (Debian's runc, one
    /// `runc run --detach` per container) or `runc` (`runc create` + `runc start`, one runc
    /// process more).
    #[arg(long, value_enum, default_value_t = OciExecutorChoice::Youki)]
    pub oci_executor: OciExecutorChoice,
    /// Change no kernel setting of the host. Without it podvisor sets the cgroup2 option
    /// `favordynmods` at start (as the kubelet sets its kernel tunables unless
    /// `--protect-kernel-defaults`): moving a container's process into its cgroup then no
    /// longer waits for an RCU grace period, several milliseconds of every start.
    #[arg(long)]
    pub protect_kernel_defaults: bool,
    /// Attach new `oci` pods to a network configured in this CNI directory, read as
    /// containerd reads its `conf_dir` (the first .conf/.conflist/.json file in lexical order,
    /// or the one `--cni-network` names): for a node whose network add-on writes there.
    /// Without it (and without `--cni-network`) pods get podvisor's own network, whatever
    /// other tools put in /etc/cni/net.d. Running pods keep the network they were attached
    /// with across restarts either way.
    #[arg(long, value_name = "DIR")]
    pub cni_conf_dir: Option<PathBuf>,
    /// Attach new `oci` pods to the network of this `name` in the CNI configuration
    /// directory (`--cni-conf-dir`, else /etc/cni/net.d).
    #[arg(long, value_name = "NAME")]
    pub cni_network: Option<String>,
}

impl RuntimeArgs {
    /// The network of new `oci` pods the flags ask for: podvisor's own unless a CNI
    /// configuration directory or network is named.
    #[must_use]
    pub fn network_choice(&self) -> NetworkChoice {
        if self.cni_conf_dir.is_none() && self.cni_network.is_none() {
            return NetworkChoice::Own;
        }
        NetworkChoice::ConfDir {
            dir: self
                .cni_conf_dir
                .clone()
                .unwrap_or_else(|| PathBuf::from(SYSTEM_CONF_DIR)),
            name: self.cni_network.clone(),
        }
    }

    /// The node's kernel tunables, before any pod starts: `favordynmods` set unless
    /// `--protect-kernel-defaults` (said on stderr when set now, or when it stays off).
    fn kernel_tunables(&self) {
        use podvisor_runtime::cgroup::dynmods::{Dynmods, favor_dynamic_modifications};
        match favor_dynamic_modifications(self.protect_kernel_defaults) {
            Dynmods::AlreadySet(_) | Dynmods::NoCgroup2 => {}
            set @ Dynmods::Set(_) => eprintln!("podvisor: {set}"),
            other => eprintln!("podvisor: warning: {other}"),
        }
    }

    /// The runtime over `state_dir`, with images in `images_dir`. The `oci` class is there
    /// whenever runc is installed (pods pick it with `runtimeClassName: oci`); `--runtime oci`
    /// needs it.
    pub fn runtime(
        &self,
        state_dir: &Path,
        images_dir: &Path,
        shim: &Path,
    ) -> anyhow::Result<ProcessRuntime> {
        if let Some(problem) = podvisor_runtime::process::privileges_problem() {
            anyhow::bail!("{problem}");
        }
        self.kernel_tunables();
        let default = match self.runtime {
            RuntimeChoice::Process => RuntimeClass::Process,
            RuntimeChoice::Oci => RuntimeClass::Oci,
        };
        // The class is there where it ran before youki (runc installed), and with youki
        // wherever the CNI plugins are; `--runtime oci` asks for it either way.
        let youki = self.oci_executor == OciExecutorChoice::Youki;
        let runc = Path::new(podvisor_runtime::oci::executor::RUNC).exists()
            || (youki
                && (default == RuntimeClass::Oci || Path::new("/usr/lib/cni/bridge").exists()));
        if default == RuntimeClass::Oci && !runc {
            anyhow::bail!(
                "--runtime oci with --oci-executor runc or runc-run needs runc at {} (apt-get \
                 install runc; --oci-executor youki does not)",
                podvisor_runtime::oci::executor::RUNC
            );
        }
        let oci = if runc {
            let registry = match &self.registry_config {
                Some(path) => Some(
                    RegistryConfig::load(path)
                        .with_context(|| format!("reading {}", path.display()))?,
                ),
                None => None,
            };
            Some(OciOptions {
                images: ImageStore::open(images_dir)
                    .with_context(|| format!("opening the image store {}", images_dir.display()))?,
                registry,
                warm_sandboxes: self.warm_sandboxes,
                executor: match self.oci_executor {
                    OciExecutorChoice::Runc => RuncMode::CreateStart,
                    OciExecutorChoice::RuncRun => RuncMode::Run,
                    OciExecutorChoice::Youki => RuncMode::Youki,
                },
                network: self.network_choice(),
            })
        } else {
            None
        };
        let with_oci = oci.is_some();
        match ProcessRuntime::with_classes(
            state_dir.to_path_buf(),
            shim.to_path_buf(),
            oci,
            default,
        ) {
            // The oci class is optional unless asked for: a host whose CNI set-up cannot be
            // read still runs process pods, with a warning.
            Err(e) if with_oci && default == RuntimeClass::Process => {
                eprintln!("warning: the oci runtime class is unavailable: {e}");
                ProcessRuntime::with_classes(
                    state_dir.to_path_buf(),
                    shim.to_path_buf(),
                    None,
                    default,
                )
                .context("starting the runtime")
            }
            other => other.context("starting the runtime"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_pods_get_podvisors_network_unless_a_directory_or_network_is_named() {
        let args = |dir: Option<&str>, name: Option<&str>| RuntimeArgs {
            cni_conf_dir: dir.map(PathBuf::from),
            cni_network: name.map(str::to_owned),
            ..RuntimeArgs::default()
        };
        assert_eq!(args(None, None).network_choice(), NetworkChoice::Own);
        assert_eq!(
            args(Some("/run/net.d"), None).network_choice(),
            NetworkChoice::ConfDir {
                dir: PathBuf::from("/run/net.d"),
                name: None
            }
        );
        // A network named without a directory is looked up where containerd looks.
        assert_eq!(
            args(None, Some("podman")).network_choice(),
            NetworkChoice::ConfDir {
                dir: PathBuf::from(SYSTEM_CONF_DIR),
                name: Some("podman".to_owned())
            }
        );
    }
}
