//! Upstream's table cases (kubelet_pods_test.go, util_test.go, dns_test.go) and podvisor's
//! own for what upstream leaves to the runtime.

use std::net::IpAddr;

use k8s_openapi::api::core::v1::{HostAlias, Pod, PodDNSConfig, PodDNSConfigOption, PodSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::dns::*;
use super::*;

fn ips(list: &[&str]) -> Vec<IpAddr> {
    list.iter().map(|s| s.parse().unwrap()).collect()
}

fn alias(ip: &str, names: &[&str]) -> HostAlias {
    HostAlias {
        ip: ip.to_owned(),
        hostnames: Some(names.iter().map(|s| (*s).to_owned()).collect()),
    }
}

fn pod(name: &str, spec: PodSpec) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some("ns1".to_owned()),
            uid: Some("uid-1".to_owned()),
            ..Default::default()
        },
        spec: Some(spec),
        status: None,
    }
}

const LOCAL: &str = "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n\
fe00::0\tip6-localnet\nfe00::0\tip6-mcastprefix\nfe00::1\tip6-allnodes\nfe00::2\tip6-allrouters\n";

#[test]
fn managed_hosts_file_content_upstream_cases() {
    let head = format!("# Kubernetes-managed hosts file.\n{LOCAL}");
    type Case = (
        Vec<IpAddr>,
        &'static str,
        &'static str,
        Vec<HostAlias>,
        String,
    );
    let cases: Vec<Case> = vec![
        (
            ips(&["123.45.67.89"]),
            "podFoo",
            "",
            vec![],
            format!("{head}123.45.67.89\tpodFoo\n"),
        ),
        (
            ips(&["203.0.113.1"]),
            "podFoo",
            "domainFoo",
            vec![],
            format!("{head}203.0.113.1\tpodFoo.domainFoo\tpodFoo\n"),
        ),
        (
            ips(&["203.0.113.1"]),
            "podFoo",
            "domainFoo",
            vec![alias("123.45.67.89", &["foo", "bar", "baz"])],
            format!(
                "{head}203.0.113.1\tpodFoo.domainFoo\tpodFoo\n\n# Entries added by HostAliases.\n123.45.67.89\tfoo\tbar\tbaz\n"
            ),
        ),
        (
            ips(&["203.0.113.1"]),
            "podFoo",
            "domainFoo",
            vec![
                alias("123.45.67.89", &["foo", "bar", "baz"]),
                alias("456.78.90.123", &["park", "doo", "boo"]),
            ],
            format!(
                "{head}203.0.113.1\tpodFoo.domainFoo\tpodFoo\n\n# Entries added by HostAliases.\n123.45.67.89\tfoo\tbar\tbaz\n456.78.90.123\tpark\tdoo\tboo\n"
            ),
        ),
        (
            ips(&["203.0.113.1", "fd00::6"]),
            "podFoo",
            "domainFoo",
            vec![],
            format!(
                "{head}203.0.113.1\tpodFoo.domainFoo\tpodFoo\nfd00::6\tpodFoo.domainFoo\tpodFoo\n"
            ),
        ),
    ];
    for (i, (pod_ips, host, domain, aliases, want)) in cases.into_iter().enumerate() {
        assert_eq!(
            managed_hosts_file_content(&pod_ips, host, domain, &aliases),
            want,
            "case {i}"
        );
    }
}

#[test]
fn node_hosts_file_content_upstream_cases() {
    let raw1 = format!("# hosts file for testing.\n{LOCAL}123.45.67.89\tsome.domain\n");
    let raw2 = format!("# another hosts file for testing.\n{LOCAL}12.34.56.78\tanother.domain\n");
    let header = "# Kubernetes-managed hosts file (host network).\n";
    assert_eq!(
        node_hosts_file_content(&raw1, &[]),
        format!("{header}{raw1}")
    );
    assert_eq!(
        node_hosts_file_content(&raw2, &[]),
        format!("{header}{raw2}")
    );
    assert_eq!(
        node_hosts_file_content(&raw1, &[alias("123.45.67.89", &["foo", "bar", "baz"])]),
        format!("{header}{raw1}\n# Entries added by HostAliases.\n123.45.67.89\tfoo\tbar\tbaz\n")
    );
    assert_eq!(
        node_hosts_file_content(
            &raw2,
            &[
                alias("123.45.67.89", &["foo", "bar", "baz"]),
                alias("456.78.90.123", &["park", "doo", "boo"])
            ]
        ),
        format!(
            "{header}{raw2}\n# Entries added by HostAliases.\n123.45.67.89\tfoo\tbar\tbaz\n456.78.90.123\tpark\tdoo\tboo\n"
        )
    );
}

#[test]
fn a_host_network_pod_gets_the_nodes_hosts_file_and_others_the_managed_one() {
    let names = PodHostname {
        hostname: "web".to_owned(),
        domain: String::new(),
    };
    let node = "127.0.0.1\tlocalhost\n";
    let host_net = pod(
        "web",
        PodSpec {
            host_network: Some(true),
            ..Default::default()
        },
    );
    assert_eq!(
        hosts_file_content(&host_net, &[], &names, node),
        format!("{MANAGED_HOSTS_HEADER_WITH_HOST_NETWORK}{node}")
    );
    let on_pod_net = pod(
        "web",
        PodSpec {
            host_aliases: Some(vec![alias("10.0.0.1", &["db"])]),
            ..Default::default()
        },
    );
    let got = hosts_file_content(&on_pod_net, &ips(&["10.244.0.5"]), &names, node);
    assert!(got.starts_with(MANAGED_HOSTS_HEADER), "{got}");
    assert!(got.contains("10.244.0.5\tweb\n"), "{got}");
    assert!(got.ends_with("10.0.0.1\tdb\n"), "{got}");
}

#[test]
fn truncate_pod_hostname_upstream_cases() {
    let cases = [
        ("short", "test", Some("test")),
        // 63 characters: kept.
        (
            "exactly 63",
            "1234567890123456789012345678901234567890123456789012345678-63",
            None,
        ),
        // 64: cut to 63.
        (
            "64, cut",
            "1234567890123456789012345678901234567890123456789012345678901234",
            Some("123456789012345678901234567890123456789012345678901234567890123"),
        ),
        // The cut leaves a trailing '-' and '.': both go.
        (
            "trailing dash and dot",
            "123456789012345678901234567890123456789012345678901234567890-.-x1234",
            Some("123456789012345678901234567890123456789012345678901234567890"),
        ),
    ];
    for (desc, input, want) in cases {
        let got = truncate_pod_hostname("pod", input).unwrap();
        assert_eq!(got, want.unwrap_or(input), "{desc}");
        assert!(got.len() <= HOSTNAME_MAX_LEN, "{desc}");
    }
    let err = truncate_pod_hostname("pod", &"-".repeat(70)).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "hostname for pod \"pod\" was invalid: \"{}\"",
            "-".repeat(70)
        )
    );
}

#[test]
fn pod_hostname_and_domain_follow_hostname_subdomain_and_override() {
    let with = |spec: PodSpec| pod_hostname_and_domain(&pod("web-0", spec), "cluster.local");
    let names = with(PodSpec::default()).unwrap();
    assert_eq!(
        (names.hostname.as_str(), names.domain.as_str()),
        ("web-0", "")
    );
    let names = with(PodSpec {
        hostname: Some("db".to_owned()),
        subdomain: Some("svc1".to_owned()),
        ..Default::default()
    })
    .unwrap();
    assert_eq!(names.hostname, "db");
    assert_eq!(names.domain, "svc1.ns1.svc.cluster.local");
    assert_eq!(names.fqdn(), "db.svc1.ns1.svc.cluster.local");
    // hostnameOverride beats both and has no domain.
    let names = with(PodSpec {
        hostname: Some("db".to_owned()),
        subdomain: Some("svc1".to_owned()),
        hostname_override: Some("my.host.example".to_owned()),
        ..Default::default()
    })
    .unwrap();
    assert_eq!(
        (names.hostname.as_str(), names.domain.as_str()),
        ("my.host.example", "")
    );
    // A long pod name is truncated.
    let long = format!("{}-x", "a".repeat(62));
    let names = pod_hostname_and_domain(&pod(&long, PodSpec::default()), "").unwrap();
    assert_eq!(names.hostname, "a".repeat(62));
    let err = with(PodSpec {
        hostname: Some("Not_Valid".to_owned()),
        ..Default::default()
    })
    .unwrap_err();
    assert!(
        err.to_string()
            .starts_with("pod Hostname \"Not_Valid\" is not a valid DNS label: "),
        "{err}"
    );
    let err = with(PodSpec {
        subdomain: Some("a.b".to_owned()),
        ..Default::default()
    })
    .unwrap_err();
    assert!(
        err.to_string()
            .starts_with("pod Subdomain \"a.b\" is not a valid DNS label"),
        "{err}"
    );
}

#[test]
fn kernel_hostname_upstream_cases() {
    let names = |h: &str, d: &str| PodHostname {
        hostname: h.to_owned(),
        domain: d.to_owned(),
    };
    let domain = "testns.svc.cluster.local";
    assert_eq!(kernel_hostname(&names("test", ""), None).unwrap(), "test");
    assert_eq!(
        kernel_hostname(&names("test", ""), Some(true)).unwrap(),
        "test"
    );
    assert_eq!(
        kernel_hostname(&names("test", domain), Some(false)).unwrap(),
        "test"
    );
    assert_eq!(
        kernel_hostname(&names("test", domain), None).unwrap(),
        "test"
    );
    assert_eq!(
        kernel_hostname(&names("test", domain), Some(true)).unwrap(),
        "test.testns.svc.cluster.local"
    );
    let long = "1234567890123456789012345678901234567890";
    let err = kernel_hostname(&names(long, domain), Some(true)).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "failed to construct FQDN from pod hostname and cluster domain, FQDN {long}.{domain} is too long (64 characters is the max, 65 characters requested)"
        )
    );
}

#[test]
fn the_sandbox_hostname_of_a_host_network_pod_is_the_nodes() {
    let spec = PodSpec {
        host_network: Some(true),
        hostname: Some("ignored".to_owned()),
        ..Default::default()
    };
    assert_eq!(
        sandbox_hostname(&pod("web", spec), "cluster.local", "node1").unwrap(),
        "node1"
    );
    let spec = PodSpec {
        subdomain: Some("s".to_owned()),
        set_hostname_as_fqdn: Some(true),
        ..Default::default()
    };
    assert_eq!(
        sandbox_hostname(&pod("web", spec), "cluster.local", "node1").unwrap(),
        "web.s.ns1.svc.cluster.local"
    );
    assert_eq!(hostname_file_content("web"), "web\n");
}

#[test]
fn parse_resolv_conf_upstream_cases() {
    type Case = (
        &'static str,
        &'static [&'static str],
        &'static [&'static str],
        &'static [&'static str],
    );
    let ok: &[Case] = &[
        ("", &[], &[], &[]),
        (" ", &[], &[], &[]),
        ("\n", &[], &[], &[]),
        ("\t\n\t", &[], &[], &[]),
        ("#comment\n", &[], &[], &[]),
        (" #comment\n", &[], &[], &[]),
        ("#comment\n#comment", &[], &[], &[]),
        (
            "#comment\nnameserver 1.2.3.4\nsearch",
            &["1.2.3.4"],
            &[],
            &[],
        ),
        ("nameserver 1.2.3.4", &["1.2.3.4"], &[], &[]),
        (" nameserver 1.2.3.4", &["1.2.3.4"], &[], &[]),
        ("\tnameserver 1.2.3.4", &["1.2.3.4"], &[], &[]),
        ("nameserver\t1.2.3.4", &["1.2.3.4"], &[], &[]),
        ("nameserver \t 1.2.3.4", &["1.2.3.4"], &[], &[]),
        (
            "nameserver 1.2.3.4\nnameserver 5.6.7.8",
            &["1.2.3.4", "5.6.7.8"],
            &[],
            &[],
        ),
        ("nameserver 1.2.3.4 #comment", &["1.2.3.4"], &[], &[]),
        ("search ", &[], &[], &[]),
        ("search .", &[], &[], &[]),
        ("search foo", &[], &["foo"], &[]),
        ("search foo bar", &[], &["foo", "bar"], &[]),
        ("search foo. bar", &[], &["foo", "bar"], &[]),
        ("search foo bar bat\n", &[], &["foo", "bar", "bat"], &[]),
        ("search foo\nsearch bar", &[], &["bar"], &[]),
        (
            "nameserver 1.2.3.4\nsearch foo bar",
            &["1.2.3.4"],
            &["foo", "bar"],
            &[],
        ),
        (
            "nameserver 1.2.3.4\nsearch foo\nnameserver 5.6.7.8\nsearch bar",
            &["1.2.3.4", "5.6.7.8"],
            &["bar"],
            &[],
        ),
        (
            "#comment\nnameserver 1.2.3.4\n#comment\nsearch foo\ncomment",
            &["1.2.3.4"],
            &["foo"],
            &[],
        ),
        ("options ", &[], &[], &[]),
        (
            "options ndots:5 attempts:2",
            &[],
            &[],
            &["ndots:5", "attempts:2"],
        ),
        (
            "options ndots:1\noptions ndots:5 attempts:3",
            &[],
            &[],
            &["ndots:5", "attempts:3"],
        ),
        (
            "nameserver 1.2.3.4\nsearch foo\nnameserver 5.6.7.8\nsearch bar\noptions ndots:5 attempts:4",
            &["1.2.3.4", "5.6.7.8"],
            &["bar"],
            &["ndots:5", "attempts:4"],
        ),
    ];
    for (text, servers, searches, options) in ok {
        let got = parse_resolv_conf(text).unwrap_or_else(|e| panic!("{text:?}: {e}"));
        assert_eq!(got.servers, *servers, "{text:?}");
        assert_eq!(got.searches, *searches, "{text:?}");
        assert_eq!(got.options, *options, "{text:?}");
    }
    for text in ["#comment\nnameserver", "#comment\nnameserver\nsearch"] {
        assert!(parse_resolv_conf(text).is_err(), "{text:?}");
    }
}

#[test]
fn search_limits_drop_long_domains_and_cut_from_the_end() {
    let s = |v: &[&str]| v.iter().map(|x| (*x).to_owned()).collect::<Vec<_>>();
    let (got, event) = fit_search_limits(s(&["testNS.svc.TEST", "svc.TEST", "TEST"]));
    assert_eq!(got, s(&["testNS.svc.TEST", "svc.TEST", "TEST"]));
    assert_eq!(event, None);
    // A domain longer than 253 characters is dropped (upstream: 256 B's).
    let long = "B".repeat(256);
    let (got, event) = fit_search_limits(s(&[
        "testNS.svc.TEST",
        "svc.TEST",
        "TEST",
        "AAA",
        &long,
        "BBB",
    ]));
    assert_eq!(
        got,
        s(&["testNS.svc.TEST", "svc.TEST", "TEST", "AAA", "BBB"])
    );
    assert_eq!(
        event.unwrap().message,
        "Search Line limits were exceeded, some search paths have been omitted, the applied search line is: testNS.svc.TEST svc.TEST TEST AAA BBB"
    );
    // More than 32 domains: the first 32 stay.
    let many: Vec<String> = (0..33).map(|i| format!("d{i}")).collect();
    let (got, event) = fit_search_limits(many.clone());
    assert_eq!(got, many[..32]);
    assert_eq!(event.unwrap().reason, "DNSConfigForming");
    // A line over 2048 characters: domains go from the end until it fits.
    let big: Vec<String> = (0..10).map(|i| format!("{i}{}", "x".repeat(249))).collect();
    let (got, event) = fit_search_limits(big.clone());
    assert_eq!(got, big[..8]);
    assert!(got.join(" ").len() <= MAX_DNS_SEARCH_LIST_CHARS);
    assert!(event.is_some());
}

#[test]
fn nameserver_limits_upstream_cases() {
    let s = |v: &[&str]| v.iter().map(|x| (*x).to_owned()).collect::<Vec<_>>();
    assert_eq!(
        fit_nameserver_limits(s(&["127.0.0.1"])),
        (s(&["127.0.0.1"]), None)
    );
    let three = s(&["127.0.0.1", "10.0.0.10", "8.8.8.8"]);
    assert_eq!(fit_nameserver_limits(three.clone()), (three.clone(), None));
    let (got, event) = fit_nameserver_limits(s(&["127.0.0.1", "10.0.0.10", "8.8.8.8", "1.2.3.4"]));
    assert_eq!(got, three);
    assert_eq!(
        event.unwrap().message,
        "Nameserver limits were exceeded, some nameservers have been omitted, the applied nameserver line is: 127.0.0.1 10.0.0.10 8.8.8.8"
    );
}

#[test]
fn merge_dns_options_upstream_cases() {
    let opt = |n: &str, v: Option<&str>| PodDNSConfigOption {
        name: Some(n.to_owned()),
        value: v.map(str::to_owned),
    };
    let existing = ["ndots:5".to_owned(), "debug".to_owned()];
    assert_eq!(merge_dns_options(&existing, &[]), ["ndots:5", "debug"]);
    assert_eq!(
        merge_dns_options(
            &existing,
            &[opt("single-request", None), opt("attempts", Some("3"))]
        ),
        ["ndots:5", "debug", "single-request", "attempts:3"]
    );
    assert_eq!(
        merge_dns_options(
            &existing,
            &[
                opt("ndots", Some("3")),
                opt("debug", None),
                opt("single-request", None),
                opt("attempts", Some("3"))
            ]
        ),
        ["ndots:3", "debug", "single-request", "attempts:3"]
    );
}

#[test]
fn pod_dns_type_upstream_cases() {
    let cases = [
        ("ClusterFirst", false, Ok(PodDnsType::Cluster)),
        ("ClusterFirstWithHostNet", true, Ok(PodDnsType::Cluster)),
        ("ClusterFirstWithHostNet", false, Ok(PodDnsType::Cluster)),
        ("Default", false, Ok(PodDnsType::Host)),
        ("Default", true, Ok(PodDnsType::Host)),
        ("ClusterFirst", true, Ok(PodDnsType::Host)),
        ("None", false, Ok(PodDnsType::None)),
        (
            "invalidPolicy",
            false,
            Err("invalid DNSPolicy=invalidPolicy".to_owned()),
        ),
    ];
    for (policy, host_network, want) in cases {
        assert_eq!(
            pod_dns_type(policy, host_network),
            want,
            "{policy} {host_network}"
        );
    }
}

const NODE_RESOLV: &str = "nameserver 192.168.1.1\nsearch corp.example\noptions edns0\n";

fn node(cluster_dns: &[&str]) -> NodeDns {
    NodeDns {
        cluster_dns: cluster_dns.iter().map(|s| s.parse().unwrap()).collect(),
        cluster_domain: "cluster.local".to_owned(),
        resolver_config: Some(NODE_RESOLV.to_owned()),
        node_ips: vec![],
    }
}

fn dns_pod(policy: &str, host_network: bool, dns_config: Option<PodDNSConfig>) -> Pod {
    pod(
        "web",
        PodSpec {
            dns_policy: Some(policy.to_owned()),
            host_network: Some(host_network),
            dns_config,
            ..Default::default()
        },
    )
}

#[test]
fn cluster_first_without_cluster_dns_falls_back_to_the_nodes_resolver_with_a_warning() {
    let (config, events) = pod_dns(&dns_pod("ClusterFirst", false, None), &node(&[])).unwrap();
    assert_eq!(config, parse_resolv_conf(NODE_RESOLV).unwrap());
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].reason, "MissingClusterDNS");
    assert_eq!(
        events[0].message,
        "pod: \"web_ns1(uid-1)\". kubelet does not have ClusterDNS IP configured and cannot create Pod using \"ClusterFirst\" policy. Falling back to \"Default\" policy."
    );
    assert_eq!(
        resolv_conf_content(&config, NODE_RESOLV),
        "search corp.example\nnameserver 192.168.1.1\noptions edns0\n"
    );
}

#[test]
fn cluster_first_with_cluster_dns_puts_the_cluster_domains_first() {
    let (config, events) = pod_dns(
        &dns_pod("ClusterFirst", false, None),
        &node(&["10.96.0.10"]),
    )
    .unwrap();
    assert!(events.is_empty());
    assert_eq!(config.servers, ["10.96.0.10"]);
    assert_eq!(
        config.searches,
        [
            "ns1.svc.cluster.local",
            "svc.cluster.local",
            "cluster.local",
            "corp.example"
        ]
    );
    assert_eq!(config.options, ["ndots:5"]);
    // On the host network ClusterFirst is Default; ClusterFirstWithHostNet is cluster DNS.
    let (config, _) =
        pod_dns(&dns_pod("ClusterFirst", true, None), &node(&["10.96.0.10"])).unwrap();
    assert_eq!(config.servers, ["192.168.1.1"]);
    let (config, _) = pod_dns(
        &dns_pod("ClusterFirstWithHostNet", true, None),
        &node(&["10.96.0.10"]),
    )
    .unwrap();
    assert_eq!(config.servers, ["10.96.0.10"]);
}

#[test]
fn none_takes_only_the_pods_dns_config_and_dns_config_merges_into_the_others() {
    let pod_config = PodDNSConfig {
        nameservers: Some(vec!["203.0.113.1".to_owned(), "192.168.1.1".to_owned()]),
        searches: Some(vec!["my.dns.search.suffix".to_owned()]),
        options: Some(vec![
            PodDNSConfigOption {
                name: Some("ndots".to_owned()),
                value: Some("2".to_owned()),
            },
            PodDNSConfigOption {
                name: Some("edns0".to_owned()),
                value: None,
            },
        ]),
    };
    let (config, events) = pod_dns(
        &dns_pod("None", false, Some(pod_config.clone())),
        &node(&[]),
    )
    .unwrap();
    assert!(events.is_empty());
    assert_eq!(config.servers, ["203.0.113.1", "192.168.1.1"]);
    assert_eq!(config.searches, ["my.dns.search.suffix"]);
    assert_eq!(config.options, ["ndots:2", "edns0"]);
    assert_eq!(
        resolv_conf_content(&config, NODE_RESOLV),
        "search my.dns.search.suffix\nnameserver 203.0.113.1\nnameserver 192.168.1.1\noptions ndots:2 edns0\n"
    );
    // Default + dnsConfig: appended without duplicates, options merged.
    let (config, _) = pod_dns(&dns_pod("Default", false, Some(pod_config)), &node(&[])).unwrap();
    assert_eq!(config.servers, ["192.168.1.1", "203.0.113.1"]);
    assert_eq!(config.searches, ["corp.example", "my.dns.search.suffix"]);
    assert_eq!(config.options, ["edns0", "ndots:2"]);
}

#[test]
fn without_a_resolver_file_the_pod_resolves_through_the_nodes_loopback() {
    let mut n = node(&[]);
    n.resolver_config = None;
    let (config, _) = pod_dns(&dns_pod("Default", false, None), &n).unwrap();
    assert_eq!(config.servers, ["127.0.0.1"]);
    assert_eq!(config.searches, ["."]);
    n.node_ips = vec!["fd00::1".parse().unwrap()];
    let (config, _) = pod_dns(&dns_pod("Default", false, None), &n).unwrap();
    assert_eq!(config.servers, ["::1"]);
}

#[test]
fn an_empty_config_copies_the_nodes_file_as_containerd_does() {
    assert_eq!(
        resolv_conf_content(&DnsConfig::default(), NODE_RESOLV),
        NODE_RESOLV
    );
    let mut n = node(&[]);
    n.resolver_config = Some("# nothing\n".to_owned());
    let (config, _) = pod_dns(&dns_pod("Default", false, None), &n).unwrap();
    assert_eq!(resolv_conf_content(&config, "# nothing\n"), "# nothing\n");
    // A broken node file is an error, not an empty resolver.
    n.resolver_config = Some("nameserver\n".to_owned());
    assert!(pod_dns(&dns_pod("Default", false, None), &n).is_err());
}

#[test]
fn the_files_are_written_whole_with_mode_0644() {
    use std::os::unix::fs::PermissionsExt;
    let dir = std::env::temp_dir().join(format!("pv-etc-{}", std::process::id()));
    let files = PodEtcFiles {
        hosts: "h\n".to_owned(),
        resolv_conf: "r\n".to_owned(),
        hostname: "n\n".to_owned(),
    };
    let paths = files.write(&dir).unwrap();
    assert_eq!(std::fs::read_to_string(&paths.hosts).unwrap(), "h\n");
    assert_eq!(std::fs::read_to_string(&paths.resolv_conf).unwrap(), "r\n");
    assert_eq!(std::fs::read_to_string(&paths.hostname).unwrap(), "n\n");
    let mode = std::fs::metadata(&paths.hosts)
        .unwrap()
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(mode, 0o644);
    // Rewriting replaces.
    let again = PodEtcFiles {
        hosts: "h2\n".to_owned(),
        ..files
    };
    again.write(&dir).unwrap();
    assert_eq!(std::fs::read_to_string(&paths.hosts).unwrap(), "h2\n");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_hosts_file_is_mounted_once_the_pod_has_an_ip_or_on_the_host_network() {
    let on_pod_net = pod("web", PodSpec::default());
    assert!(!should_mount_hosts_file(&on_pod_net, &[]));
    assert!(should_mount_hosts_file(&on_pod_net, &ips(&["10.244.0.5"])));
    let host_net = pod(
        "web",
        PodSpec {
            host_network: Some(true),
            ..Default::default()
        },
    );
    assert!(should_mount_hosts_file(&host_net, &[]));
}

#[test]
fn pod_etc_files_puts_the_pieces_together() {
    let node = NodeFacts {
        hostname: "node1".to_owned(),
        hosts: "127.0.0.1\tlocalhost\n".to_owned(),
        dns: node(&[]),
    };
    let p = pod(
        "web",
        PodSpec {
            hostname: Some("www".to_owned()),
            subdomain: Some("site".to_owned()),
            dns_policy: Some("ClusterFirst".to_owned()),
            ..Default::default()
        },
    );
    let (files, events) = pod_etc_files(&p, &ips(&["10.244.0.5"]), &node).unwrap();
    assert!(
        files
            .hosts
            .ends_with("10.244.0.5\twww.site.ns1.svc.cluster.local\twww\n"),
        "{}",
        files.hosts
    );
    assert_eq!(files.hostname, "www\n");
    assert_eq!(
        files.resolv_conf,
        "search corp.example\nnameserver 192.168.1.1\noptions edns0\n"
    );
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].reason, "MissingClusterDNS");
    let facts = NodeFacts::read_host(vec![], "cluster.local");
    assert!(!facts.hostname.is_empty());
}
