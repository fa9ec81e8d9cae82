//! RBAC's four kinds through the real kubectl, on the generic registry: `create
//! role|clusterrole|rolebinding|clusterrolebinding`, get (the server's tables), `-o yaml`,
//! apply (client- and server-side), validation errors, the immutable `roleRef`, watch, delete
//! and deletecollection.

use crate::common;

use common::TestServer;
use serde_json::{Value, json};

fn header_and_row(out: &str, name: &str) -> (Vec<String>, Vec<String>) {
    let mut lines = out.lines();
    let header = lines
        .next()
        .unwrap_or("")
        .split("  ")
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .map(str::to_owned)
        .collect();
    let row = lines
        .find(|l| l.split_whitespace().next() == Some(name))
        .unwrap_or_else(|| panic!("no row {name} in {out}"))
        .split_whitespace()
        .map(str::to_owned)
        .collect();
    (header, row)
}

#[test]
fn roles_and_bindings_from_kubectl_create() {
    let s = TestServer::start();
    let out = s.kubectl_ok(&[
        "create",
        "role",
        "pod-reader",
        "--verb=get,list,watch",
        "--resource=pods",
    ]);
    assert_eq!(
        out.trim(),
        "role.rbac.authorization.k8s.io/pod-reader created"
    );
    s.kubectl_ok(&[
        "create",
        "clusterrole",
        "node-viewer",
        "--verb=get",
        "--resource=nodes",
    ]);
    s.kubectl_ok(&[
        "create",
        "rolebinding",
        "read-pods",
        "--role=pod-reader",
        "--user=alice",
        "--group=devs",
        "--serviceaccount=default:builder",
    ]);
    s.kubectl_ok(&[
        "create",
        "clusterrolebinding",
        "view-nodes",
        "--clusterrole=node-viewer",
        "--group=ops",
    ]);

    let role: Value =
        serde_json::from_str(&s.kubectl_ok(&["get", "role", "pod-reader", "-o", "json"])).unwrap();
    assert_eq!(role["apiVersion"], "rbac.authorization.k8s.io/v1");
    assert_eq!(
        role["rules"],
        json!([{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}])
    );
    assert!(
        role["metadata"]["uid"]
            .as_str()
            .is_some_and(|u| !u.is_empty())
    );
    let yaml = s.kubectl_ok(&["get", "clusterrolebinding", "view-nodes", "-o", "yaml"]);
    assert!(yaml.contains("kind: ClusterRoleBinding"), "{yaml}");
    assert!(
        yaml.contains("apiGroup: rbac.authorization.k8s.io"),
        "{yaml}"
    );

    // The tables: roles with the default convertor, bindings with their printer.
    let out = s.kubectl_ok(&["get", "clusterroles"]);
    let (header, row) = header_and_row(&out, "node-viewer");
    assert_eq!(header, ["NAME", "CREATED AT"], "{out}");
    assert!(row[1].ends_with('Z') && row[1].contains('T'), "{out}");
    let out = s.kubectl_ok(&["get", "rolebindings", "-o", "wide"]);
    let (header, row) = header_and_row(&out, "read-pods");
    assert_eq!(
        header,
        ["NAME", "ROLE", "AGE", "USERS", "GROUPS", "SERVICEACCOUNTS"],
        "{out}"
    );
    assert_eq!(row[1], "Role/pod-reader", "{out}");
    assert_eq!(&row[3..], ["alice", "devs", "default/builder"], "{out}");
    let out = s.kubectl_ok(&["get", "clusterrolebinding", "view-nodes"]);
    let (_, row) = header_and_row(&out, "view-nodes");
    assert_eq!(row[1], "ClusterRole/node-viewer", "{out}");

    // Discovery knows the group, so short kinds and `api-resources` work.
    let out = s.kubectl_ok(&["api-resources", "--api-group=rbac.authorization.k8s.io"]);
    for kind in ["Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding"] {
        assert!(out.contains(kind), "{out}");
    }

    let out = s.kubectl_ok(&["delete", "rolebinding", "read-pods"]);
    assert!(
        out.contains("rolebinding.rbac.authorization.k8s.io \"read-pods\" deleted"),
        "{out}"
    );
    let r = s.kubectl(&["get", "rolebinding", "read-pods"]);
    assert_eq!(
        r.stderr.trim(),
        "Error from server (NotFound): rolebindings.rbac.authorization.k8s.io \"read-pods\" not found"
    );
    let out = s.kubectl_ok(&["delete", "clusterroles", "--all"]);
    assert!(out.contains("\"node-viewer\" deleted"), "{out}");
    assert_eq!(
        s.kubectl_ok(&["get", "clusterroles", "-o", "name"]).trim(),
        ""
    );
}

const ROLE: &str = "apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: cm-editor
  labels: {team: a}
rules:
- apiGroups: [\"\"]
  resources: [configmaps]
  verbs: [get, update]
";

#[test]
fn apply_validation_and_the_fixed_role_ref() {
    let s = TestServer::start();
    let r = s.kubectl_stdin(&["apply", "-f", "-"], ROLE);
    assert!(r.ok, "{}{}", r.stdout, r.stderr);
    let more = ROLE.replace("[get, update]", "[get, update, patch]");
    let r = s.kubectl_stdin(&["apply", "--server-side", "-f", "-"], &more);
    assert!(r.ok, "{}{}", r.stdout, r.stderr);
    let verbs = s.kubectl_ok(&[
        "get",
        "role",
        "cm-editor",
        "-o",
        "jsonpath={.rules[0].verbs}",
    ]);
    assert_eq!(verbs, r#"["get","update","patch"]"#);
    let out = s.kubectl_ok(&["get", "roles", "-l", "team=a", "-o", "name"]);
    assert_eq!(out.trim(), "role.rbac.authorization.k8s.io/cm-editor");

    // Upstream's validation, with its words.
    let bad = ROLE.replace("  verbs: [get, update]\n", "  verbs: []\n");
    let r = s.kubectl_stdin(&["apply", "-f", "-"], &bad.replace("cm-editor", "no-verbs"));
    assert!(!r.ok);
    assert!(
        r.stderr
            .contains("rules[0].verbs: Required value: verbs must contain at least one value"),
        "{}",
        r.stderr
    );
    let r = s.kubectl(&[
        "create",
        "clusterrolebinding",
        "x",
        "--clusterrole=view",
        "--serviceaccount=nons",
    ]);
    assert!(!r.ok);

    s.kubectl_ok(&[
        "create",
        "rolebinding",
        "b",
        "--clusterrole=view",
        "--user=alice",
    ]);
    let r = s.kubectl(&[
        "patch",
        "rolebinding",
        "b",
        "--type=merge",
        "-p",
        r#"{"roleRef":{"name":"edit"}}"#,
    ]);
    assert!(!r.ok);
    assert!(
        r.stderr.contains(
            r#"roleRef: Invalid value: rbac.RoleRef{APIGroup:"rbac.authorization.k8s.io", Kind:"ClusterRole", Name:"edit"}: cannot change roleRef"#
        ),
        "{}",
        r.stderr
    );
    // The subjects may change.
    s.kubectl_ok(&[
        "patch",
        "rolebinding",
        "b",
        "--type=merge",
        "-p",
        r#"{"subjects":[{"kind":"User","name":"bob","apiGroup":"rbac.authorization.k8s.io"}]}"#,
    ]);
    let subjects = s.kubectl_ok(&[
        "get",
        "rolebinding",
        "b",
        "-o",
        "jsonpath={.subjects[*].name}",
    ]);
    assert_eq!(subjects, "bob");
}

#[test]
fn rbac_objects_are_watched_and_deleted_as_a_collection() {
    let s = TestServer::start();
    s.kubectl_ok(&[
        "create",
        "clusterrole",
        "a",
        "--verb=get",
        "--resource=pods",
    ]);
    let (code, list) = s.json(
        "GET",
        "/apis/rbac.authorization.k8s.io/v1/clusterroles",
        None,
    );
    assert_eq!(code, 200, "{list}");
    assert_eq!(list["kind"], "ClusterRoleList");
    assert_eq!(list["apiVersion"], "rbac.authorization.k8s.io/v1");
    let rv = list["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_owned();
    s.kubectl_ok(&[
        "create",
        "clusterrole",
        "b",
        "--verb=list",
        "--resource=pods",
    ]);
    let (code, _, body) = s.request(
        "GET",
        &format!(
            "/apis/rbac.authorization.k8s.io/v1/clusterroles?watch=true&resourceVersion={rv}&timeoutSeconds=1"
        ),
        &[],
        None,
    );
    assert_eq!(code, 200);
    let first: Value = serde_json::from_str(body.lines().next().unwrap()).unwrap();
    assert_eq!(first["type"], "ADDED");
    assert_eq!(first["object"]["metadata"]["name"], "b");

    // A cluster-scoped kind has no namespaced collection; a namespaced one has no
    // cluster-scoped objects.
    let (code, _) = s.json(
        "GET",
        "/apis/rbac.authorization.k8s.io/v1/namespaces/default/clusterroles",
        None,
    );
    assert_eq!(code, 404);
    // The bootstrap policy's roles (labelled `kubernetes.io/bootstrapping`) are kept.
    let (code, body) = s.json(
        "DELETE",
        "/apis/rbac.authorization.k8s.io/v1/clusterroles?labelSelector=kubernetes.io%2Fbootstrapping%21%3Drbac-defaults",
        None,
    );
    assert_eq!(code, 200, "{body}");
    assert_eq!(body["items"].as_array().map(Vec::len), Some(2));
    let (_, list) = s.json(
        "GET",
        "/apis/rbac.authorization.k8s.io/v1/clusterroles",
        None,
    );
    let left = list["items"].as_array().unwrap();
    assert!(!left.is_empty());
    assert!(
        left.iter()
            .all(|r| r["metadata"]["labels"]["kubernetes.io/bootstrapping"] == "rbac-defaults"),
        "{list}"
    );
}
