//! The timeline renderer (`timeline::svg::render`) on simulated stories and on what the API
//! serves: lanes in drawing order (init → sidecar → regular → ephemeral), spans in time order
//! with the state and reason of each, restarts, markers (events, probe failures, hooks,
//! signals), the deletion with its grace period. Each story's drawing is reduced to its
//! structure (one line per element) and snapshotted with `insta`; the assertions say what to
//! look for.

use k8s_openapi::api::core::v1::{Event, Pod};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use podvisor_lifecycle::sim::{self, Script, SimOptions};
use podvisor_lifecycle::timeline::{LaneKind, Timeline, Transition, html, svg};
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

fn simulate(name: &str, spec: Value, script: &str, secs: u64) -> Timeline {
    let script = Script::parse(script).expect("a valid script");
    let opts = SimOptions {
        duration: Duration::from_secs(secs),
        ..SimOptions::default()
    };
    let p = pod(name, spec);
    let records = sim::simulate(p.clone(), &script, &opts).expect("the simulation runs");
    Timeline::from_sim(
        &p,
        &records,
        &opts.start.to_string(),
        script
            .delete
            .as_ref()
            .map(|d| (d.at.as_secs_f64(), d.grace_period_seconds)),
        secs as f64,
    )
}

/// The value of attribute `name` in the tag starting at `tag`.
fn attr<'a>(tag: &'a str, name: &str) -> Option<&'a str> {
    let key = format!(" {name}=\"");
    let start = tag.find(&key)? + key.len();
    let end = tag[start..].find('"')? + start;
    Some(&tag[start..end])
}

/// The drawing's structure, one line per lane, span, restart, marker and deletion, in
/// document order.
fn structure(svg: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (i, _) in svg.match_indices('<') {
        let tag = &svg[i..i + svg[i..].find('>').unwrap_or(0)];
        let class = attr(tag, "class").unwrap_or("");
        if tag.starts_with("<g") && class == "lane" {
            out.push(format!(
                "lane {} ({})",
                attr(tag, "data-name").unwrap_or(""),
                attr(tag, "data-kind").unwrap_or("")
            ));
        } else if tag.starts_with("<rect")
            && class.starts_with("span ")
            && attr(tag, "data-start").is_some()
        {
            out.push(format!(
                "  span {}..{} {} {}",
                attr(tag, "data-start").unwrap_or(""),
                attr(tag, "data-end").unwrap_or(""),
                attr(tag, "data-state").unwrap_or(""),
                attr(tag, "data-reason").unwrap_or("")
            ));
        } else if class == "restart" && attr(tag, "data-t").is_some() {
            out.push(format!(
                "  restart #{} at {}",
                attr(tag, "data-count").unwrap_or(""),
                attr(tag, "data-t").unwrap_or("")
            ));
        } else if tag.starts_with("<g")
            && class.starts_with("marker ")
            && attr(tag, "data-t").is_some()
        {
            let count = attr(tag, "data-count").unwrap_or("1");
            out.push(format!(
                "  marker {} {} at {}{}",
                attr(tag, "data-kind").unwrap_or(""),
                attr(tag, "data-reason").unwrap_or(""),
                attr(tag, "data-t").unwrap_or(""),
                if count == "1" {
                    String::new()
                } else {
                    format!(" x{count}")
                }
            ));
        } else if tag.starts_with("<rect") && attr(tag, "id") == Some("deletion") {
            out.push(format!(
                "deletion at {} grace {}",
                attr(tag, "data-t").unwrap_or(""),
                attr(tag, "data-grace").unwrap_or("")
            ));
        }
    }
    out
}

fn lanes(lines: &[String]) -> Vec<&str> {
    lines
        .iter()
        .filter(|l| l.starts_with("lane "))
        .map(String::as_str)
        .collect()
}

/// The spans of one lane as (start, end, state, reason).
fn lane_spans(lines: &[String], lane: &str) -> Vec<(f64, f64, String, String)> {
    let header = format!("lane {lane} ");
    lines
        .iter()
        .skip_while(|l| !l.starts_with(&header))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.strip_prefix("  span "))
        .map(|l| {
            let mut parts = l.splitn(3, ' ');
            let (s, e) = parts.next().unwrap().split_once("..").unwrap();
            let state = parts.next().unwrap().to_string();
            let reason = parts.next().unwrap_or("").trim().to_string();
            (s.parse().unwrap(), e.parse().unwrap(), state, reason)
        })
        .collect()
}

fn assert_time_ordered(spans: &[(f64, f64, String, String)]) {
    for w in spans.windows(2) {
        assert!(
            w[0].0 <= w[1].0 && w[0].1 <= w[1].0 + 1e-9,
            "spans out of order: {w:?}"
        );
    }
    for s in spans {
        assert!(s.0 <= s.1, "a span ends before it starts: {s:?}");
    }
}

/// B1/B3, S10: a crash loop: terminated `Error` and waiting `CrashLoopBackOff` alternate, each
/// restart is marked where `restartCount` goes up (0, 10, 30, 70 s: the back-off doubles), and
/// the `BackOff` warnings are on the container's lane.
#[test]
fn b1_crash_loop_lane_alternates_error_and_back_off() {
    let t = simulate(
        "crasher",
        json!({"containers": [{"name": "app", "image": "busybox"}]}),
        "containers:\n  app:\n    runs:\n      - exitAfter: 0s\n        exitCode: 1\n",
        120,
    );
    let drawing = svg::render(&t);
    let lines = structure(&drawing);
    let spans = lane_spans(&lines, "app");
    assert_time_ordered(&spans);
    let back_offs: Vec<_> = spans
        .iter()
        .filter(|s| s.2 == "waiting" && s.3 == "CrashLoopBackOff")
        .collect();
    assert!(back_offs.len() >= 3, "back-off waits: {spans:?}");
    assert!(back_offs[1].1 - back_offs[1].0 > back_offs[0].1 - back_offs[0].0);
    let restarts: Vec<_> = lines.iter().filter(|l| l.contains("restart #")).collect();
    assert!(restarts.len() >= 3, "{lines:#?}");
    // The repeated events are folded as kubectl folds them: one BackOff mark with its count.
    let back_off_marks: Vec<_> = lines
        .iter()
        .filter(|l| l.contains("marker event BackOff"))
        .collect();
    assert_eq!(back_off_marks.len(), 1, "{lines:#?}");
    assert!(back_off_marks[0].ends_with(" x13"), "{lines:#?}");
    assert!(
        drawing.contains("BackOff (x13 over 2m): Back-off restarting failed container app"),
        "{drawing}"
    );
    assert!(drawing.contains("<text class=\"marker-count\""));
    insta::assert_snapshot!("timeline_crash_loop", lines.join("\n"));
}

/// R8, A11: a liveness probe that fails from 10 s on: three failures (period 10 s,
/// threshold 3) are marked as probe failures, then `Killing` and the restart.
#[test]
fn r8_probe_killed_container_shows_failures_then_the_restart() {
    let t = simulate(
        "probed",
        json!({"containers": [{"name": "app", "image": "busybox", "livenessProbe": {
            "exec": {"command": ["check"]}, "periodSeconds": 10, "failureThreshold": 3}}]}),
        "containers:\n  app:\n    probes:\n      liveness:\n        - {from: 10s, result: failure}\n",
        60,
    );
    let lines = structure(&svg::render(&t));
    // The three failures are one mark with their count, as kubectl folds them.
    let failures: Vec<_> = lines
        .iter()
        .filter(|l| l.contains("marker probe-failure Unhealthy"))
        .collect();
    assert_eq!(failures.len(), 1, "{lines:#?}");
    let count: i32 = failures[0]
        .rsplit_once(" x")
        .and_then(|(_, n)| n.parse().ok())
        .expect("a count");
    assert!(count >= 3, "{lines:#?}");
    let killing = lines
        .iter()
        .position(|l| l.contains("marker event Killing"))
        .expect("a Killing marker");
    let first_failure = lines
        .iter()
        .position(|l| l == failures[0])
        .expect("the failures");
    assert!(first_failure < killing, "failures come before the kill");
    assert!(lines.iter().any(|l| l.contains("restart #1")), "{lines:#?}");
    assert_time_ordered(&lane_spans(&lines, "app"));
    insta::assert_snapshot!("timeline_probe_killed", lines.join("\n"));
}

/// Lanes in drawing order whatever the spec order: init, sidecar, regular, ephemeral (A14: the
/// debugger is added at 10 s and gets its lane after the regular containers).
#[test]
fn lanes_are_init_then_sidecar_then_regular_then_ephemeral() {
    let t = simulate(
        "lanes",
        json!({
            "initContainers": [
                {"name": "proxy", "image": "busybox", "restartPolicy": "Always"},
                {"name": "setup", "image": "busybox"},
            ],
            "containers": [{"name": "web", "image": "busybox"}, {"name": "worker", "image": "busybox"}],
        }),
        "containers:\n  setup:\n    runs:\n      - {exitAfter: 1s, exitCode: 0}\n  debugger:\n    runs:\n      - {exitAfter: 5s, exitCode: 1}\nephemeralContainers:\n- at: 10s\n  container: {name: debugger, image: busybox}\n",
        30,
    );
    let kinds: Vec<_> = t.lanes.iter().map(|l| (l.name.as_str(), l.kind)).collect();
    assert_eq!(
        kinds,
        [
            ("setup", LaneKind::Init),
            ("proxy", LaneKind::Sidecar),
            ("web", LaneKind::Regular),
            ("worker", LaneKind::Regular),
            ("debugger", LaneKind::Ephemeral),
        ]
    );
    let lines = structure(&svg::render(&t));
    assert_eq!(
        lanes(&lines),
        [
            "lane setup (init)",
            "lane proxy (sidecar)",
            "lane web (regular)",
            "lane worker (regular)",
            "lane debugger (ephemeral)",
        ]
    );
    let setup = lane_spans(&lines, "setup");
    assert_eq!(setup.last().map(|s| s.3.as_str()), Some("Completed"));
    let debugger = lane_spans(&lines, "debugger");
    assert!(
        debugger.first().is_some_and(|s| s.0 >= 10.0),
        "{debugger:?}"
    );
    assert_eq!(debugger.last().map(|s| s.3.as_str()), Some("Error"));
}

/// T1, T4, H4: a sidecar pod deleted at 30 s (grace 30): the deletion band spans 30..60 s,
/// the preStop hooks and SIGTERMs are marked, and the sidecar terminates after the app.
#[test]
fn t4_sidecar_pod_terminating_shows_the_grace_period_and_the_order() {
    let t = simulate(
        "sidecar",
        json!({
            "initContainers": [{"name": "proxy", "image": "busybox", "restartPolicy": "Always",
                "lifecycle": {"preStop": {"sleep": {"seconds": 1}}}}],
            "containers": [{"name": "app", "image": "busybox",
                "lifecycle": {"preStop": {"sleep": {"seconds": 2}}}}],
        }),
        "containers:\n  app:\n    stopAfterSignal: 3s\n  proxy:\n    stopAfterSignal: 1s\ndelete: {at: 30s}\n",
        120,
    );
    let lines = structure(&svg::render(&t));
    assert!(
        lines.contains(&"deletion at 30.000 grace 30".to_string()),
        "{lines:#?}"
    );
    let app = lane_spans(&lines, "app");
    let proxy = lane_spans(&lines, "proxy");
    let ended = |spans: &[(f64, f64, String, String)]| {
        spans
            .iter()
            .find(|s| s.2 == "terminated")
            .map(|s| s.0)
            .expect("terminated")
    };
    assert!(
        ended(&app) > 30.0 && ended(&app) <= ended(&proxy),
        "{app:?} {proxy:?}"
    );
    assert!(
        lines.iter().any(|l| l.contains("marker hook preStop")),
        "{lines:#?}"
    );
    assert!(
        lines.iter().any(|l| l.contains("marker signal SIGTERM")),
        "{lines:#?}"
    );
    insta::assert_snapshot!("timeline_sidecar_terminating", lines.join("\n"));
}

/// The API's view: recorded transitions, an aggregated event (marked where it began and
/// where it was last seen, with its count), a probe failure, and a pending deletion whose
/// band ends at `deletionTimestamp` (the API sets it to the delete's time plus the grace).
#[test]
fn from_api_history_events_and_deletion() {
    let created = Timestamp::from_second(1_767_225_600).unwrap();
    let at = |s: i64| created + SignedDuration::from_secs(s);
    let mut p: Pod = serde_json::from_value(json!({
        "metadata": {"name": "web", "namespace": "default", "uid": "u1",
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "deletionTimestamp": "2026-01-01T00:01:30Z", "deletionGracePeriodSeconds": 30},
        "spec": {"containers": [{"name": "web", "image": "busybox"}]},
        "status": {"phase": "Running", "containerStatuses": [{"name": "web", "image": "busybox",
            "imageID": "", "ready": true, "restartCount": 1, "started": true,
            "state": {"running": {"startedAt": "2026-01-01T00:00:20Z"}}}]},
    }))
    .unwrap();
    let status = |v: Value| serde_json::from_value(v).unwrap();
    let waiting = status(
        json!({"phase": "Pending", "containerStatuses": [{"name": "web",
        "image": "busybox", "imageID": "", "ready": false, "restartCount": 0,
        "state": {"waiting": {"reason": "ContainerCreating"}}}]}),
    );
    let running = status(
        json!({"phase": "Running", "containerStatuses": [{"name": "web",
        "image": "busybox", "imageID": "", "ready": false, "restartCount": 0, "started": true,
        "state": {"running": {"startedAt": "2026-01-01T00:00:02Z"}}}]}),
    );
    let history = vec![
        Transition {
            time: k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime(at(0)),
            deletion_timestamp: None,
            deletion_grace_period_seconds: None,
            status: waiting,
        },
        Transition {
            time: k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime(at(2)),
            deletion_timestamp: None,
            deletion_grace_period_seconds: None,
            status: running,
        },
        Transition::of(&p, at(20)),
    ];
    let event = |reason: &str, type_: &str, first: i64, last: i64, count: i32| -> Event {
        serde_json::from_value(json!({
            "metadata": {"name": format!("web.{reason}")},
            "involvedObject": {"kind": "Pod", "name": "web", "uid": "u1",
                "fieldPath": "spec.containers{web}"},
            "reason": reason, "type": type_, "message": format!("{reason} message"),
            "count": count,
            "firstTimestamp": at(first).to_string(), "lastTimestamp": at(last).to_string(),
        }))
        .unwrap()
    };
    let mut other = event("Started", "Normal", 3, 3, 1);
    other.involved_object.uid = Some("another-pod".into());
    let events = vec![
        event("Unhealthy", "Warning", 10, 18, 3),
        event("Started", "Normal", 2, 2, 1),
        other,
    ];
    p.metadata.uid = Some("u1".into());
    let t = Timeline::from_api(&p, &history, &events, at(70));
    let lines = structure(&svg::render(&t));
    assert_eq!(
        lines,
        [
            "lane web (regular)",
            "  span 0.000..2.000 waiting ContainerCreating",
            "  span 2.000..20.000 running ",
            "  span 20.000..90.000 ready ",
            "  restart #1 at 20.000",
            "  marker event Started at 2.000",
            "  marker probe-failure Unhealthy at 10.000 x3",
            "deletion at 60.000 grace 30",
        ]
    );
    // One mark for the aggregated event, with kubectl's `(x3 over 8s)` on hover.
    assert!(
        svg::render(&t).contains("Unhealthy (x3 over 8s): Unhealthy message"),
        "{lines:#?}"
    );
}

/// The page is self-contained: no reference to anything outside it but the SVG namespace, and
/// hover texts are escaped.
#[test]
fn html_page_has_no_external_reference_and_escapes_text() {
    let mut t = simulate(
        "web",
        json!({"containers": [{"name": "web", "image": "busybox"}]}),
        "",
        20,
    );
    if let Some(m) = t.markers.first_mut() {
        m.message = "<script>alert(1)</script> & \"quotes\"".into();
    }
    let page = html::page(&t, "<h1>web</h1>", None);
    let without_ns = page.replace("xmlns=\"http://www.w3.org/2000/svg\"", "");
    assert!(!without_ns.contains("http://") && !without_ns.contains("https://"));
    assert!(!page.contains("<script>alert"), "hover text is escaped");
    assert!(page.contains("&lt;script&gt;alert(1)&lt;/script&gt; &amp; &quot;quotes&quot;"));
    assert!(!page.contains("<script"), "a static page has no script");
    assert!(page.contains("id=\"legend\""));
    let live = html::page(&t, "", Some("/pods/default/web/stream"));
    assert!(
        live.contains("EventSource") && live.contains("data-stream=\"/pods/default/web/stream\"")
    );
}

/// The same timeline always gives the same bytes (the snapshots above depend on it).
#[test]
fn rendering_is_deterministic() {
    let make = || {
        svg::render(&simulate(
            "web",
            json!({"containers": [{"name": "web", "image": "busybox"}]}),
            "delete: {at: 10s}\n",
            30,
        ))
    };
    assert_eq!(make(), make());
}

/// A server without history: the object alone, its current state drawn from the creation to
/// `now`.
#[test]
fn from_api_without_history_draws_the_current_state_since_creation() {
    let p: Pod = serde_json::from_value(json!({
        "metadata": {"name": "web", "namespace": "default", "uid": "u1",
            "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"containers": [{"name": "web", "image": "busybox"}]},
        "status": {"phase": "Running", "containerStatuses": [{"name": "web", "image": "busybox",
            "imageID": "", "ready": true, "restartCount": 0, "started": true,
            "state": {"running": {"startedAt": "2026-01-01T00:00:01Z"}}}]},
    }))
    .unwrap();
    let now = Timestamp::from_second(1_767_225_600 + 40).unwrap();
    let lines = structure(&svg::render(&Timeline::from_api(&p, &[], &[], now)));
    assert_eq!(lines, ["lane web (regular)", "  span 0.000..40.000 ready "]);
}

/// A sidecar stopped by the kubelet at the end of a pod that succeeded (exit 143 after its
/// SIGTERM, reported as `Error`) is drawn as a neutral `stopped` span, not a red error; the
/// same exit in a pod that did not succeed stays an error.
#[test]
fn a_sidecar_stopped_at_a_succeeded_pods_end_is_drawn_stopped() {
    let spec = json!({
        "restartPolicy": "Never",
        "initContainers": [{"name": "proxy", "image": "busybox", "restartPolicy": "Always"}],
        "containers": [{"name": "app", "image": "busybox"}],
    });
    let script = |app_exit: i32| {
        format!(
            "containers:\n  app:\n    runs:\n      - {{exitAfter: 5s, exitCode: {app_exit}}}\n  \
             proxy:\n    stopAfterSignal: 1s\n    signalExitCode: 143\n"
        )
    };
    let t = simulate("job", spec.clone(), &script(0), 30);
    let drawing = svg::render(&t);
    let lines = structure(&drawing);
    let proxy = lane_spans(&lines, "proxy");
    let last = proxy.last().expect("proxy spans");
    assert_eq!(
        (last.2.as_str(), last.3.as_str()),
        ("stopped", "Error"),
        "{lines:#?}"
    );
    assert!(
        drawing.contains("stopped at the pod&#39;s end (reported as Error)"),
        "{drawing}"
    );
    assert!(!proxy.iter().any(|s| s.2 == "terminated"), "{lines:#?}");

    let t = simulate("job", spec, &script(1), 30);
    let lines = structure(&svg::render(&t));
    let proxy = lane_spans(&lines, "proxy");
    let last = proxy.last().expect("proxy spans");
    assert_eq!(last.2, "terminated", "a failed pod's sidecar: {lines:#?}");
}

/// The legend names every colour of the phase row.
#[test]
fn the_legend_shows_the_phase_colours() {
    let t = simulate(
        "legend",
        json!({"containers": [{"name": "app", "image": "busybox"}]}),
        "containers: {}\n",
        10,
    );
    let drawing = svg::render(&t);
    let legend = &drawing[drawing.find("id=\"legend\"").expect("a legend")..];
    for phase in ["Pending", "Running", "Succeeded", "Failed", "Unknown"] {
        assert!(
            legend.contains(&format!("class=\"phase phase-{phase}\"")),
            "{phase}: {legend}"
        );
    }
}
