//! A pod's resolver configuration: the kubelet's `GetPodDNS` (policy, cluster DNS, the
//! node's `resolv.conf`, the pod's `dnsConfig`, the limits) and the `resolv.conf` text
//! containerd writes from it.

use std::net::IpAddr;

use k8s_openapi::api::core::v1::{Pod, PodDNSConfigOption};

use super::EtcFilesError;

/// Most nameservers a pod gets (glibc's `MAXNS`).
pub const MAX_DNS_NAMESERVERS: usize = 3;
/// Most search domains a pod gets (`ExpandedDNSConfig`, GA).
pub const MAX_DNS_SEARCH_PATHS: usize = 32;
/// Longest search line, domains joined by spaces (`ExpandedDNSConfig`, GA).
pub const MAX_DNS_SEARCH_LIST_CHARS: usize = 2048;
/// Longest single search domain kept (a DNS-1123 subdomain: glibc aborts on longer ones).
pub const MAX_DNS_SEARCH_PATH_LEN: usize = 253;

/// Resolver settings: what a `resolv.conf` says, or what a pod gets.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DnsConfig {
    /// `nameserver` lines, in order.
    pub servers: Vec<String>,
    /// The `search` domains.
    pub searches: Vec<String>,
    /// The `options`, each `name` or `name:value`.
    pub options: Vec<String>,
}

/// What the node's kubelet is configured with (`--cluster-dns`, `--cluster-domain`,
/// `--resolv-conf`) and its addresses.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeDns {
    /// Cluster DNS servers; empty when the node has none (podvisor alone on a machine).
    pub cluster_dns: Vec<IpAddr>,
    /// The cluster domain (`cluster.local`); empty for none.
    pub cluster_domain: String,
    /// The content of the node's resolver file, or `None` for `--resolv-conf=""` (the pod
    /// then gets the node's own address family's loopback and search `.`).
    pub resolver_config: Option<String>,
    /// The node's addresses (only their families matter, for `resolver_config: None`).
    pub node_ips: Vec<IpAddr>,
}

/// A warning event the kubelet records on the pod while forming its DNS (`reason`, message).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DnsEvent {
    /// `MissingClusterDNS` or `DNSConfigForming`.
    pub reason: &'static str,
    /// The event's message.
    pub message: String,
}

/// How a pod's resolver is formed (the kubelet's `podDNSType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PodDnsType {
    /// Cluster DNS first (`ClusterFirst` off the host network, `ClusterFirstWithHostNet`).
    Cluster,
    /// The node's resolver (`Default`, and `ClusterFirst` on the host network).
    Host,
    /// Only the pod's `dnsConfig` (`None`).
    None,
}

/// The pod's DNS type from `dnsPolicy` and `hostNetwork` (the kubelet's `getPodDNSType`).
///
/// # Errors
/// An unknown policy (the API server rejects those).
pub fn pod_dns_type(policy: &str, host_network: bool) -> Result<PodDnsType, String> {
    match policy {
        "None" => Ok(PodDnsType::None),
        "ClusterFirstWithHostNet" => Ok(PodDnsType::Cluster),
        "ClusterFirst" if !host_network => Ok(PodDnsType::Cluster),
        "ClusterFirst" | "Default" => Ok(PodDnsType::Host),
        other => Err(format!("invalid DNSPolicy={other}")),
    }
}

/// Parses a `resolv.conf` as the kubelet does: `nameserver` lines accumulate, the last
/// `search` and the last `options` line win, `#` comments and blank lines are skipped, and
/// search domains lose a trailing dot (`.` alone is dropped).
///
/// # Errors
/// A `nameserver` line without an address.
pub fn parse_resolv_conf(text: &str) -> Result<DnsConfig, EtcFilesError> {
    let mut conf = DnsConfig::default();
    let mut errors = Vec::new();
    for line in text.split('\n') {
        let trimmed = line.trim();
        if trimmed.starts_with('#') {
            continue;
        }
        let fields: Vec<&str> = trimmed.split_whitespace().collect();
        match fields.first().copied() {
            Some("nameserver") => match fields.get(1) {
                Some(ns) => conf.servers.push((*ns).to_owned()),
                None => errors.push("nameserver list is empty "),
            },
            Some("search") => {
                conf.searches = fields[1..]
                    .iter()
                    .filter(|s| **s != ".")
                    .map(|s| s.strip_suffix('.').unwrap_or(s).to_owned())
                    .collect();
            }
            Some("options") => conf.options = fields[1..].iter().map(|s| (*s).to_owned()).collect(),
            _ => {}
        }
    }
    if errors.is_empty() {
        Ok(conf)
    } else {
        Err(EtcFilesError::ResolvConf(errors.join(", ")))
    }
}

fn omit_duplicates(items: impl IntoIterator<Item = String>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for item in items {
        if !out.contains(&item) {
            out.push(item);
        }
    }
    out
}

/// Merges the pod's `dnsConfig.options` into `existing`: a pod option replaces one of the
/// same name (`ndots:5` + `ndots=2` → `ndots:2`). The kubelet goes through a Go map, so its
/// order is random; this keeps first-appearance order.
#[must_use]
pub fn merge_dns_options(existing: &[String], pod_options: &[PodDNSConfigOption]) -> Vec<String> {
    let mut merged: Vec<(String, String)> = Vec::new();
    let mut set = |name: &str, value: &str| match merged.iter_mut().find(|(n, _)| n == name) {
        Some(entry) => entry.1 = value.to_owned(),
        None => merged.push((name.to_owned(), value.to_owned())),
    };
    for op in existing {
        match op.split_once(':') {
            Some((name, value)) => set(name, value),
            None => set(op, ""),
        }
    }
    for op in pod_options {
        set(
            op.name.as_deref().unwrap_or_default(),
            op.value.as_deref().unwrap_or_default(),
        );
    }
    merged
        .into_iter()
        .map(|(n, v)| if v.is_empty() { n } else { format!("{n}:{v}") })
        .collect()
}

/// Cuts the search list to the limits (the kubelet's `formDNSSearchFitsLimits`): at most
/// [`MAX_DNS_SEARCH_PATHS`] domains, none longer than [`MAX_DNS_SEARCH_PATH_LEN`], and
/// domains dropped from the end until the line fits [`MAX_DNS_SEARCH_LIST_CHARS`]. Returns
/// the event to record when anything was cut.
#[must_use]
pub fn fit_search_limits(mut searches: Vec<String>) -> (Vec<String>, Option<DnsEvent>) {
    let mut exceeded = false;
    if searches.len() > MAX_DNS_SEARCH_PATHS {
        searches.truncate(MAX_DNS_SEARCH_PATHS);
        exceeded = true;
    }
    let before = searches.len();
    searches.retain(|s| s.len() <= MAX_DNS_SEARCH_PATH_LEN);
    exceeded |= searches.len() != before;
    let line_len = searches.join(" ").len();
    if line_len > MAX_DNS_SEARCH_LIST_CHARS {
        let mut cut_len = 0;
        let mut cut = 0;
        for s in searches.iter().rev() {
            cut_len += s.len() + 1;
            cut += 1;
            if line_len - cut_len <= MAX_DNS_SEARCH_LIST_CHARS {
                break;
            }
        }
        searches.truncate(searches.len() - cut);
        exceeded = true;
    }
    let event = exceeded.then(|| DnsEvent {
        reason: "DNSConfigForming",
        message: format!(
            "Search Line limits were exceeded, some search paths have been omitted, the applied search line is: {}",
            searches.join(" ")
        ),
    });
    (searches, event)
}

/// Cuts the nameservers to [`MAX_DNS_NAMESERVERS`] (the kubelet's
/// `formDNSNameserversFitsLimits`), with the event to record when any was cut.
#[must_use]
pub fn fit_nameserver_limits(mut servers: Vec<String>) -> (Vec<String>, Option<DnsEvent>) {
    if servers.len() <= MAX_DNS_NAMESERVERS {
        return (servers, None);
    }
    servers.truncate(MAX_DNS_NAMESERVERS);
    let message = format!(
        "Nameserver limits were exceeded, some nameservers have been omitted, the applied nameserver line is: {}",
        servers.join(" ")
    );
    (
        servers,
        Some(DnsEvent {
            reason: "DNSConfigForming",
            message,
        }),
    )
}

/// The pod's resolver settings (the kubelet's `GetPodDNS`) and the warning events to record
/// on the pod: `MissingClusterDNS` when a cluster-DNS policy falls back to the node's
/// resolver because the node has no cluster DNS (podvisor alone on a machine), and
/// `DNSConfigForming` when limits cut the result.
///
/// # Errors
/// The node's resolver file cannot be parsed.
pub fn pod_dns(pod: &Pod, node: &NodeDns) -> Result<(DnsConfig, Vec<DnsEvent>), EtcFilesError> {
    let spec = pod.spec.clone().unwrap_or_default();
    let mut events = Vec::new();
    let mut config = match &node.resolver_config {
        Some(text) => parse_resolv_conf(text)?,
        None => DnsConfig::default(),
    };
    let policy = spec.dns_policy.as_deref().unwrap_or("ClusterFirst");
    // An invalid policy is treated as ClusterFirst, as the kubelet does after logging it.
    let dns_type =
        pod_dns_type(policy, spec.host_network == Some(true)).unwrap_or(PodDnsType::Cluster);
    let mut use_host = dns_type == PodDnsType::Host;
    match dns_type {
        PodDnsType::None => config = DnsConfig::default(),
        PodDnsType::Cluster if !node.cluster_dns.is_empty() => {
            config.servers = node.cluster_dns.iter().map(ToString::to_string).collect();
            config.searches = cluster_first_searches(config.searches, pod, &node.cluster_domain);
            config.options = vec!["ndots:5".to_owned()];
        }
        PodDnsType::Cluster => {
            let msg = "kubelet does not have ClusterDNS IP configured and cannot create Pod using \"ClusterFirst\" policy. Falling back to \"Default\" policy.";
            events.push(DnsEvent {
                reason: "MissingClusterDNS",
                message: format!(
                    "pod: {}. {msg}",
                    podvisor_api::gotext::quote(&pod_desc(pod))
                ),
            });
            use_host = true;
        }
        PodDnsType::Host => {}
    }
    if use_host && node.resolver_config.is_none() {
        config.servers = node
            .node_ips
            .iter()
            .map(|ip| if ip.is_ipv6() { "::1" } else { "127.0.0.1" }.to_owned())
            .collect();
        if config.servers.is_empty() {
            config.servers.push("127.0.0.1".to_owned());
        }
        config.searches = vec![".".to_owned()];
    }
    if let Some(pod_config) = &spec.dns_config {
        config.servers = omit_duplicates(
            config
                .servers
                .into_iter()
                .chain(pod_config.nameservers.iter().flatten().cloned()),
        );
        config.searches = omit_duplicates(
            config
                .searches
                .into_iter()
                .chain(pod_config.searches.iter().flatten().cloned()),
        );
        config.options = merge_dns_options(
            &config.options,
            pod_config.options.as_deref().unwrap_or_default(),
        );
    }
    let (servers, event) = fit_nameserver_limits(config.servers);
    events.extend(event);
    let (searches, event) = fit_search_limits(config.searches);
    events.extend(event);
    config.servers = servers;
    config.searches = searches;
    Ok((config, events))
}

/// The kubelet's `format.Pod`: `name_namespace(uid)`.
fn pod_desc(pod: &Pod) -> String {
    let m = &pod.metadata;
    format!(
        "{}_{}({})",
        m.name.as_deref().unwrap_or_default(),
        m.namespace.as_deref().unwrap_or_default(),
        m.uid.as_deref().unwrap_or_default()
    )
}

/// `<ns>.svc.<domain>`, `svc.<domain>`, `<domain>` in front of the node's search domains.
fn cluster_first_searches(host: Vec<String>, pod: &Pod, cluster_domain: &str) -> Vec<String> {
    if cluster_domain.is_empty() {
        return host;
    }
    let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
    let cluster = [
        format!("{ns}.svc.{cluster_domain}"),
        format!("svc.{cluster_domain}"),
        cluster_domain.to_owned(),
    ];
    omit_duplicates(cluster.into_iter().chain(host))
}

/// The `resolv.conf` text for `config`, as containerd writes a sandbox's: a `search` line,
/// one `nameserver` line per server, an `options` line, each only when not empty. With
/// nothing at all, containerd copies the node's file: `node_resolv_conf` is returned as is.
#[must_use]
pub fn resolv_conf_content(config: &DnsConfig, node_resolv_conf: &str) -> String {
    let mut out = String::new();
    if !config.searches.is_empty() {
        out.push_str(&format!("search {}\n", config.searches.join(" ")));
    }
    for server in &config.servers {
        out.push_str(&format!("nameserver {server}\n"));
    }
    if !config.options.is_empty() {
        out.push_str(&format!("options {}\n", config.options.join(" ")));
    }
    if out.is_empty() {
        node_resolv_conf.to_owned()
    } else {
        out
    }
}
