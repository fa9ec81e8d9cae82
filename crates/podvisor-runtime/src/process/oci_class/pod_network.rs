//! What an `oci` pod's sandbox was made as (`<pod dir>/network.json`): read again by a
//! restarted agent and at tear-down.

use crate::sandbox::cni::{AttachedNetwork, Attachment, PortMapping};
use crate::sandbox::netns::NsKind;
use serde::{Deserialize, Serialize};
use std::net::IpAddr;
use std::path::{Path, PathBuf};

/// A pod sandbox's network, as made (`<pod dir>/network.json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(in crate::process) struct PodNetwork {
    /// The pod shares the host's network (and UTS) namespace.
    pub host_network: bool,
    /// The pod's address on the CNI network (none with `hostNetwork`).
    pub ip: Option<IpAddr>,
    /// The pod's host name.
    pub hostname: String,
    /// The directory holding the pod's namespaces (`<pod dir>/ns`), when it has any.
    pub namespaces: Option<PathBuf>,
    /// Which namespaces are held there ([`NsKind::for_pod`]). Absent in the records of
    /// sandboxes made before `hostIPC` was honoured: all three whenever `namespaces` is set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held: Option<Vec<NsKind>>,
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
    /// The network the sandbox was attached with and its result: its `DEL` runs exactly
    /// that, whatever is configured by then. Absent in records made before it was kept (those
    /// are released with the agent's network) and with `hostNetwork`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attached: Option<AttachedNetwork>,
}

/// Where a pod's directory keeps its sandbox's network record (only `oci` pods have one).
pub(in crate::process) fn network_file(pod_dir: &Path) -> PathBuf {
    pod_dir.join("network.json")
}

impl PodNetwork {
    /// The file the pod's namespace of `kind` is held at, if the sandbox holds one (`None`:
    /// the host's).
    pub(in crate::process) fn namespace(&self, kind: NsKind) -> Option<PathBuf> {
        let dir = self.namespaces.as_ref()?;
        let held = self.held.as_ref().is_none_or(|held| held.contains(&kind));
        held.then(|| dir.join(kind.name()))
    }

    pub(super) fn attachment(&self) -> Option<Attachment> {
        let netns = self.namespace(NsKind::Net)?;
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
    pub(in crate::process) fn load(pod_dir: &Path) -> Option<PodNetwork> {
        let bytes = std::fs::read(network_file(pod_dir)).ok()?;
        serde_json::from_slice(&bytes).ok()
    }
}
