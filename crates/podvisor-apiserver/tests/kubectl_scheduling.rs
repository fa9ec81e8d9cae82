//! Scheduling gates (M11, K1) and the binding through the real kubectl: a gated pod stays
//! unbound with `PodScheduled=False` `SchedulingGated` and STATUS `SchedulingGated`; gates
//! can only be removed, node selectors only extended while gated; removing the last gate
//! binds the pod (`spec.nodeName`, `PodScheduled=True`, the scheduler's `Scheduled` event).
//! D10: the observed generations the status carries survive status writes that omit them.

use serde_json::{Value, json};

use crate::common::{NODE, TestServer, pod_yaml};

fn gated_yaml(name: &str) -> String {
    format!(
        "{}  schedulingGates:\n  - name: example.com/quota\n  - name: example.com/review\n",
        pod_yaml(name)
    )
}

fn get(s: &TestServer, name: &str) -> Value {
    serde_json::from_str(&s.kubectl_ok(&["get", "pod", name, "-o", "json"])).unwrap()
}

fn pod_scheduled(pod: &Value) -> Value {
    pod["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "PodScheduled")
        .cloned()
        .unwrap_or(Value::Null)
}

fn row(out: &str, name: &str) -> Vec<String> {
    out.lines()
        .find(|l| l.split_whitespace().next() == Some(name))
        .unwrap_or_else(|| panic!("no row {name} in {out}"))
        .split_whitespace()
        .map(str::to_owned)
        .collect()
}

#[test]
fn m11_a_gated_pod_waits_unbound_until_its_last_gate_goes() {
    let s = TestServer::start();
    s.create(&gated_yaml("held"));
    let pod = get(&s, "held");
    assert_eq!(pod["spec"]["nodeName"], Value::Null, "{pod}");
    assert_eq!(pod["status"]["phase"], "Pending");
    let c = pod_scheduled(&pod);
    assert_eq!(
        (&c["status"], &c["reason"], &c["message"]),
        (
            &json!("False"),
            &json!("SchedulingGated"),
            &json!("Scheduling is blocked due to non-empty scheduling gates")
        ),
        "{c}"
    );
    // K1: kubectl shows SchedulingGated, and no node.
    let wide = s.kubectl_ok(&["get", "pods", "-o", "wide"]);
    let r = row(&wide, "held");
    assert_eq!(&r[1..3], ["0/1", "SchedulingGated"], "{wide}");
    assert_eq!(r[6], "<none>", "{wide}");

    // Gates can only be removed.
    let added = s.kubectl(&[
        "patch",
        "pod",
        "held",
        "--type=json",
        "-p",
        r#"[{"op":"add","path":"/spec/schedulingGates/-","value":{"name":"example.com/new"}}]"#,
    ]);
    assert!(!added.ok);
    assert!(
        added.stderr.contains(
            "spec.schedulingGates[2].name: Forbidden: only deletion is allowed, but found new scheduling gate 'example.com/new'"
        ),
        "{}",
        added.stderr
    );
    // While gated, node selectors may be added.
    s.kubectl_ok(&[
        "patch",
        "pod",
        "held",
        "-p",
        r#"{"spec":{"nodeSelector":{"disk":"ssd"}}}"#,
    ]);
    // One gate of two removed: still gated, still unbound.
    s.kubectl_ok(&[
        "patch",
        "pod",
        "held",
        "--type=json",
        "-p",
        r#"[{"op":"remove","path":"/spec/schedulingGates/0"}]"#,
    ]);
    let pod = get(&s, "held");
    assert_eq!(pod["spec"]["nodeName"], Value::Null);
    assert_eq!(pod["metadata"]["generation"], 3);
    assert_eq!(pod_scheduled(&pod)["reason"], "SchedulingGated");
    let events = s.kubectl_ok(&[
        "get",
        "events",
        "--field-selector",
        "reason=Scheduled",
        "-o",
        "name",
    ]);
    assert_eq!(events.trim(), "", "no Scheduled event while gated");

    // The last gate goes: bound to this node by the scheduler, once the node has the
    // label the pod's selector asks for (without it the pod would not fit).
    s.kubectl_ok(&["label", "node", NODE, "disk=ssd"]);
    s.kubectl_ok(&[
        "patch",
        "pod",
        "held",
        "--type=json",
        "-p",
        r#"[{"op":"remove","path":"/spec/schedulingGates"}]"#,
    ]);
    let pod = get(&s, "held");
    assert_eq!(pod["spec"]["nodeName"], NODE, "{pod}");
    let c = pod_scheduled(&pod);
    assert_eq!(c["status"], "True", "{c}");
    assert_eq!(c["reason"], Value::Null, "{c}");
    let events: Value = serde_json::from_str(&s.kubectl_ok(&[
        "get",
        "events",
        "--field-selector",
        "reason=Scheduled",
        "-o",
        "json",
    ]))
    .unwrap();
    let items = events["items"].as_array().unwrap();
    assert_eq!(items.len(), 1, "{events}");
    assert_eq!(
        items[0]["message"],
        format!("Successfully assigned default/held to {NODE}")
    );
    assert_eq!(items[0]["source"]["component"], "default-scheduler");
    assert_eq!(items[0]["involvedObject"]["name"], "held");
    let wide = s.kubectl_ok(&["get", "pods", "-o", "wide"]);
    let r = row(&wide, "held");
    assert_eq!((r[2].as_str(), r[6].as_str()), ("Pending", NODE), "{wide}");
}

/// `ValidatePodCreate`: a pod may not be created bound and gated.
#[test]
fn m11_a_pod_cannot_be_created_bound_and_gated() {
    let s = TestServer::start();
    let yaml = format!("{}  nodeName: {NODE}\n", gated_yaml("both"));
    let out = s.kubectl_stdin(&["create", "-f", "-"], &yaml);
    assert!(!out.ok);
    assert!(
        out.stderr.contains(
            "spec.nodeName: Forbidden: cannot be set until all schedulingGates have been cleared"
        ),
        "{}",
        out.stderr
    );
}

/// The `pods/binding` subresource as a scheduler uses it: refused for a gated pod (409), and
/// for a pod bound already; a created pod without gates is bound by the node's scheduler.
#[test]
fn pods_binding_subresource_binds_as_the_api_server_does() {
    let s = TestServer::start();
    s.create(&gated_yaml("g"));
    let binding = |name: &str| {
        json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name},
               "target": {"kind": "Node", "name": NODE}})
    };
    let (code, body) = s.json(
        "POST",
        "/api/v1/namespaces/default/pods/g/binding",
        Some(&binding("g")),
    );
    assert_eq!(code, 409, "{body}");
    assert_eq!(
        body["message"],
        "Operation cannot be fulfilled on pods/binding \"g\": pod g has non-empty .spec.schedulingGates"
    );
    s.create(&pod_yaml("free"));
    assert_eq!(get(&s, "free")["spec"]["nodeName"], NODE);
    let (code, body) = s.json(
        "POST",
        "/api/v1/namespaces/default/pods/free/binding",
        Some(&binding("free")),
    );
    assert_eq!(code, 409, "{body}");
    assert_eq!(
        body["message"],
        format!(
            "Operation cannot be fulfilled on pods/binding \"free\": pod free is already assigned to node \"{NODE}\""
        )
    );
    // Another scheduler's pod waits for it; a binding (as that scheduler posts it) binds it.
    s.create(&format!("{}  schedulerName: mine\n", pod_yaml("other")));
    assert_eq!(get(&s, "other")["spec"]["nodeName"], Value::Null);
    let (code, body) = s.json(
        "POST",
        "/api/v1/namespaces/default/pods/other/binding",
        Some(&binding("other")),
    );
    assert_eq!((code, &body["status"]), (201, &json!("Success")), "{body}");
    let pod = get(&s, "other");
    assert_eq!(pod["spec"]["nodeName"], NODE);
    assert_eq!(pod_scheduled(&pod)["status"], "True");
}

/// D10 (`preserveOldObservedGeneration`): a status write without `observedGeneration` keeps
/// the one the status had.
#[test]
fn d10_status_writes_keep_observed_generation() {
    let s = TestServer::start();
    s.create(&pod_yaml("web"));
    s.patch_status(
        "web",
        &json!({"observedGeneration": 1, "conditions": [
            {"type": "Ready", "status": "False", "observedGeneration": 1}
        ]}),
    );
    s.patch_status(
        "web",
        &json!({"observedGeneration": null, "conditions": [{"type": "Ready", "status": "True"}]}),
    );
    let pod = get(&s, "web");
    assert_eq!(pod["status"]["observedGeneration"], 1, "{pod}");
    let ready = pod["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "Ready")
        .unwrap();
    assert_eq!(ready["observedGeneration"], 1, "{pod}");
}
