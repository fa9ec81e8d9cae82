//! The eviction manager's rules, each named after what the kubelet does.

use super::*;
use k8s_openapi::api::core::v1::Pod;
use serde_json::json;

fn pod(priority: Option<i32>, request: Option<&str>) -> Pod {
    let resources = request.map_or(json!({}), |r| json!({"requests": {"ephemeral-storage": r}}));
    serde_json::from_value(json!({
        "metadata": {"name": "p", "namespace": "default"},
        "spec": {"priority": priority, "containers": [{"name": "app", "resources": resources}]},
    }))
    .unwrap()
}

fn usage(app: u64) -> PodDiskUsage {
    PodDiskUsage {
        containers: [("app".to_owned(), app)].into(),
        volumes: 0,
    }
}

const GI: u64 = 1 << 30;

#[test]
fn default_threshold_is_nodefs_available_below_ten_percent() {
    let t = Threshold::parse(DEFAULT_EVICTION_HARD).unwrap();
    assert_eq!(t, Threshold::Percentage(0.1));
    // 10 GiB times float32 0.1 (0.10000000149...), truncated: the kubelet's 1 GiB and 16 B.
    assert_eq!(t.quantity(10 * GI), 1_073_741_840);
    assert!(t.met(Observation {
        capacity: 10 * GI,
        available: 1_073_741_839
    }));
    assert!(!t.met(Observation {
        capacity: 10 * GI,
        available: 1_073_741_840
    }));
}

#[test]
fn eviction_hard_takes_a_quantity_and_names_what_is_wrong() {
    assert_eq!(
        Threshold::parse("nodefs.available<1Gi").unwrap(),
        Threshold::Bytes(GI)
    );
    assert_eq!(
        parse_eviction_hard("nodefs.available<5%").unwrap(),
        Threshold::Percentage(0.05)
    );
    assert!(parse_eviction_hard("nodefs.available<5%,nodefs.available<1Gi").is_err());
    assert!(matches!(
        Threshold::parse("memory.available<100Mi"),
        Err(EvictionError::Signal(_))
    ));
    assert!(matches!(
        Threshold::parse("nodefs.available=10%"),
        Err(EvictionError::Syntax(_))
    ));
    assert!(matches!(
        Threshold::parse("nodefs.available<0%"),
        Err(EvictionError::Value { .. })
    ));
    assert!(matches!(
        Threshold::parse("nodefs.available<lots"),
        Err(EvictionError::Value { .. })
    ));
}

#[test]
fn rank_puts_pods_exceeding_requests_first_then_lower_priority_then_larger_excess() {
    let (a, b, c, d) = (
        pod(Some(0), Some("1Gi")), // within its request
        pod(Some(10), None),       // exceeds (no request), high priority
        pod(Some(0), None),        // exceeds, low priority, small
        pod(Some(0), None),        // exceeds, low priority, large
    );
    let (ua, ub, uc, ud) = (usage(GI / 2), usage(GI), usage(100), usage(GI));
    let cand = |uid, pod, usage| Candidate {
        uid,
        pod,
        is_static: false,
        usage: Some(usage),
    };
    let mut pods = vec![
        cand("a", &a, &ua),
        cand("b", &b, &ub),
        cand("c", &c, &uc),
        cand("d", &d, &ud),
    ];
    rank_for_nodefs(&mut pods);
    let order: Vec<&str> = pods.iter().map(|c| c.uid).collect();
    assert_eq!(order, ["d", "c", "b", "a"]);
}

#[test]
fn rank_puts_pods_without_stats_first() {
    let (a, b) = (pod(None, None), pod(None, None));
    let ua = usage(GI);
    let mut pods = vec![
        Candidate {
            uid: "measured",
            pod: &a,
            is_static: false,
            usage: Some(&ua),
        },
        Candidate {
            uid: "unmeasured",
            pod: &b,
            is_static: false,
            usage: None,
        },
    ];
    rank_for_nodefs(&mut pods);
    assert_eq!(pods[0].uid, "unmeasured");
}

#[test]
fn message_names_threshold_available_and_each_container_above_its_request() {
    let p = pod(None, Some("1Ki"));
    let u = usage(3 << 20);
    let c = Candidate {
        uid: "u",
        pod: &p,
        is_static: false,
        usage: Some(&u),
    };
    let obs = Observation {
        capacity: 64 << 20,
        available: 1000,
    };
    assert_eq!(
        eviction_message(&c, Threshold::Percentage(0.1), obs),
        "The node was low on resource: ephemeral-storage. Threshold quantity: 6710886, available: 1000. \
         Container app was using 3Mi, request is 1Ki, has larger consumption of ephemeral-storage. "
    );
    // A container within its request is not named; no request prints as 0.
    let none = pod(None, None);
    let small = usage(0);
    let c = Candidate {
        uid: "u",
        pod: &none,
        is_static: false,
        usage: Some(&small),
    };
    assert_eq!(
        eviction_message(&c, Threshold::Bytes(2048), obs),
        "The node was low on resource: ephemeral-storage. Threshold quantity: 2Ki, available: 1000. "
    );
    let p = pod(None, None);
    let u = usage(5000);
    let c = Candidate {
        uid: "u",
        pod: &p,
        is_static: false,
        usage: Some(&u),
    };
    assert!(eviction_message(&c, Threshold::Bytes(2048), obs).ends_with(
        "Container app was using 5000, request is 0, has larger consumption of ephemeral-storage. "
    ));
}

#[test]
fn one_pod_per_synchronization_and_critical_pods_are_never_evicted() {
    let mut m = EvictionManager::new(Threshold::Percentage(0.1), PRESSURE_TRANSITION_PERIOD);
    let (critical, normal) = (pod(Some(SYSTEM_CRITICAL_PRIORITY), None), pod(None, None));
    let (big, small) = (usage(GI), usage(1));
    let full = Observation {
        capacity: 10 * GI,
        available: 0,
    };
    let pods = vec![
        Candidate {
            uid: "critical",
            pod: &critical,
            is_static: false,
            usage: Some(&big),
        },
        Candidate {
            uid: "static",
            pod: &normal,
            is_static: true,
            usage: Some(&big),
        },
        Candidate {
            uid: "normal",
            pod: &normal,
            is_static: false,
            usage: Some(&small),
        },
    ];
    let d = m.synchronize(full, pods, Instant::now());
    assert!(d.disk_pressure && d.threshold_met);
    assert_eq!(d.evict.map(|(uid, _)| uid).as_deref(), Some("normal"));
}

#[test]
fn disk_pressure_stays_for_the_transition_period_after_the_threshold_clears() {
    let period = Duration::from_secs(300);
    let mut m = EvictionManager::new(Threshold::Percentage(0.1), period);
    let t0 = Instant::now();
    let full = Observation {
        capacity: 100,
        available: 5,
    };
    let free = Observation {
        capacity: 100,
        available: 50,
    };
    assert!(!m.synchronize(free, vec![], t0).disk_pressure);
    assert!(m.synchronize(full, vec![], t0).disk_pressure);
    let later = m.synchronize(free, vec![], t0 + period - Duration::from_secs(1));
    assert!(later.disk_pressure && !later.threshold_met && later.evict.is_none());
    assert!(!m.synchronize(free, vec![], t0 + period).disk_pressure);
}

#[test]
fn disk_pressure_taints_the_node_no_schedule_and_untaints_it_after() {
    let mut spec = json!({"taints": [{"key": "other", "effect": "NoExecute"}]});
    assert!(set_disk_pressure_taint(&mut spec, true));
    assert!(!set_disk_pressure_taint(&mut spec, true));
    assert_eq!(
        spec["taints"][1],
        json!({"key": "node.kubernetes.io/disk-pressure", "effect": "NoSchedule"})
    );
    assert!(set_disk_pressure_taint(&mut spec, false));
    assert_eq!(
        spec,
        json!({"taints": [{"key": "other", "effect": "NoExecute"}]})
    );
    let mut bare = json!({});
    assert!(!set_disk_pressure_taint(&mut bare, false));
    assert!(set_disk_pressure_taint(&mut bare, true));
    assert!(set_disk_pressure_taint(&mut bare, false));
    assert_eq!(bare, json!({}));
}

#[test]
fn admit_rejects_pods_under_disk_pressure_but_critical_ones() {
    assert_eq!(admit(false, false), None);
    assert_eq!(admit(true, true), None);
    assert_eq!(
        admit(true, false).as_deref(),
        Some("The node had condition: [DiskPressure]. ")
    );
}
