//! A warm pool of pod sandboxes: network, IPC and UTS namespaces made and attached to the
//! CNI network ahead of the pods that will take them.
//!
//! Attaching a namespace to a bridge network costs a process start per plugin (`bridge`,
//! `host-local`, `portmap`) and their netlink work: most of an OCI pod's start here. A pool
//! does that work before the pod exists, so a pod that can take a pooled sandbox starts with
//! a host name set and one rename. Which pods can: those whose sandbox does not depend
//! on the pod, i.e. their own network, IPC and UTS namespaces (no `hostNetwork`, no
//! `hostIPC`), no `hostPort` (`portmap` maps ports at ADD), on a network whose plugins do not
//! read the pod's `CNI_ARGS` (podvisor's own bridge network, or any network of the reference
//! plugins: [`serves`]).
//!
//! Each pooled sandbox lives under `<pool dir>/<id>/ns` and is attached with CNI container ID
//! `<id>`; a pod that takes one renames that directory into its own ([`adopt`]) and keeps the
//! ID for the DEL at its tear-down. What is still in the pool when the agent stops is released
//! by the next one ([`SandboxPool::release_all`]): nothing of the pool outlives the agent's
//! interest in it.

use std::collections::VecDeque;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use super::cni::{AttachedNetwork, Attachment, Cni, NetworkConfigList, POD_IFNAME};
use super::netns::{NS_DIR, NsKind, PodNamespaces};

/// The plugins of the CNI project's reference set (`containernetworking/plugins`, Debian's
/// `containernetworking-plugins`), main, IPAM and meta: none reads the `K8S_POD_*` pairs of
/// `CNI_ARGS`, so a sandbox attached ahead, before its pod exists, is what the pod would
/// have got.
const REFERENCE_PLUGINS: &[&str] = &[
    "bridge",
    "host-device",
    "ipvlan",
    "loopback",
    "macvlan",
    "ptp",
    "vlan",
    "host-local",
    "static",
    "dhcp",
    "bandwidth",
    "firewall",
    "portmap",
    "sbr",
    "tuning",
    "vrf",
];

/// Whether sandboxes of `network` can be made ahead: every plugin and IPAM plugin of the list
/// is a reference plugin (`REFERENCE_PLUGINS`). A network add-on's plugin (Calico, Cilium,
/// ...) reads the pod's name and namespace from `CNI_ARGS` at `ADD`: its pods make their own.
#[must_use]
pub fn serves(network: &NetworkConfigList) -> bool {
    let known = |t: Option<&serde_json::Value>| {
        t.and_then(serde_json::Value::as_str)
            .is_some_and(|t| REFERENCE_PLUGINS.contains(&t))
    };
    network.plugins.iter().all(|p| {
        known(p.get("type"))
            && p.get("ipam")
                .is_none_or(|ipam| ipam.get("type").is_none() || known(ipam.get("type")))
    })
}

/// The pool's directory in the pods directory (`<state>/pods`), which is one mount
/// ([`super::pods_mount`]): a shim drops the pool's mounts with every other pod's, and a pod
/// takes a pooled sandbox with a `rename` inside that mount. No pod UID has its name: readers
/// of the pods directory skip it by this name.
pub const POOL_DIR: &str = ".sandbox-pool";

/// Where agents before 2026-11-27 kept the pool, in the state directory: what is left there is
/// released by the first fill, and shims drop its mounts.
pub const LEGACY_POOL_DIR: &str = "sandbox-pool";

/// Beside each pooled sandbox's namespaces: the network it was attached with
/// ([`AttachedNetwork`]), so that a later agent releases a leftover with exactly that.
const RECORD: &str = "network.json";

/// The host name of a pooled sandbox until a pod takes it.
const POOL_HOSTNAME: &str = "podvisor-pool";

/// A sandbox in the pool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WarmSandbox {
    /// The CNI container ID it was attached with (DEL needs the same).
    pub id: String,
    /// Its namespaces (`<pool dir>/<id>/ns`).
    pub namespaces: PodNamespaces,
    /// Its address on the network.
    pub ip: Option<IpAddr>,
    /// The network it was attached with (none: unknown, released with the pool's).
    pub attached: Option<AttachedNetwork>,
}

impl WarmSandbox {
    /// The CNI attachment it was made with.
    #[must_use]
    pub fn attachment(&self) -> Attachment {
        attachment(&self.id, self.namespaces.net_path())
    }
}

fn attachment(id: &str, netns: PathBuf) -> Attachment {
    Attachment {
        container_id: id.to_owned(),
        netns,
        ifname: POD_IFNAME.to_owned(),
        args: vec![("IgnoreUnknown".to_owned(), "1".to_owned())],
        port_mappings: Vec::new(),
    }
}

/// How long releasing the pool waits for a fill under way to stop (a sandbox is made in tens
/// of milliseconds; a CNI plugin that hangs has its own timeout).
const FILL_STOP_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// The pool: up to `size` ready sandboxes, refilled in the background after each take.
#[derive(Debug)]
pub struct SandboxPool {
    dir: PathBuf,
    size: usize,
    ready: Mutex<VecDeque<WarmSandbox>>,
    filling: AtomicBool,
    /// The leftovers of an earlier agent were released (by the first fill).
    swept: AtomicBool,
    /// Released ([`SandboxPool::release_all`]): nothing is made any more.
    closed: AtomicBool,
    seq: AtomicU64,
    /// A directory an earlier agent kept its pool in, released with the leftovers.
    legacy: Option<PathBuf>,
}

impl SandboxPool {
    /// A pool of `size` sandboxes under `dir` (nothing is made yet: see [`SandboxPool::fill`]).
    #[must_use]
    pub fn new(dir: impl Into<PathBuf>, size: usize) -> SandboxPool {
        SandboxPool {
            dir: dir.into(),
            legacy: None,
            size,
            ready: Mutex::new(VecDeque::new()),
            filling: AtomicBool::new(false),
            swept: AtomicBool::new(false),
            closed: AtomicBool::new(false),
            seq: AtomicU64::new(0),
        }
    }

    /// Also releases what an earlier agent left in `dir` (an older layout's pool directory).
    #[must_use]
    pub fn sweeping(mut self, dir: impl Into<PathBuf>) -> SandboxPool {
        self.legacy = Some(dir.into());
        self
    }

    /// Takes a ready sandbox, if there is one.
    pub fn take(&self) -> Option<WarmSandbox> {
        self.ready
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .pop_front()
    }

    /// Whether `Pool::fill` has run (it sweeps what an earlier agent left first).
    pub fn started(&self) -> bool {
        self.swept.load(Ordering::Acquire)
    }

    /// How many sandboxes are ready.
    pub fn ready(&self) -> usize {
        self.ready
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .len()
    }

    /// Makes sandboxes until the pool is full (a pool of 0 never has any); one filler at a time (a second call while one
    /// runs returns at once). The first fill releases what an earlier agent left in the
    /// pool's directory. A failure stops the filling quietly: pods then make their own.
    pub async fn fill(&self, cni: &Cni, network: &NetworkConfigList) {
        if self.closed.load(Ordering::Acquire) || self.filling.swap(true, Ordering::AcqRel) {
            return;
        }
        let cni = &cni.in_background();
        // Also with a size of 0: an earlier agent may have kept some.
        if !self.swept.swap(true, Ordering::AcqRel) {
            self.release_everything(cni, network).await;
        }
        while !self.closed.load(Ordering::Acquire) && self.ready() < self.size {
            match self.make_one(cni, network).await {
                // Released while it was made: it goes too.
                Ok(sandbox) if self.closed.load(Ordering::Acquire) => {
                    release(cni, network, &sandbox, &self.dir).await;
                }
                Ok(sandbox) => self
                    .ready
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .push_back(sandbox),
                Err(e) => {
                    tracing::warn!("warming a pod sandbox: {e}");
                    break;
                }
            }
        }
        self.filling.store(false, Ordering::Release);
    }

    async fn make_one(
        &self,
        cni: &Cni,
        network: &NetworkConfigList,
    ) -> Result<WarmSandbox, String> {
        let id = format!(
            "pool{:x}{:x}{:x}",
            std::process::id(),
            jiff::Timestamp::now().as_nanosecond(),
            self.seq.fetch_add(1, Ordering::Relaxed)
        );
        let ns_dir = self.dir.join(&id).join(NS_DIR);
        let made = tokio::task::spawn_blocking(move || {
            PodNamespaces::create(&ns_dir, POOL_HOSTNAME, &NsKind::ALL)
        })
        .await
        .map_err(|e| e.to_string())?;
        let (namespaces, _) = made.map_err(|e| e.to_string())?;
        let att = attachment(&id, namespaces.net_path());
        match cni.add(network, &att).await {
            Ok(result) => {
                let attached = AttachedNetwork::new(network, &result);
                let sandbox = WarmSandbox {
                    ip: result.pod_ips().first().copied(),
                    id,
                    namespaces,
                    attached: Some(attached.clone()),
                };
                let record = self.dir.join(&sandbox.id).join(RECORD);
                let json = serde_json::to_vec(&attached).expect("JSON");
                if let Err(e) = std::fs::write(&record, json) {
                    release(cni, network, &sandbox, &self.dir).await;
                    return Err(format!("writing {}: {e}", record.display()));
                }
                Ok(sandbox)
            }
            Err(e) => {
                let sandbox = WarmSandbox {
                    id,
                    namespaces,
                    ip: None,
                    attached: None,
                };
                release(cni, network, &sandbox, &self.dir).await;
                Err(e.to_string())
            }
        }
    }

    /// Releases the ready sandboxes and every one left under the pool's directory by an
    /// earlier agent (none of those was taken: a taken one lives in its pod's directory), at
    /// the agent's stop: the pool makes none after (a fill under way stops, and releases what
    /// it was making). The first fill does the same without closing the pool.
    pub async fn release_all(&self, cni: &Cni, network: &NetworkConfigList) {
        self.closed.store(true, Ordering::Release);
        // A fill under way stops after the sandbox it is making, and releases that one.
        let deadline = std::time::Instant::now() + FILL_STOP_WAIT;
        while self.filling.load(Ordering::Acquire) && std::time::Instant::now() < deadline {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        self.release_everything(cni, network).await;
        let _ = std::fs::remove_dir(&self.dir);
    }

    /// The ready sandboxes and whatever else the pool's directory holds, released.
    async fn release_everything(&self, cni: &Cni, network: &NetworkConfigList) {
        let ready: Vec<WarmSandbox> = self
            .ready
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .drain(..)
            .collect();
        for sandbox in &ready {
            release(cni, network, sandbox, &self.dir).await;
        }
        for dir in std::iter::once(&self.dir).chain(&self.legacy) {
            let Ok(entries) = std::fs::read_dir(dir) else {
                continue;
            };
            for entry in entries.flatten() {
                let Some(id) = entry.file_name().to_str().map(str::to_owned) else {
                    continue;
                };
                // Released with the network it was attached with, when it says.
                let attached = std::fs::read(entry.path().join(RECORD))
                    .ok()
                    .and_then(|bytes| serde_json::from_slice(&bytes).ok());
                let sandbox = WarmSandbox {
                    namespaces: PodNamespaces::new(entry.path().join(NS_DIR)),
                    id,
                    ip: None,
                    attached,
                };
                release(cni, network, &sandbox, dir).await;
            }
            if Some(dir) == self.legacy.as_ref() {
                let _ = std::fs::remove_dir(dir);
            }
        }
    }
}

/// CNI DEL of `sandbox` (with the network it records, else `network`), then its namespaces
/// and directory.
async fn release(cni: &Cni, network: &NetworkConfigList, sandbox: &WarmSandbox, pool_dir: &Path) {
    let released = cni
        .release(sandbox.attached.as_ref(), network, &sandbox.attachment())
        .await;
    if let Err(e) = released {
        tracing::warn!("releasing pooled sandbox {}: {e}", sandbox.id);
    }
    let namespaces = sandbox.namespaces.clone();
    let dir = pool_dir.join(&sandbox.id);
    let _ = tokio::task::spawn_blocking(move || {
        if let Err(e) = namespaces.remove() {
            tracing::warn!(
                "removing pooled namespaces {}: {e}",
                namespaces.dir().display()
            );
        }
        let _ = std::fs::remove_file(dir.join(RECORD));
        let _ = std::fs::remove_dir(&dir);
    })
    .await;
}

/// Gives a taken sandbox to the pod whose directory is `pod_dir`, named `hostname`; returns
/// its namespaces, now under `<pod_dir>/sandbox/ns`.
///
/// One `rename` of its pool directory: the namespace mounts stay where they are and move with
/// their directory, in every mount namespace at once, so no mount is made or detached (each
/// costs more as the node's mounts grow: 1 to 2.5 ms for the moves with 8 pods here). Where the
/// rename cannot be done (the pool and the pod on different file systems), the mounts are moved
/// one by one into `<pod_dir>/ns` ([`PodNamespaces::move_to`]). The caller records the
/// directory returned: the pod's namespaces are wherever it says.
///
/// # Errors
/// The namespaces can be neither renamed nor moved, or the host name cannot be set.
pub fn adopt(
    sandbox: &WarmSandbox,
    pod_dir: &Path,
    hostname: &str,
) -> Result<PodNamespaces, String> {
    let target = pod_dir.join(ADOPTED);
    if let Some(pooled) = sandbox.namespaces.dir().parent()
        && std::fs::rename(pooled, &target).is_ok()
    {
        let adopted = PodNamespaces::new(target.join(NS_DIR));
        if let Err(e) = adopted.set_hostname(hostname) {
            // Back where the caller releases it from.
            let _ = std::fs::rename(&target, pooled);
            return Err(e.to_string());
        }
        return Ok(adopted);
    }
    let moved = sandbox
        .namespaces
        .move_to(&pod_dir.join(NS_DIR), &NsKind::ALL)
        .map_err(|e| e.to_string())?;
    if let Some(parent) = sandbox.namespaces.dir().parent() {
        // Its record goes with it: what is left in the pool's directory is released.
        let _ = std::fs::remove_file(parent.join(RECORD));
        let _ = std::fs::remove_dir(parent);
    }
    moved.set_hostname(hostname).map_err(|e| e.to_string())?;
    Ok(moved)
}

/// The directory a pooled sandbox's directory becomes in its pod's ([`adopt`]).
pub const ADOPTED: &str = "sandbox";

#[cfg(test)]
mod tests {
    use super::*;

    fn list(text: &str) -> NetworkConfigList {
        NetworkConfigList::from_conflist_bytes(text.as_bytes()).unwrap()
    }

    #[test]
    fn the_pool_serves_networks_of_reference_plugins_only() {
        // podman's default network.
        assert!(serves(&list(
            r#"{"cniVersion":"0.4.0","name":"podman","plugins":[
                {"type":"bridge","bridge":"cni-podman0","ipam":{"type":"host-local","ranges":[[{"subnet":"10.88.0.0/16"}]]}},
                {"type":"portmap","capabilities":{"portMappings":true}},
                {"type":"firewall"},{"type":"tuning"}]}"#
        )));
        // A network add-on's plugin, or a reference plugin with another's IPAM.
        assert!(!serves(&list(
            r#"{"cniVersion":"0.3.1","name":"k8s-pod-network","plugins":[
                {"type":"calico","ipam":{"type":"calico-ipam"}},{"type":"portmap"}]}"#
        )));
        assert!(!serves(&list(
            r#"{"cniVersion":"1.0.0","name":"n","plugins":[
                {"type":"bridge","ipam":{"type":"whereabouts"}}]}"#
        )));
    }
}
