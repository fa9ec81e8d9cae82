//! `kubectl patch --subresource resize` (kubectl 1.32+; run with 1.32 and 1.34) against the
//! real server: the `pods/resize` subresource takes only container resources, bumps the
//! generation, and refuses what `ValidatePodResize` (1.35) refuses with its words; the main
//! pod update still refuses a resource change.

use crate::common;

use common::TestServer;
use serde_json::Value;

fn resizable(name: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  initContainers:\n  - name: setup\n    image: busybox\n    command: ['true']\n  - name: proxy\n    image: busybox\n    restartPolicy: Always\n    command: [sleep, '3600']\n    resources:\n      requests: {{cpu: 50m}}\n  containers:\n  - name: app\n    image: busybox\n    command: [sleep, '3600']\n    resources:\n      requests: {{cpu: 100m, memory: 64Mi}}\n      limits: {{cpu: 200m, memory: 128Mi}}\n"
    )
}

fn patch(s: &TestServer, pod: &str, patch: &str) -> common::Run {
    s.kubectl(&[
        "patch",
        "pod",
        pod,
        "--subresource",
        "resize",
        "--patch",
        patch,
    ])
}

#[test]
fn kubectl_patch_subresource_resize_changes_resources_and_generation() {
    let s = TestServer::start();
    s.create(&resizable("web"));
    let r = patch(
        &s,
        "web",
        r#"{"spec":{"containers":[{"name":"app","resources":{"requests":{"cpu":"150m"},"limits":{"cpu":"300m","memory":"96Mi"}}}]}}"#,
    );
    assert!(r.ok, "{}", r.stderr);
    assert_eq!(r.stdout.trim(), "pod/web patched");
    let pod: Value =
        serde_json::from_str(&s.kubectl_ok(&["get", "pod", "web", "-o", "json"])).unwrap();
    let res = &pod["spec"]["containers"][0]["resources"];
    assert_eq!(res["requests"]["cpu"], "150m");
    assert_eq!(res["requests"]["memory"], "64Mi");
    assert_eq!(res["limits"]["cpu"], "300m");
    // 1.35: a memory limit may go down with the default NotRequired policy.
    assert_eq!(res["limits"]["memory"], "96Mi");
    assert_eq!(pod["metadata"]["generation"], 2);
    // A sidecar resizes too.
    let r = patch(
        &s,
        "web",
        r#"{"spec":{"initContainers":[{"name":"proxy","resources":{"requests":{"cpu":"80m"}}}]}}"#,
    );
    assert!(r.ok, "{}", r.stderr);
    // The subresource reads as the pod.
    let got: Value = serde_json::from_str(&s.kubectl_ok(&[
        "get",
        "pod",
        "web",
        "--subresource",
        "resize",
        "-o",
        "json",
    ]))
    .unwrap();
    assert_eq!(
        got["spec"]["initContainers"][1]["resources"]["requests"]["cpu"],
        "80m"
    );
    assert_eq!(got["metadata"]["generation"], 3);
    // Other fields of the request are dropped, as the resize strategy drops them.
    let r = patch(
        &s,
        "web",
        r#"{"metadata":{"labels":{"x":"y"}},"spec":{"activeDeadlineSeconds":5}}"#,
    );
    assert!(r.ok, "{}", r.stderr);
    let pod: Value =
        serde_json::from_str(&s.kubectl_ok(&["get", "pod", "web", "-o", "json"])).unwrap();
    assert_eq!(pod["metadata"].get("labels"), None);
    assert_eq!(pod["spec"].get("activeDeadlineSeconds"), None);
    assert_eq!(pod["metadata"]["generation"], 3);
}

#[test]
fn kubectl_patch_subresource_resize_refusals() {
    let s = TestServer::start();
    s.create(&resizable("web"));
    let refused = |p: &str, want: &str| {
        let r = patch(&s, "web", p);
        assert!(!r.ok, "{p} was accepted");
        assert_eq!(r.stderr.trim(), want, "{p}");
    };
    // Requests equal to limits would make a Burstable pod Guaranteed.
    s.create(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: qos\nspec:\n  containers:\n  - name: app\n    image: busybox\n    resources:\n      requests: {cpu: 100m, memory: 64Mi}\n      limits: {cpu: 200m, memory: 64Mi}\n",
    );
    let r = patch(
        &s,
        "qos",
        r#"{"spec":{"containers":[{"name":"app","resources":{"requests":{"cpu":"200m"}}}]}}"#,
    );
    assert!(!r.ok);
    assert_eq!(
        r.stderr.trim(),
        "The Pod \"qos\" is invalid: spec: Invalid value: \"Burstable\": Pod QOS Class may not change as a result of resizing"
    );
    refused(
        r#"{"spec":{"containers":[{"name":"app","resources":{"limits":{"memory":null}}}]}}"#,
        "The Pod \"web\" is invalid: spec.containers[0].resources.limits: Forbidden: resource limits cannot be removed",
    );
    refused(
        r#"{"spec":{"containers":[{"name":"app","resources":{"limits":{"ephemeral-storage":"1Gi"}}}]}}"#,
        "The Pod \"web\" is invalid: spec: Forbidden: only cpu and memory resources are mutable",
    );
    refused(
        r#"{"spec":{"initContainers":[{"name":"setup","resources":{"requests":{"cpu":"10m"}}}]}}"#,
        "The Pod \"web\" is invalid: spec: Forbidden: resources for non-sidecar init containers are immutable",
    );
    // The pod itself still refuses a resource change, with the update's words.
    let r = s.kubectl(&[
        "patch",
        "pod",
        "web",
        "--patch",
        r#"{"spec":{"containers":[{"name":"app","resources":{"requests":{"cpu":"150m"}}}]}}"#,
    ]);
    assert!(!r.ok);
    assert!(
        r.stderr.starts_with(
            "The Pod \"web\" is invalid: spec: Forbidden: pod updates may not change fields other than `spec.containers[*].image`"
        ),
        "{}",
        r.stderr
    );
    let pod: Value =
        serde_json::from_str(&s.kubectl_ok(&["get", "pod", "web", "-o", "json"])).unwrap();
    assert_eq!(pod["metadata"]["generation"], 1);
}
