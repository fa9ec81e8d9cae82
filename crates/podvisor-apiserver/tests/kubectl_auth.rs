//! `kubectl auth whoami` and `kubectl auth can-i` through the real kubectl: the review APIs
//! (`authentication.k8s.io/v1` SelfSubjectReview, `authorization.k8s.io/v1`
//! SelfSubjectAccessReview and SelfSubjectRulesReview), and `/version/`.

use crate::common;

use common::TestServer;
use serde_json::json;

#[test]
fn kubectl_auth_whoami_names_the_tokens_user() {
    let s = TestServer::start();
    let out = s.kubectl_ok(&["auth", "whoami"]);
    assert!(out.contains("podvisor-admin"), "{out}");
    assert!(out.contains("system:masters"), "{out}");
    let out = s.kubectl_ok(&["auth", "whoami", "-o", "json"]);
    let review: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(review["kind"], "SelfSubjectReview");
    assert_eq!(review["status"]["userInfo"]["username"], "podvisor-admin");
}

#[test]
fn kubectl_auth_can_i_is_yes_for_everything() {
    let s = TestServer::start();
    assert_eq!(
        s.kubectl_ok(&["auth", "can-i", "create", "pods"]).trim(),
        "yes"
    );
    assert_eq!(
        s.kubectl_ok(&["auth", "can-i", "delete", "secrets", "-n", "kube-system"])
            .trim(),
        "yes"
    );
    assert_eq!(
        s.kubectl_ok(&["auth", "can-i", "get", "/healthz"]).trim(),
        "yes"
    );
    let list = s.kubectl_ok(&["auth", "can-i", "--list"]);
    assert!(list.lines().any(|l| l.starts_with("*.*")), "{list}");

    // The API server's validation: exactly one kind of attributes.
    let (code, err) = s.json(
        "POST",
        "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
        Some(&json!({"spec": {}})),
    );
    assert_eq!(code, 422, "{err}");
    assert!(
        err["message"].as_str().unwrap().contains(
            "spec.resourceAttributes: Invalid value: \"null\": exactly one of nonResourceAttributes or resourceAttributes must be specified"
        ),
        "{err}"
    );
    // The Python client's VersionApi asks for `/version/`.
    let (code, version) = s.json("GET", "/version/", None);
    assert_eq!(code, 200);
    assert_eq!(version["major"], "1");
}

/// `kubectl port-forward` against an API server that runs no pods (no node agent here) gets
/// a message that says why; `serve`'s forwarding is tested end to end in
/// `crates/podvisor/tests/port_forward.rs`.
#[test]
fn kubectl_port_forward_without_a_node_is_refused_with_a_reason() {
    let s = TestServer::start();
    s.create(&common::pod_yaml("pf"));
    // No node agent here: the pod is made Running by hand, as kubectl checks the phase first.
    s.kubectl_ok(&[
        "patch",
        "pod",
        "pf",
        "--subresource=status",
        "--type=merge",
        "-p",
        r#"{"status":{"phase":"Running"}}"#,
    ]);
    let r = s.kubectl(&["port-forward", "pod/pf", "0:80"]);
    assert!(!r.ok);
    assert!(
        r.stderr
            .contains("unable to upgrade connection: this API server runs no pods"),
        "{}",
        r.stderr
    );
}
