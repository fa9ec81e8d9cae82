//! The `kubernetes` Service and its EndpointSlice, read-only, through the real kubectl: `get
//! svc` and `get endpointslices` list them, `cluster-info` finds the control plane, and every
//! write of a Service is refused with why (`serve` runs no service proxy) and where Services
//! work.

use crate::common;

use common::TestServer;
use serde_json::Value;

#[test]
fn the_kubernetes_service_is_listed_and_cluster_info_works() {
    let s = TestServer::start();
    let out = s.kubectl_ok(&["get", "svc"]);
    let header: Vec<&str> = out.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(
        header,
        [
            "NAME",
            "TYPE",
            "CLUSTER-IP",
            "EXTERNAL-IP",
            "PORT(S)",
            "AGE"
        ],
        "{out}"
    );
    let row: Vec<&str> = out.lines().nth(1).unwrap().split_whitespace().collect();
    assert_eq!(
        &row[..5],
        ["kubernetes", "ClusterIP", "10.96.0.1", "<none>", "443/TCP"],
        "{out}"
    );
    let svc: Value =
        serde_json::from_str(&s.kubectl_ok(&["get", "svc", "kubernetes", "-o", "json"])).unwrap();
    assert_eq!(svc["spec"]["ports"][0]["name"], "https");
    assert_eq!(svc["spec"]["ports"][0]["targetPort"], s.addr.port());

    let out = s.kubectl_ok(&["get", "endpointslices", "-n", "default"]);
    let row: Vec<&str> = out.lines().nth(1).unwrap().split_whitespace().collect();
    assert_eq!(
        &row[..4],
        [
            "kubernetes",
            "IPv4",
            &s.addr.port().to_string(),
            &s.addr.ip().to_string()
        ],
        "{out}"
    );
    let label = s.kubectl_ok(&[
        "get",
        "endpointslices",
        "-l",
        "kubernetes.io/service-name=kubernetes",
        "-o",
        "name",
    ]);
    assert_eq!(label.trim(), "endpointslice.discovery.k8s.io/kubernetes");

    // kubectl 1.20 colours the line even when it is not a terminal.
    let out = s.kubectl_ok(&["cluster-info"]);
    let out = without_colours(&out);
    assert!(
        out.contains(&format!(
            "Kubernetes control plane is running at https://{}",
            s.addr
        )),
        "{out}"
    );
}

#[test]
fn service_writes_say_serve_runs_no_service_proxy() {
    let s = TestServer::start();
    let r = s.kubectl(&["create", "service", "clusterip", "x", "--tcp=80"]);
    assert!(!r.ok, "{}", r.stdout);
    assert!(
        r.stderr
            .contains("services \"x\" cannot be created: podvisor serve runs no service proxy"),
        "{}",
        r.stderr
    );
    assert!(r.stderr.contains("podvisor node"), "{}", r.stderr);
    let r = s.kubectl(&["delete", "svc", "kubernetes"]);
    assert!(!r.ok);
    assert!(r.stderr.contains("cannot be deleted"), "{}", r.stderr);
    let r = s.kubectl(&["label", "svc", "kubernetes", "a=b"]);
    assert!(!r.ok);
    assert!(r.stderr.contains("cannot be patched"), "{}", r.stderr);
    let (code, body) = s.json(
        "DELETE",
        "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices/kubernetes",
        None,
    );
    assert_eq!(code, 405, "{body}");
    // Still there, unchanged.
    assert_eq!(
        s.kubectl_ok(&[
            "get",
            "svc",
            "kubernetes",
            "-o",
            "jsonpath={.metadata.labels.a}"
        ]),
        ""
    );
}

/// `text` without ANSI SGR sequences (`ESC [ ... m`).
fn without_colours(text: &str) -> String {
    let mut out = String::new();
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c == 'm' {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}
