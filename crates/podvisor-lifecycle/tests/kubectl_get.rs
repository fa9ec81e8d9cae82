//! Rule tests for the `kubectl get pods` row (kubelet-lifecycle.md section 3.1: K1-K11) and for
//! the duration formats it and the kubelet's messages use.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use podvisor_lifecycle::duration::{
    go_duration, human_duration, human_signed_duration, short_human_duration,
};
use podvisor_lifecycle::kubectl::{PodRow, pod_row, pod_status_text, ready_text};
use serde_json::{Value, json};

// ---- builders ---------------------------------------------------------------------------------

const NOW: &str = "2025-01-10T12:00:00Z";
fn now() -> Timestamp {
    NOW.parse().unwrap()
}
/// An RFC 3339 instant `secs` seconds before [`NOW`].
fn ago(secs: i64) -> String {
    now()
        .checked_sub(SignedDuration::from_secs(secs))
        .unwrap()
        .to_string()
}

/// A pod named `p` created 5 minutes ago. `init` names with a `+` prefix are sidecars.
fn pod(init: &[&str], containers: &[&str], status: Value) -> Pod {
    let init: Vec<Value> = init
        .iter()
        .map(|n| match n.strip_prefix('+') {
            Some(n) => json!({"name": n, "image": "busybox", "restartPolicy": "Always"}),
            None => json!({"name": n, "image": "busybox"}),
        })
        .collect();
    let containers: Vec<Value> = containers
        .iter()
        .map(|n| json!({"name": n, "image": "busybox"}))
        .collect();
    serde_json::from_value(json!({
        "metadata": {"name": "p", "namespace": "default", "creationTimestamp": ago(300)},
        "spec": {"initContainers": init, "containers": containers},
        "status": status,
    }))
    .unwrap()
}

fn running(name: &str, ready: bool) -> Value {
    json!({"name": name, "ready": ready, "started": true, "state": {"running": {}}})
}
fn running_unstarted(name: &str) -> Value {
    json!({"name": name, "ready": false, "started": false, "state": {"running": {}}})
}
fn waiting(name: &str, reason: &str) -> Value {
    json!({"name": name, "state": {"waiting": {"reason": reason}}})
}
fn terminated(name: &str, code: i32, reason: &str) -> Value {
    json!({"name": name, "state": {"terminated": {"exitCode": code, "reason": reason}}})
}
/// Adds `restartCount` and a `lastState.terminated` that finished `secs_ago` seconds ago.
fn restarted(mut v: Value, count: i32, secs_ago: i64) -> Value {
    v["restartCount"] = json!(count);
    v["lastState"] = json!({"terminated": {"exitCode": 1, "reason": "Error",
                                           "finishedAt": ago(secs_ago)}});
    v
}
fn cond(type_: &str, status: &str) -> Value {
    json!({"type": type_, "status": status})
}

fn status(pod: &Pod) -> String {
    pod_status_text(pod)
}
fn row(pod: &Pod) -> PodRow {
    pod_row(pod, now())
}

// ---- K1 ---------------------------------------------------------------------------------------

#[test]
fn k1_reason_starts_as_phase_then_status_reason_then_scheduling_gated() {
    let p = pod(&[], &["app"], json!({"phase": "Pending"}));
    assert_eq!(status(&p), "Pending");
    let p = pod(
        &[],
        &["app"],
        json!({"phase": "Failed", "reason": "Evicted"}),
    );
    assert_eq!(status(&p), "Evicted");
    let p = pod(
        &[],
        &["app"],
        json!({"phase": "Pending", "reason": "Something", "conditions": [
            {"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"}]}),
    );
    assert_eq!(status(&p), "SchedulingGated");
    // No status at all: empty phase, empty reason.
    let p: Pod = serde_json::from_value(json!({"metadata": {"name": "p"},
        "spec": {"containers": [{"name": "a", "image": "x"}]}}))
    .unwrap();
    assert_eq!(status(&p), "");
}

// ---- K2 / K7 ----------------------------------------------------------------------------------

#[test]
fn k2_k7_total_counts_sidecars_ready_counts_started_ready_sidecars() {
    let p = pod(
        &["init", "+s1", "+s2"],
        &["a", "b"],
        json!({"phase": "Running",
               "conditions": [cond("Initialized", "True")],
               "initContainerStatuses": [terminated("init", 0, "Completed"),
                                         running("s1", true),
                                         running("s2", false)],
               "containerStatuses": [running("a", true), running("b", false)]}),
    );
    assert_eq!(ready_text(&p), "2/4");
    assert_eq!(row(&p).ready, "2/4");
    assert_eq!(status(&p), "Running");
    // No statuses yet: 0/<total>.
    let p = pod(&["+s1"], &["a"], json!({"phase": "Pending"}));
    assert_eq!(ready_text(&p), "0/2");
}

// ---- K3 ---------------------------------------------------------------------------------------

#[test]
fn k3_init_container_status_texts() {
    let cases: Vec<(&str, Vec<Value>, &str)> = vec![
        (
            "first running",
            vec![running("i1", false), waiting("i2", "PodInitializing")],
            "Init:0/2",
        ),
        (
            "second waiting PodInitializing",
            vec![
                terminated("i1", 0, "Completed"),
                waiting("i2", "PodInitializing"),
            ],
            "Init:1/2",
        ),
        (
            "waiting with no reason",
            vec![terminated("i1", 0, "Completed"), json!({"name": "i2"})],
            "Init:1/2",
        ),
        (
            "crash loop",
            vec![
                waiting("i1", "CrashLoopBackOff"),
                waiting("i2", "PodInitializing"),
            ],
            "Init:CrashLoopBackOff",
        ),
        (
            "image pull",
            vec![
                terminated("i1", 0, "Completed"),
                waiting("i2", "ErrImagePull"),
            ],
            "Init:ErrImagePull",
        ),
        (
            "terminated with reason",
            vec![
                terminated("i1", 1, "Error"),
                waiting("i2", "PodInitializing"),
            ],
            "Init:Error",
        ),
        (
            "terminated without reason",
            vec![terminated("i1", 3, ""), waiting("i2", "PodInitializing")],
            "Init:ExitCode:3",
        ),
        (
            "terminated without reason but with signal",
            vec![
                json!({"name": "i1", "state": {"terminated": {"exitCode": 137, "signal": 9}}}),
                waiting("i2", "PodInitializing"),
            ],
            "Init:Signal:9",
        ),
    ];
    for (name, init_statuses, want) in cases {
        let p = pod(
            &["i1", "i2"],
            &["app"],
            json!({"phase": "Pending",
                   "initContainerStatuses": init_statuses,
                   "containerStatuses": [waiting("app", "PodInitializing")]}),
        );
        assert_eq!(status(&p), want, "case {name:?}");
    }
}

#[test]
fn k3_sidecars_started_are_skipped_unstarted_block() {
    let p = pod(
        &["+side", "init"],
        &["app"],
        json!({"phase": "Pending",
               "initContainerStatuses": [running("side", true), running("init", false)],
               "containerStatuses": [waiting("app", "PodInitializing")]}),
    );
    assert_eq!(status(&p), "Init:1/2");
    assert_eq!(ready_text(&p), "1/2");
    let p = pod(
        &["+side", "init"],
        &["app"],
        json!({"phase": "Pending",
               "initContainerStatuses": [running_unstarted("side"),
                                         waiting("init", "PodInitializing")],
               "containerStatuses": [waiting("app", "PodInitializing")]}),
    );
    assert_eq!(status(&p), "Init:0/2");
    assert_eq!(ready_text(&p), "0/2");
}

#[test]
fn k3_init_restarts_are_counted_while_initializing() {
    let p = pod(
        &["i1", "i2"],
        &["app"],
        json!({"phase": "Pending",
               "initContainerStatuses": [
                   restarted(waiting("i1", "CrashLoopBackOff"), 3, 45),
                   restarted(waiting("i2", "PodInitializing"), 7, 5)],
               "containerStatuses": [restarted(waiting("app", "PodInitializing"), 9, 1)]}),
    );
    let r = row(&p);
    assert_eq!(r.status, "Init:CrashLoopBackOff");
    // Only i1 (the reported one) counts: the loop stops there; regular containers are skipped.
    assert_eq!(r.restarts, "3 (45s ago)");
}

// ---- K4 ---------------------------------------------------------------------------------------

#[test]
fn k4_reverse_walk_lowest_index_reason_wins() {
    let p = pod(
        &[],
        &["a", "b", "c"],
        json!({"phase": "Running",
               "containerStatuses": [waiting("a", "CrashLoopBackOff"),
                                     terminated("b", 1, "Error"),
                                     running("c", true)]}),
    );
    assert_eq!(status(&p), "CrashLoopBackOff");
    assert_eq!(ready_text(&p), "1/3");
    let p = pod(
        &[],
        &["a", "b", "c"],
        json!({"phase": "Running",
               "containerStatuses": [running("a", true),
                                     terminated("b", 2, ""),
                                     waiting("c", "ImagePullBackOff")]}),
    );
    assert_eq!(status(&p), "ExitCode:2");
    let p = pod(
        &[],
        &["a"],
        json!({"phase": "Running", "containerStatuses": [
            {"name": "a", "state": {"terminated": {"exitCode": 143, "signal": 15}}}]}),
    );
    assert_eq!(status(&p), "Signal:15");
    // A waiting container with an empty reason does not override.
    let p = pod(
        &[],
        &["a"],
        json!({"phase": "Pending", "containerStatuses": [waiting("a", "")]}),
    );
    assert_eq!(status(&p), "Pending");
}

#[test]
fn k4_restarts_after_initialization_count_sidecars_not_regular_init() {
    let p = pod(
        &["init", "+side"],
        &["a", "b"],
        json!({"phase": "Running",
               "conditions": [cond("Initialized", "True")],
               "initContainerStatuses": [
                   restarted(terminated("init", 0, "Completed"), 4, 10),
                   restarted(running("side", true), 2, 120)],
               "containerStatuses": [restarted(running("a", true), 1, 600),
                                     restarted(running("b", true), 3, 3000)]}),
    );
    let r = row(&p);
    assert_eq!(r.status, "Running");
    assert_eq!(r.ready, "3/3");
    // 2 (side) + 1 + 3; the newest finishedAt among those is the sidecar's (2m ago), not the
    // regular init container's 10s.
    assert_eq!(r.restarts, "6 (2m ago)");
}

#[test]
fn k4_regular_containers_are_examined_when_initialized_true_even_if_init_blocks() {
    // The Initialized condition is True, so K4 runs although K3 stopped at the sidecar.
    let p = pod(
        &["+side"],
        &["a"],
        json!({"phase": "Running",
               "conditions": [cond("Initialized", "True")],
               "initContainerStatuses": [restarted(waiting("side", "CrashLoopBackOff"), 5, 30)],
               "containerStatuses": [running("a", true)]}),
    );
    let r = row(&p);
    assert_eq!(r.ready, "1/2");
    assert_eq!(r.restarts, "5 (30s ago)");
}

// ---- K5 ---------------------------------------------------------------------------------------

#[test]
fn k5_completed_with_a_running_container() {
    let statuses = json!([terminated("a", 0, "Completed"), running("b", true)]);
    let p = pod(
        &[],
        &["a", "b"],
        json!({"phase": "Running", "conditions": [cond("Ready", "True")],
               "containerStatuses": statuses}),
    );
    assert_eq!(status(&p), "Running");
    let p = pod(
        &[],
        &["a", "b"],
        json!({"phase": "Running", "conditions": [cond("Ready", "False")],
               "containerStatuses": statuses}),
    );
    assert_eq!(status(&p), "NotReady");
    // `hasRunning` needs running *and* ready: a running unready container keeps `Completed`.
    let p = pod(
        &[],
        &["a", "b"],
        json!({"phase": "Running", "conditions": [cond("Ready", "False")],
               "containerStatuses": [terminated("a", 0, "Completed"), running("b", false)]}),
    );
    assert_eq!(status(&p), "Completed");
}

// ---- K6 ---------------------------------------------------------------------------------------

#[test]
fn k6_terminating_and_node_lost() {
    let mk = |phase: &str, reason: Option<&str>| {
        let mut p = pod(
            &[],
            &["a"],
            json!({"phase": phase, "containerStatuses": [waiting("a", "CrashLoopBackOff")]}),
        );
        p.metadata.deletion_timestamp = Some(Time(now()));
        if let Some(r) = reason {
            p.status.as_mut().unwrap().reason = Some(r.to_owned());
        }
        p
    };
    assert_eq!(status(&mk("Running", None)), "Terminating");
    assert_eq!(status(&mk("Pending", None)), "Terminating");
    assert_eq!(status(&mk("Running", Some("NodeLost"))), "Unknown");
    // Terminal phases are not Terminating: the container reason stays.
    assert_eq!(status(&mk("Failed", None)), "CrashLoopBackOff");
    assert_eq!(status(&mk("Succeeded", None)), "CrashLoopBackOff");
}

// ---- K8 / K9 / K10 ----------------------------------------------------------------------------

#[test]
fn k8_restarts_column() {
    let p = pod(
        &[],
        &["a"],
        json!({"phase": "Running", "containerStatuses": [running("a", true)]}),
    );
    assert_eq!(row(&p).restarts, "0");
    let p = pod(
        &[],
        &["a"],
        json!({"phase": "Running",
               "containerStatuses": [restarted(running("a", true), 3, 45)]}),
    );
    assert_eq!(row(&p).restarts, "3 (45s ago)");
    // A count without any lastState.terminated time: just the number.
    let mut a = running("a", true);
    a["restartCount"] = json!(2);
    let p = pod(
        &[],
        &["a"],
        json!({"phase": "Running", "containerStatuses": [a]}),
    );
    assert_eq!(row(&p).restarts, "2");
    // The newest finishedAt wins across containers.
    let p = pod(
        &[],
        &["a", "b"],
        json!({"phase": "Running",
               "containerStatuses": [restarted(running("a", true), 1, 7200),
                                     restarted(running("b", true), 1, 123)]}),
    );
    assert_eq!(row(&p).restarts, "2 (2m3s ago)");
}

#[test]
fn k9_age() {
    let mut p = pod(&[], &["a"], json!({"phase": "Pending"}));
    assert_eq!(row(&p).age, "5m");
    p.metadata.creation_timestamp = Some(Time(ago(2 * 86400 + 9 * 3600 + 59).parse().unwrap()));
    assert_eq!(row(&p).age, "2d9h");
    p.metadata.creation_timestamp = Some(Time(ago(-1).parse().unwrap()));
    assert_eq!(row(&p).age, "0s");
    p.metadata.creation_timestamp = Some(Time(ago(-5).parse().unwrap()));
    assert_eq!(row(&p).age, "<invalid>");
    p.metadata.creation_timestamp = None;
    assert_eq!(row(&p).age, "<unknown>");
}

#[test]
fn k10_wide_columns() {
    let p = pod(&[], &["a"], json!({"phase": "Pending"}));
    assert_eq!(
        row(&p),
        PodRow {
            name: "p".into(),
            ready: "0/1".into(),
            status: "Pending".into(),
            restarts: "0".into(),
            age: "5m".into(),
            ip: "<none>".into(),
            node: "<none>".into(),
            nominated_node: "<none>".into(),
            readiness_gates: "<none>".into(),
        }
    );
    let p: Pod = serde_json::from_value(json!({
        "metadata": {"name": "web", "creationTimestamp": ago(45)},
        "spec": {"nodeName": "node-1",
                 "readinessGates": [{"conditionType": "example.com/a"},
                                    {"conditionType": "example.com/b"},
                                    {"conditionType": "example.com/c"}],
                 "containers": [{"name": "a", "image": "x"}]},
        "status": {"phase": "Running", "podIP": "10.0.0.9",
                   "podIPs": [{"ip": "10.0.0.7"}, {"ip": "fd00::7"}],
                   "nominatedNodeName": "node-2",
                   "conditions": [cond("example.com/a", "True"), cond("example.com/b", "False"),
                                  cond("example.com/a", "False")],
                   "containerStatuses": [running("a", true)]},
    }))
    .unwrap();
    let r = row(&p);
    assert_eq!(r.name, "web");
    assert_eq!(r.age, "45s");
    assert_eq!(r.ip, "10.0.0.7");
    assert_eq!(r.node, "node-1");
    assert_eq!(r.nominated_node, "node-2");
    assert_eq!(r.readiness_gates, "1/3");
}

// ---- K11 consequences -------------------------------------------------------------------------

#[test]
fn k11a_crash_looping_sidecar_shows_init_crash_loop_in_running_pod() {
    let p = pod(
        &["+side"],
        &["a"],
        json!({"phase": "Running",
               "conditions": [cond("Initialized", "True"), cond("Ready", "False")],
               "initContainerStatuses": [restarted(waiting("side", "CrashLoopBackOff"), 4, 20)],
               "containerStatuses": [running("a", true)]}),
    );
    let r = row(&p);
    assert_eq!(r.status, "Init:CrashLoopBackOff");
    assert_eq!(r.ready, "1/2");
    assert_eq!(r.restarts, "4 (20s ago)");
}

#[test]
fn k11b_crash_loop_while_phase_running() {
    let p = pod(
        &[],
        &["a"],
        json!({"phase": "Running",
               "containerStatuses": [restarted(waiting("a", "CrashLoopBackOff"), 5, 80)]}),
    );
    let r = row(&p);
    assert_eq!(r.status, "CrashLoopBackOff");
    assert_eq!(r.ready, "0/1");
    assert_eq!(r.restarts, "5 (80s ago)");
}

#[test]
fn k11c_succeeded_shows_completed_failed_shows_container_reason() {
    let p = pod(
        &[],
        &["a"],
        json!({"phase": "Succeeded",
               "containerStatuses": [terminated("a", 0, "Completed")]}),
    );
    assert_eq!(status(&p), "Completed");
    for reason in ["Error", "OOMKilled", "ContainerStatusUnknown"] {
        let p = pod(
            &[],
            &["a", "b"],
            json!({"phase": "Failed",
                   "containerStatuses": [terminated("a", 137, reason),
                                         terminated("b", 0, "Completed")]}),
        );
        assert_eq!(status(&p), reason);
    }
}

#[test]
fn k11d_evicted_or_deadline_pod_shows_container_reason() {
    for pod_reason in ["Evicted", "DeadlineExceeded"] {
        let p = pod(
            &[],
            &["a"],
            json!({"phase": "Failed", "reason": pod_reason,
                   "containerStatuses": [terminated("a", 137, "Error")]}),
        );
        assert_eq!(status(&p), "Error");
        // Without a terminated/waiting reason the pod reason shows.
        let p = pod(
            &[],
            &["a"],
            json!({"phase": "Failed", "reason": pod_reason,
                   "containerStatuses": [{"name": "a", "state": {}}]}),
        );
        assert_eq!(status(&p), pod_reason);
    }
}

#[test]
fn k11e_waiting_main_containers_after_init_and_fresh_pods() {
    let p = pod(
        &["init"],
        &["a"],
        json!({"phase": "Pending",
               "conditions": [cond("Initialized", "True")],
               "initContainerStatuses": [terminated("init", 0, "Completed")],
               "containerStatuses": [waiting("a", "PodInitializing")]}),
    );
    assert_eq!(status(&p), "PodInitializing");
    let p = pod(
        &[],
        &["a"],
        json!({"phase": "Pending",
               "containerStatuses": [waiting("a", "ContainerCreating")]}),
    );
    assert_eq!(status(&p), "ContainerCreating");
}

#[test]
fn k11f_restarts_during_initialization_count_init_up_to_reported_one() {
    let p = pod(
        &["i1", "i2", "i3"],
        &["a"],
        json!({"phase": "Pending",
               "initContainerStatuses": [
                   restarted(terminated("i1", 0, "Completed"), 2, 300),
                   restarted(waiting("i2", "CrashLoopBackOff"), 3, 40),
                   restarted(waiting("i3", "PodInitializing"), 8, 1)],
               "containerStatuses": [restarted(waiting("a", "PodInitializing"), 9, 1)]}),
    );
    let r = row(&p);
    assert_eq!(r.status, "Init:CrashLoopBackOff");
    assert_eq!(r.restarts, "5 (40s ago)");
}

// ---- duration formats -------------------------------------------------------------------------

#[test]
fn human_duration_table() {
    let m = 60;
    let h = 3600;
    let d = 86400;
    let cases: &[(u64, &str)] = &[
        (0, "0s"),
        (1, "1s"),
        (45, "45s"),
        (119, "119s"),
        (2 * m, "2m"),
        (2 * m + 3, "2m3s"),
        (9 * m + 59, "9m59s"),
        (10 * m, "10m"),
        (10 * m + 59, "10m"),
        (179 * m, "179m"),
        (3 * h, "3h"),
        (3 * h + m, "3h1m"),
        (7 * h + 59 * m + 59, "7h59m"),
        (8 * h, "8h"),
        (47 * h + 59 * m, "47h"),
        (2 * d, "2d"),
        (2 * d + 9 * h, "2d9h"),
        (7 * d + 23 * h, "7d23h"),
        (8 * d, "8d"),
        (729 * d, "729d"),
        (730 * d, "2y"),
        (733 * d, "2y3d"),
        (8 * 365 * d, "8y"),
        (30 * 365 * d + 100 * d, "30y"),
    ];
    for (secs, want) in cases {
        assert_eq!(human_duration(Duration::from_secs(*secs)), *want, "{secs}s");
    }
    assert_eq!(human_duration(Duration::from_millis(1999)), "1s");
    assert_eq!(human_duration(Duration::from_millis(999)), "0s");
}

#[test]
fn human_signed_duration_tolerates_small_skew() {
    let cases: &[(i64, &str)] = &[
        (0, "0s"),
        (-500, "0s"),
        (-1000, "0s"),
        (-1999, "0s"),
        (-2000, "<invalid>"),
        (-3_600_000, "<invalid>"),
        (125_000, "2m5s"),
    ];
    for (millis, want) in cases {
        assert_eq!(
            human_signed_duration(SignedDuration::from_millis(*millis)),
            *want,
            "{millis}ms"
        );
    }
}

#[test]
fn short_human_duration_table() {
    let cases: &[(u64, &str)] = &[
        (0, "0s"),
        (59, "59s"),
        (60, "1m"),
        (3599, "59m"),
        (3600, "1h"),
        (86399, "23h"),
        (86400, "1d"),
        (364 * 86400, "364d"),
        (365 * 86400, "1y"),
    ];
    for (secs, want) in cases {
        assert_eq!(short_human_duration(Duration::from_secs(*secs)), *want);
    }
}

#[test]
fn go_duration_table() {
    let cases: &[(Duration, &str)] = &[
        (Duration::ZERO, "0s"),
        (Duration::from_nanos(100), "100ns"),
        (Duration::from_micros(2), "2µs"),
        (Duration::from_nanos(1_500), "1.5µs"),
        (Duration::from_micros(1_500), "1.5ms"),
        (Duration::from_millis(500), "500ms"),
        (Duration::from_millis(1_500), "1.5s"),
        (Duration::from_secs(1), "1s"),
        (Duration::from_secs(10), "10s"),
        (Duration::from_secs(20), "20s"),
        (Duration::from_secs(40), "40s"),
        (Duration::from_secs(59), "59s"),
        (Duration::from_secs(60), "1m0s"),
        (Duration::from_secs(80), "1m20s"),
        (Duration::from_secs(160), "2m40s"),
        (Duration::from_secs(300), "5m0s"),
        (Duration::from_secs(3600), "1h0m0s"),
        (Duration::from_millis(3_723_500), "1h2m3.5s"),
        (Duration::from_secs(100 * 3600 + 1), "100h0m1s"),
        (Duration::new(1, 1), "1.000000001s"),
    ];
    for (d, want) in cases {
        assert_eq!(go_duration(*d), *want, "{d:?}");
    }
}
