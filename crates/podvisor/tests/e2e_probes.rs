//! End to end, probes (spec section 6): every probe type against real endpoints the test
//! starts (an HTTP server, a listening and a refused TCP port, a tonic-health gRPC server,
//! commands run in the container), every outcome, and what the results do to the pod.

use crate::common;

use common::*;
use serde_json::{Value, json};
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(20);

fn sleeper(name: &str) -> Value {
    json!({"name": name, "image": "busybox", "command": ["sleep", "100000"]})
}

fn with(mut container: Value, key: &str, value: Value) -> Value {
    container[key] = value;
    container
}

fn spec(containers: Vec<Value>) -> Value {
    json!({"terminationGracePeriodSeconds": 2, "containers": containers})
}

fn http_probe(port: u16, path: &str) -> Value {
    json!({"httpGet": {"host": "127.0.0.1", "port": port, "path": path}, "periodSeconds": 1})
}

fn ready_of(status: &Value, name: &str) -> bool {
    find_container(status, name).is_some_and(|c| c["ready"] == true)
}

#[test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
fn r19_http_get_probe_success_and_status_code_failure() {
    let ctx = Ctx::new("r19http");
    let ok = HttpServer::start(200);
    let bad = HttpServer::start(500);
    let refused = RefusedPort::new();
    let pod = pod(
        "web",
        spec(vec![
            // A named container port (R19).
            with(
                with(
                    sleeper("good"),
                    "ports",
                    json!([{"name": "health", "containerPort": ok.port}]),
                ),
                "readinessProbe",
                json!({"httpGet": {"host": "127.0.0.1", "port": "health", "path": "/healthz?x=1"},
                       "periodSeconds": 1}),
            ),
            with(
                sleeper("bad"),
                "readinessProbe",
                http_probe(bad.port, "/ready"),
            ),
            with(
                sleeper("nobody"),
                "readinessProbe",
                http_probe(refused.port, "/x"),
            ),
        ]),
    );
    let mut running = ctx.spawn(&[pod], &[]);
    running.wait_status("good ready", WAIT, |s| ready_of(s, "good"));
    running.wait_events("Unhealthy", Some("bad"), 2, WAIT);
    running.wait_event("Unhealthy", Some("nobody"), WAIT);
    running.terminate();
    let run = running.wait(RUN_TIMEOUT);
    assert_eq!(run.code, Some(0), "{}", run.dump());
    let bad_events = run.container_events("Unhealthy", "bad");
    assert!(bad_events.len() >= 2, "{}", run.dump());
    for e in &bad_events {
        assert_eq!(e["type"], "Warning");
        assert_eq!(
            e["message"],
            "Readiness probe failed: HTTP probe failed with statuscode: 500"
        );
    }
    // A transport error is a failure with Go's error text.
    assert_eq!(
        run.container_events("Unhealthy", "nobody")[0]["message"],
        format!(
            "Readiness probe failed: Get \"http://127.0.0.1:{p}/x\": dial tcp 127.0.0.1:{p}: \
             connect: connection refused",
            p = refused.port
        )
    );
    assert!(
        run.events_before_deletion("Unhealthy", "good").is_empty(),
        "{}",
        run.dump()
    );
    assert!(
        run.statuses().iter().any(|s| s["ready"] == "1/3"),
        "{}",
        run.dump()
    );
    assert!(
        !run.statuses().iter().any(|s| ready_of(s, "bad")),
        "{}",
        run.dump()
    );
    // The server saw the kubelet's request: path with query, user agent, Accept.
    let reqs = ok.requests();
    assert!(!reqs.is_empty());
    for r in &reqs {
        assert_eq!(r.path, "/healthz?x=1");
        assert!(r.headers["user-agent"].starts_with("kube-probe/"), "{r:?}");
        assert_eq!(r.headers["accept"], "*/*");
    }
    assert!(bad.requests().iter().all(|r| r.path == "/ready"));
}

#[test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
fn r19_http_get_probe_timeout_is_enforced() {
    let ctx = Ctx::new("r19timeout");
    let slow = HttpServer::start(200);
    slow.set_delay(Duration::from_secs(4));
    let mut probe = http_probe(slow.port, "/slow");
    probe["timeoutSeconds"] = json!(1);
    let pod = pod(
        "slowweb",
        spec(vec![with(sleeper("app"), "readinessProbe", probe)]),
    );
    let mut running = ctx.spawn(&[pod], &[]);
    running.wait_event("Unhealthy", Some("app"), WAIT);
    running.terminate();
    let run = running.wait(RUN_TIMEOUT);
    assert_eq!(run.code, Some(0), "{}", run.dump());
    let first = run.container_events("Unhealthy", "app")[0];
    assert_eq!(
        first["message"],
        format!(
            "Readiness probe failed: Get \"http://127.0.0.1:{}/slow\": context deadline exceeded \
             (Client.Timeout exceeded while awaiting headers)",
            slow.port
        )
    );
    // The failure came about timeoutSeconds after the request reached the server, not when
    // the server would have answered (4 s).
    let sent = slow.requests()[0].at;
    let failed = run.started_epoch + t(first);
    let waited = failed - sent;
    assert!(
        (0.8..3.0).contains(&waited),
        "failed {waited:.2}s after the request"
    );
    assert!(
        !run.statuses().iter().any(|s| ready_of(s, "app")),
        "{}",
        run.dump()
    );
}

#[test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
fn r20_tcp_socket_probe_open_and_refused() {
    let ctx = Ctx::new("r20tcp");
    let open = HttpServer::start(200);
    let refused = RefusedPort::new();
    let tcp =
        |port: u16| json!({"tcpSocket": {"host": "127.0.0.1", "port": port}, "periodSeconds": 1});
    let pod = pod(
        "tcp",
        spec(vec![
            with(sleeper("open"), "readinessProbe", tcp(open.port)),
            with(sleeper("closed"), "readinessProbe", tcp(refused.port)),
        ]),
    );
    let mut running = ctx.spawn(&[pod], &[]);
    running.wait_status("open ready", WAIT, |s| ready_of(s, "open"));
    running.wait_event("Unhealthy", Some("closed"), WAIT);
    running.terminate();
    let run = running.wait(RUN_TIMEOUT);
    assert_eq!(run.code, Some(0), "{}", run.dump());
    assert_eq!(
        run.container_events("Unhealthy", "closed")[0]["message"],
        format!(
            "Readiness probe failed: dial tcp 127.0.0.1:{}: connect: connection refused",
            refused.port
        )
    );
    assert!(
        run.events_before_deletion("Unhealthy", "open").is_empty(),
        "{}",
        run.dump()
    );
    assert!(
        !run.statuses().iter().any(|s| ready_of(s, "closed")),
        "{}",
        run.dump()
    );
    // A tcpSocket probe only connects: the server saw connections but no request.
    assert!(open.requests().is_empty());
}

#[test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
fn r21_grpc_probe_serving_and_not_serving() {
    let ctx = Ctx::new("r21grpc");
    let port = grpc_health_server(&["down"]);
    let refused = RefusedPort::new();
    let grpc =
        |service: &str| json!({"grpc": {"port": port, "service": service}, "periodSeconds": 1});
    let pod = pod(
        "grpc",
        spec(vec![
            with(sleeper("serving"), "readinessProbe", grpc("")),
            with(sleeper("notserving"), "readinessProbe", grpc("down")),
            with(sleeper("unknown"), "readinessProbe", grpc("nosuchservice")),
            with(
                sleeper("refused"),
                "readinessProbe",
                json!({"grpc": {"port": refused.port}, "periodSeconds": 1}),
            ),
        ]),
    );
    let mut running = ctx.spawn(&[pod], &[]);
    running.wait_status("serving ready", WAIT, |s| ready_of(s, "serving"));
    running.wait_event("Unhealthy", Some("notserving"), WAIT);
    running.wait_event("Unhealthy", Some("unknown"), WAIT);
    running.wait_event("Unhealthy", Some("refused"), WAIT);
    running.terminate();
    let run = running.wait(RUN_TIMEOUT);
    assert_eq!(run.code, Some(0), "{}", run.dump());
    assert_eq!(
        run.container_events("Unhealthy", "notserving")[0]["message"],
        "Readiness probe failed: service unhealthy (responded with \"NOT_SERVING\")"
    );
    // tonic-health answers NotFound for an unknown service: an RPC error, a failure.
    assert_eq!(
        run.container_events("Unhealthy", "unknown")[0]["message"],
        "Readiness probe failed: error: health rpc probe failed: rpc error: code = NotFound \
         desc = service not registered"
    );
    // Nothing listens: the (blocking) dial runs into the timeout.
    assert_eq!(
        run.container_events("Unhealthy", "refused")[0]["message"],
        format!(
            "Readiness probe failed: timeout: failed to connect service \"127.0.0.1:{}\" within \
             1s: context deadline exceeded",
            refused.port
        )
    );
    assert!(
        run.events_before_deletion("Unhealthy", "serving")
            .is_empty(),
        "{}",
        run.dump()
    );
    for name in ["notserving", "unknown", "refused"] {
        assert!(
            !run.statuses().iter().any(|s| ready_of(s, name)),
            "{}",
            run.dump()
        );
    }
}

#[test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
fn r18_exec_probe_success_failure_and_timeout() {
    let ctx = Ctx::new("r18exec");
    let exec =
        |cmd: Value| json!({"exec": {"command": cmd}, "periodSeconds": 1, "timeoutSeconds": 1});
    let pod = pod(
        "exec",
        spec(vec![
            with(sleeper("ok"), "readinessProbe", exec(sh("exit 0"))),
            // `$(VAR)` expands to the container's static env (R18).
            with(
                with(
                    sleeper("expand"),
                    "env",
                    json!([{"name": "GREETING", "value": "hello"}]),
                ),
                "readinessProbe",
                exec(json!(["test", "$(GREETING)", "=", "hello"])),
            ),
            with(
                sleeper("fail"),
                "readinessProbe",
                exec(sh("echo not ready; exit 3")),
            ),
            with(
                sleeper("slow"),
                "readinessProbe",
                exec(json!(["sleep", "5"])),
            ),
        ]),
    );
    let mut running = ctx.spawn(&[pod], &[]);
    running.wait_status("ok ready", WAIT, |s| ready_of(s, "ok"));
    running.wait_status("expand ready", WAIT, |s| ready_of(s, "expand"));
    running.wait_event("Unhealthy", Some("fail"), WAIT);
    running.wait_events("Unhealthy", Some("slow"), 2, WAIT);
    running.terminate();
    let run = running.wait(RUN_TIMEOUT);
    assert_eq!(run.code, Some(0), "{}", run.dump());
    assert!(
        run.events_before_deletion("Unhealthy", "ok").is_empty(),
        "{}",
        run.dump()
    );
    assert_eq!(
        run.container_events("Unhealthy", "fail")[0]["message"],
        "Readiness probe failed: not ready\n"
    );
    let slow = run.container_events("Unhealthy", "slow");
    assert!(slow.len() >= 2, "{}", run.dump());
    assert_eq!(
        slow[0]["message"],
        "Readiness probe failed: command \"sleep 5\" timed out"
    );
    // timeoutSeconds (1) is enforced: failures are a period or two apart, not 5 s (the
    // command's own length).
    let started = run.event_times("Started", "slow")[0];
    assert!(t(slow[0]) - started < 4.0, "{}", run.dump());
    assert!(t(slow[1]) - t(slow[0]) < 4.0, "{}", run.dump());
    assert!(
        !run.statuses()
            .iter()
            .any(|s| ready_of(s, "slow") || ready_of(s, "fail"))
    );
}

#[test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
fn r11_r14_liveness_failure_restarts_the_container() {
    let ctx = Ctx::new("r14liveness");
    let liveness = json!({
        "exec": {"command": sh("echo sick; exit 1")},
        "periodSeconds": 1, "failureThreshold": 2,
    });
    let pod = pod(
        "live",
        spec(vec![with(sleeper("app"), "livenessProbe", liveness)]),
    );
    let mut running = ctx.spawn(&[pod], &[]);
    running.wait_status("restarted and running", WAIT, |s| {
        let c = container(s, "app");
        c["restart_count"] == 1 && c["state"] == "running"
    });
    running.terminate();
    let run = running.wait(RUN_TIMEOUT);
    assert_eq!(run.code, Some(0), "{}", run.dump());
    let unhealthy = run.events_before_deletion("Unhealthy", "app");
    for e in &unhealthy {
        assert_eq!(e["type"], "Warning");
        assert_eq!(e["message"], "Liveness probe failed: sick\n");
    }
    let killing = run.container_events("Killing", "app");
    assert_eq!(
        killing[0]["message"],
        "Container app failed liveness probe, will be restarted"
    );
    // failureThreshold: two failures before the kill.
    let before = unhealthy.iter().filter(|e| t(e) <= t(killing[0])).count();
    assert!(before >= 2, "{}", run.dump());
    // The killed instance ended on SIGTERM; the new one runs.
    let restarted = run
        .statuses()
        .into_iter()
        .find(|s| container(s, "app")["restart_count"] == 1)
        .unwrap();
    assert_eq!(
        container(restarted, "app")["last_exit_code"],
        143,
        "{}",
        run.dump()
    );
    assert!(run.event_times("Started", "app").len() >= 2);
}

#[test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
fn r15_startup_probe_gates_liveness_and_readiness() {
    let ctx = Ctx::new("r15gate");
    let flag = ctx.path("started");
    let runs = |kind: &str| ctx.path(&format!("{kind}-runs"));
    let record = |kind: &str| {
        json!({
            "exec": {"command": sh(&format!("date +%s.%N >> {}", runs(kind).display()))},
            "periodSeconds": 1,
        })
    };
    let mut app = json!({
        "name": "app", "image": "busybox",
        "command": sh(&format!("sleep 2; touch {}; exec sleep 100000", flag.display())),
        "startupProbe": {
            "exec": {"command": ["test", "-f", flag.display().to_string()]},
            "periodSeconds": 1, "failureThreshold": 30,
        },
    });
    app["readinessProbe"] = record("readiness");
    app["livenessProbe"] = record("liveness");
    let pod = pod("gated", spec(vec![app]));
    let mut running = ctx.spawn(&[pod], &[]);
    running.wait_status("ready", WAIT, |s| ready_of(s, "app"));
    // The liveness worker ticks once a period now that the container has started.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    // (A whole line: the shell creates the file before `date` has written to it.)
    let ran = |kind: &str| std::fs::read_to_string(runs(kind)).is_ok_and(|t| t.contains('\n'));
    while !(ran("liveness") && ran("readiness")) && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    running.terminate();
    let run = running.wait(RUN_TIMEOUT);
    assert_eq!(run.code, Some(0), "{}", run.dump());
    let unhealthy: Vec<_> = run
        .events_before_deletion("Unhealthy", "app")
        .iter()
        .map(|e| e["message"].as_str().unwrap().to_string())
        .collect();
    assert!(!unhealthy.is_empty(), "{}", run.dump());
    assert!(
        unhealthy.iter().all(|m| m == "Startup probe failed: "),
        "{}",
        run.dump()
    );
    assert!(
        run.events("Killing")
            .iter()
            .all(|k| k["message"] == "Stopping container app")
    );
    // started, then ready; neither before the startup probe could succeed.
    let started_t = run
        .first_container_time("app", |c| c["started"] == true)
        .unwrap();
    let ready_t = run
        .first_container_time("app", |c| c["ready"] == true)
        .unwrap();
    let flag_epoch = std::fs::metadata(&flag)
        .unwrap()
        .modified()
        .unwrap()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    // (The flag's mtime comes from the coarse kernel clock: a few milliseconds of slack.)
    assert!(
        run.started_epoch + started_t >= flag_epoch - 0.05,
        "{}",
        run.dump()
    );
    assert!(ready_t >= started_t);
    // No liveness or readiness probe ran before the container was started.
    for kind in ["readiness", "liveness"] {
        let text = std::fs::read_to_string(runs(kind)).unwrap_or_default();
        let first: f64 = text
            .lines()
            .next()
            .unwrap_or_else(|| panic!("no {kind} probe ran\n{}", run.dump()))
            .parse()
            .unwrap();
        assert!(
            first >= flag_epoch - 0.05,
            "{kind} probe ran before the startup probe passed"
        );
    }
}

#[test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
fn r15_startup_probe_failure_kills_and_restarts() {
    let ctx = Ctx::new("r15fail");
    let startup = json!({
        "exec": {"command": sh("echo no; exit 1")}, "periodSeconds": 1, "failureThreshold": 2,
    });
    let pod = pod(
        "slowstart",
        spec(vec![with(sleeper("app"), "startupProbe", startup)]),
    );
    let mut running = ctx.spawn(&[pod], &[]);
    running.wait_status("restarted", WAIT, |s| {
        container(s, "app")["restart_count"] == 1
    });
    running.terminate();
    let run = running.wait(RUN_TIMEOUT);
    assert_eq!(run.code, Some(0), "{}", run.dump());
    let killing = run.container_events("Killing", "app");
    assert_eq!(
        killing[0]["message"],
        "Container app failed startup probe, will be restarted"
    );
    let failures: Vec<_> = run
        .container_events("Unhealthy", "app")
        .into_iter()
        .filter(|e| t(e) <= t(killing[0]))
        .collect();
    assert!(failures.len() >= 2, "{}", run.dump());
    assert!(
        failures
            .iter()
            .all(|e| e["message"] == "Startup probe failed: no\n")
    );
    // Never started, so never ready.
    assert!(
        !run.statuses()
            .iter()
            .any(|s| container(s, "app")["started"] == true)
    );
}

#[test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
fn r12_r14_readiness_flips_ready_both_ways() {
    let ctx = Ctx::new("r12flip");
    let flag = ctx.path("ready");
    let readiness = json!({
        "exec": {"command": ["test", "-f", flag.display().to_string()]}, "periodSeconds": 1,
    });
    let pod = pod(
        "flip",
        spec(vec![with(sleeper("app"), "readinessProbe", readiness)]),
    );
    let mut running = ctx.spawn(&[pod], &[]);
    running.wait_event("Unhealthy", Some("app"), WAIT);
    std::fs::write(&flag, "").unwrap();
    let ready = running.wait_status("1/1", WAIT, |s| s["ready"] == "1/1");
    assert_eq!(ready["conditions"]["Ready"], "True");
    assert_eq!(ready["conditions"]["ContainersReady"], "True");
    let became_ready = t(&ready);
    std::fs::remove_file(&flag).unwrap();
    let unready = running.wait_status("0/1 again", WAIT, |s| {
        t(s) > became_ready && s["ready"] == "0/1"
    });
    assert_eq!(unready["conditions"]["Ready"], "False");
    assert_eq!(unready["phase"], "Running");
    running.terminate();
    let run = running.wait(RUN_TIMEOUT);
    assert_eq!(run.code, Some(0), "{}", run.dump());
    // A failure was reported after the flag went away, and it is what made the pod unready.
    let after: Vec<_> = run
        .container_events("Unhealthy", "app")
        .into_iter()
        .filter(|e| t(e) > became_ready)
        .collect();
    assert!(!after.is_empty(), "{}", run.dump());
    assert_eq!(after[0]["message"], "Readiness probe failed: ");
    assert!(
        run.events("Killing").len() == 1,
        "readiness never restarts: {}",
        run.dump()
    );
}

#[test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
fn t2_liveness_kill_uses_the_probe_termination_grace_period() {
    let ctx = Ctx::new("t2probegrace");
    let sick = ctx.path("sick");
    // The first instance falls sick and ignores SIGTERM; the second recovers.
    let script = format!(
        "if [ -f {s} ]; then rm {s}; exec sleep 100000; else trap '' TERM; touch {s}; exec sleep 100000; fi",
        s = sick.display()
    );
    let app = json!({
        "name": "app", "image": "busybox", "command": sh(&script),
        "livenessProbe": {
            "exec": {"command": ["sh", "-c", format!("! test -f {}", sick.display())]},
            "periodSeconds": 1, "failureThreshold": 1,
            "terminationGracePeriodSeconds": 1,
        },
    });
    let pod = pod(
        "probegrace",
        json!({"terminationGracePeriodSeconds": 30, "containers": [app]}),
    );
    let mut running = ctx.spawn(&[pod], &[]);
    let restarted = running.wait_status("restarted", WAIT, |s| {
        container(s, "app")["restart_count"] == 1 && container(s, "app")["state"] == "running"
    });
    running.terminate();
    let run = running.wait(RUN_TIMEOUT);
    assert_eq!(run.code, Some(0), "{}", run.dump());
    let killing = run.container_events("Killing", "app");
    assert_eq!(
        killing[0]["message"],
        "Container app failed liveness probe, will be restarted"
    );
    // SIGKILL after the probe's grace period (1 s, raised to the 2 s minimum), not the pod's
    // 30 s (T2, T3).
    assert_eq!(
        container(&restarted, "app")["last_exit_code"],
        137,
        "{}",
        run.dump()
    );
    let died = run
        .first_container_time("app", |c| {
            c["last_exit_code"] == 137 || c["exit_code"] == 137
        })
        .unwrap();
    let took = died - t(killing[0]);
    assert!(
        (1.5..6.0).contains(&took),
        "killed {took:.2}s after Killing\n{}",
        run.dump()
    );
}

/// The Unix times a probe recorded with `date +%s.%N >> file`.
fn probe_runs(file: &std::path::Path) -> Vec<f64> {
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect()
}

#[test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
fn r1_r11_initial_delay_and_success_threshold() {
    let ctx = Ctx::new("r11delay");
    let runs = |name: &str| ctx.path(&format!("{name}-runs"));
    let probe = |name: &str, extra: Value| {
        let mut p = json!({
            "exec": {"command": sh(&format!("date +%s.%N >> {}", runs(name).display()))},
            "periodSeconds": 1,
        });
        p.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        p
    };
    let pod = pod(
        "thresholds",
        spec(vec![
            with(
                sleeper("delayed"),
                "readinessProbe",
                probe("delayed", json!({"initialDelaySeconds": 2})),
            ),
            with(
                sleeper("thrice"),
                "readinessProbe",
                probe("thrice", json!({"successThreshold": 3})),
            ),
        ]),
    );
    let mut running = ctx.spawn(&[pod], &[]);
    running.wait_status("2/2", WAIT, |s| s["ready"] == "2/2");
    running.terminate();
    let run = running.wait(RUN_TIMEOUT);
    assert_eq!(run.code, Some(0), "{}", run.dump());
    let started = |name: &str| run.started_epoch + run.event_times("Started", name)[0];
    let ready = |name: &str| {
        run.started_epoch
            + run
                .first_container_time(name, |c| c["ready"] == true)
                .unwrap()
    };
    // No probe before initialDelaySeconds (R11).
    let delayed = probe_runs(&runs("delayed"));
    assert!(!delayed.is_empty());
    let first = delayed[0] - started("delayed");
    assert!(
        first >= 1.9,
        "first probe {first:.2}s after the start\n{}",
        run.dump()
    );
    // Ready only after the third success in a row: at least two periods after the first.
    let thrice = probe_runs(&runs("thrice"));
    assert!(thrice.len() >= 3, "{thrice:?}");
    let became = ready("thrice");
    assert!(
        became >= thrice[2] - 0.1,
        "ready before the third success\n{}",
        run.dump()
    );
    assert!(became - thrice[0] >= 1.7, "{}", run.dump());
}
