//! Whole-pod stories on simulated time: each runs a pod against a scripted fake runtime
//! (`sim::simulate`) and snapshots the readable timeline (`sim::text_report`).
//!
//! Every snapshot was read against kubelet-lifecycle.md before it was accepted; the comment on
//! each story says what to look for.

use k8s_openapi::api::core::v1::Pod;
use podvisor_lifecycle::sim::{self, Script, SimOptions};
use serde_json::{Value, json};
use std::time::Duration;

fn pod(name: &str, spec: Value) -> Pod {
    serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": spec,
    }))
    .expect("a valid pod")
}

/// Simulates `spec` as pod `name` under `script` (YAML) for `secs` seconds.
fn story(name: &str, spec: Value, script: &str, secs: u64) -> String {
    let script = Script::parse(script).expect("a valid script");
    let opts = SimOptions {
        duration: Duration::from_secs(secs),
        ..SimOptions::default()
    };
    let records = sim::simulate(pod(name, spec), &script, &opts).expect("the simulation runs");
    sim::text_report(name, &records)
}

/// B1/B3/B7, S10, section 12 #1: the app dies at once, every time. Starts at 0, 0, 10, 30, 70,
/// 150, 310, 610, 910, 1210, 1510 and 1810 s (waits 0, 10, 20, 40, 80, 160, 300, 300, ...);
/// `restartCount` goes up when the replacement starts; the STATUS column alternates
/// `Error`/`CrashLoopBackOff`; BackOff events carry the pod's full name.
#[test]
fn crash_loop_over_30_minutes() {
    let report = story(
        "crasher",
        json!({"containers": [{"name": "app", "image": "busybox"}]}),
        "containers:\n  app:\n    runs:\n      - exitAfter: 0s\n        exitCode: 1\n",
        30 * 60,
    );
    insta::assert_snapshot!("crash_loop_over_30_minutes", report);
}

fn init_failure(policy: &str) -> String {
    story(
        &format!("init-{}", policy.to_lowercase()),
        json!({
            "restartPolicy": policy,
            "initContainers": [{"name": "setup", "image": "busybox"}],
            "containers": [{"name": "app", "image": "busybox"}],
        }),
        "containers:\n  setup:\n    runs:\n      - exitAfter: 2s\n        exitCode: 3\n",
        60,
    )
}

/// A5/P4/P5: a failing regular init container. Always and OnFailure retry it with back-off
/// (Pending, `Init:Error` then `Init:CrashLoopBackOff`; the app never starts). Never fails the
/// pod at once: phase Failed, STATUS `Init:Error`, the app stays `PodInitializing`.
#[test]
fn init_failure_under_each_restart_policy() {
    insta::assert_snapshot!("init_failure_always", init_failure("Always"));
    insta::assert_snapshot!("init_failure_on_failure", init_failure("OnFailure"));
    insta::assert_snapshot!("init_failure_never", init_failure("Never"));
}

/// A5–A8, T5: sidecar `logs` starts first; the regular init container `setup` only after it
/// runs; sidecar `proxy` (startup probe) only after `setup` exited 0; the app only once
/// `proxy`'s startup probe passed. On delete at 30 s every preStop starts at once; the app gets
/// SIGTERM when its preStop is done, then `proxy` (the later sidecar) once the app has exited,
/// then `logs` once `proxy` has exited. Final phase Failed (the app died of SIGTERM, 143).
#[test]
fn sidecars_start_in_order_and_stop_in_reverse_order_on_delete() {
    let pre_stop = json!({"preStop": {"sleep": {"seconds": 1}}});
    let report = story(
        "sidecars",
        json!({
            "initContainers": [
                {"name": "logs", "image": "busybox", "restartPolicy": "Always", "lifecycle": pre_stop},
                {"name": "setup", "image": "busybox"},
                {"name": "proxy", "image": "busybox", "restartPolicy": "Always", "lifecycle": pre_stop,
                 "startupProbe": {"exec": {"command": ["ready"]}, "periodSeconds": 1}},
            ],
            "containers": [{"name": "app", "image": "busybox", "lifecycle": pre_stop}],
        }),
        "containers:
  setup:
    runs:
      - exitAfter: 3s
  proxy:
    stopAfterSignal: 2s
    probes:
      startup:
        - from: 0s
          result: failure
        - from: 2s
          result: success
  app:
    stopAfterSignal: 3s
  logs:
    stopAfterSignal: 1s
delete:
  at: 30s
",
        120,
    );
    insta::assert_snapshot!("sidecars_start_in_order_and_stop_in_reverse_order", report);
}

/// R11/R15, T2, B6: the app would need 60 s but the startup probe allows 5 + 3 x 2 s. Probes at
/// 6, 8, 10 (ticks from worker start at 0, initial delay 5 s since container start) fail; the
/// kill at 10 uses the probe's terminationGracePeriodSeconds; restarts follow the back-off.
#[test]
fn startup_probe_kills_a_slow_app() {
    let report = story(
        "slow",
        json!({"containers": [{
            "name": "app",
            "image": "busybox",
            "startupProbe": {
                "exec": {"command": ["ready"]},
                "initialDelaySeconds": 5,
                "periodSeconds": 2,
                "failureThreshold": 3,
                "terminationGracePeriodSeconds": 5,
            },
        }]}),
        "containers:
  app:
    probes:
      startup:
        - from: 0s
          result: failure
        - from: 60s
          result: success
",
        90,
    );
    insta::assert_snapshot!("startup_probe_kills_a_slow_app", report);
}

/// H4, T3: grace 10 s, preStop takes 30 s, the app ignores SIGTERM. Delete at 5: preStop
/// runs 5..15, SIGTERM at 15 with the 2 s minimum, SIGKILL at 17, Failed with 137.
#[test]
fn pre_stop_exceeding_the_grace_period() {
    let report = story(
        "drain",
        json!({
            "terminationGracePeriodSeconds": 10,
            "containers": [{
                "name": "app",
                "image": "busybox",
                "lifecycle": {"preStop": {"exec": {"command": ["drain"]}}},
            }],
        }),
        "containers:
  app:
    stopAfterSignal: never
    hooks:
      preStop:
        duration: 30s
delete:
  at: 5s
",
        60,
    );
    insta::assert_snapshot!("pre_stop_exceeding_the_grace_period", report);
}

/// M1/P13: 20 s after startTime the pod is evicted: DeadlineExceeded event, Killing, phase
/// Failed with reason DeadlineExceeded (kubectl STATUS `DeadlineExceeded`), never restarted.
#[test]
fn active_deadline_exceeded() {
    let report = story(
        "deadline",
        json!({
            "activeDeadlineSeconds": 20,
            "terminationGracePeriodSeconds": 5,
            "containers": [{"name": "app", "image": "busybox"}],
        }),
        "containers:\n  app:\n    stopAfterSignal: 1s\n",
        60,
    );
    insta::assert_snapshot!("active_deadline_exceeded", report);
}

/// A16 (1.35 `ContainerRestartRules`): the app has `restartPolicy: Never` with a rule restarting
/// on exit code 42. Exit 42 at 5 s: restarted at once; exit 42 at 10 s: restarted after 10 s of
/// back-off; exit 1 at 25 s: not restarted, so the pod fails (its own policy is Always, but the
/// container's wins).
#[test]
fn restart_rules_restart_on_42_but_not_on_1() {
    let report = story(
        "rules",
        json!({"containers": [{
            "name": "app",
            "image": "busybox",
            "restartPolicy": "Never",
            "restartPolicyRules": [{"action": "Restart", "exitCodes": {"operator": "In", "values": [42]}}],
        }]}),
        "containers:
  app:
    runs:
      - exitAfter: 5s
        exitCode: 42
      - exitAfter: 5s
        exitCode: 42
      - exitAfter: 5s
        exitCode: 1
",
        120,
    );
    insta::assert_snapshot!("restart_rules_restart_on_42_but_not_on_1", report);
}

/// A13, T5, T8, section 12 #7/#10: a Job-style pod. The job exits 0 at 10 s while the sidecar
/// runs: the kubelet stops the sidecar itself (`Stopping container proxy`), the sidecar's 143
/// is ignored, and the pod ends Succeeded with STATUS `Completed`.
#[test]
fn job_with_sidecar_completes() {
    let report = story(
        "job",
        json!({
            "restartPolicy": "Never",
            "initContainers": [{"name": "proxy", "image": "busybox", "restartPolicy": "Always"}],
            "containers": [{"name": "job", "image": "busybox"}],
        }),
        "containers:
  job:
    runs:
      - exitAfter: 10s
        exitCode: 0
  proxy:
    stopAfterSignal: 1s
",
        60,
    );
    insta::assert_snapshot!("job_with_sidecar_completes", report);
}

/// A1/A2, D2: the sandbox dies at 30 s (`sandboxLost`). `SandboxChanged`; the app shows
/// terminated 137; the init container runs again in the new sandbox, then the app restarts
/// with restartCount 1. Under `Never` the pod stays dead and ends Failed.
#[test]
fn sandbox_lost_and_re_created() {
    let spec = |policy: &str| {
        json!({
            "restartPolicy": policy,
            "initContainers": [{"name": "setup", "image": "busybox"}],
            "containers": [{"name": "app", "image": "busybox"}],
        })
    };
    let script = "containers:\n  setup:\n    runs:\n      - exitAfter: 1s\n        exitCode: 0\nsandboxLost: [30s]\n";
    let always = story("lost", spec("Always"), script, 60);
    let never = story("lost-never", spec("Never"), script, 60);
    insta::assert_snapshot!("sandbox_lost_and_re_created", format!("{always}\n{never}"));
}

/// A14 (`kubectl debug`): a debugger is added at 10 s (`ephemeralContainers`), runs 5 s and
/// exits 1; a second one added at 20 s runs until the delete at 40 s. Neither is ever
/// restarted nor counts for READY (1/1 throughout) or the phase; each shows `(ephem)`; the
/// second is stopped with the app when the pod is deleted.
#[test]
fn ephemeral_debug_containers() {
    let report = story(
        "debugged",
        json!({"containers": [{"name": "app", "image": "busybox"}]}),
        "containers:
  debugger:
    runs:
      - exitAfter: 5s
        exitCode: 1
ephemeralContainers:
  - at: 10s
    container: {name: debugger, image: busybox, targetContainerName: app, stdin: true, tty: true}
  - at: 20s
    container: {name: shell, image: busybox}
delete:
  at: 40s
",
        60,
    );
    insta::assert_snapshot!("ephemeral_debug_containers", report);
}

/// M11/K1: a pod with scheduling gates is `Pending`, STATUS `SchedulingGated`, with
/// `PodScheduled=False` and no container, until its last gate goes at 20 s; then the
/// scheduler's `Scheduled` event (`Successfully assigned default/held to sim-node`) and the
/// kubelet starts it (`Created`/`Started` at 20 s, PodScheduled True). The delete at 30 s
/// counts from the simulation's start. Without `ungate` it stays gated for the whole run.
#[test]
fn scheduling_gated_pod_starts_when_ungated() {
    let spec = json!({
        "schedulingGates": [{"name": "example.com/quota"}],
        "containers": [{"name": "app", "image": "busybox"}],
    });
    let report = story(
        "held",
        spec.clone(),
        "ungate: 20s\ndelete: {at: 30s, gracePeriodSeconds: 5}\n",
        60,
    );
    insta::assert_snapshot!("scheduling_gated_pod_starts_when_ungated", report);
    let gated = story("held", spec, "", 60);
    insta::assert_snapshot!("scheduling_gated_pod_stays_gated", gated);
}

/// In-place resize (A11, A18 step 7, D10): at 5 s the app's cpu goes up in place
/// (`ResizeStarted`, `UpdateContainerResources`, `ResizeCompleted`, no restart); at 10 s its
/// memory limit goes below the 96Mi it uses and is refused (`ResizeError`,
/// `PodResizeInProgress` stays True), retried every 10 s; the sidecar's memory, policy
/// `RestartContainer`, is resized at 15 s by a restart (`Container proxy resize requires
/// restart`, restart count 1).
#[test]
fn resize_in_place_refused_and_by_restart() {
    let res = |cpu: &str, mem: &str| json!({"requests": {"cpu": cpu, "memory": mem}, "limits": {"cpu": cpu, "memory": mem}});
    let report = story(
        "resize",
        json!({
            "initContainers": [{"name": "proxy", "image": "busybox", "restartPolicy": "Always",
                "resources": res("100m", "64Mi"),
                "resizePolicy": [{"resourceName": "memory", "restartPolicy": "RestartContainer"}]}],
            "containers": [{"name": "app", "image": "busybox", "resources": res("100m", "128Mi")}],
        }),
        "containers:\n  app:\n    memoryUsage: 96Mi\n\
         resize:\n\
         - at: 5s\n  containers:\n    app: {requests: {cpu: 200m, memory: 128Mi}, limits: {cpu: 200m, memory: 128Mi}}\n\
         - at: 10s\n  containers:\n    app: {requests: {cpu: 200m, memory: 64Mi}, limits: {cpu: 200m, memory: 64Mi}}\n\
         - at: 15s\n  containers:\n    proxy: {requests: {cpu: 100m, memory: 32Mi}, limits: {cpu: 100m, memory: 32Mi}}\n",
        30,
    );
    insta::assert_snapshot!("resize_in_place_refused_and_by_restart", report);
}

/// KEP-5532 (`RestartAllContainersOnContainerExits` on): examples/restart-all.yaml with its
/// script. The app exits 88 at 11 s and 23 s: `AllContainersRestarting` goes True, the watcher
/// gets SIGTERM with the 2 s minimum and no preStop, the phase stays Pending; once it is dead
/// the condition goes False and `setup` runs again first in the same sandbox (one
/// `CreateSandbox` in the whole story), then watcher and app with restart counts 1, then 2.
/// The third run exits 0: the watcher is stopped and the pod ends Succeeded.
#[test]
fn restart_all_containers_in_place() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples");
    let manifest = std::fs::read_to_string(format!("{dir}/restart-all.yaml")).unwrap();
    let mut pod = podvisor_api::decode_pods(&manifest, "restart-all.yaml")
        .unwrap()
        .remove(0);
    podvisor_api::apply_defaults(&mut pod);
    let gates =
        podvisor_api::FeatureGates::parse("RestartAllContainersOnContainerExits=true").unwrap();
    podvisor_api::validate_pod_with_gates(&pod, gates).unwrap();
    let script = std::fs::read_to_string(format!("{dir}/scripts/restart-all.yaml")).unwrap();
    let script = Script::parse(&script).expect("a valid script");
    let mut opts = SimOptions {
        duration: Duration::from_secs(60),
        ..SimOptions::default()
    };
    opts.config.gates = gates;
    let records = sim::simulate(pod, &script, &opts).expect("the simulation runs");
    let report = sim::text_report("restart-all", &records);
    insta::assert_snapshot!("restart_all_containers_in_place", report);
}
