//! The node's own API objects, as the kubelet keeps them: the `Node` registered at start
//! (`registerWithAPIServer`), its status set from what the agent sees of the machine
//! (`pkg/kubelet/nodestatus/setters.go`) and written on change and at least every
//! [`NodeStatusConfig::report_interval`] (`nodeStatusReportFrequency`, 5 min), and its
//! `Lease` in `kube-node-lease` renewed every [`NodeStatusConfig::lease_renew_interval`]
//! (`nodeLeaseRenewIntervalFraction` 0.25 of the 40 s lease).
//!
//! The setters are pure functions of [`MachineFacts`] (read by [`MachineFacts::read`]) and
//! the previous status, so heartbeats and transitions are tested without a machine. The
//! objects are written through [`NodeObjectStore`], the same store path the pod status writers
//! use; nothing here assumes which API server reads them.

use crate::log::warning;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::{
    DaemonEndpoint, NodeAddress, NodeCondition, NodeDaemonEndpoints, NodeStatus, NodeSystemInfo,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use podvisor_store::{Key, Preconditions, Store, StoreError, Value};
use serde_json::json;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// The namespace of the nodes' Leases.
pub const NODE_LEASE_NAMESPACE: &str = "kube-node-lease";
/// The Lease's duration (kubelet's `nodeLeaseDurationSeconds`).
pub const LEASE_DURATION_SECONDS: i32 = 40;
/// The version the Node reports for its kubelet.
pub const KUBELET_VERSION: &str = "v1.35.0-podvisor";
/// Pods a node accepts (kubelet's `maxPods`).
pub const MAX_PODS: i64 = 110;
/// The kubelet's default hard eviction threshold `memory.available<100Mi`.
const MEMORY_EVICTION_BYTES: u64 = 100 * 1024 * 1024;
/// The kubelet's default hard eviction threshold `nodefs.available<10%`, in percent.
const NODEFS_EVICTION_PERCENT: u64 = 10;

/// What the agent sees of the machine.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MachineFacts {
    /// Online CPUs.
    pub cpus: u32,
    /// `MemTotal` of `/proc/meminfo`, bytes.
    pub memory_bytes: u64,
    /// `MemAvailable` of `/proc/meminfo`, bytes.
    pub memory_available_bytes: u64,
    /// Size of the state directory's filesystem, bytes.
    pub fs_bytes: u64,
    /// Free space of that filesystem for unprivileged users, bytes.
    pub fs_available_bytes: u64,
    /// `kernel.pid_max`.
    pub pid_max: u64,
    /// Processes (threads) running now.
    pub pids_running: u64,
    /// `uname -r`.
    pub kernel_version: String,
    /// `PRETTY_NAME` of `/etc/os-release`.
    pub os_image: String,
    /// `/etc/machine-id`.
    pub machine_id: String,
    /// `/proc/sys/kernel/random/boot_id`.
    pub boot_id: String,
    /// `/sys/class/dmi/id/product_uuid` where readable.
    pub system_uuid: String,
    /// The machine's hostname.
    pub hostname: String,
    /// The address other machines reach it on, if one was found.
    pub internal_ip: Option<String>,
}

fn read_trimmed(path: &str) -> String {
    std::fs::read_to_string(path)
        .map(|s| s.trim().to_owned())
        .unwrap_or_default()
}

/// The number of CPUs in a `/sys/devices/system/cpu/online` list (`0-3,6`).
pub fn count_cpu_list(list: &str) -> u32 {
    list.trim()
        .split(',')
        .filter(|p| !p.is_empty())
        .map(|part| match part.split_once('-') {
            Some((a, b)) => match (a.parse::<u32>(), b.parse::<u32>()) {
                (Ok(a), Ok(b)) if b >= a => b - a + 1,
                _ => 0,
            },
            None => u32::from(part.parse::<u32>().is_ok()),
        })
        .sum()
}

/// A `/proc/meminfo` field in bytes (`MemTotal:  16384 kB`).
pub fn meminfo_bytes(meminfo: &str, field: &str) -> Option<u64> {
    meminfo.lines().find_map(|line| {
        let rest = line.strip_prefix(field)?.strip_prefix(':')?;
        let mut words = rest.split_whitespace();
        let n: u64 = words.next()?.parse().ok()?;
        Some(match words.next() {
            Some("kB") => n * 1024,
            _ => n,
        })
    })
}

/// `PRETTY_NAME` of an os-release file (quotes removed).
pub fn os_release_pretty_name(text: &str) -> Option<String> {
    text.lines().find_map(|line| {
        let v = line.trim().strip_prefix("PRETTY_NAME=")?;
        Some(v.trim_matches(|c| c == '"' || c == '\'').to_owned())
    })
}

impl MachineFacts {
    /// Reads the facts of this machine; `state_dir`'s filesystem is the node's ephemeral
    /// storage.
    pub fn read(state_dir: &Path, hostname: &str) -> MachineFacts {
        let cpus = match count_cpu_list(&read_trimmed("/sys/devices/system/cpu/online")) {
            0 => std::thread::available_parallelism()
                .map_or(1, |n| u32::try_from(n.get()).unwrap_or(u32::MAX)),
            n => n,
        };
        let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
        let (fs_bytes, fs_available_bytes) = match rustix::fs::statvfs(state_dir) {
            Ok(s) => (s.f_blocks * s.f_frsize, s.f_bavail * s.f_frsize),
            Err(_) => (0, 0),
        };
        let os_release = std::fs::read_to_string("/etc/os-release")
            .or_else(|_| std::fs::read_to_string("/usr/lib/os-release"))
            .unwrap_or_default();
        let pids_running = read_trimmed("/proc/loadavg")
            .split_whitespace()
            .nth(3)
            .and_then(|f| f.split_once('/'))
            .and_then(|(_, total)| total.parse().ok())
            .unwrap_or(0);
        MachineFacts {
            cpus,
            memory_bytes: meminfo_bytes(&meminfo, "MemTotal").unwrap_or(0),
            memory_available_bytes: meminfo_bytes(&meminfo, "MemAvailable").unwrap_or(0),
            fs_bytes,
            fs_available_bytes,
            pid_max: read_trimmed("/proc/sys/kernel/pid_max")
                .parse()
                .unwrap_or(0),
            pids_running,
            kernel_version: rustix::system::uname()
                .release()
                .to_string_lossy()
                .into_owned(),
            os_image: os_release_pretty_name(&os_release).unwrap_or_else(|| "Linux".to_owned()),
            machine_id: read_trimmed("/etc/machine-id"),
            boot_id: read_trimmed("/proc/sys/kernel/random/boot_id"),
            system_uuid: read_trimmed("/sys/class/dmi/id/product_uuid").to_lowercase(),
            hostname: hostname.to_owned(),
            internal_ip: internal_ip(hostname),
        }
    }
}

/// The kubelet's node IP without `--node-ip` (`getNodeIP`): the first non-loopback address
/// the hostname resolves to, else the address of the interface of the default route.
fn internal_ip(hostname: &str) -> Option<String> {
    use std::net::ToSocketAddrs;
    let addrs: Vec<std::net::IpAddr> = (hostname, 0)
        .to_socket_addrs()
        .map(|a| a.map(|a| a.ip()).collect())
        .unwrap_or_default();
    let addrs: Vec<std::net::IpAddr> = addrs
        .into_iter()
        .filter(|ip| !ip.is_loopback() && !ip.is_unspecified())
        .collect();
    addrs
        .iter()
        .find(|ip| ip.is_ipv4())
        .or_else(|| addrs.first())
        .map(ToString::to_string)
        .or_else(|| {
            default_route_ip(
                &std::fs::read_to_string("/proc/net/route").ok()?,
                &std::fs::read_to_string("/proc/net/fib_trie").ok()?,
            )
            .map(|ip| ip.to_string())
        })
}

/// The local IPv4 address on the default route's interface, from `/proc/net/route` (its
/// interface's subnets) and `/proc/net/fib_trie` (the machine's `host LOCAL` addresses).
pub fn default_route_ip(route: &str, fib_trie: &str) -> Option<std::net::Ipv4Addr> {
    let hex = |s: &str| u32::from_str_radix(s, 16).ok().map(u32::from_be);
    let rows: Vec<(&str, u32, u32)> = route
        .lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            // Iface Destination Gateway Flags RefCnt Use Metric Mask ...; each word is the
            // address's network-order bytes read as a host-order number.
            let dest = hex(f.get(1)?)?;
            let mask = hex(f.get(7)?)?;
            Some((*f.first()?, dest, mask))
        })
        .collect();
    let iface = rows.iter().find(|r| r.1 == 0 && r.2 == 0)?.0;
    let subnets: Vec<(u32, u32)> = rows
        .iter()
        .filter(|r| r.0 == iface && r.2 != 0)
        .map(|r| (r.1, r.2))
        .collect();
    let lines: Vec<&str> = fib_trie.lines().collect();
    lines.windows(2).find_map(|w| {
        let ip: std::net::Ipv4Addr = w[0].trim().strip_prefix("|-- ")?.parse().ok()?;
        if !w[1].contains("host LOCAL") || ip.is_loopback() {
            return None;
        }
        let n = u32::from(ip);
        subnets
            .iter()
            .any(|(dest, mask)| n & mask == *dest)
            .then_some(ip)
    })
}

/// A byte count as the API server writes a binary-SI quantity (`16Gi`, `1024Ki`, `1000`).
pub fn binary_quantity(bytes: u64) -> String {
    const SUFFIXES: [(&str, u32); 6] = [
        ("Ei", 60),
        ("Pi", 50),
        ("Ti", 40),
        ("Gi", 30),
        ("Mi", 20),
        ("Ki", 10),
    ];
    if bytes == 0 {
        return "0".to_owned();
    }
    for (suffix, shift) in SUFFIXES {
        if bytes.trailing_zeros() >= shift {
            return format!("{}{suffix}", bytes >> shift);
        }
    }
    bytes.to_string()
}

/// What the Node reports besides the machine.
#[derive(Debug, Clone)]
pub struct NodeStatusConfig {
    /// The node's name (every bound pod's `spec.nodeName`).
    pub node_name: String,
    /// `nodeInfo.containerRuntimeVersion`: `podvisor://<version>`.
    pub runtime_version: String,
    /// `daemonEndpoints.kubeletEndpoint.Port`: where the node serves logs and exec.
    pub kubelet_port: i32,
    /// The node's state directory (its filesystem is the ephemeral storage).
    pub state_dir: PathBuf,
    /// How often the status is computed and compared (`nodeStatusUpdateFrequency`, 10 s).
    pub status_interval: Duration,
    /// The longest time between two status writes (`nodeStatusReportFrequency`, 5 min).
    pub report_interval: Duration,
    /// How often the Lease is renewed (10 s).
    pub lease_renew_interval: Duration,
    /// `DiskPressure` as the node's eviction manager reports it (with its threshold and
    /// transition period); without one, the default hard threshold on the facts.
    pub disk_pressure: Option<tokio::sync::watch::Receiver<bool>>,
}

impl NodeStatusConfig {
    /// The kubelet's intervals for `node_name`.
    pub fn new(node_name: String, state_dir: PathBuf, kubelet_port: i32) -> Self {
        NodeStatusConfig {
            node_name,
            runtime_version: format!("podvisor://{}", env!("CARGO_PKG_VERSION")),
            kubelet_port,
            state_dir,
            status_interval: Duration::from_secs(10),
            report_interval: Duration::from_secs(300),
            lease_renew_interval: Duration::from_secs(10),
            disk_pressure: None,
        }
    }
}

fn go_arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    }
}

/// The labels the kubelet puts on its Node (`initialNode`, `updateDefaultLabels`).
pub fn default_labels(hostname: &str) -> BTreeMap<String, String> {
    [
        ("beta.kubernetes.io/arch", go_arch()),
        ("beta.kubernetes.io/os", std::env::consts::OS),
        ("kubernetes.io/arch", go_arch()),
        ("kubernetes.io/hostname", hostname),
        ("kubernetes.io/os", std::env::consts::OS),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect()
}

/// One condition as the kubelet's setters make it: `lastHeartbeatTime` is `now`,
/// `lastTransitionTime` is kept unless the status changed.
fn condition(
    previous: Option<&NodeStatus>,
    type_: &str,
    status: bool,
    (reason, message): (&str, &str),
    now: Timestamp,
) -> NodeCondition {
    let status = if status { "True" } else { "False" };
    let old = previous
        .and_then(|p| p.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == type_));
    let transition = match old {
        Some(c) if c.status == status => c.last_transition_time.clone(),
        _ => Some(Time(now)),
    };
    NodeCondition {
        type_: type_.to_owned(),
        status: status.to_owned(),
        reason: Some(reason.to_owned()),
        message: Some(message.to_owned()),
        last_heartbeat_time: Some(Time(now)),
        last_transition_time: transition,
    }
}

/// The Node's status from the machine's facts and the previous status (the setters of
/// `pkg/kubelet/nodestatus`: machine info, versions, daemon endpoints, addresses, the
/// pressure conditions and Ready, in the kubelet's order).
pub fn node_status(
    facts: &MachineFacts,
    config: &NodeStatusConfig,
    previous: Option<&NodeStatus>,
    now: Timestamp,
) -> NodeStatus {
    let q = |s: String| Quantity(s);
    let capacity: BTreeMap<String, Quantity> = [
        ("cpu", facts.cpus.to_string()),
        ("ephemeral-storage", binary_quantity(facts.fs_bytes)),
        ("memory", binary_quantity(facts.memory_bytes)),
        ("pods", MAX_PODS.to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), q(v)))
    .collect();
    // Allocatable is capacity less the hard eviction thresholds (no kube- or
    // system-reserved is configured).
    let nodefs_reserved = facts.fs_bytes / 100 * NODEFS_EVICTION_PERCENT;
    let allocatable: BTreeMap<String, Quantity> = [
        ("cpu", facts.cpus.to_string()),
        (
            "ephemeral-storage",
            facts.fs_bytes.saturating_sub(nodefs_reserved).to_string(),
        ),
        (
            "memory",
            binary_quantity(facts.memory_bytes.saturating_sub(MEMORY_EVICTION_BYTES)),
        ),
        ("pods", MAX_PODS.to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), q(v)))
    .collect();
    let memory_pressure = facts.memory_available_bytes < MEMORY_EVICTION_BYTES;
    let disk_pressure = match &config.disk_pressure {
        Some(reported) => *reported.borrow(),
        None => {
            facts.fs_bytes > 0
                && facts.fs_available_bytes * 100 < facts.fs_bytes * NODEFS_EVICTION_PERCENT
        }
    };
    // The kubelet has no default `pid.available` threshold: PIDPressure only when the
    // machine is out of pids.
    let pid_pressure = facts.pid_max > 0 && facts.pids_running >= facts.pid_max;
    let conditions = vec![
        condition(
            previous,
            "MemoryPressure",
            memory_pressure,
            if memory_pressure {
                (
                    "KubeletHasInsufficientMemory",
                    "kubelet has insufficient memory available",
                )
            } else {
                (
                    "KubeletHasSufficientMemory",
                    "kubelet has sufficient memory available",
                )
            },
            now,
        ),
        condition(
            previous,
            "DiskPressure",
            disk_pressure,
            if disk_pressure {
                ("KubeletHasDiskPressure", "kubelet has disk pressure")
            } else {
                ("KubeletHasNoDiskPressure", "kubelet has no disk pressure")
            },
            now,
        ),
        condition(
            previous,
            "PIDPressure",
            pid_pressure,
            if pid_pressure {
                (
                    "KubeletHasInsufficientPID",
                    "kubelet has insufficient PID available",
                )
            } else {
                (
                    "KubeletHasSufficientPID",
                    "kubelet has sufficient PID available",
                )
            },
            now,
        ),
        condition(
            previous,
            "Ready",
            true,
            ("KubeletReady", "kubelet is posting ready status"),
            now,
        ),
    ];
    let mut addresses = Vec::new();
    if let Some(ip) = &facts.internal_ip {
        addresses.push(NodeAddress {
            type_: "InternalIP".to_owned(),
            address: ip.clone(),
        });
    }
    addresses.push(NodeAddress {
        type_: "Hostname".to_owned(),
        address: facts.hostname.clone(),
    });
    NodeStatus {
        capacity: Some(capacity),
        allocatable: Some(allocatable),
        conditions: Some(conditions),
        addresses: Some(addresses),
        daemon_endpoints: Some(NodeDaemonEndpoints {
            kubelet_endpoint: Some(DaemonEndpoint {
                port: config.kubelet_port,
            }),
        }),
        node_info: Some(NodeSystemInfo {
            architecture: go_arch().to_owned(),
            boot_id: facts.boot_id.clone(),
            container_runtime_version: config.runtime_version.clone(),
            kernel_version: facts.kernel_version.clone(),
            kube_proxy_version: String::new(),
            kubelet_version: KUBELET_VERSION.to_owned(),
            machine_id: facts.machine_id.clone(),
            operating_system: std::env::consts::OS.to_owned(),
            os_image: facts.os_image.clone(),
            system_uuid: facts.system_uuid.clone(),
            swap: None,
        }),
        // Images, volumes and runtime handlers are kept as the node last reported them.
        images: previous.and_then(|p| p.images.clone()),
        ..NodeStatus::default()
    }
}

/// Whether two statuses differ in more than their heartbeat times (the kubelet's
/// `nodeStatusHasChanged`): a change is written at once, no change only every
/// `report_interval`.
pub fn status_changed(old: Option<&NodeStatus>, new: &NodeStatus) -> bool {
    let strip = |s: &NodeStatus| {
        let mut s = s.clone();
        for c in s.conditions.iter_mut().flatten() {
            c.last_heartbeat_time = None;
        }
        s
    };
    old.is_none_or(|o| strip(o) != strip(new))
}

/// The events the kubelet's setters record for a status: one per condition that is new or
/// changed status (`NodeHasSufficientMemory`, `NodeHasDiskPressure`, `NodeReady`, ...).
pub fn condition_events(old: Option<&NodeStatus>, new: &NodeStatus) -> Vec<&'static str> {
    let old_status = |t: &str| {
        old.and_then(|o| o.conditions.as_ref())
            .and_then(|cs| cs.iter().find(|c| c.type_ == t))
            .map(|c| c.status.clone())
    };
    new.conditions
        .iter()
        .flatten()
        .filter(|c| old_status(&c.type_).as_deref() != Some(c.status.as_str()))
        .filter_map(|c| {
            Some(match (c.type_.as_str(), c.status == "True") {
                ("MemoryPressure", false) => "NodeHasSufficientMemory",
                ("MemoryPressure", true) => "NodeHasInsufficientMemory",
                ("DiskPressure", false) => "NodeHasNoDiskPressure",
                ("DiskPressure", true) => "NodeHasDiskPressure",
                ("PIDPressure", false) => "NodeHasSufficientPID",
                ("PIDPressure", true) => "NodeHasInsufficientPID",
                ("Ready", true) => "NodeReady",
                ("Ready", false) => "NodeNotReady",
                _ => return None,
            })
        })
        .collect()
}

/// An Event about the node as the kubelet records it: the involved object's uid is the node's
/// name (kubelet's `nodeRef`), stored in `default`, named `<node>.<unix nanos in hex>`.
pub fn node_event(node_name: &str, reason: &str, message: &str, now: Timestamp) -> Value {
    let stamp = time_text(now);
    json!({
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {
            "name": format!("{node_name}.{:x}", now.as_nanosecond()),
            "namespace": "default",
            "uid": crate::new_uid(),
            "creationTimestamp": stamp,
        },
        "involvedObject": {"kind": "Node", "name": node_name, "uid": node_name, "apiVersion": "v1"},
        "reason": reason,
        "message": message,
        "source": {"component": "kubelet", "host": node_name},
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "count": 1,
        "type": "Normal",
        "eventTime": null,
        "reportingComponent": "kubelet",
        "reportingInstance": node_name,
    })
}

/// A `MicroTime` as the API writes it.
pub fn micro_time(t: Timestamp) -> String {
    t.strftime("%Y-%m-%dT%H:%M:%S%.6fZ").to_string()
}

/// The node's Lease: held by the node, owned by its Node object.
pub fn lease_object(node_name: &str, node_uid: &str, created: &str, now: Timestamp) -> Value {
    json!({
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {
            "name": node_name,
            "namespace": NODE_LEASE_NAMESPACE,
            "uid": crate::new_uid(),
            "creationTimestamp": created,
            "ownerReferences": [{
                "apiVersion": "v1",
                "kind": "Node",
                "name": node_name,
                "uid": node_uid,
            }],
        },
        "spec": {
            "holderIdentity": node_name,
            "leaseDurationSeconds": LEASE_DURATION_SECONDS,
            "renewTime": micro_time(now),
        },
    })
}

/// Where the agent reads and writes its Node and Lease: the narrow part of the store it
/// needs (the pod status writers use the same store).
pub trait NodeObjectStore: Send + Sync + 'static {
    /// Reads an object.
    fn get(&self, key: &Key) -> Result<Option<Value>, StoreError>;
    /// Creates an object; `AlreadyExists` when taken.
    fn create(&self, key: &Key, obj: Value) -> Result<Value, StoreError>;
    /// Replaces an object if its resourceVersion is still `rv`.
    fn update(&self, key: &Key, obj: Value, rv: Option<String>) -> Result<Value, StoreError>;
}

impl NodeObjectStore for Store {
    fn get(&self, key: &Key) -> Result<Option<Value>, StoreError> {
        Store::get(self, key)
    }
    fn create(&self, key: &Key, obj: Value) -> Result<Value, StoreError> {
        Store::create(self, key, obj)
    }
    fn update(&self, key: &Key, obj: Value, rv: Option<String>) -> Result<Value, StoreError> {
        Store::update(
            self,
            key,
            obj,
            Preconditions {
                uid: None,
                resource_version: rv,
            },
        )
    }
}

fn time_text(t: Timestamp) -> String {
    t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

fn rv_of(obj: &Value) -> Option<String> {
    obj.pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        .map(str::to_owned)
}

/// The node's side of its objects: registration, status reports and the Lease.
pub struct NodeReporter<S: NodeObjectStore> {
    store: Arc<S>,
    config: NodeStatusConfig,
    /// The status last written, and when.
    last: Option<(NodeStatus, Timestamp)>,
    /// Events recorded so far.
    events: u64,
}

impl<S: NodeObjectStore> NodeReporter<S> {
    /// A reporter writing to `store`.
    pub fn new(store: Arc<S>, config: NodeStatusConfig) -> Self {
        NodeReporter {
            store,
            config,
            last: None,
            events: 0,
        }
    }

    fn node_key(&self) -> Key {
        Key::cluster("nodes", &self.config.node_name)
    }

    /// Registers the Node (`registerWithAPIServer`): creates it, or adds the default labels
    /// to the one that exists (its spec, cordon and taints included, is kept). Returns it.
    pub fn register(&self, now: Timestamp) -> Result<Value, StoreError> {
        let key = self.node_key();
        let name = &self.config.node_name;
        loop {
            match self.store.get(&key)? {
                None => {
                    let node = json!({
                        "apiVersion": "v1",
                        "kind": "Node",
                        "metadata": {
                            "name": name,
                            "uid": crate::new_uid(),
                            "creationTimestamp": time_text(now),
                            "labels": default_labels(name),
                            "annotations": {
                                "volumes.kubernetes.io/controller-managed-attach-detach": "true",
                            },
                        },
                        "spec": {},
                    });
                    match self.store.create(&key, node) {
                        Err(StoreError::AlreadyExists(_)) => {}
                        other => return other,
                    }
                }
                Some(mut node) => {
                    let mut changed = false;
                    for (k, v) in default_labels(name) {
                        let labels = &mut node["metadata"]["labels"];
                        if labels.get(&k).and_then(Value::as_str) != Some(v.as_str()) {
                            labels[&k] = json!(v);
                            changed = true;
                        }
                    }
                    if !changed {
                        return Ok(node);
                    }
                    let rv = rv_of(&node);
                    match self.store.update(&key, node, rv) {
                        Err(StoreError::Conflict { .. }) => {}
                        other => return other,
                    }
                }
            }
        }
    }

    /// One status tick: computes the status and writes it when it changed or when
    /// `report_interval` passed since the last write. Returns whether it wrote.
    pub fn report(&mut self, facts: &MachineFacts, now: Timestamp) -> Result<bool, StoreError> {
        let key = self.node_key();
        let Some(mut node) = self.store.get(&key)? else {
            // Deleted: registered again, as the kubelet does on its next sync.
            self.register(now)?;
            self.last = None;
            return self.report(facts, now);
        };
        let previous: Option<NodeStatus> = node
            .get("status")
            .and_then(|s| serde_json::from_value(s.clone()).ok());
        let status = node_status(facts, &self.config, previous.as_ref(), now);
        let due = match &self.last {
            Some((_, at)) => {
                now.duration_since(*at).as_secs_f64() >= self.config.report_interval.as_secs_f64()
            }
            None => true,
        };
        let pressure = status
            .conditions
            .iter()
            .flatten()
            .any(|c| c.type_ == "DiskPressure" && c.status == "True");
        let tainted = crate::eviction::set_disk_pressure_taint(&mut node["spec"], pressure);
        if !due && !tainted && !status_changed(previous.as_ref(), &status) {
            return Ok(false);
        }
        node["status"] = serde_json::to_value(&status).unwrap_or(Value::Null);
        let rv = rv_of(&node);
        match self.store.update(&key, node, rv) {
            Ok(_) => {
                for reason in condition_events(previous.as_ref(), &status) {
                    let message = format!("Node {} status is now: {reason}", self.config.node_name);
                    self.event(reason, &message, now);
                }
                self.last = Some((status, now));
                Ok(true)
            }
            Err(StoreError::Conflict { .. }) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Records an Event about the node; one that cannot be written is logged and dropped, as
    /// the kubelet's recorder does.
    pub fn event(&mut self, reason: &str, message: &str, now: Timestamp) {
        let name = &self.config.node_name;
        let mut event = node_event(name, reason, message, now);
        // Several events of one report share `now`: each its own name.
        self.events += 1;
        let ev_name = format!("{name}.{:x}", now.as_nanosecond() + i128::from(self.events));
        event["metadata"]["name"] = json!(ev_name);
        if let Err(e) = self
            .store
            .create(&Key::new("events", "default", &ev_name), event)
        {
            warning!("node {name}: recording the event {reason}: {e}");
        }
    }

    /// Renews the node's Lease, creating it (owned by the Node) when missing.
    pub fn renew_lease(&self, now: Timestamp) -> Result<Value, StoreError> {
        let name = &self.config.node_name;
        let key = Key::new("leases", NODE_LEASE_NAMESPACE, name);
        match self.store.get(&key)? {
            Some(mut lease) => {
                lease["spec"]["holderIdentity"] = json!(name);
                lease["spec"]["leaseDurationSeconds"] = json!(LEASE_DURATION_SECONDS);
                lease["spec"]["renewTime"] = json!(micro_time(now));
                let rv = rv_of(&lease);
                self.store.update(&key, lease, rv)
            }
            None => {
                let node = self.store.get(&self.node_key())?;
                let uid = node
                    .as_ref()
                    .and_then(|n| n.pointer("/metadata/uid"))
                    .and_then(Value::as_str)
                    .unwrap_or("");
                self.store
                    .create(&key, lease_object(name, uid, &time_text(now), now))
            }
        }
    }
}

/// Runs the node's reporter for ever: registers, then reports the status every
/// `status_interval` and renews the Lease every `lease_renew_interval`. Store errors are
/// logged and retried on the next tick.
pub async fn run<S: NodeObjectStore>(store: Arc<S>, config: NodeStatusConfig) {
    let status_every = config.status_interval;
    let lease_every = config.lease_renew_interval;
    let state_dir = config.state_dir.clone();
    let hostname = config.node_name.clone();
    let mut reporter = NodeReporter::new(store, config);
    let mut status_tick = tokio::time::interval(status_every);
    let mut lease_tick = tokio::time::interval(lease_every);
    status_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    lease_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut registered = false;
    let mut pressure = reporter.config.disk_pressure.clone();
    loop {
        // A change of `DiskPressure` is reported at once, as the kubelet's fast status
        // update on a condition change.
        let pressure_changed = async {
            match pressure.as_mut() {
                Some(rx) => {
                    if rx.changed().await.is_err() {
                        std::future::pending::<()>().await;
                    }
                }
                None => std::future::pending().await,
            }
        };
        let status = tokio::select! {
            _ = status_tick.tick() => true,
            _ = lease_tick.tick() => false,
            () = pressure_changed => true,
        };
        let dir = state_dir.clone();
        let host = hostname.clone();
        let result = tokio::task::spawn_blocking(move || {
            let now = Timestamp::now();
            let done = (|| {
                if !registered {
                    reporter.register(now)?;
                    reporter.event("Starting", "Starting kubelet.", now);
                }
                if status {
                    let facts = MachineFacts::read(&dir, &host);
                    reporter.report(&facts, now)?;
                } else {
                    reporter.renew_lease(now)?;
                }
                Ok::<_, StoreError>(())
            })();
            (reporter, done)
        })
        .await;
        match result {
            Ok((r, done)) => {
                reporter = r;
                match done {
                    Ok(()) => registered = true,
                    Err(e) => warning!("node {hostname}: writing the node's status or lease: {e}"),
                }
            }
            Err(e) => {
                warning!("node {hostname}: the node status task failed: {e}");
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts() -> MachineFacts {
        MachineFacts {
            cpus: 4,
            memory_bytes: 8 * 1024 * 1024 * 1024,
            memory_available_bytes: 4 * 1024 * 1024 * 1024,
            fs_bytes: 100 * 1024 * 1024 * 1024,
            fs_available_bytes: 50 * 1024 * 1024 * 1024,
            pid_max: 4_194_304,
            pids_running: 300,
            kernel_version: "6.1.0-test".into(),
            os_image: "Test Linux 1".into(),
            machine_id: "m".into(),
            boot_id: "b".into(),
            system_uuid: String::new(),
            hostname: "worker-1".into(),
            internal_ip: Some("192.0.2.10".into()),
        }
    }

    fn config() -> NodeStatusConfig {
        NodeStatusConfig::new("worker-1".into(), PathBuf::from("/tmp"), 6443)
    }

    fn at(secs: i64) -> Timestamp {
        Timestamp::from_second(1_700_000_000 + secs).unwrap()
    }

    fn cond<'a>(s: &'a NodeStatus, t: &str) -> &'a NodeCondition {
        s.conditions
            .as_ref()
            .unwrap()
            .iter()
            .find(|c| c.type_ == t)
            .unwrap()
    }

    #[test]
    fn machine_file_parsers() {
        assert_eq!(count_cpu_list("0-3,6\n"), 5);
        assert_eq!(count_cpu_list("0"), 1);
        assert_eq!(count_cpu_list(""), 0);
        let meminfo = "MemTotal:       16384 kB\nMemFree:  10 kB\nMemAvailable:    8192 kB\n";
        assert_eq!(meminfo_bytes(meminfo, "MemTotal"), Some(16384 * 1024));
        assert_eq!(meminfo_bytes(meminfo, "MemAvailable"), Some(8192 * 1024));
        assert_eq!(meminfo_bytes(meminfo, "Mem"), None);
        assert_eq!(
            os_release_pretty_name("NAME=x\nPRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\n")
                .as_deref(),
            Some("Debian GNU/Linux 12 (bookworm)")
        );
        assert_eq!(binary_quantity(16 * 1024 * 1024 * 1024), "16Gi");
        assert_eq!(binary_quantity(24_684_084 * 1024), "24684084Ki");
        assert_eq!(binary_quantity(1000), "1000");
    }

    #[test]
    fn internal_ip_is_the_default_route_interface_address() {
        let route = "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n\
            eth0\t00000000\t010200C0\t0003\t0\t0\t0\t00000000\t0\t0\t0\n\
            pv0\t0000F40A\t00000000\t0001\t0\t0\t0\t0000FFFF\t0\t0\t0\n\
            eth0\t000200C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n";
        let fib = "Main:\n  +-- 0.0.0.0/0 3 0 5\n              |-- 10.244.0.1\n                 /32 host LOCAL\n\
            |-- 127.0.0.1\n              /32 host LOCAL\n           |-- 192.0.2.0\n              /24 link UNICAST\n\
            |-- 192.0.2.2\n              /32 host LOCAL\n";
        assert_eq!(
            default_route_ip(route, fib),
            Some(std::net::Ipv4Addr::new(192, 0, 2, 2))
        );
        let no_default = route.replace("\t00000000\t010200C0", "\t0000000A\t010200C0");
        assert_eq!(default_route_ip(&no_default, fib), None);
    }

    #[test]
    fn status_from_machine_facts() {
        let s = node_status(&facts(), &config(), None, at(0));
        let cap = s.capacity.as_ref().unwrap();
        assert_eq!(cap["cpu"].0, "4");
        assert_eq!(cap["memory"].0, "8Gi");
        assert_eq!(cap["pods"].0, "110");
        assert_eq!(cap["ephemeral-storage"].0, "100Gi");
        let alloc = s.allocatable.as_ref().unwrap();
        // Capacity less the default hard eviction thresholds.
        assert_eq!(alloc["memory"].0, "8092Mi");
        assert_eq!(
            alloc["ephemeral-storage"].0,
            (100_u64 * 1024 * 1024 * 1024 - 10 * 1024 * 1024 * 1024).to_string()
        );
        let types: Vec<&str> = s
            .conditions
            .as_ref()
            .unwrap()
            .iter()
            .map(|c| c.type_.as_str())
            .collect();
        assert_eq!(
            types,
            ["MemoryPressure", "DiskPressure", "PIDPressure", "Ready"]
        );
        let ready = cond(&s, "Ready");
        assert_eq!(
            (
                ready.status.as_str(),
                ready.reason.as_deref(),
                ready.message.as_deref()
            ),
            (
                "True",
                Some("KubeletReady"),
                Some("kubelet is posting ready status")
            )
        );
        assert_eq!(
            cond(&s, "MemoryPressure").reason.as_deref(),
            Some("KubeletHasSufficientMemory")
        );
        assert_eq!(
            cond(&s, "DiskPressure").reason.as_deref(),
            Some("KubeletHasNoDiskPressure")
        );
        assert_eq!(
            cond(&s, "PIDPressure").reason.as_deref(),
            Some("KubeletHasSufficientPID")
        );
        let addrs: Vec<(&str, &str)> = s
            .addresses
            .as_ref()
            .unwrap()
            .iter()
            .map(|a| (a.type_.as_str(), a.address.as_str()))
            .collect();
        assert_eq!(
            addrs,
            [("InternalIP", "192.0.2.10"), ("Hostname", "worker-1")]
        );
        let info = s.node_info.as_ref().unwrap();
        assert_eq!(info.kernel_version, "6.1.0-test");
        assert_eq!(info.os_image, "Test Linux 1");
        assert_eq!(info.kubelet_version, "v1.35.0-podvisor");
        assert!(info.container_runtime_version.starts_with("podvisor://"));
        assert_eq!(
            s.daemon_endpoints.unwrap().kubelet_endpoint.unwrap().port,
            6443
        );
    }

    #[test]
    fn disk_pressure_is_the_eviction_managers_when_it_runs() {
        // Plenty of space, but the manager still reports pressure (its transition period),
        // and the other way round.
        let (tx, rx) = tokio::sync::watch::channel(true);
        let mut c = config();
        c.disk_pressure = Some(rx);
        let s = node_status(&facts(), &c, None, at(0));
        assert_eq!(cond(&s, "DiskPressure").status, "True");
        tx.send_replace(false);
        let mut full = facts();
        full.fs_available_bytes = 0;
        let s = node_status(&full, &c, Some(&s), at(1));
        let disk = cond(&s, "DiskPressure");
        assert_eq!(
            (disk.status.as_str(), disk.reason.as_deref()),
            ("False", Some("KubeletHasNoDiskPressure"))
        );
    }

    #[test]
    fn pressure_conditions_follow_the_eviction_thresholds() {
        let mut f = facts();
        f.memory_available_bytes = 50 * 1024 * 1024;
        f.fs_available_bytes = 5 * 1024 * 1024 * 1024;
        f.pids_running = f.pid_max;
        let s = node_status(&f, &config(), None, at(0));
        let mem = cond(&s, "MemoryPressure");
        assert_eq!(
            (mem.status.as_str(), mem.reason.as_deref()),
            ("True", Some("KubeletHasInsufficientMemory"))
        );
        let disk = cond(&s, "DiskPressure");
        assert_eq!(
            (disk.status.as_str(), disk.reason.as_deref()),
            ("True", Some("KubeletHasDiskPressure"))
        );
        assert_eq!(cond(&s, "PIDPressure").status, "True");
    }

    #[test]
    fn heartbeats_move_and_transitions_only_on_change() {
        let first = node_status(&facts(), &config(), None, at(0));
        let second = node_status(&facts(), &config(), Some(&first), at(10));
        let ready = cond(&second, "Ready");
        assert_eq!(ready.last_heartbeat_time, Some(Time(at(10))));
        assert_eq!(ready.last_transition_time, Some(Time(at(0))));
        assert!(!status_changed(Some(&first), &second));
        let mut f = facts();
        f.memory_available_bytes = 1;
        let third = node_status(&f, &config(), Some(&second), at(20));
        assert!(status_changed(Some(&second), &third));
        assert_eq!(
            cond(&third, "MemoryPressure").last_transition_time,
            Some(Time(at(20)))
        );
        assert_eq!(
            cond(&third, "Ready").last_transition_time,
            Some(Time(at(0)))
        );
        assert!(status_changed(None, &third));
    }

    #[test]
    fn condition_changes_are_events() {
        let first = node_status(&facts(), &config(), None, at(0));
        assert_eq!(
            condition_events(None, &first),
            [
                "NodeHasSufficientMemory",
                "NodeHasNoDiskPressure",
                "NodeHasSufficientPID",
                "NodeReady"
            ]
        );
        let same = node_status(&facts(), &config(), Some(&first), at(10));
        assert!(condition_events(Some(&first), &same).is_empty());
        let mut f = facts();
        f.memory_available_bytes = 1;
        let low = node_status(&f, &config(), Some(&same), at(20));
        assert_eq!(
            condition_events(Some(&same), &low),
            ["NodeHasInsufficientMemory"]
        );
        let e = node_event(
            "worker-1",
            "NodeReady",
            "Node worker-1 status is now: NodeReady",
            at(0),
        );
        assert_eq!(e["involvedObject"]["uid"], "worker-1");
        assert_eq!(e["metadata"]["namespace"], "default");
    }

    #[test]
    fn reports_on_change_and_every_report_interval() {
        let dir = std::env::temp_dir().join(format!("podvisor-node-status-{}", crate::new_uid()));
        std::fs::create_dir_all(&dir).unwrap();
        let store = Arc::new(Store::open(&dir.join("store.redb")).unwrap());
        let mut r = NodeReporter::new(Arc::clone(&store), config());
        let node = r.register(at(0)).unwrap();
        assert_eq!(
            node["metadata"]["labels"]["kubernetes.io/hostname"],
            "worker-1"
        );
        assert!(
            r.report(&facts(), at(0)).unwrap(),
            "the first status is written"
        );
        assert!(!r.report(&facts(), at(10)).unwrap(), "nothing changed");
        let mut f = facts();
        f.memory_available_bytes = 1;
        assert!(r.report(&f, at(20)).unwrap(), "a change is written at once");
        assert!(!r.report(&f, at(310)).unwrap());
        assert!(
            r.report(&f, at(320)).unwrap(),
            "5 minutes after the last write"
        );
        let (events, _) = store.list("events", Some("default")).unwrap();
        let mut reasons: Vec<&str> = events.iter().filter_map(|e| e["reason"].as_str()).collect();
        reasons.sort_unstable();
        assert_eq!(
            reasons,
            [
                "NodeHasInsufficientMemory",
                "NodeHasNoDiskPressure",
                "NodeHasSufficientMemory",
                "NodeHasSufficientPID",
                "NodeReady"
            ]
        );
        let stored = store
            .get(&Key::cluster("nodes", "worker-1"))
            .unwrap()
            .unwrap();
        let status: NodeStatus = serde_json::from_value(stored["status"].clone()).unwrap();
        assert_eq!(
            cond(&status, "Ready").last_heartbeat_time,
            Some(Time(at(320)))
        );
        // A cordon made through the API survives registration and reports.
        let mut cordoned = stored.clone();
        cordoned["spec"]["unschedulable"] = json!(true);
        store
            .update(
                &Key::cluster("nodes", "worker-1"),
                cordoned,
                Preconditions::default(),
            )
            .unwrap();
        r.register(at(330)).unwrap();
        r.report(&f, at(700)).unwrap();
        let stored = store
            .get(&Key::cluster("nodes", "worker-1"))
            .unwrap()
            .unwrap();
        assert_eq!(stored["spec"]["unschedulable"], json!(true));

        let lease = r.renew_lease(at(0)).unwrap();
        assert_eq!(lease["spec"]["holderIdentity"], "worker-1");
        assert_eq!(lease["spec"]["leaseDurationSeconds"], 40);
        assert_eq!(
            lease["metadata"]["ownerReferences"][0]["uid"],
            node["metadata"]["uid"]
        );
        let renewed = r.renew_lease(at(10)).unwrap();
        assert_eq!(renewed["spec"]["renewTime"], micro_time(at(10)));
        assert_eq!(renewed["metadata"]["uid"], lease["metadata"]["uid"]);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
