//! The `oci` runtime class: pods whose containers run from images, in runc containers, in a
//! pod sandbox of their own.
//!
//! The sandbox is the pod's network, IPC and UTS namespaces, held by bind mounts under the
//! pod's directory (no pause process) and made before the pod's shim starts (the shim's mount
//! namespace is a copy of the agent's), with an address from the CNI network (`/etc/cni/net.d`,
//! else podvisor's bridge) and the pod's `/etc/hosts`, `/etc/resolv.conf` and `/etc/hostname`.
//! A `hostNetwork` pod keeps the host's network and UTS namespaces. What was made is recorded
//! in `<pod dir>/network.json`, read again by a restarted agent and at tear-down.
//!
//! Each container's image is resolved as the kubelet's image manager does (pull policy, one
//! pull at a time, the report for the `Pulling`/`Pulled` events, the image error reasons), and
//! the instance goes to the shim as an [`OciLaunch`], which the shim turns into a bundle and
//! runs with runc (`shim/supervisor.rs`).

use crate::config::BuildOptions;
use crate::oci::launch::OciLaunch;
use crate::sandbox::cni::{
    Attachment, Cni, DefaultNetwork, NetworkConfigList, PortMapping, kubernetes_args,
    resolve_network,
};
use crate::sandbox::etc_files::{NodeFacts, pod_etc_files, sandbox_hostname};
use crate::sandbox::netns::PodNamespaces;
use crate::{ImageReport, PodPaths, RuntimeError, SandboxError, StartError};
use k8s_openapi::api::core::v1::{Container, Pod};
use podvisor_image::{ImageStore, NoProgress, PullOptions, Reference, RegistryConfig};
use serde::{Deserialize, Serialize};
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// The cluster domain pods' FQDNs end in.
const CLUSTER_DOMAIN: &str = "cluster.local";

/// How the `oci` class is set up.
#[derive(Debug, Clone)]
pub struct OciOptions {
    /// The image store (`<state>/images`).
    pub images: ImageStore,
    /// Registry credentials and mirrors (`--registry-config`).
    pub registry: Option<RegistryConfig>,
}

/// The `oci` class of a [`super::ProcessRuntime`].
#[derive(Debug)]
pub(super) struct OciClass {
    images: ImageStore,
    registry: Option<RegistryConfig>,
    cni: Cni,
    network: NetworkConfigList,
    node: NodeFacts,
    state_dir: PathBuf,
    /// The kubelet pulls one image at a time (`serializeImagePulls`).
    pulls: tokio::sync::Mutex<()>,
}

/// A pod sandbox's network, as made (`<pod dir>/network.json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct PodNetwork {
    /// The pod shares the host's network (and UTS) namespace.
    pub host_network: bool,
    /// The pod's address on the CNI network (none with `hostNetwork`).
    pub ip: Option<IpAddr>,
    /// The pod's host name.
    pub hostname: String,
    /// The pod's namespaces (`<pod dir>/ns`), when it has its own.
    pub namespaces: Option<PathBuf>,
    /// `/etc/hosts`, `/etc/resolv.conf`, `/etc/hostname` of the pod.
    pub hosts: PathBuf,
    /// `/etc/resolv.conf`.
    pub resolv_conf: PathBuf,
    /// `/etc/hostname`.
    pub hostname_file: PathBuf,
    /// The CNI attachment's container ID and arguments, for its removal.
    pub cni_id: String,
    /// `CNI_ARGS`.
    pub cni_args: Vec<(String, String)>,
    /// The hostPort mappings given to `portmap`.
    pub port_mappings: Vec<(u16, u16, String, String)>,
}

fn network_file(pod_dir: &Path) -> PathBuf {
    pod_dir.join("network.json")
}

fn failed_sandbox(message: impl std::fmt::Display) -> SandboxError {
    SandboxError {
        reason: "FailedCreatePodSandBox",
        message: format!("Failed to create pod sandbox: {message}"),
    }
}

impl PodNetwork {
    fn attachment(&self) -> Option<Attachment> {
        let netns = self.namespaces.as_ref()?.join("net");
        Some(Attachment {
            container_id: self.cni_id.clone(),
            netns,
            ifname: "eth0".to_owned(),
            args: self.cni_args.clone(),
            port_mappings: self
                .port_mappings
                .iter()
                .map(
                    |(host_port, container_port, protocol, host_ip)| PortMapping {
                        host_port: *host_port,
                        container_port: *container_port,
                        protocol: protocol.clone(),
                        host_ip: host_ip.clone(),
                    },
                )
                .collect(),
        })
    }

    /// What the pod's network was made as, if it was.
    pub(super) fn load(pod_dir: &Path) -> Option<PodNetwork> {
        let bytes = std::fs::read(network_file(pod_dir)).ok()?;
        serde_json::from_slice(&bytes).ok()
    }
}

impl OciClass {
    /// The class with its network: the first CNI config of `/etc/cni/net.d`, else podvisor's
    /// bridge network, written under `<state>/cni/net.d`.
    pub(super) fn new(state_dir: &Path, options: OciOptions) -> Result<OciClass, RuntimeError> {
        let default = DefaultNetwork::new(state_dir);
        let network = resolve_network(
            Path::new("/etc/cni/net.d"),
            &state_dir.join("cni").join("net.d"),
            &default,
        )
        .map_err(|e| RuntimeError::Other(format!("the CNI network: {e}")))?;
        Ok(OciClass {
            images: options.images,
            registry: options.registry,
            cni: Cni::new(
                vec![PathBuf::from("/usr/lib/cni"), PathBuf::from("/opt/cni/bin")],
                state_dir.join("cni").join("cache"),
            ),
            network,
            node: NodeFacts::read_host(Vec::new(), CLUSTER_DOMAIN),
            state_dir: state_dir.to_owned(),
            pulls: tokio::sync::Mutex::new(()),
        })
    }

    /// Makes the pod's sandbox network before its shim starts (see the module docs). On
    /// failure nothing of it is left.
    pub(super) async fn create_network(
        &self,
        pod: &Pod,
        paths: &PodPaths,
    ) -> Result<PodNetwork, SandboxError> {
        if let Some(network) = PodNetwork::load(&paths.pod_dir) {
            return Ok(network);
        }
        let spec = pod.spec.clone().unwrap_or_default();
        let host_network = spec.host_network == Some(true);
        let hostname =
            sandbox_hostname(pod, CLUSTER_DOMAIN, &self.node.hostname).map_err(failed_sandbox)?;
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        let cni_id: String = uid.chars().filter(char::is_ascii_hexdigit).collect();
        let mut network = PodNetwork {
            host_network,
            ip: None,
            hostname: hostname.clone(),
            namespaces: None,
            hosts: paths.pod_dir.join("etc").join("hosts"),
            resolv_conf: paths.pod_dir.join("etc").join("resolv.conf"),
            hostname_file: paths.pod_dir.join("etc").join("hostname"),
            cni_args: kubernetes_args(
                pod.metadata.namespace.as_deref().unwrap_or("default"),
                pod.metadata.name.as_deref().unwrap_or_default(),
                &uid,
                &cni_id,
            ),
            cni_id,
            port_mappings: PortMapping::from_pod_spec(&spec)
                .into_iter()
                .map(|m| (m.host_port, m.container_port, m.protocol, m.host_ip))
                .collect(),
        };
        std::fs::create_dir_all(&paths.pod_dir).map_err(failed_sandbox)?;
        if !host_network {
            let dir = paths.pod_dir.join("ns");
            let name = hostname.clone();
            let made = tokio::task::spawn_blocking(move || PodNamespaces::create(&dir, &name))
                .await
                .map_err(failed_sandbox)?;
            let (namespaces, _) = made.map_err(failed_sandbox)?;
            network.namespaces = Some(namespaces.dir().to_owned());
            let attachment = network
                .attachment()
                .ok_or_else(|| failed_sandbox("no netns"))?;
            match self.cni.add(&self.network, &attachment).await {
                Ok(result) => network.ip = result.pod_ips().first().copied(),
                Err(e) => {
                    self.remove_network(&network).await;
                    return Err(SandboxError {
                        reason: "FailedCreatePodSandBox",
                        message: format!(
                            "Failed to create pod sandbox: rpc error: code = Unknown desc = \
                             failed to setup network for sandbox \"{}\": plugin type=\"bridge\" \
                             name=\"{}\" failed (add): {e}",
                            network.cni_id, self.network.name
                        ),
                    });
                }
            }
        }
        let ips: Vec<IpAddr> = network.ip.into_iter().collect();
        let written = pod_etc_files(pod, &ips, &self.node)
            .and_then(|(files, _events)| files.write(&paths.pod_dir.join("etc")));
        if let Err(e) = written {
            self.remove_network(&network).await;
            return Err(failed_sandbox(e));
        }
        let json = serde_json::to_vec(&network).map_err(failed_sandbox)?;
        if let Err(e) = std::fs::write(network_file(&paths.pod_dir), json) {
            self.remove_network(&network).await;
            return Err(failed_sandbox(e));
        }
        Ok(network)
    }

    /// Releases what [`OciClass::create_network`] made: the CNI attachment (the address, the
    /// veth, the port mappings) and the namespaces. Idempotent.
    pub(super) async fn remove_network(&self, network: &PodNetwork) {
        if let Some(attachment) = network.attachment()
            && let Err(e) = self.cni.del(&self.network, &attachment).await
        {
            tracing::warn!("releasing the network of sandbox {}: {e}", network.cni_id);
        }
        if let Some(dir) = &network.namespaces {
            let namespaces = PodNamespaces::new(dir.clone());
            let removed = tokio::task::spawn_blocking(move || namespaces.remove()).await;
            if let Ok(Err(e)) = removed {
                tracing::warn!("removing the namespaces of sandbox {}: {e}", network.cni_id);
            }
        }
    }

    /// Removes the network of the pod at `pod_dir`, if one was made.
    pub(super) async fn remove_network_of(&self, pod_dir: &Path) {
        if let Some(network) = PodNetwork::load(pod_dir) {
            self.remove_network(&network).await;
        }
    }

    /// Resolves the container's image as the kubelet's image manager does and describes the
    /// instance for the shim.
    pub(super) async fn launch(
        &self,
        pod: &Pod,
        container: &Container,
        instance: u64,
        paths: &PodPaths,
        network: &PodNetwork,
        container_id: &str,
    ) -> Result<(OciLaunch, (ImageReport, String)), StartError> {
        let fail = |reason: &str, message: String, pulling: bool| StartError {
            reason: reason.to_owned(),
            message,
            created: false,
            pulling,
        };
        let image_name = container.image.clone().unwrap_or_default();
        let reference = Reference::parse(&image_name).map_err(|e| {
            fail(
                "InvalidImageName",
                format!(
                    "Failed to apply default image tag {}: couldn't parse image name {}: {}",
                    podvisor_api::gotext::quote(&image_name),
                    podvisor_api::gotext::quote(&image_name),
                    e.reason
                ),
                false,
            )
        })?;
        let policy = container
            .image_pull_policy
            .as_deref()
            .unwrap_or("IfNotPresent");
        let present = {
            let store = self.images.clone();
            let reference = reference.clone();
            tokio::task::spawn_blocking(move || store.get(&reference))
                .await
                .map_err(|e| fail("ErrImagePull", e.to_string(), false))?
                .map_err(|e| fail("ErrImagePull", e.to_string(), false))?
        };
        let (image, report) = match (policy, present) {
            ("Never", None) => {
                return Err(fail(
                    "ErrImageNeverPull",
                    format!(
                        "Container image {} is not present with pull policy of Never",
                        podvisor_api::gotext::quote(&image_name)
                    ),
                    false,
                ));
            }
            ("IfNotPresent" | "Never", Some(image)) => (image, ImageReport::Present),
            _ => {
                let requested = Instant::now();
                let _one_at_a_time = self.pulls.lock().await;
                let options = PullOptions::for_reference(self.registry.as_ref(), &reference);
                // On a blocking thread of its own: the pull's future is not provably `Send`
                // (its layer stream's closures borrow), which the `Runtime` trait requires.
                let (store, wanted) = (self.images.clone(), reference.clone());
                let handle = tokio::runtime::Handle::current();
                let pulled = tokio::task::spawn_blocking(move || {
                    handle.block_on(store.pull(&wanted, &options, &NoProgress))
                })
                .await
                .map_err(|e| fail("ErrImagePull", e.to_string(), true))?
                .map_err(|e| fail("ErrImagePull", e.to_string(), true))?;
                let report = ImageReport::Pulled {
                    pull: pulled.duration,
                    total: requested.elapsed(),
                    size: pulled.image.size,
                };
                (pulled.image, report)
            }
        };
        {
            let store = self.images.clone();
            let id = image.id.clone();
            let _ = tokio::task::spawn_blocking(move || store.mark_used(&id)).await;
        }
        let env = crate::config::kubelet_environment(pod, container, &BuildOptions::default())
            .map_err(|m| fail("CreateContainerConfigError", m, false))?;
        let ns = |kind: &str| network.namespaces.as_ref().map(|d| d.join(kind));
        let launch = OciLaunch {
            id: container_id
                .rsplit("://")
                .next()
                .unwrap_or(container_id)
                .to_owned(),
            dir: paths.pod_dir.join("oci").join(instance.to_string()),
            runc_state: self.state_dir.clone(),
            pod: pod.clone(),
            container: container.clone(),
            image: image.config.config().clone(),
            layers: image.layers.clone(),
            env,
            network: ns("net"),
            ipc: ns("ipc"),
            uts: ns("uts"),
            hostname: network.hostname.clone(),
            hosts: Some(network.hosts.clone()),
            resolv_conf: Some(network.resolv_conf.clone()),
            hostname_file: Some(network.hostname_file.clone()),
        };
        // containerd reports the repo digest the image came by, else its id.
        let image_id = image
            .repo_digest
            .clone()
            .unwrap_or_else(|| image.id.as_str().to_owned());
        Ok((launch, (report, image_id)))
    }
}
