//! Namespace deletion through the real kubectl, as the API server and the namespace
//! controller do it: `Terminating` with a deletion timestamp, creates refused, the content
//! deleted, the deletion conditions, and the namespace gone once its last finalizer is.

use crate::common;

use common::TestServer;
use serde_json::Value;
use std::time::{Duration, Instant};

fn namespace(s: &TestServer, name: &str) -> Option<Value> {
    let (code, body) = s.json("GET", &format!("/api/v1/namespaces/{name}"), None);
    (code == 200).then_some(body)
}

fn condition<'a>(ns: &'a Value, type_: &str) -> Option<&'a Value> {
    ns["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
}

fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_deleted_namespace_terminates_empties_and_goes() {
    let s = TestServer::start();
    s.kubectl_ok(&["create", "namespace", "team"]);
    s.kubectl_ok(&[
        "-n",
        "team",
        "create",
        "secret",
        "generic",
        "s",
        "--from-literal=k=v",
    ]);
    s.kubectl_ok(&[
        "-n",
        "team",
        "create",
        "configmap",
        "plain",
        "--from-literal=k=v",
    ]);
    let apply = s
        .kubectl_command(&["apply", "-f", "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            use std::io::Write as _;
            child.stdin.take().unwrap().write_all(
                b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: held, namespace: team, finalizers: [example.com/hold]}\ndata: {k: v}\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: team}\nspec:\n  terminationGracePeriodSeconds: 0\n  containers: [{name: c, image: busybox, command: [sleep, '60']}]\n",
            )?;
            child.wait_with_output()
        })
        .unwrap();
    assert!(
        apply.status.success(),
        "{}",
        String::from_utf8_lossy(&apply.stderr)
    );

    let out = s.kubectl_ok(&["delete", "namespace", "team", "--wait=false"]);
    assert_eq!(out.trim(), "namespace \"team\" deleted");
    let ns = namespace(&s, "team").expect("still there while content remains");
    assert_eq!(ns["status"]["phase"], "Terminating");
    assert!(ns["metadata"]["deletionTimestamp"].is_string(), "{ns}");
    let table = s.kubectl_ok(&["get", "namespace", "team"]);
    assert!(table.contains("Terminating"), "{table}");

    // Nothing new may be created in it (the NamespaceLifecycle admission plugin).
    let r = s.kubectl(&[
        "-n",
        "team",
        "create",
        "configmap",
        "late",
        "--from-literal=k=v",
    ]);
    assert!(!r.ok);
    assert!(
        r.stderr.contains(
            "configmaps \"late\" is forbidden: unable to create new content in namespace team because it is being terminated"
        ),
        "{}",
        r.stderr
    );

    // The controller deletes the content; the finalized ConfigMap stays, and says why.
    wait_until("the content but `held` to go", || {
        let ns = namespace(&s, "team").unwrap();
        condition(&ns, "NamespaceContentRemaining").is_some_and(|c| {
            c["message"] == "Some resources are remaining: configmaps. has 1 resource instances"
        })
    });
    let ns = namespace(&s, "team").unwrap();
    let finalizers = condition(&ns, "NamespaceFinalizersRemaining").unwrap();
    assert_eq!(finalizers["status"], "True");
    assert_eq!(finalizers["reason"], "SomeFinalizerRemain");
    assert_eq!(
        finalizers["message"],
        "Some finalizers are remaining: example.com/hold in 1 resource instances"
    );
    let content = condition(&ns, "NamespaceDeletionContentFailure").unwrap();
    assert_eq!(
        (content["status"].as_str(), content["reason"].as_str()),
        (Some("False"), Some("ContentDeleted"))
    );
    assert_eq!(s.json("GET", "/api/v1/namespaces/team/pods/p", None).0, 404);
    assert_eq!(
        s.json("GET", "/api/v1/namespaces/team/secrets/s", None).0,
        404
    );
    let held = s
        .json("GET", "/api/v1/namespaces/team/configmaps/held", None)
        .1;
    assert!(held["metadata"]["deletionTimestamp"].is_string(), "{held}");

    // Its finalizer removed, the ConfigMap goes, and then the namespace.
    s.kubectl_ok(&[
        "-n",
        "team",
        "patch",
        "configmap",
        "held",
        "--type=json",
        "-p",
        r#"[{"op":"remove","path":"/metadata/finalizers"}]"#,
    ]);
    s.kubectl_ok(&["wait", "--for=delete", "namespace/team", "--timeout=20s"]);
    assert!(namespace(&s, "team").is_none());

    // A namespace of the same name can be made again, empty but for what the root CA
    // publisher puts in every namespace.
    s.kubectl_ok(&["create", "namespace", "team"]);
    let cms = s.kubectl_ok(&["-n", "team", "get", "configmaps", "-o", "name"]);
    assert_eq!(cms.trim(), "configmap/kube-root-ca.crt");
}

/// `kubectl delete namespace` waits for the namespace to go (its default `--wait`).
#[test]
fn kubectl_delete_namespace_waits_until_it_is_gone() {
    let s = TestServer::start();
    s.kubectl_ok(&["create", "namespace", "brief"]);
    s.kubectl_ok(&[
        "-n",
        "brief",
        "create",
        "configmap",
        "c",
        "--from-literal=k=v",
    ]);
    let out = s.kubectl_ok(&["delete", "namespace", "brief", "--timeout=20s"]);
    assert_eq!(out.trim(), "namespace \"brief\" deleted");
    assert!(namespace(&s, "brief").is_none());
    let r = s.kubectl(&["delete", "namespace", "default"]);
    assert!(!r.ok);
    assert!(r.stderr.contains("forbidden"), "{}", r.stderr);
}

/// Namespaces on the registry: created `Active` with the `kubernetes` finalizer and their name
/// label (which a write cannot take away), labelled and applied like any kind, their
/// `default` ServiceAccount made with them; invalid names in the API server's words.
#[test]
fn namespaces_are_created_labelled_and_applied() {
    let s = TestServer::start();
    s.kubectl_ok(&["create", "namespace", "team-a"]);
    s.kubectl_ok(&["label", "namespace", "team-a", "tier=web"]);
    let ns = namespace(&s, "team-a").unwrap();
    assert_eq!(ns["status"]["phase"], "Active");
    assert_eq!(ns["spec"]["finalizers"], serde_json::json!(["kubernetes"]));
    assert_eq!(
        ns["metadata"]["labels"]["kubernetes.io/metadata.name"],
        "team-a"
    );
    assert_eq!(ns["metadata"]["labels"]["tier"], "web");
    s.kubectl_ok(&["get", "serviceaccount", "default", "-n", "team-a"]);

    // The name label comes back; the finalizers change only through `finalize`.
    s.kubectl_ok(&[
        "patch",
        "namespace",
        "team-a",
        "--type=merge",
        "-p",
        r#"{"metadata":{"labels":{"kubernetes.io/metadata.name":"other"}},"spec":{"finalizers":[]}}"#,
    ]);
    let ns = namespace(&s, "team-a").unwrap();
    assert_eq!(
        ns["metadata"]["labels"]["kubernetes.io/metadata.name"],
        "team-a"
    );
    assert_eq!(ns["spec"]["finalizers"], serde_json::json!(["kubernetes"]));

    let r = s.kubectl_stdin(
        &["apply", "--server-side", "-f", "-"],
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: team-b\n  annotations: {owner: ops}\n",
    );
    assert!(r.ok, "{}{}", r.stdout, r.stderr);
    let ns = namespace(&s, "team-b").unwrap();
    assert_eq!(ns["metadata"]["annotations"]["owner"], "ops");
    assert_eq!(ns["status"]["phase"], "Active");

    let r = s.kubectl(&["create", "namespace", "Team.B"]);
    assert!(!r.ok);
    assert!(
        r.stderr
            .contains("metadata.name: Invalid value: \"Team.B\": a lowercase RFC 1123 label"),
        "{}",
        r.stderr
    );
    let (code, _) = s.json("DELETE", "/api/v1/namespaces", None);
    assert_eq!(code, 405);
}
