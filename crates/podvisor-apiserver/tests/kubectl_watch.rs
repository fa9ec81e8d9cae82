//! Watches with the real kubectl: `get -w`, `wait --for=condition=Ready`, and status
//! patches the way the node agent (or a readiness-gate controller) makes them.

use crate::common;

use std::io::{BufRead, BufReader};
use std::process::{Child, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use common::{TestServer, pod_yaml};
use k8s_openapi::api::core::v1::Pod;
use podvisor_agent::node::write_pod_status;
use podvisor_store::Key;
use serde_json::json;

/// Reads a child's stdout lines on a thread.
fn lines_of(child: &mut Child) -> mpsc::Receiver<String> {
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

/// Waits for a line containing all of `words`.
fn expect_line(rx: &mpsc::Receiver<String>, words: &[&str]) -> String {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let mut seen = Vec::new();
    while let Some(left) = deadline.checked_duration_since(std::time::Instant::now()) {
        match rx.recv_timeout(left) {
            Ok(line) => {
                if words
                    .iter()
                    .all(|w| line.split_whitespace().any(|c| c == *w))
                {
                    return line;
                }
                seen.push(line);
            }
            Err(_) => break,
        }
    }
    panic!("no line with {words:?}; saw {seen:#?}");
}

fn running_status(ready: bool) -> serde_json::Value {
    json!({
        "phase": "Running",
        "conditions": [
            {"type": "PodScheduled", "status": "True"},
            {"type": "Initialized", "status": "True"},
            {"type": "ContainersReady", "status": if ready { "True" } else { "False" }},
            {"type": "Ready", "status": if ready { "True" } else { "False" }}
        ],
        "containerStatuses": [{
            "name": "app", "image": "busybox", "imageID": "", "ready": ready, "restartCount": 0,
            "started": true, "containerID": "podvisor://web-app-0",
            "state": {"running": {"startedAt": "2025-01-01T00:00:00Z"}}
        }]
    })
}

#[test]
fn kubectl_get_watch_streams_table_rows() {
    let s = TestServer::start();
    s.create(&pod_yaml("web"));
    let mut child = s
        .kubectl_command(&["get", "pods", "-w"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let rx = lines_of(&mut child);
    expect_line(&rx, &["NAME", "READY", "STATUS", "RESTARTS", "AGE"]);
    expect_line(&rx, &["web", "0/1", "Pending"]);
    s.patch_status("web", &running_status(true));
    expect_line(&rx, &["web", "1/1", "Running"]);
    s.create(&pod_yaml("second"));
    expect_line(&rx, &["second", "0/1", "Pending"]);
    s.kubectl_ok(&["delete", "pod", "second", "--wait=false"]);
    expect_line(&rx, &["second", "0/1", "Terminating"]);
    child.kill().unwrap();
    child.wait().unwrap();
}

#[test]
fn kubectl_wait_for_ready_after_a_status_patch() {
    let s = TestServer::start();
    s.create(&pod_yaml("web"));
    let waiter = s
        .kubectl_command(&["wait", "--for=condition=Ready", "pod/web", "--timeout=20s"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    s.patch_status("web", &running_status(false));
    std::thread::sleep(Duration::from_millis(200));
    s.patch_status("web", &running_status(true));
    let out = waiter.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "pod/web condition met"
    );
}

#[test]
fn kubectl_patch_status_sets_a_readiness_gate_condition() {
    let s = TestServer::start();
    s.create(&format!(
        "{}  readinessGates:\n  - conditionType: example.com/gate\n",
        pod_yaml("gated")
    ));
    s.patch_status("gated", &running_status(false));
    // A strategic merge patch (kubectl's default) merges conditions by type.
    s.kubectl_ok(&[
        "patch",
        "pod",
        "gated",
        "--subresource=status",
        "-p",
        r#"{"status":{"conditions":[{"type":"example.com/gate","status":"True"}]}}"#,
    ]);
    let types = s.kubectl_ok(&[
        "get",
        "pod",
        "gated",
        "-o",
        "jsonpath={range .status.conditions[*]}{.type}={.status} {end}",
    ]);
    assert_eq!(
        types.trim(),
        "PodScheduled=True Initialized=True ContainersReady=False Ready=False example.com/gate=True"
    );
    let wide = s.kubectl_ok(&["get", "pod", "gated", "-o", "wide"]);
    let row: Vec<&str> = wide.lines().nth(1).unwrap().split_whitespace().collect();
    assert_eq!(row.last(), Some(&"1/1"), "{wide}");
    // The node's status writes keep conditions it does not own (the gate).
    let mut pod: Pod =
        serde_json::from_str(&s.kubectl_ok(&["get", "pod", "gated", "-o", "json"])).unwrap();
    pod.status = Some(serde_json::from_value(running_status(true)).unwrap());
    let write = |pod: &Pod| {
        let key = Key::new("pods", "default", "gated");
        let uid = pod.metadata.uid.clone().unwrap();
        write_pod_status(s.state.store(), &key, &uid, pod.status.as_ref().unwrap()).unwrap()
    };
    let stored = write(&pod);
    let types: Vec<(&str, &str)> = stored["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["type"].as_str().unwrap(), c["status"].as_str().unwrap()))
        .collect();
    assert_eq!(
        types,
        [
            ("example.com/gate", "True"),
            ("PodScheduled", "True"),
            ("Initialized", "True"),
            ("ContainersReady", "True"),
            ("Ready", "True")
        ]
    );
    let rv = stored["metadata"]["resourceVersion"].clone();
    let again = write(&pod);
    assert_eq!(
        again["metadata"]["resourceVersion"], rv,
        "a no-op write writes nothing"
    );
    // The status subresource ignores spec changes.
    s.kubectl_ok(&[
        "patch",
        "pod",
        "gated",
        "--subresource=status",
        "--type=merge",
        "-p",
        r#"{"spec":{"activeDeadlineSeconds":5},"status":{"phase":"Running"}}"#,
    ]);
    let deadline = s.kubectl_ok(&[
        "get",
        "pod",
        "gated",
        "-o",
        "jsonpath={.spec.activeDeadlineSeconds}",
    ]);
    assert_eq!(deadline, "");
}
