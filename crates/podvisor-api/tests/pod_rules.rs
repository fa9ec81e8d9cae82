//! The shared pod rules (`podvisor_api::pod`, `gotext`, `meta`) pinned with upstream's table
//! cases: `pkg/apis/core/v1/helper/qos/qos_test.go` (`TestComputePodQOS`) and A16's
//! `ContainerShouldRestart`.

use k8s_openapi::api::core::v1::{Container, PodSpec};
use podvisor_api::gotext;
use podvisor_api::pod::{QosClass, container_should_restart, is_sidecar, qos_class};
use serde_json::{Value, json};
use std::time::Duration;

/// `getResourceList(cpu, memory)`: empty strings are left out.
fn list(cpu: &str, memory: &str) -> Value {
    let mut m = serde_json::Map::new();
    if !cpu.is_empty() {
        m.insert("cpu".into(), json!(cpu));
    }
    if !memory.is_empty() {
        m.insert("memory".into(), json!(memory));
    }
    Value::Object(m)
}

fn container(requests: Value, limits: Value) -> Value {
    json!({"name": "c", "resources": {"requests": requests, "limits": limits}})
}

fn spec(v: Value) -> PodSpec {
    serde_json::from_value(v).expect("spec")
}

fn pod(containers: Vec<Value>) -> PodSpec {
    spec(json!({ "containers": containers }))
}

#[test]
fn qos_compute_pod_qos_table() {
    use QosClass::*;
    let cases: Vec<(&str, PodSpec, QosClass)> = vec![
        (
            "guaranteed",
            pod(vec![container(
                list("100m", "100Mi"),
                list("100m", "100Mi"),
            )]),
            Guaranteed,
        ),
        (
            "guaranteed-guaranteed",
            pod(vec![
                container(list("100m", "100Mi"), list("100m", "100Mi")),
                container(list("100m", "100Mi"), list("100m", "100Mi")),
            ]),
            Guaranteed,
        ),
        (
            "best-effort-best-effort",
            pod(vec![
                container(list("", ""), list("", "")),
                container(list("", ""), list("", "")),
            ]),
            BestEffort,
        ),
        (
            "best-effort",
            pod(vec![container(list("", ""), list("", ""))]),
            BestEffort,
        ),
        (
            "best-effort-burstable",
            pod(vec![
                container(list("", ""), list("", "")),
                container(list("1", ""), list("2", "")),
            ]),
            Burstable,
        ),
        (
            "best-effort-guaranteed",
            pod(vec![
                container(list("", ""), list("", "")),
                container(list("10m", "100Mi"), list("10m", "100Mi")),
            ]),
            Burstable,
        ),
        (
            "burstable-cpu-guaranteed-memory",
            pod(vec![container(list("", "100Mi"), list("", "100Mi"))]),
            Burstable,
        ),
        (
            "burstable-no-limits",
            pod(vec![container(list("100m", "100Mi"), list("", ""))]),
            Burstable,
        ),
        (
            "burstable-guaranteed",
            pod(vec![
                container(list("1", "100Mi"), list("2", "100Mi")),
                container(list("100m", "100Mi"), list("100m", "100Mi")),
            ]),
            Burstable,
        ),
        (
            "burstable-unbounded-but-requests-match-limits",
            pod(vec![
                container(list("100m", "100Mi"), list("200m", "200Mi")),
                container(list("100m", "100Mi"), list("", "")),
            ]),
            Burstable,
        ),
        (
            "burstable-1",
            pod(vec![container(list("10m", "100Mi"), list("100m", "200Mi"))]),
            Burstable,
        ),
        (
            "burstable-2",
            pod(vec![container(list("0", "0"), list("100m", "200Mi"))]),
            Burstable,
        ),
        (
            "best-effort-hugepages",
            pod(vec![container(
                json!({"cpu": "0", "memory": "0", "hugepages-2Mi": "1Gi"}),
                json!({"cpu": "0", "memory": "0", "hugepages-2Mi": "1Gi"}),
            )]),
            BestEffort,
        ),
        (
            "init-container",
            spec(json!({
                "containers": [container(list("", ""), list("", ""))],
                "initContainers": [container(list("10m", "100Mi"), list("100m", "200Mi"))],
            })),
            Burstable,
        ),
        (
            "guaranteed-with-pod-level-resources",
            spec(json!({
                "containers": [container(list("", ""), list("", ""))],
                "resources": {"requests": list("10m", "100Mi"), "limits": list("10m", "100Mi")},
            })),
            Guaranteed,
        ),
        (
            "guaranteed-with-pod-and-container-level-resources",
            spec(json!({
                "containers": [container(list("3m", "10Mi"), list("5m", "20Mi"))],
                "resources": {"requests": list("10m", "100Mi"), "limits": list("10m", "100Mi")},
            })),
            Guaranteed,
        ),
        (
            "burstable-with-pod-level-resources",
            spec(json!({
                "containers": [container(list("", ""), list("", ""))],
                "resources": {"requests": list("10m", "10Mi"), "limits": list("20m", "50Mi")},
            })),
            Burstable,
        ),
        (
            "burstable-with-pod-and-container-level-requests",
            spec(json!({
                "containers": [container(list("5m", "10Mi"), list("", ""))],
                "resources": {"requests": list("10m", "10Mi"), "limits": list("", "")},
            })),
            Burstable,
        ),
        (
            "zero-request-only",
            pod(vec![container(json!({"cpu": "0"}), json!({}))]),
            BestEffort,
        ),
        // The cases the three copies this replaced got wrong (issue 7, section 5).
        (
            "equal-quantities-spelled-differently",
            pod(vec![container(
                list("1", "1Gi"),
                list("1000m", "1073741824"),
            )]),
            Guaranteed,
        ),
        (
            "ephemeral-storage-only",
            pod(vec![container(
                json!({"ephemeral-storage": "1Gi"}),
                json!({"ephemeral-storage": "1Gi"}),
            )]),
            BestEffort,
        ),
    ];
    for (name, spec, want) in cases {
        assert_eq!(qos_class(&spec), want, "{name}");
    }
}

fn c(v: Value) -> Container {
    let mut v = v;
    v["name"] = json!("c");
    serde_json::from_value(v).expect("container")
}

fn policy(p: &str) -> PodSpec {
    spec(json!({"containers": [], "restartPolicy": p}))
}

#[test]
fn a16_container_should_restart_table() {
    let plain = c(json!({}));
    // Pod policy alone (empty means Always).
    for (pod_policy, code, want) in [
        ("Always", 0, true),
        ("Always", 1, true),
        ("OnFailure", 0, false),
        ("OnFailure", 2, true),
        ("Never", 1, false),
        ("", 0, true),
    ] {
        let spec = if pod_policy.is_empty() {
            spec(json!({"containers": []}))
        } else {
            policy(pod_policy)
        };
        assert_eq!(
            container_should_restart(&plain, &spec, code),
            want,
            "pod {pod_policy:?} exit {code}"
        );
    }
    // The container's own policy wins over the pod's.
    let never = c(json!({"restartPolicy": "Never"}));
    assert!(!container_should_restart(&never, &policy("Always"), 1));
    let on_failure = c(json!({"restartPolicy": "OnFailure"}));
    assert!(!container_should_restart(&on_failure, &policy("Always"), 0));
    assert!(container_should_restart(&on_failure, &policy("Never"), 3));
    // Rules: a matching Restart rule restarts; rules with no match fall back to the policy.
    let rules = c(json!({"restartPolicy": "Never", "restartPolicyRules": [
        {"action": "Restart", "exitCodes": {"operator": "In", "values": [42, 43]}},
    ]}));
    assert!(container_should_restart(&rules, &policy("Never"), 42));
    assert!(!container_should_restart(&rules, &policy("Always"), 1));
    let not_in = c(json!({"restartPolicy": "Never", "restartPolicyRules": [
        {"action": "Restart", "exitCodes": {"operator": "NotIn", "values": [0]}},
    ]}));
    assert!(container_should_restart(&not_in, &policy("Never"), 7));
    assert!(!container_should_restart(&not_in, &policy("Never"), 0));
    // Only the first matching rule decides (`findMatchingContainerRestartRule`): an action other
    // than Restart there falls back to the container policy even if a later rule says Restart.
    let first = c(json!({"restartPolicy": "Never", "restartPolicyRules": [
        {"action": "DoNotRestart", "exitCodes": {"operator": "In", "values": [5]}},
        {"action": "Restart", "exitCodes": {"operator": "In", "values": [5]}},
    ]}));
    assert!(!container_should_restart(&first, &policy("Always"), 5));
    // Sidecars are init containers with restartPolicy Always.
    assert!(is_sidecar(&c(json!({"restartPolicy": "Always"}))));
    assert!(!is_sidecar(&c(json!({"restartPolicy": "OnFailure"}))));
    assert!(!is_sidecar(&plain));
}

#[test]
fn go_quote_and_durations_as_go_prints_them() {
    assert_eq!(gotext::quote("a\"b\\c\n"), r#""a\"b\\c\n""#);
    assert_eq!(gotext::quote("\u{7}\u{1b}x\u{7f}"), r#""\a\x1bx\x7f""#);
    assert_eq!(gotext::quote("héllo ✓"), "\"héllo ✓\"");
    assert_eq!(gotext::quote("\u{200b}"), r#""\u200b""#);
    assert_eq!(gotext::quote_bytes(b"a\xffb"), r#""a\xffb""#);
    for (d, text) in [
        (Duration::ZERO, "0s"),
        (Duration::from_millis(500), "500ms"),
        (Duration::from_millis(1500), "1.5s"),
        (Duration::from_secs(10), "10s"),
        (Duration::from_secs(80), "1m20s"),
        (Duration::from_secs(300), "5m0s"),
        (Duration::from_secs(3600), "1h0m0s"),
        (Duration::from_micros(2), "2µs"),
        (Duration::from_nanos(100), "100ns"),
        (Duration::from_nanos(1_500_000), "1.5ms"),
    ] {
        assert_eq!(gotext::duration(d), text);
        assert_eq!(gotext::parse_duration(text), Some(d), "{text}");
    }
    assert_eq!(
        gotext::parse_duration("2m40s"),
        Some(Duration::from_secs(160))
    );
    assert_eq!(gotext::parse_duration("-1s"), None);
    assert_eq!(gotext::parse_duration("soon"), None);
    assert_eq!(gotext::parse_duration("10"), None);
}

#[test]
fn uids_are_random_version_4_uuids() {
    let a = podvisor_api::meta::new_uid();
    let b = podvisor_api::meta::new_uid();
    assert_ne!(a, b);
    assert_eq!(a.len(), 36);
    assert_eq!(&a[14..15], "4");
    assert!(matches!(&a[19..20], "8" | "9" | "a" | "b"), "{a}");
    let s = podvisor_api::meta::name_suffix();
    assert_eq!(s.len(), 5);
    assert!(
        s.chars()
            .all(|ch| "bcdfghjklmnpqrstvwxz2456789".contains(ch)),
        "{s}"
    );
}
