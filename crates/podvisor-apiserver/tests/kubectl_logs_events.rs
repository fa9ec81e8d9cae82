//! `kubectl logs` from CRI log files, and events: the node agent's recorder's count aggregation and its
//! correlator's combined events as `kubectl describe` and `kubectl get events` show them.

use crate::common;

use std::process::Stdio;
use std::time::Duration;

use common::{NODE, TestServer, pod_yaml};
use k8s_openapi::api::core::v1::Pod;
use podvisor_agent::node::Recorder;
use podvisor_lifecycle::{ContainerKind, Event, EventType};
use serde_json::{Value, json};

fn uid_of(s: &TestServer, name: &str) -> String {
    s.kubectl_ok(&["get", "pod", name, "-o", "jsonpath={.metadata.uid}"])
}

fn app_status(restart_count: u32, state: Value, last: Value) -> Value {
    json!({"phase": "Running", "containerStatuses": [{
        "name": "app", "image": "busybox", "imageID": "", "ready": true,
        "restartCount": restart_count, "containerID": format!("podvisor://app-{restart_count}"),
        "state": state, "lastState": last
    }]})
}

#[test]
fn kubectl_logs_reads_the_cri_files() {
    let s = TestServer::start();
    s.create(&pod_yaml("web"));
    let uid = uid_of(&s, "web");
    s.write_log(
        "default",
        "web",
        &uid,
        "app",
        0,
        "2025-01-01T00:00:00Z stdout F old run\n",
    );
    s.write_log(
        "default",
        "web",
        &uid,
        "app",
        1,
        "2025-01-01T00:01:00.5Z stdout F hello\n2025-01-01T00:01:01Z stderr F world\n2025-01-01T00:01:02Z stdout P par\n2025-01-01T00:01:02Z stdout F tial\n",
    );
    let r = s.kubectl(&["logs", "web"]);
    assert_eq!(
        r.stderr.trim(),
        "Error from server (BadRequest): container \"app\" in pod \"web\" is waiting to start: ContainerCreating"
    );
    s.patch_status(
        "web",
        &app_status(
            1,
            json!({"running": {"startedAt": "2025-01-01T00:01:00Z"}}),
            json!({"terminated": {"exitCode": 1, "reason": "Error", "containerID": "podvisor://app-0"}}),
        ),
    );
    assert_eq!(s.kubectl_ok(&["logs", "web"]), "hello\nworld\npartial\n");
    assert_eq!(s.kubectl_ok(&["logs", "web", "--previous"]), "old run\n");
    assert_eq!(s.kubectl_ok(&["logs", "web", "--tail=2"]), "partial\n");
    assert_eq!(
        s.kubectl_ok(&["logs", "web", "--limit-bytes=7"]),
        "hello\nw"
    );
    assert_eq!(
        s.kubectl_ok(&["logs", "web", "--timestamps", "--tail=3"]),
        "2025-01-01T00:01:01.000000000Z world\n2025-01-01T00:01:02.000000000Z par2025-01-01T00:01:02.000000000Z tial\n"
    );
    assert_eq!(
        s.kubectl_ok(&["logs", "web", "--since-time=2025-01-01T00:01:01Z"]),
        "world\npartial\n"
    );
}

/// Pod `web` with `app` running and one line logged (`one`), and `kubectl logs -f web`
/// following it: the pod's uid and the follower.
fn follow_a_running_web(s: &TestServer) -> (String, std::process::Child) {
    s.create(&pod_yaml("web"));
    let uid = uid_of(s, "web");
    s.write_log(
        "default",
        "web",
        &uid,
        "app",
        0,
        "2025-01-01T00:00:00Z stdout F one\n",
    );
    s.patch_status(
        "web",
        &app_status(
            0,
            json!({"running": {"startedAt": "2025-01-01T00:00:00Z"}}),
            json!({}),
        ),
    );
    let follower = s
        .kubectl_command(&["logs", "-f", "web"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    (uid, follower)
}

#[test]
fn kubectl_logs_follow_ends_when_the_container_terminates() {
    let s = TestServer::start();
    let (uid, follower) = follow_a_running_web(&s);
    let path = s
        .log_root
        .join(format!("default_web_{uid}"))
        .join("app/0.log");
    let mut text = std::fs::read_to_string(&path).unwrap();
    text.push_str("2025-01-01T00:00:01Z stdout F two\n2025-01-01T00:00:02Z stdout P unfinished");
    std::fs::write(&path, text).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    s.patch_status(
        "web",
        &app_status(
            0,
            json!({"terminated": {"exitCode": 0, "reason": "Completed", "containerID": "podvisor://app-0"}}),
            json!({}),
        ),
    );
    let out = follower.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), "one\ntwo\nunfinished");
}

/// The kubelet's follow reads on in the new file once the container log manager rotated the
/// old one: what was written to the old file until the runtime reopened, then the new file.
#[test]
fn kubectl_logs_follow_goes_on_across_a_rotation() {
    let s = TestServer::start();
    let (uid, follower) = follow_a_running_web(&s);
    let dir = s.log_root.join(format!("default_web_{uid}")).join("app");
    let append = |path: &std::path::Path, text: &str| {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .open(path)
            .unwrap();
        f.write_all(text.as_bytes()).unwrap();
    };
    // The rotation: renamed, written to until the runtime reopens, then a new file that is
    // longer than what the follower had read of the old one.
    let rotated = dir.join("0.log.20250101-000001");
    std::fs::rename(dir.join("0.log"), &rotated).unwrap();
    append(&rotated, "2025-01-01T00:00:01Z stdout F two\n");
    append(
        &dir.join("0.log"),
        "2025-01-01T00:00:02Z stdout F three\n2025-01-01T00:00:03Z stdout F four\n",
    );
    std::thread::sleep(Duration::from_millis(500));
    append(&dir.join("0.log"), "2025-01-01T00:00:04Z stdout F five\n");
    std::thread::sleep(Duration::from_millis(300));
    s.patch_status(
        "web",
        &app_status(
            0,
            json!({"terminated": {"exitCode": 0, "reason": "Completed", "containerID": "podvisor://app-0"}}),
            json!({}),
        ),
    );
    let out = follower.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "one\ntwo\nthree\nfour\nfive\n"
    );
    // Without follow, as the kubelet: the current file only.
    assert_eq!(s.kubectl_ok(&["logs", "web"]), "three\nfour\nfive\n");
}

#[test]
fn kubectl_logs_needs_a_container_name_for_several() {
    let s = TestServer::start();
    s.create(&format!(
        "{}  - name: side\n    image: busybox\n",
        pod_yaml("two")
    ));
    let (code, body) = s.json("GET", "/api/v1/namespaces/default/pods/two/log", None);
    assert_eq!(code, 400);
    assert_eq!(
        body["message"],
        "a container name must be specified for pod two, choose one of: [app side]"
    );
    let r = s.kubectl(&["logs", "two", "-c", "side", "--previous"]);
    assert_eq!(
        r.stderr.trim(),
        "Error from server (BadRequest): container \"side\" in pod \"two\" is waiting to start: ContainerCreating"
    );
}

#[test]
fn kubectl_describe_shows_aggregated_events() {
    let s = TestServer::start();
    s.create(&pod_yaml("web"));
    let pod: Pod =
        serde_json::from_str(&s.kubectl_ok(&["get", "pod", "web", "-o", "json"])).unwrap();
    let store = s.state.store();
    let started = Event {
        type_: EventType::Normal,
        reason: "Started",
        message: "Started container app".to_owned(),
        container: Some((ContainerKind::Regular, "app".to_owned())),
    };
    let backoff = Event {
        type_: EventType::Warning,
        reason: "BackOff",
        message: "Back-off restarting failed container app in pod web_default(x)".to_owned(),
        container: Some((ContainerKind::Regular, "app".to_owned())),
    };
    let t0 = jiff::Timestamp::now() - jiff::SignedDuration::from_secs(120);
    let mut c = Recorder::new(NODE);
    c.record(store, &pod, &started, t0).unwrap();
    let first = c.record(store, &pod, &backoff, t0).unwrap();
    let again = c
        .record(store, &pod, &backoff, jiff::Timestamp::now())
        .unwrap();
    let (first, again) = (first.unwrap(), again.unwrap());
    assert_eq!(first["metadata"]["name"], again["metadata"]["name"]);
    assert_eq!(again["count"], 2);
    assert_eq!(again["involvedObject"]["fieldPath"], "spec.containers{app}");
    assert_eq!(
        again["source"],
        json!({"component": "kubelet", "host": NODE})
    );
    assert_eq!(again["reportingComponent"], "kubelet");

    let out = s.kubectl_ok(&["describe", "pod", "web"]);
    let events = out
        .split("Events:")
        .nth(1)
        .unwrap_or_else(|| panic!("{out}"));
    let lines: Vec<Vec<&str>> = events
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(
        lines[1],
        ["Type", "Reason", "Age", "From", "Message"],
        "{events}"
    );
    assert!(
        lines
            .iter()
            // The event is two minutes old; a loaded machine adds seconds (`2m1s`).
            .any(|l| l.len() > 4
                && l[..2] == ["Normal", "Started"]
                && l[2].starts_with("2m")
                && l[3..5] == ["kubelet", "Started"]),
        "{events}"
    );
    assert!(
        lines.iter().any(|l| l.starts_with(&["Warning", "BackOff"])
            && l[2].ends_with('s')
            && l[3] == "(x2"
            && l[4] == "over"
            && l[5].starts_with("2m")
            && l[5].ends_with(')')),
        "{events}"
    );
    let list = s.kubectl_ok(&["get", "events", "--field-selector", "reason=BackOff"]);
    let rows: Vec<&str> = list.lines().collect();
    assert_eq!(rows.len(), 2, "{list}");
    assert!(
        rows[1]
            .split_whitespace()
            .skip(1)
            .take(3)
            .eq(["Warning", "BackOff", "pod/web"]),
        "{list}"
    );
    // Started, BackOff and the scheduler's Scheduled from the create.
    let all = s.kubectl_ok(&["get", "events", "-A", "-o", "name"]);
    assert_eq!(all.lines().count(), 3, "{all}");

    // The event TTL counts from the last write: an hour after the Started event was written
    // it expires; the BackOff event, written again since, lives an hour from then.
    let ttl = podvisor_apiserver::EVENT_TTL;
    let later = t0 + jiff::SignedDuration::from_secs(3600 + 5);
    assert_eq!(podvisor_apiserver::expire_events(store, later, ttl), 1);
    let left = s.kubectl_ok(&["get", "events", "-o", "jsonpath={.items[*].reason}"]);
    let mut reasons: Vec<&str> = left.split_whitespace().collect();
    reasons.sort_unstable();
    assert_eq!(reasons, ["BackOff", "Scheduled"], "{left}");
    let much_later = jiff::Timestamp::now() + jiff::SignedDuration::from_secs(3600 + 5);
    assert_eq!(podvisor_apiserver::expire_events(store, much_later, ttl), 2);
}

#[test]
fn kubectl_describe_shows_combined_similar_events() {
    let s = TestServer::start();
    s.create(&pod_yaml("web"));
    let pod: Pod =
        serde_json::from_str(&s.kubectl_ok(&["get", "pod", "web", "-o", "json"])).unwrap();
    let store = s.state.store();
    let unhealthy = |code: u32| Event {
        type_: EventType::Warning,
        reason: "Unhealthy",
        message: format!("Liveness probe failed: HTTP probe failed with statuscode: {code}"),
        container: Some((ContainerKind::Regular, "app".to_owned())),
    };
    let now = jiff::Timestamp::now();
    let t0 = now - jiff::SignedDuration::from_secs(120);
    let at = |secs: i64| t0 + jiff::SignedDuration::from_secs(secs);
    let mut c = Recorder::new(NODE);
    // Nine distinct messages of the same reason within ten minutes are events of their own.
    for i in 0..9 {
        let e = c.record(store, &pod, &unhealthy(500 + i), at(i.into()));
        assert_eq!(e.unwrap().unwrap()["count"], 1);
    }
    // The tenth is the combined event; the eleventh counts it, with its own message.
    let combined = c
        .record(store, &pod, &unhealthy(510), at(60))
        .unwrap()
        .unwrap();
    assert_eq!(
        combined["message"],
        "(combined from similar events): Liveness probe failed: HTTP probe failed with statuscode: 510"
    );
    let again = c
        .record(store, &pod, &unhealthy(511), now)
        .unwrap()
        .unwrap();
    assert_eq!(again["metadata"]["name"], combined["metadata"]["name"]);
    assert_eq!(again["count"], 2);
    assert_eq!(
        again["message"],
        "(combined from similar events): Liveness probe failed: HTTP probe failed with statuscode: 511"
    );

    let out = s.kubectl_ok(&["describe", "pod", "web"]);
    let events = out
        .split("Events:")
        .nth(1)
        .unwrap_or_else(|| panic!("{out}"));
    let line = events
        .lines()
        .find(|l| l.contains("combined"))
        .unwrap_or_else(|| panic!("{events}"));
    let words: Vec<&str> = line.split_whitespace().collect();
    // `Warning  Unhealthy  0s (x2 over 60s)  kubelet  (combined from similar events): ...`
    assert_eq!(words[..2], ["Warning", "Unhealthy"], "{events}");
    assert_eq!(words[3..5], ["(x2", "over"], "{events}");
    assert!(words[5].ends_with("s)"), "{events}");
    assert_eq!(words[6], "kubelet", "{events}");
    assert_eq!(
        words[7..].join(" "),
        "(combined from similar events): Liveness probe failed: HTTP probe failed with \
         statuscode: 511",
        "{events}"
    );
    let reasons = s.kubectl_ok(&[
        "get",
        "events",
        "--field-selector",
        "reason=Unhealthy",
        "-o",
        "name",
    ]);
    assert_eq!(reasons.lines().count(), 10, "{reasons}");

    // The spam filter: 25 events about the pod at once (11 so far), then one per 5 minutes.
    let started = Event {
        type_: EventType::Normal,
        reason: "Started",
        message: "Started container app".to_owned(),
        container: Some((ContainerKind::Regular, "app".to_owned())),
    };
    for _ in 11..25 {
        assert!(c.record(store, &pod, &started, now).unwrap().is_some());
    }
    assert!(c.record(store, &pod, &started, now).unwrap().is_none());
    let later = now + jiff::SignedDuration::from_secs(300);
    let written = c.record(store, &pod, &started, later).unwrap().unwrap();
    // 14 written, one dropped and counted with the next write.
    assert_eq!(written["count"], 16);
}

/// The scheduler's core/v1 event is also an `events.k8s.io/v1` Event (one object, two
/// shapes): kubectl lists it through the new group, and a watch there sees the new shape.
#[test]
fn events_are_served_in_events_k8s_io_v1_too() {
    let s = TestServer::start();
    s.create(&pod_yaml("web"));
    let table = s.kubectl_ok(&["get", "events.v1.events.k8s.io", "-A"]);
    assert!(table.contains("Scheduled"), "{table}");
    let raw = s.kubectl_ok(&[
        "get",
        "--raw",
        "/apis/events.k8s.io/v1/namespaces/default/events",
    ]);
    let list: serde_json::Value = serde_json::from_str(&raw).unwrap();
    assert_eq!(list["apiVersion"], "events.k8s.io/v1");
    let event = &list["items"][0];
    assert_eq!(event["apiVersion"], "events.k8s.io/v1");
    assert_eq!(event["regarding"]["name"], "web");
    assert!(
        event["note"]
            .as_str()
            .unwrap()
            .starts_with("Successfully assigned default/web")
    );
    assert_eq!(event["deprecatedSource"]["component"], "default-scheduler");
    assert!(event.get("involvedObject").is_none(), "{event}");
    let watched = s.kubectl_ok(&[
        "get",
        "--raw",
        "/apis/events.k8s.io/v1/namespaces/default/events?watch=true&timeoutSeconds=1",
    ]);
    let first: serde_json::Value = serde_json::from_str(watched.lines().next().unwrap()).unwrap();
    assert_eq!(first["type"], "ADDED");
    assert_eq!(first["object"]["apiVersion"], "events.k8s.io/v1");
    assert_eq!(first["object"]["regarding"]["name"], "web");
}
