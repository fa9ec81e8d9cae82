//! The peer the issue compares the OCI pod start with: containerd 1.6's CRI, driven as a
//! kubelet drives it (`RunPodSandbox`, `CreateContainer`, `StartContainer` over its gRPC
//! socket), on the same kind of pod as the benchmark's own: busybox looping on `sleep 1`, its
//! image present, on a CNI bridge (the standard `bridge` + `host-local` plugins, no
//! `portmap`, as podvisor's own network runs a pod without port mappings).
//!
//! containerd runs with its own configuration, root, state and sockets under a temporary
//! directory (`restrict_oom_score_adj`, which this machine needs; the CNI plugins from
//! `/usr/lib/cni`; a bridge `cdbench0` on 10.246.0.0/16 of its own), and its images are
//! imported with `ctr` from the OCI layouts `scripts/busybox-image` writes: busybox, and a
//! pause image of Debian's static `catatonit` as its `sandbox_image` (nothing can be pulled
//! here). Everything is removed at the end: the pods (`StopPodSandbox`, `RemovePodSandbox`),
//! containerd (SIGTERM, then SIGKILL), its shims, its mounts, its bridge, the directory, and
//! the runc shim's directories under `/run/containerd` when they are left empty.
//!
//! The CRI messages are written here with `prost` from the fields of the CRI's
//! `runtime.v1` API that this client sets (the wire format needs only the field numbers);
//! every other field is left out and so sent as its default.

use anyhow::{Context, Result, bail};
use podvisor_testkit::numbers::{Stats, stats};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use tonic::transport::Channel;

/// The peer's results: the start as the issue measures it, and what ran.
pub(crate) struct Comparison {
    /// `RunPodSandbox` sent → `StartContainer` answered.
    pub start: Stats,
    /// containerd's own version line.
    pub version: String,
}

/// Why the comparison does not run on this machine, if it does not.
pub(crate) fn unavailable() -> Option<String> {
    let missing: Vec<&str> = ["containerd", "ctr", "containerd-shim-runc-v2", "runc"]
        .into_iter()
        .filter(|b| super::on_path(b).is_none())
        .collect();
    if !missing.is_empty() {
        return Some(format!(
            "{} not installed (Debian: apt-get install containerd runc): skipped",
            missing.join(", ")
        ));
    }
    if !Path::new("/usr/bin/catatonit").exists() {
        return Some("catatonit not installed (its pause image): skipped".into());
    }
    if !Path::new("/usr/lib/cni/bridge").exists() {
        return Some("the CNI plugins are not in /usr/lib/cni: skipped".into());
    }
    None
}

/// Runs containerd under `dir`, starts `n` pods through its CRI one at a time (each removed
/// before the next), and removes everything again.
/// Dropped (also half-started, or with the future cancelled), it removes what it made.
pub(crate) async fn measure(dir: &Path, n: usize) -> Result<Comparison> {
    let mut peer = Peer::start(dir)?;
    peer.run(n).await
}

/// The bridge podvisor does not use, on a subnet of its own.
const BRIDGE: &str = "cdbench0";
const SUBNET: &str = "10.246.0.0/16";
/// What the benchmark's header says of containerd's network.
pub(crate) const NETWORK: &str =
    "cdbench (its own conf_dir; bridge cdbench0 10.246.0.0/16, host-local, no portmap)";
const PAUSE: &str = "podvisor.local/pause:bench";
const BUSYBOX: &str = "docker.io/library/busybox:latest";

struct Peer {
    dir: PathBuf,
    socket: PathBuf,
    /// Taken when dropped.
    daemon: Option<Child>,
}

impl Peer {
    fn start(dir: &Path) -> Result<Peer> {
        let socket = dir.join("containerd.sock");
        // From here on a failure drops it, which removes what is made.
        let mut peer = Peer {
            dir: dir.to_owned(),
            socket: socket.clone(),
            daemon: None,
        };
        std::fs::create_dir_all(dir.join("net.d"))?;
        let config = format!(
            r#"version = 2
root = "{root}"
state = "{state}"
[grpc]
  address = "{socket}"
[ttrpc]
  address = "{socket}.ttrpc"
[debug]
  address = "{dir}/debug.sock"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{PAUSE}"
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "{dir}/net.d"
"#,
            root = dir.join("root").display(),
            state = dir.join("state").display(),
            socket = socket.display(),
            dir = dir.display(),
        );
        std::fs::write(dir.join("config.toml"), config)?;
        let conflist = serde_json::json!({
            "cniVersion": "1.0.0",
            "name": "cdbench",
            "plugins": [{
                "type": "bridge",
                "bridge": BRIDGE,
                "isGateway": true,
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{"subnet": SUBNET}]],
                    "routes": [{"dst": "0.0.0.0/0"}],
                    "dataDir": dir.join("ipam").display().to_string(),
                },
            }],
        });
        std::fs::write(
            dir.join("net.d/10-cdbench.conflist"),
            serde_json::to_vec_pretty(&conflist)?,
        )?;
        let log = std::fs::File::create(dir.join("containerd.log"))?;
        peer.daemon = Some(
            Command::new("containerd")
                .arg("--config")
                .arg(dir.join("config.toml"))
                .stdin(Stdio::null())
                .stdout(log.try_clone()?)
                .stderr(log)
                .spawn()
                .context("starting containerd")?,
        );
        peer.wait_socket()?;
        for (name, flag) in [(BUSYBOX, None), (PAUSE, Some("--pause"))] {
            peer.import(name, flag)?;
        }
        Ok(peer)
    }

    fn wait_socket(&mut self) -> Result<()> {
        let deadline = Instant::now() + Duration::from_secs(20);
        while !self.socket.exists() {
            if let Some(daemon) = &mut self.daemon
                && let Some(status) = daemon.try_wait()?
            {
                bail!("containerd exited ({status}): {}", self.log_tail());
            }
            if Instant::now() > deadline {
                bail!("containerd did not listen within 20 s: {}", self.log_tail());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(())
    }

    fn log_tail(&self) -> String {
        let log = std::fs::read_to_string(self.dir.join("containerd.log")).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(5)..].join("\n")
    }

    /// Writes the image's OCI layout with `scripts/busybox-image`, tars it and imports it
    /// into the CRI's namespace (`k8s.io`), unpacked.
    fn import(&self, name: &str, flag: Option<&str>) -> Result<()> {
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scripts/busybox-image");
        let layout = self
            .dir
            .join(format!("layout-{}", name.replace(['/', ':'], "_")));
        let mut write = Command::new(script);
        write.args(flag).arg(&layout).arg(name);
        run(&mut write)?;
        let tar = layout.with_extension("tar");
        run(Command::new("tar")
            .arg("-C")
            .arg(&layout)
            .arg("-cf")
            .arg(&tar)
            .arg("."))?;
        run(Command::new("ctr")
            .arg("--address")
            .arg(&self.socket)
            .args(["-n", "k8s.io", "images", "import"])
            .arg(&tar))
    }

    async fn run(&mut self, n: usize) -> Result<Comparison> {
        let channel = connect(&self.socket).await?;
        let mut cri = Cri::new(channel);
        let version: cri::VersionResponse = cri
            .call(
                "Version",
                cri::VersionRequest {
                    version: "v1".into(),
                },
            )
            .await?;
        let version = format!("{} {}", version.runtime_name, version.runtime_version);
        // One pod first, unmeasured: containerd's first sandbox loads what later ones reuse,
        // as podvisor's bench measures a serve that has started.
        let mut samples = Vec::with_capacity(n);
        for i in 0..=n {
            let (took, sandbox) = self.start_pod(&mut cri, i).await?;
            if i > 0 {
                samples.push(took);
            }
            let id = cri::PodSandboxId {
                pod_sandbox_id: sandbox,
            };
            let _: cri::Empty = cri.call("StopPodSandbox", id.clone()).await?;
            let _: cri::Empty = cri.call("RemovePodSandbox", id).await?;
        }
        Ok(Comparison {
            start: stats(samples),
            version,
        })
    }

    /// The kubelet's start of a one-container pod whose image is present; the time from the
    /// sandbox request to the container's start answered, and the sandbox's ID.
    async fn start_pod(&self, cri: &mut Cri, i: usize) -> Result<(Duration, String)> {
        let name = format!("cd-start-{i:03}");
        let uid = format!("00000000-0000-4000-8000-{i:012}");
        let logs = self.dir.join("logs").join(&uid);
        let namespaces = cri::NamespaceOption {
            network: cri::NAMESPACE_POD,
            pid: cri::NAMESPACE_CONTAINER,
            ipc: cri::NAMESPACE_POD,
        };
        let sandbox_config = cri::PodSandboxConfig {
            metadata: Some(cri::PodSandboxMetadata {
                name: name.clone(),
                uid,
                namespace: "default".into(),
                attempt: 0,
            }),
            hostname: name.clone(),
            log_directory: logs.display().to_string(),
            linux: Some(cri::LinuxPodSandboxConfig {
                cgroup_parent: String::new(),
                security_context: Some(cri::LinuxSandboxSecurityContext {
                    namespace_options: Some(namespaces.clone()),
                }),
            }),
        };
        let container = cri::ContainerConfig {
            metadata: Some(cri::ContainerMetadata {
                name: "app".into(),
                attempt: 0,
            }),
            image: Some(cri::ImageSpec {
                image: BUSYBOX.into(),
            }),
            command: vec![
                "sh".into(),
                "-c".into(),
                "while true; do sleep 1; done".into(),
            ],
            log_path: "app/0.log".into(),
            linux: Some(cri::LinuxContainerConfig {
                security_context: Some(cri::LinuxContainerSecurityContext {
                    namespace_options: Some(namespaces),
                }),
            }),
        };
        let begun = Instant::now();
        let sandbox: cri::RunPodSandboxResponse = cri
            .call(
                "RunPodSandbox",
                cri::RunPodSandboxRequest {
                    config: Some(sandbox_config.clone()),
                },
            )
            .await?;
        let created: cri::CreateContainerResponse = cri
            .call(
                "CreateContainer",
                cri::CreateContainerRequest {
                    pod_sandbox_id: sandbox.pod_sandbox_id.clone(),
                    config: Some(container),
                    sandbox_config: Some(sandbox_config),
                },
            )
            .await?;
        let _: cri::Empty = cri
            .call(
                "StartContainer",
                cri::StartContainerRequest {
                    container_id: created.container_id,
                },
            )
            .await?;
        Ok((begun.elapsed(), sandbox.pod_sandbox_id))
    }
}

impl Drop for Peer {
    /// containerd, then what it leaves: its shims (they exit with their last container, but
    /// one stuck would hold the mounts), its mounts, its bridge, the directory.
    fn drop(&mut self) {
        if let Some(mut daemon) = self.daemon.take() {
            podvisor_testkit::terminate(&mut daemon, Duration::from_secs(10));
        }
        // The shims carry the state directory (their socket, `-address`) on the command line.
        podvisor_testkit::signal_marked(
            &self.dir.display().to_string(),
            podvisor_testkit::MarkerIn::Cmdline,
            podvisor_testkit::Signal::KILL,
        );
        podvisor_testkit::mounts::detach_mounts_under(&self.dir);
        let _ = Command::new("ip")
            .args(["link", "del", BRIDGE])
            .stderr(Stdio::null())
            .status();
        // The runc shim's directories, where they are empty (never another containerd's).
        for empty in [
            "/run/containerd/runc/k8s.io",
            "/run/containerd/runc",
            "/run/containerd/s",
            "/run/containerd",
        ] {
            let _ = std::fs::remove_dir(empty);
        }
        if let Err(e) = std::fs::remove_dir_all(&self.dir) {
            eprintln!(
                "[bench api] containerd clean-up: removing {}: {e}",
                self.dir.display()
            );
        }
    }
}

fn run(command: &mut Command) -> Result<()> {
    let out = command
        .output()
        .with_context(|| format!("running {command:?}"))?;
    if !out.status.success() {
        bail!(
            "{command:?}: {}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

/// A gRPC channel over containerd's unix socket.
async fn connect(socket: &Path) -> Result<Channel> {
    let socket = socket.to_owned();
    let channel = tonic::transport::Endpoint::try_from("http://[::]:0")?
        .connect_with_connector(tower::service_fn(move |_: tonic::transport::Uri| {
            let socket = socket.clone();
            async move {
                let stream = tokio::net::UnixStream::connect(socket).await?;
                Ok::<_, std::io::Error>(hyper_util::rt::TokioIo::new(stream))
            }
        }))
        .await
        .context("connecting to containerd's CRI")?;
    Ok(channel)
}

/// Unary calls of `runtime.v1.RuntimeService`.
struct Cri(tonic::client::Grpc<Channel>);

impl Cri {
    fn new(channel: Channel) -> Cri {
        Cri(tonic::client::Grpc::new(channel))
    }

    async fn call<Q, A>(&mut self, method: &str, request: Q) -> Result<A>
    where
        Q: prost::Message + Send + Sync + 'static,
        A: prost::Message + Default + Send + Sync + 'static,
    {
        self.0.ready().await.context("containerd's CRI")?;
        let path: hyper::http::uri::PathAndQuery =
            format!("/runtime.v1.RuntimeService/{method}").parse()?;
        let codec = tonic_prost::ProstCodec::<Q, A>::default();
        let answer = self
            .0
            .unary(tonic::Request::new(request), path, codec)
            .await
            .with_context(|| format!("CRI {method}"))?;
        Ok(answer.into_inner())
    }
}

/// The CRI `runtime.v1` messages this client sends and reads, with the fields it uses.
mod cri {
    pub(super) const NAMESPACE_POD: i32 = 0;
    pub(super) const NAMESPACE_CONTAINER: i32 = 1;

    #[derive(Clone, PartialEq, prost::Message)]
    pub(super) struct VersionRequest {
        #[prost(string, tag = "1")]
        pub version: String,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub(super) struct VersionResponse {
        #[prost(string, tag = "2")]
        pub runtime_name: String,
        #[prost(string, tag = "3")]
        pub runtime_version: String,
    }

    /// An empty answer (`StartContainerResponse`, `StopPodSandboxResponse`, ...).
    #[derive(Clone, PartialEq, prost::Message)]
    pub(super) struct Empty {}

    #[derive(Clone, PartialEq, prost::Message)]
    pub(super) struct NamespaceOption {
        #[prost(int32, tag = "1")]
        pub network: i32,
        #[prost(int32, tag = "2")]
        pub pid: i32,
        #[prost(int32, tag = "3")]
        pub ipc: i32,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub(super) struct LinuxSandboxSecurityContext {
        #[prost(message, optional, tag = "1")]
        pub namespace_options: Option<NamespaceOption>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub(super) struct LinuxPodSandboxConfig {
        #[prost(string, tag = "1")]
        pub cgroup_parent: String,
        #[prost(message, optional, tag = "2")]
        pub security_context: Option<LinuxSandboxSecurityContext>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub(super) struct PodSandboxMetadata {
        #[prost(string, tag = "1")]
        pub name: String,
        #[prost(string, tag = "2")]
        pub uid: String,
        #[prost(string, tag = "3")]
        pub namespace: String,
        #[prost(uint32, tag = "4")]
        pub attempt: u32,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub(super) struct PodSandboxConfig {
        #[prost(message, optional, tag = "1")]
        pub metadata: Option<PodSandboxMetadata>,
        #[prost(string, tag = "2")]
        pub hostname: String,
        #[prost(string, tag = "3")]
        pub log_directory: String,
        #[prost(message, optional, tag = "8")]
        pub linux: Option<LinuxPodSandboxConfig>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub(super) struct RunPodSandboxRequest {
        #[prost(message, optional, tag = "1")]
        pub config: Option<PodSandboxConfig>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub(super) struct RunPodSandboxResponse {
        #[prost(string, tag = "1")]
        pub pod_sandbox_id: String,
    }

    /// `StopPodSandboxRequest` and `RemovePodSandboxRequest`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub(super) struct PodSandboxId {
        #[prost(string, tag = "1")]
        pub pod_sandbox_id: String,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub(super) struct ContainerMetadata {
        #[prost(string, tag = "1")]
        pub name: String,
        #[prost(uint32, tag = "2")]
        pub attempt: u32,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub(super) struct ImageSpec {
        #[prost(string, tag = "1")]
        pub image: String,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub(super) struct LinuxContainerSecurityContext {
        #[prost(message, optional, tag = "3")]
        pub namespace_options: Option<NamespaceOption>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub(super) struct LinuxContainerConfig {
        #[prost(message, optional, tag = "2")]
        pub security_context: Option<LinuxContainerSecurityContext>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub(super) struct ContainerConfig {
        #[prost(message, optional, tag = "1")]
        pub metadata: Option<ContainerMetadata>,
        #[prost(message, optional, tag = "2")]
        pub image: Option<ImageSpec>,
        #[prost(string, repeated, tag = "3")]
        pub command: Vec<String>,
        #[prost(string, tag = "11")]
        pub log_path: String,
        #[prost(message, optional, tag = "15")]
        pub linux: Option<LinuxContainerConfig>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub(super) struct CreateContainerRequest {
        #[prost(string, tag = "1")]
        pub pod_sandbox_id: String,
        #[prost(message, optional, tag = "2")]
        pub config: Option<ContainerConfig>,
        #[prost(message, optional, tag = "3")]
        pub sandbox_config: Option<PodSandboxConfig>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub(super) struct CreateContainerResponse {
        #[prost(string, tag = "1")]
        pub container_id: String,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub(super) struct StartContainerRequest {
        #[prost(string, tag = "1")]
        pub container_id: String,
    }
}
