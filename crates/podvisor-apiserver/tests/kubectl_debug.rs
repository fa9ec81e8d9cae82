//! `kubectl debug` against a real server (no node agent: what runs is the e2e tests'): the
//! `pods/ephemeralcontainers` subresource as kubectl patches it, the API server's validation
//! of it (M11, V12), and `--copy-to`.

use crate::common;

use common::{TestServer, pod_yaml};
use serde_json::{Value, json};

fn pod_json(s: &TestServer, name: &str) -> Value {
    serde_json::from_str(&s.kubectl_ok(&["get", "pod", name, "-o", "json"])).unwrap()
}

#[test]
fn explore_debug() {
    let s = TestServer::start();
    s.create(&pod_yaml("web"));
    let r = s.kubectl(&[
        "debug",
        "web",
        "--image=busybox",
        "--target=app",
        "-c",
        "debugger",
        "-v=8",
        "--",
        "sh",
        "-c",
        "echo hi",
    ]);
    eprintln!("OUT {}\nERR {}", r.stdout, r.stderr);
    let pod = pod_json(&s, "web");
    eprintln!("{}", serde_json::to_string_pretty(&pod["spec"]).unwrap());
    let r = s.kubectl(&[
        "debug",
        "web",
        "--image=busybox",
        "--copy-to=web-copy",
        "-v=8",
        "--",
        "sh",
    ]);
    eprintln!("OUT {}\nERR {}", r.stdout, r.stderr);
    let _ = json!({});
    panic!();
}
