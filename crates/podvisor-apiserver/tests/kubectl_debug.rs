//! `kubectl debug` against a real server (no node agent: what runs is the e2e tests'): the
//! `pods/ephemeralcontainers` subresource as kubectl patches it (a strategic merge patch of
//! `spec.ephemeralContainers`), the API server's validation of it
//! (`ValidatePodEphemeralContainersUpdate`, M11, V12), and `--copy-to` (a protobuf create).

use crate::common;

use common::{NODE, TestServer, pod_yaml};
use serde_json::{Value, json};

const SUB: &str = "/api/v1/namespaces/default/pods/web/ephemeralcontainers";

fn pod_json(s: &TestServer, name: &str) -> Value {
    serde_json::from_str(&s.kubectl_ok(&["get", "pod", name, "-o", "json"])).unwrap()
}

/// A PATCH with an explicit content type; returns status and parsed body.
fn patch(s: &TestServer, path: &str, content_type: &str, body: &Value) -> (u16, Value) {
    let (code, _, text) = s.request(
        "PATCH",
        path,
        &[("content-type", content_type)],
        Some(&body.to_string()),
    );
    (code, serde_json::from_str(&text).unwrap())
}

/// The pod `web` with the ephemeral container `debugger` (targeting `app`) added by kubectl.
fn debugged() -> TestServer {
    let s = TestServer::start();
    s.create(&pod_yaml("web"));
    let out = s.kubectl_ok(&[
        "debug",
        "web",
        "--image=busybox",
        "--target=app",
        "-c",
        "debugger",
        "--",
        "sh",
        "-c",
        "echo hi",
    ]);
    assert!(out.contains("Targeting container \"app\""), "{out}");
    s
}

/// M11/V12: kubectl's strategic merge patch adds the container, defaulted as on create; the
/// spec change bumps `metadata.generation`; the write is recorded under the subresource; GET
/// on the subresource answers the pod; discovery lists it.
#[test]
fn kubectl_debug_adds_an_ephemeral_container() {
    let s = debugged();
    let pod = pod_json(&s, "web");
    assert_eq!(
        pod["spec"]["ephemeralContainers"],
        json!([{
            "name": "debugger",
            "image": "busybox",
            "command": ["sh", "-c", "echo hi"],
            "imagePullPolicy": "Always",
            "resources": {},
            "targetContainerName": "app",
            "terminationMessagePath": "/dev/termination-log",
            "terminationMessagePolicy": "File",
        }])
    );
    assert_eq!(pod["metadata"]["generation"], 2);
    let (code, got) = s.json("GET", SUB, None);
    assert_eq!(code, 200);
    assert_eq!(got["kind"], "Pod");
    assert_eq!(got["spec"]["ephemeralContainers"][0]["name"], "debugger");
    let entry = got["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["subresource"] == "ephemeralcontainers")
        .expect("a managedFields entry of the subresource");
    // No fieldManager: the user agent's first part names the manager.
    assert_eq!(entry["manager"], "kubectl");
    assert!(
        entry["fieldsV1"]["f:spec"]["f:ephemeralContainers"]["k:{\"name\":\"debugger\"}"]
            .is_object(),
        "{entry}"
    );
    let resources = s.kubectl_ok(&["api-resources", "--no-headers"]);
    assert!(!resources.contains("ephemeralcontainers"), "{resources}");
}

/// `ValidatePodEphemeralContainersUpdate`: existing ephemeral containers may be neither removed
/// (PUT without them) nor changed (a JSON patch of the image); V12: an added one may not have
/// ports, probes, lifecycle or resources, needs a name no other container has, and its
/// `targetContainerName` must name a container. Nothing is written by a refused request.
#[test]
fn ephemeral_containers_may_only_be_added() {
    let s = debugged();
    let mut pod = pod_json(&s, "web");
    pod["spec"]["ephemeralContainers"] = json!([]);
    let (code, st) = s.json("PUT", SUB, Some(&pod));
    assert_eq!(code, 422, "{st}");
    assert_eq!(
        st["message"],
        "Pod \"web\" is invalid: spec.ephemeralContainers: Forbidden: existing ephemeral containers \"debugger\" may not be removed\n"
    );
    let (code, st) = patch(
        &s,
        SUB,
        "application/json-patch+json",
        &json!([{"op": "replace", "path": "/spec/ephemeralContainers/0/image", "value": "alpine"}]),
    );
    assert_eq!(code, 422, "{st}");
    let message = st["message"].as_str().unwrap();
    assert!(
        message.starts_with("Pod \"web\" is invalid: spec.ephemeralContainers: Forbidden: existing ephemeral containers \"debugger\" may not be changed\n"),
        "{message}"
    );
    assert!(message.contains("alpine"), "{message}");

    let add = |e: Value| {
        patch(
            &s,
            SUB,
            "application/strategic-merge-patch+json",
            &json!({"spec": {"ephemeralContainers": [e]}}),
        )
    };
    let (code, st) = add(json!({
        "name": "bad", "image": "busybox", "targetContainerName": "nope",
        "ports": [{"containerPort": 80}],
        "resources": {"limits": {"cpu": "1"}},
        "readinessProbe": {"exec": {"command": ["true"]}},
        "lifecycle": {"preStop": {"exec": {"command": ["true"]}}},
    }));
    assert_eq!(code, 422, "{st}");
    let fields: Vec<String> = st["details"]["causes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            format!(
                "{} {}",
                c["field"].as_str().unwrap(),
                c["message"].as_str().unwrap()
            )
        })
        .collect();
    let forbidden = "Forbidden: cannot be set for an Ephemeral Container";
    for expected in [
        "spec.ephemeralContainers[1].targetContainerName Not found: \"nope\"".to_owned(),
        format!("spec.ephemeralContainers[1].ports {forbidden}"),
        format!("spec.ephemeralContainers[1].resources {forbidden}"),
        format!("spec.ephemeralContainers[1].readinessProbe {forbidden}"),
        format!("spec.ephemeralContainers[1].lifecycle {forbidden}"),
    ] {
        assert!(fields.contains(&expected), "{expected} not in {fields:?}");
    }
    let (code, st) = add(json!({"name": "app", "image": "busybox"}));
    assert_eq!(code, 422, "{st}");
    assert_eq!(
        st["message"],
        "Pod \"web\" is invalid: spec.ephemeralContainers[1].name: Duplicate value: \"app\""
    );
    let (code, st) = add(json!({"name": "debugger", "image": "alpine"}));
    assert_eq!(code, 422, "{st}");
    let pod = pod_json(&s, "web");
    assert_eq!(
        pod["spec"]["ephemeralContainers"].as_array().map(Vec::len),
        Some(1)
    );
    assert_eq!(pod["metadata"]["generation"], 2);

    // Through kubectl: the API server's words.
    let out = s.kubectl(&["debug", "web", "--image=busybox", "-c", "app", "--", "true"]);
    assert!(!out.ok);
    assert!(
        out.stderr.contains(
            "The Pod \"web\" is invalid: spec.ephemeralContainers[1].name: Duplicate value: \"app\""
        ),
        "{}",
        out.stderr
    );
}

/// `dropNonEphemeralContainerUpdates`: the subresource takes nothing but
/// `spec.ephemeralContainers` (a label or an image in the same request is ignored); the pod's
/// own update may not change them (M11's forbidden-field message).
#[test]
fn ephemeral_containers_change_only_through_their_subresource() {
    let s = debugged();
    let (code, pod) = patch(
        &s,
        SUB,
        "application/merge-patch+json",
        &json!({
            "metadata": {"labels": {"x": "y"}},
            "spec": {"containers": [{"name": "app", "image": "alpine"}],
                     "ephemeralContainers": [
                        {"name": "debugger", "image": "busybox", "command": ["sh", "-c", "echo hi"],
                         "targetContainerName": "app", "resources": {}},
                        {"name": "second", "image": "busybox"}]},
        }),
    );
    assert_eq!(code, 200, "{pod}");
    assert_eq!(pod["metadata"]["labels"], json!({"app": "web"}));
    assert_eq!(pod["spec"]["containers"][0]["image"], "busybox");
    assert_eq!(pod["spec"]["ephemeralContainers"][1]["name"], "second");
    assert_eq!(pod["metadata"]["generation"], 3);

    let (code, st) = patch(
        &s,
        "/api/v1/namespaces/default/pods/web",
        "application/json-patch+json",
        &json!([{"op": "remove", "path": "/spec/ephemeralContainers/1"}]),
    );
    assert_eq!(code, 422, "{st}");
    assert!(
        st["message"]
            .as_str()
            .unwrap()
            .contains("spec: Forbidden: pod updates may not change fields other than"),
        "{st}"
    );
    let (code, st) = s.json(
        "PUT",
        "/api/v1/namespaces/default/pods/web/ephemeralcontainers/x",
        None,
    );
    assert_eq!(code, 404, "{st}");
}

/// The mirror of a static pod takes no ephemeral container (kubernetes#113935).
#[test]
fn static_pods_take_no_ephemeral_containers() {
    let s = TestServer::start();
    s.create(&format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\n  annotations:\n    kubernetes.io/config.mirror: abc\nspec:\n  nodeName: {NODE}\n  containers:\n  - name: app\n    image: busybox\n"
    ));
    let (code, st) = patch(
        &s,
        SUB,
        "application/strategic-merge-patch+json",
        &json!({"spec": {"ephemeralContainers": [{"name": "d", "image": "busybox"}]}}),
    );
    assert_eq!(code, 422, "{st}");
    assert_eq!(
        st["message"],
        "Pod \"web\" is invalid: []: Forbidden: static pods do not support ephemeral containers"
    );
}

/// `kubectl debug --copy-to` creates the copy with a protobuf body (kubectl's typed client
/// does not fall back to JSON on a 415 but after CBOR): decoded through the Pod's wire schema,
/// admitted as any create. The copy has the original's container and the debugger, with the
/// original's probe (an int-or-string port, an inlined handler), resources (quantities) and
/// security context (a pointer field's zero kept).
#[test]
fn kubectl_debug_copy_to_creates_the_copy() {
    let s = TestServer::start();
    s.create(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\n  labels: {app: web}\nspec:\n  containers:\n  - name: app\n    image: busybox\n    command: [sleep, '3600']\n    resources: {limits: {cpu: 500m, memory: 64Mi}}\n    readinessProbe:\n      httpGet: {path: /ready, port: 8080}\n      periodSeconds: 3\n    securityContext: {runAsUser: 0, allowPrivilegeEscalation: false}\n",
    );
    let out = s.kubectl(&[
        "debug",
        "web",
        "--image=busybox",
        "--copy-to=web-copy",
        "-c",
        "dbg",
        "--",
        "sh",
        "-c",
        "echo hi",
    ]);
    assert!(out.ok, "{}{}", out.stdout, out.stderr);
    let copy = pod_json(&s, "web-copy");
    let original = pod_json(&s, "web");
    assert_eq!(
        copy["spec"]["containers"][0],
        original["spec"]["containers"][0]
    );
    assert_eq!(copy["spec"]["containers"][1]["name"], "dbg");
    assert_eq!(
        copy["spec"]["containers"][1]["command"],
        json!(["sh", "-c", "echo hi"])
    );
    assert_eq!(copy["spec"]["containers"].as_array().map(Vec::len), Some(2));
    assert_eq!(copy["status"]["phase"], "Pending");
}

/// PodSecurity evaluates `pods/ephemeralcontainers` writes (upstream ignores `pods/status`,
/// not this subresource): a privileged debug container is refused in a namespace enforcing
/// baseline, with the API server's text; status writes are not evaluated.
#[test]
fn pod_security_refuses_a_privileged_debug_container() {
    let s = TestServer::start();
    s.create(&pod_yaml("web"));
    s.kubectl_ok(&[
        "label",
        "namespace",
        "default",
        "pod-security.kubernetes.io/enforce=baseline",
    ]);
    let r = s.kubectl(&[
        "debug",
        "web",
        "--image=busybox",
        "--profile=sysadmin",
        "-c",
        "dbg",
        "--",
        "sh",
    ]);
    assert!(!r.ok);
    assert!(
        r.stderr.contains(r#"pods "web" is forbidden: violates PodSecurity "baseline:latest": privileged (container "dbg" must not set securityContext.privileged=true)"#),
        "{}",
        r.stderr
    );
    assert_eq!(
        pod_json(&s, "web")["spec"]["ephemeralContainers"],
        Value::Null
    );
    // An unprivileged one is admitted.
    s.kubectl_ok(&[
        "debug",
        "web",
        "--image=busybox",
        "--profile=baseline",
        "-c",
        "dbg2",
        "--",
        "sh",
    ]);
    // The node's status writes are not evaluated, even under a level the pod violates.
    s.kubectl_ok(&[
        "label",
        "--overwrite",
        "namespace",
        "default",
        "pod-security.kubernetes.io/enforce=restricted",
    ]);
    s.patch_status("web", &json!({"phase": "Running"}));
}
