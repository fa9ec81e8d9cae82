//! The files the kubelet and its CRI runtime give every container of a pod: `/etc/hosts`
//! (the kubelet's `managedHostsFileContent`, or the node's file for `hostNetwork` pods),
//! `/etc/resolv.conf` (the kubelet's `GetPodDNS`, written as containerd writes it: [`dns`])
//! and `/etc/hostname`, plus the pod's host name itself (`GeneratePodHostNameAndDomain`,
//! `GetNodenameForKernel`).
//!
//! Everything but [`PodEtcFiles::write`] is a pure function of the pod and what the caller read
//! from the node (its `/etc/hosts`, `/etc/resolv.conf`, host name), so each rule is tested
//! with upstream's table cases. The process runtime writes none of these files (its
//! containers see the host's); an image-based runtime bind-mounts the three written files.

pub mod dns;

use std::fs;
use std::io;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::{HostAlias, Pod};
use podvisor_api::validation::{is_dns1123_label, is_dns1123_subdomain};

/// The first line of a hosts file the kubelet writes for a pod on the pod network.
pub const MANAGED_HOSTS_HEADER: &str = "# Kubernetes-managed hosts file.\n";
/// The first line of a hosts file the kubelet writes for a `hostNetwork` pod (the node's
/// file follows).
pub const MANAGED_HOSTS_HEADER_WITH_HOST_NETWORK: &str =
    "# Kubernetes-managed hosts file (host network).\n";
/// Longest pod host name (64-byte kernel field minus its terminating NUL).
pub const HOSTNAME_MAX_LEN: usize = 63;
/// Longest fully qualified name set as the kernel host name (`setHostnameAsFQDN`).
pub const FQDN_MAX_LEN: usize = 64;

/// Errors of computing a pod's files.
#[derive(Debug, thiserror::Error)]
pub enum EtcFilesError {
    /// The pod's names cannot make a host name (the kubelet's words; the pod cannot start).
    #[error("{0}")]
    Hostname(String),
    /// The node's resolver configuration cannot be parsed.
    #[error("parse resolver configuration: {0}")]
    ResolvConf(String),
    /// A file could not be written.
    #[error("{what} {path}: {source}")]
    Io {
        /// The step (lower case).
        what: &'static str,
        /// The path.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: io::Error,
    },
}

/// A pod's short host name and its domain (empty unless `subdomain` is set).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodHostname {
    /// The host name: `hostnameOverride`, else `hostname`, else the pod's name, at most
    /// [`HOSTNAME_MAX_LEN`] bytes.
    pub hostname: String,
    /// `<subdomain>.<namespace>.svc.<cluster domain>`, or empty.
    pub domain: String,
}

impl PodHostname {
    /// `hostname.domain`, or the host name alone without a domain.
    #[must_use]
    pub fn fqdn(&self) -> String {
        if self.domain.is_empty() {
            self.hostname.clone()
        } else {
            format!("{}.{}", self.hostname, self.domain)
        }
    }
}

/// Truncates a host name longer than [`HOSTNAME_MAX_LEN`] and strips the `-` and `.` the
/// cut leaves at its end (the kubelet's `truncatePodHostnameIfNeeded`).
///
/// # Errors
/// Nothing is left after stripping.
pub fn truncate_pod_hostname(pod_name: &str, hostname: &str) -> Result<String, EtcFilesError> {
    if hostname.len() <= HOSTNAME_MAX_LEN {
        return Ok(hostname.to_owned());
    }
    // Host names are ASCII once validated; cut at a character boundary regardless.
    let mut end = HOSTNAME_MAX_LEN;
    while !hostname.is_char_boundary(end) {
        end -= 1;
    }
    let truncated = hostname[..end].trim_end_matches(['-', '.']);
    if truncated.is_empty() {
        return Err(EtcFilesError::Hostname(format!(
            "hostname for pod {pod_name:?} was invalid: {hostname:?}"
        )));
    }
    Ok(truncated.to_owned())
}

/// The pod's host name and domain (the kubelet's `GeneratePodHostNameAndDomain`, with the
/// `HostnameOverride` gate on, as in 1.35).
///
/// # Errors
/// An invalid `hostnameOverride`, `hostname` or `subdomain`, in the kubelet's words.
pub fn pod_hostname_and_domain(
    pod: &Pod,
    cluster_domain: &str,
) -> Result<PodHostname, EtcFilesError> {
    let name = pod.metadata.name.as_deref().unwrap_or_default();
    let namespace = pod.metadata.namespace.as_deref().unwrap_or("default");
    let spec = pod.spec.as_ref();
    if let Some(over) = spec.and_then(|s| s.hostname_override.as_deref()) {
        let msgs = is_dns1123_subdomain(over);
        if !msgs.is_empty() {
            return Err(EtcFilesError::Hostname(format!(
                "pod HostnameOverride {over:?} is not a valid DNS subdomain: {}",
                msgs.join(";")
            )));
        }
        return Ok(PodHostname {
            hostname: truncate_pod_hostname(name, over)?,
            domain: String::new(),
        });
    }
    let mut hostname = name;
    if let Some(h) = spec
        .and_then(|s| s.hostname.as_deref())
        .filter(|h| !h.is_empty())
    {
        let msgs = is_dns1123_label(h);
        if !msgs.is_empty() {
            return Err(EtcFilesError::Hostname(format!(
                "pod Hostname {h:?} is not a valid DNS label: {}",
                msgs.join(";")
            )));
        }
        hostname = h;
    }
    let hostname = truncate_pod_hostname(name, hostname)?;
    let mut domain = String::new();
    if let Some(sub) = spec
        .and_then(|s| s.subdomain.as_deref())
        .filter(|s| !s.is_empty())
    {
        let msgs = is_dns1123_label(sub);
        if !msgs.is_empty() {
            return Err(EtcFilesError::Hostname(format!(
                "pod Subdomain {sub:?} is not a valid DNS label: {}",
                msgs.join(";")
            )));
        }
        domain = format!("{sub}.{namespace}.svc.{cluster_domain}");
    }
    Ok(PodHostname { hostname, domain })
}

/// The name set in the pod's UTS namespace (the kubelet's `GetNodenameForKernel`): the
/// FQDN when `setHostnameAsFQDN` is true and there is a domain, else the short name.
///
/// # Errors
/// The FQDN is longer than [`FQDN_MAX_LEN`].
pub fn kernel_hostname(
    names: &PodHostname,
    set_hostname_as_fqdn: Option<bool>,
) -> Result<String, EtcFilesError> {
    if names.domain.is_empty() || set_hostname_as_fqdn != Some(true) {
        return Ok(names.hostname.clone());
    }
    let fqdn = names.fqdn();
    if fqdn.len() > FQDN_MAX_LEN {
        return Err(EtcFilesError::Hostname(format!(
            "failed to construct FQDN from pod hostname and cluster domain, FQDN {fqdn} is too long ({FQDN_MAX_LEN} characters is the max, {} characters requested)",
            fqdn.len()
        )));
    }
    Ok(fqdn)
}

/// The host name of the pod's sandbox: the node's for a `hostNetwork` pod (which keeps the
/// node's UTS namespace), else [`kernel_hostname`] of [`pod_hostname_and_domain`].
///
/// # Errors
/// As [`pod_hostname_and_domain`] and [`kernel_hostname`].
pub fn sandbox_hostname(
    pod: &Pod,
    cluster_domain: &str,
    node_hostname: &str,
) -> Result<String, EtcFilesError> {
    let spec = pod.spec.as_ref();
    if spec.and_then(|s| s.host_network) == Some(true) {
        return Ok(node_hostname.to_owned());
    }
    let names = pod_hostname_and_domain(pod, cluster_domain)?;
    kernel_hostname(&names, spec.and_then(|s| s.set_hostname_as_fqdn))
}

/// The `hostAliases` block: a blank line, a comment, then one line per alias entry with all
/// its names separated by tabs. Empty without aliases.
fn host_alias_entries(aliases: &[HostAlias]) -> String {
    if aliases.is_empty() {
        return String::new();
    }
    let mut out = String::from("\n# Entries added by HostAliases.\n");
    for alias in aliases {
        let names = alias.hostnames.as_deref().unwrap_or_default().join("\t");
        out.push_str(&format!("{}\t{names}\n", alias.ip));
    }
    out
}

/// The hosts file of a pod on the pod network (the kubelet's `managedHostsFileContent`):
/// the header, localhost and IPv6 lines, one line per pod IP with the FQDN first when there
/// is a domain, then the `hostAliases`.
#[must_use]
pub fn managed_hosts_file_content(
    pod_ips: &[IpAddr],
    hostname: &str,
    domain: &str,
    aliases: &[HostAlias],
) -> String {
    let mut out = String::from(MANAGED_HOSTS_HEADER);
    out.push_str("127.0.0.1\tlocalhost\n");
    out.push_str("::1\tlocalhost ip6-localhost ip6-loopback\n");
    out.push_str("fe00::0\tip6-localnet\n");
    out.push_str("fe00::0\tip6-mcastprefix\n");
    out.push_str("fe00::1\tip6-allnodes\n");
    out.push_str("fe00::2\tip6-allrouters\n");
    for ip in pod_ips {
        if domain.is_empty() {
            out.push_str(&format!("{ip}\t{hostname}\n"));
        } else {
            out.push_str(&format!("{ip}\t{hostname}.{domain}\t{hostname}\n"));
        }
    }
    out.push_str(&host_alias_entries(aliases));
    out
}

/// The hosts file of a `hostNetwork` pod (the kubelet's `nodeHostsFileContent`): its header,
/// the node's `/etc/hosts` as is, then the `hostAliases`.
#[must_use]
pub fn node_hosts_file_content(node_hosts: &str, aliases: &[HostAlias]) -> String {
    let mut out = String::from(MANAGED_HOSTS_HEADER_WITH_HOST_NETWORK);
    out.push_str(node_hosts);
    out.push_str(&host_alias_entries(aliases));
    out
}

/// The pod's `/etc/hosts`: [`node_hosts_file_content`] for a `hostNetwork` pod, else
/// [`managed_hosts_file_content`] with the pod's IPs and names.
#[must_use]
pub fn hosts_file_content(
    pod: &Pod,
    pod_ips: &[IpAddr],
    names: &PodHostname,
    node_hosts: &str,
) -> String {
    let spec = pod.spec.as_ref();
    let aliases = spec
        .and_then(|s| s.host_aliases.as_deref())
        .unwrap_or_default();
    if spec.and_then(|s| s.host_network) == Some(true) {
        node_hosts_file_content(node_hosts, aliases)
    } else {
        managed_hosts_file_content(pod_ips, &names.hostname, &names.domain, aliases)
    }
}

/// Whether containers get the pod's hosts file (the kubelet's `shouldMountHostsFile`): once
/// the pod has an IP, or always on the host network. A container that mounts a volume at
/// `/etc/hosts` itself keeps its own (the caller checks its `volumeMounts`).
#[must_use]
pub fn should_mount_hosts_file(pod: &Pod, pod_ips: &[IpAddr]) -> bool {
    !pod_ips.is_empty() || pod.spec.as_ref().and_then(|s| s.host_network) == Some(true)
}

/// `/etc/hostname` as containerd writes it for a sandbox: the host name and a newline.
#[must_use]
pub fn hostname_file_content(hostname: &str) -> String {
    format!("{hostname}\n")
}

/// What the pod's files are made from on this node: its host name, `/etc/hosts` and DNS
/// settings.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeFacts {
    /// The node's host name (a `hostNetwork` pod's).
    pub hostname: String,
    /// The node's `/etc/hosts` (a `hostNetwork` pod's, under its own header).
    pub hosts: String,
    /// Cluster DNS, cluster domain and the node's resolver file.
    pub dns: dns::NodeDns,
}

impl NodeFacts {
    /// Reads this machine's host name, `/etc/hosts` and `/etc/resolv.conf` (a missing file
    /// reads as empty), with the given cluster DNS servers and domain.
    #[must_use]
    pub fn read_host(cluster_dns: Vec<IpAddr>, cluster_domain: &str) -> NodeFacts {
        NodeFacts {
            hostname: rustix::system::uname()
                .nodename()
                .to_string_lossy()
                .into_owned(),
            hosts: fs::read_to_string("/etc/hosts").unwrap_or_default(),
            dns: dns::NodeDns {
                cluster_dns,
                cluster_domain: cluster_domain.to_owned(),
                resolver_config: Some(fs::read_to_string("/etc/resolv.conf").unwrap_or_default()),
                node_ips: Vec::new(),
            },
        }
    }
}

/// The pod's three files and the DNS warning events to record on it: `/etc/hosts` with its
/// IPs ([`hosts_file_content`]), `/etc/resolv.conf` ([`dns::pod_dns`], written as containerd
/// does) and `/etc/hostname` ([`sandbox_hostname`]).
///
/// # Errors
/// Invalid host names ([`pod_hostname_and_domain`], [`kernel_hostname`]) or an unparsable
/// node resolver file.
pub fn pod_etc_files(
    pod: &Pod,
    pod_ips: &[IpAddr],
    node: &NodeFacts,
) -> Result<(PodEtcFiles, Vec<dns::DnsEvent>), EtcFilesError> {
    let names = pod_hostname_and_domain(pod, &node.dns.cluster_domain)?;
    let hostname = sandbox_hostname(pod, &node.dns.cluster_domain, &node.hostname)?;
    let (config, events) = dns::pod_dns(pod, &node.dns)?;
    let node_resolv = node.dns.resolver_config.as_deref().unwrap_or_default();
    let files = PodEtcFiles {
        hosts: hosts_file_content(pod, pod_ips, &names, &node.hosts),
        resolv_conf: dns::resolv_conf_content(&config, node_resolv),
        hostname: hostname_file_content(&hostname),
    };
    Ok((files, events))
}

/// The three files of one pod, ready to write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodEtcFiles {
    /// `/etc/hosts`.
    pub hosts: String,
    /// `/etc/resolv.conf`.
    pub resolv_conf: String,
    /// `/etc/hostname`.
    pub hostname: String,
}

/// Where [`PodEtcFiles::write`] put each file (to bind-mount into containers).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodEtcPaths {
    /// `<dir>/hosts`.
    pub hosts: PathBuf,
    /// `<dir>/resolv.conf`.
    pub resolv_conf: PathBuf,
    /// `<dir>/hostname`.
    pub hostname: PathBuf,
}

impl PodEtcFiles {
    /// Writes the files into `dir` (created if missing), each replaced atomically with mode
    /// 0644, and returns their paths.
    ///
    /// # Errors
    /// The directory or a file cannot be written.
    pub fn write(&self, dir: &Path) -> Result<PodEtcPaths, EtcFilesError> {
        fs::create_dir_all(dir).map_err(|source| EtcFilesError::Io {
            what: "create directory",
            path: dir.to_owned(),
            source,
        })?;
        let paths = PodEtcPaths {
            hosts: dir.join("hosts"),
            resolv_conf: dir.join("resolv.conf"),
            hostname: dir.join("hostname"),
        };
        write_atomic(&paths.hosts, &self.hosts)?;
        write_atomic(&paths.resolv_conf, &self.resolv_conf)?;
        write_atomic(&paths.hostname, &self.hostname)?;
        Ok(paths)
    }
}

fn write_atomic(path: &Path, content: &str) -> Result<(), EtcFilesError> {
    use std::os::unix::fs::PermissionsExt;
    let err = |source| EtcFilesError::Io {
        what: "write",
        path: path.to_owned(),
        source,
    };
    let tmp = path.with_extension("tmp");
    fs::write(&tmp, content).map_err(err)?;
    fs::set_permissions(&tmp, fs::Permissions::from_mode(0o644)).map_err(err)?;
    fs::rename(&tmp, path).map_err(err)
}

#[cfg(test)]
mod tests;
