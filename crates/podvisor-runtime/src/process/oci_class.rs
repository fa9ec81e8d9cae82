//! The `oci` runtime class: pods whose containers run from images, in runc containers, in a
//! pod sandbox of their own.
//!
//! The sandbox is the pod's network, IPC and UTS namespaces, held by bind mounts under the
//! pod's directory (no pause process) and made before the pod's shim starts (the shim's mount
//! namespace is a copy of the agent's), with an address from the CNI network (podvisor's
//! bridge, unless `--cni-conf-dir` names a directory) and the pod's `/etc/hosts`,
//! `/etc/resolv.conf` and `/etc/hostname`.
//! A `hostNetwork` pod keeps the host's network and UTS namespaces, a `hostIPC` pod the host's
//! IPC namespace ([`NsKind::for_pod`]). The PID namespace is each container's own, the
//! pod's with `shareProcessNamespace` (held by the shim: `shim/pid_holder.rs`) or the host's
//! with `hostPID` ([`PidNamespace::for_pod`]); an ephemeral container with a
//! `targetContainerName` joins its target's where each container has its own
//! ([`PidNamespace::for_container`]). What was made is recorded in
//! `<pod dir>/network.json`, read again by a restarted agent and at tear-down.
//!
//! Each container's image is resolved as the kubelet's image manager does (pull policy, the
//! verification of a present image's pull credentials, one pull at a time, the report for the
//! `Pulling`/`Pulled` events, the image error reasons: `oci_class/image_manager.rs`), and
//! the instance goes to the shim as an [`OciLaunch`], which the shim turns into a bundle and
//! runs with runc (`shim/supervisor.rs`).

use crate::config::BuildOptions;
use crate::oci::launch::{OciLaunch, PidNamespace};
use crate::sandbox::cni::{
    AttachedNetwork, Attachment, Cni, DefaultNetwork, NetworkChoice, NetworkConfigList,
    PortMapping, kubernetes_args, note_network_choice, resolve_network,
};
use crate::sandbox::etc_files::{NodeFacts, pod_etc_files, sandbox_hostname};
use crate::sandbox::netns::{NsKind, PodNamespaces};
use crate::sandbox::pool::{self, SandboxPool, WarmSandbox};
use crate::{
    ImageGcOutcome, ImageGcPolicy, ImageReport, PodPaths, RuntimeError, SandboxError, StartError,
};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use podvisor_image::{ImageId, ImageStore, PullRecords, RegistryConfig};
use std::collections::HashSet;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

mod image_manager;

mod pod_network;

pub(super) use pod_network::{PodNetwork, network_file};

/// Where a pod's directory records the images its containers use (one empty file per image
/// id): image garbage collection keeps them while the pod's directory exists, across agent
/// restarts, as the kubelet keeps the images of every container the runtime still lists.
const IMAGES_IN_USE: &str = "images";

fn record_image_use(pod_dir: &Path, id: &ImageId) -> std::io::Result<()> {
    let dir = pod_dir.join(IMAGES_IN_USE);
    std::fs::create_dir_all(&dir)?;
    std::fs::write(dir.join(id.as_str()), b"")
}

/// The pod as a start sends it to the shim: without its status and managed fields, which no
/// container's spec reads (with them, a start request is about half as long again, and it is
/// decoded on the start's path).
fn pod_for_the_shim(pod: &Pod) -> Pod {
    Pod {
        metadata: ObjectMeta {
            managed_fields: None,
            ..pod.metadata.clone()
        },
        spec: pod.spec.clone(),
        status: None,
    }
}

/// The images recorded by the pods under `pods_dir`.
fn images_in_use(pods_dir: &Path) -> HashSet<String> {
    let Ok(pods) = std::fs::read_dir(pods_dir) else {
        return HashSet::new();
    };
    pods.flatten()
        .filter_map(|pod| std::fs::read_dir(pod.path().join(IMAGES_IN_USE)).ok())
        .flat_map(|images| images.flatten())
        .filter_map(|image| image.file_name().to_str().map(str::to_owned))
        .collect()
}

/// The cluster domain pods' FQDNs end in.
const CLUSTER_DOMAIN: &str = "cluster.local";

/// How the `oci` class is set up.
#[derive(Debug, Clone)]
pub struct OciOptions {
    /// The image store (`<state>/images`).
    pub images: ImageStore,
    /// Registry credentials and mirrors (`--registry-config`).
    pub registry: Option<RegistryConfig>,
    /// How many pod sandboxes to keep ready, on podvisor's own network or any other of the
    /// CNI reference plugins ([`crate::sandbox::pool`]); 0: none.
    pub warm_sandboxes: usize,
    /// The OCI runtime and how it creates and starts containers (`--oci-executor`).
    pub executor: crate::oci::executor::RuncMode,
    /// The network of new pods (`--cni-conf-dir`, `--cni-network`): podvisor's own unless
    /// one is named.
    pub network: NetworkChoice,
}

/// The `oci` class of a [`super::ProcessRuntime`].
#[derive(Debug)]
pub(super) struct OciClass {
    images: ImageStore,
    registry: Option<RegistryConfig>,
    cni: Cni,
    network: NetworkConfigList,
    /// What an attachment without port mappings runs on podvisor's own network
    /// ([`NetworkConfigList::without_portmap`]); a configured network is run as written.
    network_without_ports: NetworkConfigList,
    node: NodeFacts,
    state_dir: PathBuf,
    /// The kubelet pulls one image at a time (`serializeImagePulls`).
    pulls: tokio::sync::Mutex<()>,
    /// Which credentials each image the node pulled was pulled with ([`image_manager`]).
    pull_records: PullRecords,
    /// Sandboxes made ahead of their pods (on a network the pool serves: `pool::serves`).
    pool: Option<Arc<SandboxPool>>,
    executor: crate::oci::executor::RuncMode,
    /// `<state>/pods` was made one mount, or found to be one (`pods_mount`), or could not be.
    pods_mount: std::sync::OnceLock<bool>,
}

fn failed_sandbox(message: impl std::fmt::Display) -> SandboxError {
    SandboxError {
        reason: "FailedCreatePodSandBox",
        message: format!("Failed to create pod sandbox: {message}"),
    }
}

impl OciClass {
    /// The class with its network ([`NetworkChoice`]): podvisor's bridge network, written
    /// under `<state>/cni/net.d`, unless a CNI configuration directory is named. A network
    /// other than the one the last agent of this state directory chose is said in the log.
    pub(super) fn new(state_dir: &Path, options: OciOptions) -> Result<OciClass, RuntimeError> {
        let default = DefaultNetwork::new(state_dir);
        let (network, own_network) = resolve_network(
            &options.network,
            &state_dir.join("cni").join("net.d"),
            &default,
        )
        .map_err(|e| RuntimeError::Other(format!("the CNI network: {e}")))?;
        match note_network_choice(&state_dir.join("cni").join("pod-network.json"), &network) {
            Ok(Some(change)) => tracing::warn!("{change}"),
            Ok(None) => {}
            Err(e) => tracing::warn!("recording the network of new pods: {e}"),
        }
        tracing::info!(
            network = %network.name,
            source = %network.source.as_deref().unwrap_or(Path::new("-")).display(),
            own = own_network,
            "the network of new oci pods"
        );
        // podvisor's own network masquerades node-wide (a configured one does its own).
        if own_network {
            default
                .ensure_masquerade()
                .map_err(|e| RuntimeError::Other(format!("the pod network's masquerade: {e}")))?;
        }
        // Sandboxes are made ahead on any network of the reference plugins (podvisor's own,
        // podman's, a plain bridge): a network add-on's plugins read the pod's `CNI_ARGS`.
        let pods = state_dir.join("pods");
        let pool = (own_network || crate::sandbox::pool::serves(&network)).then(|| {
            Arc::new(
                SandboxPool::new(
                    pods.join(crate::sandbox::pool::POOL_DIR),
                    options.warm_sandboxes,
                )
                .sweeping(state_dir.join(crate::sandbox::pool::LEGACY_POOL_DIR)),
            )
        });
        let pull_records = options
            .images
            .pull_records()
            .map_err(|e| RuntimeError::Other(format!("the image pull records: {e}")))?;
        Ok(OciClass {
            pull_records,
            images: options.images,
            registry: options.registry,
            cni: Cni::new(
                vec![PathBuf::from("/usr/lib/cni"), PathBuf::from("/opt/cni/bin")],
                state_dir.join("cni").join("cache"),
            ),
            network_without_ports: if own_network {
                network.without_portmap()
            } else {
                network.clone()
            },
            network,
            node: NodeFacts::read_host(Vec::new(), CLUSTER_DOMAIN),
            state_dir: state_dir.to_owned(),
            pulls: tokio::sync::Mutex::new(()),
            pool,
            executor: options.executor,
            pods_mount: std::sync::OnceLock::new(),
        })
    }

    /// The host's address on the pod network, when the configuration tells it
    /// ([`crate::sandbox::cni::host_address`]).
    pub(super) fn host_address(&self) -> Option<IpAddr> {
        crate::sandbox::cni::host_address(&self.network)
    }

    /// Whether pod sandboxes are made ahead of their pods (a pool is configured).
    pub(super) fn makes_ahead(&self) -> bool {
        self.pool.is_some()
    }

    /// Makes `<state>/pods` one mount (`pods_mount`), once, before the class mounts a sandbox's
    /// namespaces there: shims then drop the other pods' mounts in one call. Only for the
    /// `oci` class, so that an agent of host processes adds no mount to the host's table.
    fn ensure_pods_mount(&self) {
        self.pods_mount.get_or_init(|| {
            if !rustix::process::geteuid().is_root() {
                return false;
            }
            let pods = self.state_dir.join("pods");
            match crate::sandbox::pods_mount::make(&pods) {
                Ok(true) => true,
                Ok(false) => {
                    tracing::info!(
                        "{} holds mounts of pods from before: shims detach other pods' mounts \
                         one by one",
                        pods.display()
                    );
                    false
                }
                Err(e) => {
                    tracing::warn!("making {} a mount: {e}", pods.display());
                    false
                }
            }
        });
    }

    /// Fills the pool of ready sandboxes in the background, first releasing those an earlier
    /// agent left (nothing without a pool, or outside a tokio runtime).
    pub(super) fn warm(&self) {
        let (Some(pool), Ok(handle)) = (&self.pool, tokio::runtime::Handle::try_current()) else {
            return;
        };
        self.ensure_pods_mount();
        // Pooled sandboxes never have port mappings.
        let (pool, cni, network) = (
            Arc::clone(pool),
            self.cni.clone(),
            self.network_without_ports.clone(),
        );
        handle.spawn(async move { pool.fill(&cni, &network).await });
    }

    /// Whether this class's containers are run by youki's helper, which a pod's shim then
    /// keeps started ahead ([`crate::oci::ahead`]).
    pub(super) fn keeps_helper_ahead(&self) -> bool {
        self.executor == crate::oci::executor::RuncMode::Youki
    }

    /// Makes again the warm sandboxes pods took, in the background, if the pool has started
    /// (an agent whose pods are `process` by default starts it at the first `oci` pod).
    pub(super) fn refill(&self) {
        if self.pool.as_ref().is_some_and(|p| p.started()) {
            self.warm();
        }
    }

    /// The plugin list `att` is added and deleted with: without `portmap` when it maps no
    /// port on podvisor's own network (the same for its ADD and its DEL, as the mappings are
    /// recorded with the sandbox).
    fn network_for(&self, att: &Attachment) -> &NetworkConfigList {
        if att.port_mappings.is_empty() {
            &self.network_without_ports
        } else {
            &self.network
        }
    }

    /// Releases the ready sandboxes (the agent stops), and the pods directory's own mount when
    /// no pod is left in it.
    pub(super) async fn release_warm(&self) {
        if let Some(pool) = &self.pool {
            pool.release_all(&self.cni, &self.network_without_ports)
                .await;
        }
        crate::sandbox::pods_mount::release_if_empty(&self.state_dir.join("pods"));
    }

    /// A sandbox from the pool for a pod that can take one, given to the pod of `pod_dir` and
    /// named `hostname` ([`pool::adopt`]). `None`: none ready, or the pod needs its own (see
    /// [`crate::sandbox::pool`]).
    async fn take_warm(
        &self,
        kinds: &[NsKind],
        network: &PodNetwork,
        pod_dir: &Path,
    ) -> Option<(PodNamespaces, WarmSandbox)> {
        let pool = self.pool.as_ref()?;
        if kinds != NsKind::ALL || !network.port_mappings.is_empty() {
            return None;
        }
        // Made again once the pod's start is done (`refill`), not beside it.
        let warm = pool.take()?;
        let (taken, dir, name) = (warm.clone(), pod_dir.to_owned(), network.hostname.clone());
        match tokio::task::spawn_blocking(move || pool::adopt(&taken, &dir, &name)).await {
            Ok(Ok(namespaces)) => Some((namespaces, warm)),
            failed => {
                tracing::warn!("taking pooled sandbox {}: {failed:?}", warm.id);
                let att = warm.attachment();
                let released = self
                    .cni
                    .release(warm.attached.as_ref(), self.network_for(&att), &att)
                    .await;
                if let Err(e) = released {
                    tracing::warn!("releasing pooled sandbox {}: {e}", warm.id);
                }
                let _ = warm.namespaces.remove();
                None
            }
        }
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
        self.ensure_pods_mount();
        // The first `oci` pod of an agent whose pods are host processes by default starts
        // the pool. Once it has started, it is refilled after a start (`refill`), never
        // beside one: a fill spawned here would run after this pod's take and make a
        // sandbox (three CNI plugin processes) on the cores this pod's start needs.
        if !self.pool.as_ref().is_some_and(|p| p.started()) {
            self.warm();
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
            held: None,
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
            attached: None,
            port_mappings: PortMapping::from_pod_spec(&spec)
                .into_iter()
                .map(|m| (m.host_port, m.container_port, m.protocol, m.host_ip))
                .collect(),
        };
        std::fs::create_dir_all(&paths.pod_dir).map_err(failed_sandbox)?;
        let kinds = NsKind::for_pod(host_network, spec.host_ipc == Some(true));
        let ns_dir = paths.pod_dir.join(crate::sandbox::netns::NS_DIR);
        let mut attached = false;
        if let Some((namespaces, warm)) = self.take_warm(&kinds, &network, &paths.pod_dir).await {
            attached = true;
            network.namespaces = Some(namespaces.dir().to_owned());
            network.held = Some(kinds);
            network.ip = warm.ip;
            network.cni_args = warm.attachment().args;
            network.cni_id = warm.id;
            network.attached = warm.attached;
        } else if !kinds.is_empty() {
            let dir = ns_dir.clone();
            let (name, held) = (hostname.clone(), kinds.clone());
            let made =
                tokio::task::spawn_blocking(move || PodNamespaces::create(&dir, &name, &held))
                    .await
                    .map_err(failed_sandbox)?;
            let (namespaces, _) = made.map_err(failed_sandbox)?;
            network.namespaces = Some(namespaces.dir().to_owned());
            network.held = Some(kinds);
        }
        if !host_network && !attached {
            let attachment = network
                .attachment()
                .ok_or_else(|| failed_sandbox("no netns"))?;
            let list = self.network_for(&attachment);
            match self.cni.add(list, &attachment).await {
                Ok(result) => {
                    network.ip = result.pod_ips().first().copied();
                    network.attached = Some(AttachedNetwork::new(list, &result));
                }
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
    ///
    /// The plugins run in the background ([`Cni::in_background`]): a DEL is no start's work
    /// (a `bridge` DEL is 25 to 50 ms of a Go process's CPU, which a pod deleted just before
    /// another is created took from that pod's start).
    pub(super) async fn remove_network(&self, network: &PodNetwork) {
        if let Some(attachment) = network.attachment() {
            // Exactly what it was attached with (`Cni::release`).
            let released = self
                .cni
                .in_background()
                .release(
                    network.attached.as_ref(),
                    self.network_for(&attachment),
                    &attachment,
                )
                .await;
            if let Err(e) = released {
                tracing::warn!("releasing the network of sandbox {}: {e}", network.cni_id);
            }
        }
        if let Some(dir) = &network.namespaces {
            let namespaces = PodNamespaces::new(dir.clone());
            let removed = tokio::task::spawn_blocking(move || namespaces.remove()).await;
            if let Ok(Err(e)) = removed {
                tracing::warn!("removing the namespaces of sandbox {}: {e}", network.cni_id);
            }
        }
    }

    /// Deletes the OCI runtime's state of the pod's containers whose shim died with them (a
    /// sandbox found dead after a restart of the node): `delete --force` of each instance
    /// that has a bundle under `<pod dir>/oci`, which also removes its cgroup, in runc's
    /// state and in the embedded youki's (`helper`: the podvisor binary), whichever made it
    /// (the executor may have changed across restarts). Best effort.
    pub(super) async fn remove_dead_containers(&self, paths: &PodPaths, helper: &Path) {
        use crate::oci::executor::{DirectRunner, OciExecutor, RuncMode};
        let Ok(entries) = std::fs::read_dir(paths.pod_dir.join("oci")) else {
            return;
        };
        let ids: Vec<String> = entries
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse::<u64>().ok())
            .map(|instance| {
                let id = super::container_id(paths, instance);
                id.rsplit("://").next().unwrap_or(&id).to_owned()
            })
            .collect();
        let mut executors = vec![RuncMode::Youki.executor(helper, &self.state_dir, DirectRunner)];
        if Path::new(crate::oci::executor::RUNC).exists() {
            executors.push(RuncMode::Run.executor(helper, &self.state_dir, DirectRunner));
        }
        let _ = tokio::task::spawn_blocking(move || {
            for executor in &executors {
                if !executor.root().exists() {
                    continue;
                }
                for id in &ids {
                    if matches!(executor.state(id), Ok(Some(_)))
                        && let Err(e) = executor.delete(id, true)
                    {
                        tracing::warn!("OCI runtime delete {id} of a dead sandbox: {e}");
                    }
                }
            }
        })
        .await;
    }

    /// Removes the network of the pod at `pod_dir`, if one was made.
    pub(super) async fn remove_network_of(&self, pod_dir: &Path) {
        if let Some(network) = PodNetwork::load(pod_dir) {
            self.remove_network(&network).await;
        }
    }

    /// Image garbage collection ([`crate::Runtime::garbage_collect_images`]): the images in
    /// use are those recorded by the pods' directories; images stored or used within
    /// `policy.min_age` are kept too (the kubelet's `imageMinimumGCAge`, counted from the
    /// image's first detection, which here is its pull or load, or its last use).
    pub(super) async fn garbage_collect_images(
        &self,
        policy: ImageGcPolicy,
    ) -> Result<ImageGcOutcome, RuntimeError> {
        let (store, pods) = (self.images.clone(), self.state_dir.join("pods"));
        let records = self.pull_records.clone();
        let collected = tokio::task::spawn_blocking(move || {
            let recorded = images_in_use(&pods);
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs());
            let young = |t: u64| now.saturating_sub(t) < policy.min_age.as_secs();
            let in_use: HashSet<ImageId> = store
                .list()?
                .into_iter()
                .filter(|i| {
                    recorded.contains(i.id.as_str()) || young(i.created_at) || young(i.last_used)
                })
                .map(|i| i.id)
                .collect();
            let collected = store.gc(
                policy.high_threshold_percent,
                policy.low_threshold_percent,
                &in_use,
            )?;
            // The kubelet's `PruneUnknownRecords`: the pull records of images gone, unless
            // written since this collection began.
            let stored: HashSet<String> = store
                .list()?
                .into_iter()
                .map(|i| i.id.as_str().to_owned())
                .collect();
            let pruned = records.prune(&stored, now);
            if pruned > 0 {
                tracing::debug!(pruned, "image pull records of removed images dropped");
            }
            Ok::<_, podvisor_image::Error>(collected)
        })
        .await
        .map_err(|e| RuntimeError::Other(e.to_string()))?
        .map_err(|e| RuntimeError::Other(format!("image garbage collection: {e}")))?;
        Ok(ImageGcOutcome {
            usage_percent: collected.usage_percent,
            wanted: collected.wanted,
            freed: collected.freed,
            removed: collected
                .removed
                .into_iter()
                .map(|r| r.id.as_str().to_owned())
                .collect(),
        })
    }

    /// Resolves the container's image as the kubelet's image manager does
    /// ([`image_manager`]) and describes the instance for the shim.
    pub(super) async fn launch(
        &self,
        request: &crate::StartRequest,
        paths: &PodPaths,
        network: &PodNetwork,
        container_id: &str,
    ) -> Result<(OciLaunch, (ImageReport, String)), StartError> {
        let (pod, container, instance) = (&request.pod, &request.container, request.instance);
        let opts = &BuildOptions {
            objects: request.objects.clone(),
            ..BuildOptions::default()
        };
        let (image, report) = self.ensure_image(request, &paths.pod_dir).await?;
        let fail = |reason: &str, message: String| StartError {
            reason: reason.to_owned(),
            message,
            created: false,
            pulling: false,
        };
        let env = crate::config::kubelet_environment(pod, container, opts)
            .map_err(|m| fail("CreateContainerConfigError", m))?;
        let launch = OciLaunch {
            id: container_id
                .rsplit("://")
                .next()
                .unwrap_or(container_id)
                .to_owned(),
            dir: paths.pod_dir.join("oci").join(instance.to_string()),
            runc_state: self.state_dir.clone(),
            pod: pod_for_the_shim(pod),
            container: container.clone(),
            image: image.config.config().clone(),
            layers: image.layers.clone(),
            env,
            network: network.namespace(NsKind::Net),
            ipc: network.namespace(NsKind::Ipc),
            uts: network.namespace(NsKind::Uts),
            pid: PidNamespace::for_container(pod, &container.name),
            hostname: network.hostname.clone(),
            hosts: Some(network.hosts.clone()),
            resolv_conf: Some(network.resolv_conf.clone()),
            hostname_file: Some(network.hostname_file.clone()),
            executor: self.executor,
        };
        // containerd reports the repo digest the image came by, else its id.
        let image_id = image
            .repo_digest
            .clone()
            .unwrap_or_else(|| image.id.as_str().to_owned());
        Ok((launch, (report, image_id)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shim gets the pod's metadata and spec as they are, and neither its status nor its
    /// managed fields.
    #[test]
    fn the_shim_gets_the_pod_without_its_status_and_managed_fields() {
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {
                "name": "web", "namespace": "default", "uid": "u1",
                "labels": {"app": "web"},
                "annotations": {"a": "b"},
                "managedFields": [{"manager": "kubectl", "operation": "Update"}]
            },
            "spec": {"containers": [{"name": "app", "image": "busybox"}]},
            "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "True"}]}
        }))
        .unwrap();
        let sent = pod_for_the_shim(&pod);
        assert_eq!(sent.status, None);
        assert_eq!(sent.metadata.managed_fields, None);
        assert_eq!(sent.spec, pod.spec);
        assert_eq!(
            ObjectMeta {
                managed_fields: None,
                ..pod.metadata.clone()
            },
            sent.metadata
        );
    }
}
