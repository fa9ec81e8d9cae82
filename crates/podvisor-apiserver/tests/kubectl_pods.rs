//! The real kubectl against a real server: create, get (server-side Table), apply
//! (client- and server-side), patch, replace, delete, and the API server's error texts.

use crate::common;

use common::{NODE, TestServer, pod_yaml};
use serde_json::{Value, json};

/// Splits a table line into its cells (cells have no spaces in these tests, except
/// RESTARTS with "(.. ago)", which callers check by prefix).
fn cells(line: &str) -> Vec<&str> {
    line.split_whitespace().collect()
}

fn row<'a>(out: &'a str, name: &str) -> Vec<&'a str> {
    out.lines()
        .map(cells)
        .find(|c| c.first() == Some(&name))
        .unwrap_or_else(|| panic!("no row {name} in:\n{out}"))
}

#[test]
fn kubectl_create_twice_reports_already_exists() {
    let s = TestServer::start();
    let first = s.kubectl_stdin(&["create", "-f", "-"], &pod_yaml("web"));
    assert!(first.ok, "{}", first.stderr);
    assert_eq!(first.stdout.trim(), "pod/web created");
    let again = s.kubectl_stdin(&["create", "-f", "-"], &pod_yaml("web"));
    assert!(!again.ok);
    assert_eq!(
        again.stderr.trim(),
        "Error from server (AlreadyExists): error when creating \"STDIN\": pods \"web\" already exists"
    );
    let pod: Value =
        serde_json::from_str(&s.kubectl_ok(&["get", "pod", "web", "-o", "json"])).unwrap();
    assert_eq!(pod["spec"]["nodeName"], NODE);
    assert_eq!(pod["status"]["phase"], "Pending");
    assert_eq!(pod["status"]["qosClass"], "BestEffort");
    assert_eq!(pod["metadata"]["generation"], 1);
    assert_eq!(pod["spec"]["terminationGracePeriodSeconds"], 30);
    assert_eq!(pod["metadata"]["uid"].as_str().unwrap().len(), 36);
}

#[test]
fn kubectl_get_prints_the_server_side_table_and_status_text() {
    let s = TestServer::start();
    for name in ["crash", "done", "init"] {
        s.create(&pod_yaml(name).replace(
            "  containers:",
            if name == "init" {
                "  initContainers:\n  - name: setup\n    image: busybox\n    command: ['true']\n  containers:"
            } else {
                "  containers:"
            },
        ));
    }
    s.create(&format!(
        "{}  readinessGates:\n  - conditionType: example.com/gate\n",
        pod_yaml("gated")
    ));
    let finished = "2020-01-01T00:00:00Z";
    s.patch_status(
        "crash",
        &json!({"phase": "Running", "containerStatuses": [{
            "name": "app", "image": "busybox", "imageID": "", "ready": false, "restartCount": 3,
            "state": {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off"}},
            "lastState": {"terminated": {"exitCode": 1, "reason": "Error", "finishedAt": finished}}
        }]}),
    );
    s.patch_status(
        "done",
        &json!({"phase": "Succeeded", "containerStatuses": [{
            "name": "app", "image": "busybox", "imageID": "", "ready": false, "restartCount": 0,
            "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}
        }]}),
    );
    s.patch_status(
        "init",
        &json!({"initContainerStatuses": [{
            "name": "setup", "image": "busybox", "imageID": "", "ready": false, "restartCount": 0,
            "state": {"running": {"startedAt": finished}}
        }]}),
    );
    let out = s.kubectl_ok(&["get", "pods"]);
    assert_eq!(
        cells(out.lines().next().unwrap()),
        ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    );
    let crash = row(&out, "crash");
    assert_eq!(&crash[1..4], ["0/1", "CrashLoopBackOff", "3"]);
    assert!(crash[4].starts_with('(') && crash[5] == "ago)", "{crash:?}");
    assert_eq!(&row(&out, "done")[1..4], ["0/1", "Completed", "0"]);
    assert_eq!(&row(&out, "init")[1..4], ["0/1", "Init:0/1", "0"]);
    assert_eq!(&row(&out, "gated")[1..4], ["0/1", "Pending", "0"]);

    let wide = s.kubectl_ok(&["get", "pods", "-o", "wide"]);
    assert_eq!(
        cells(wide.lines().next().unwrap()),
        [
            "NAME",
            "READY",
            "STATUS",
            "RESTARTS",
            "AGE",
            "IP",
            "NODE",
            "NOMINATED",
            "NODE",
            "READINESS",
            "GATES"
        ]
    );
    assert_eq!(row(&wide, "gated")[5..], ["<none>", NODE, "<none>", "0/1"]);
    assert_eq!(
        row(&wide, "done")[5..],
        ["<none>", NODE, "<none>", "<none>"]
    );

    // Labels come from the rows' PartialObjectMetadata.
    let labels = s.kubectl_ok(&["get", "pods", "-l", "app=done", "--show-labels"]);
    assert_eq!(labels.lines().count(), 2, "{labels}");
    assert!(labels.contains("app=done"), "{labels}");
    let names = s.kubectl_ok(&[
        "get",
        "pods",
        "--field-selector",
        "status.phase=Succeeded",
        "-o",
        "name",
    ]);
    assert_eq!(names.trim(), "pod/done");
}

#[test]
fn kubectl_apply_twice_client_side() {
    let s = TestServer::start();
    let path = s.scratch().join("ap.yaml");
    std::fs::write(&path, pod_yaml("ap")).unwrap();
    let file = path.to_str().unwrap();
    assert_eq!(
        s.kubectl_ok(&["apply", "-f", file]).trim(),
        "pod/ap created"
    );
    assert_eq!(
        s.kubectl_ok(&["apply", "-f", file]).trim(),
        "pod/ap unchanged"
    );
    std::fs::write(
        &path,
        pod_yaml("ap").replace("image: busybox", "image: busybox:1.36"),
    )
    .unwrap();
    assert_eq!(
        s.kubectl_ok(&["apply", "-f", file]).trim(),
        "pod/ap configured"
    );
    let out = s.kubectl_ok(&[
        "get", "pod", "ap", "-o",
        "jsonpath={.spec.containers[0].image} {.metadata.generation} {.metadata.annotations.kubectl\\.kubernetes\\.io/last-applied-configuration}",
    ]);
    assert!(out.starts_with("busybox:1.36 2 {"), "{out}");
    // A change M11 forbids is refused with the API server's text.
    std::fs::write(&path, pod_yaml("ap").replace("'3600'", "'60'")).unwrap();
    let r = s.kubectl(&["apply", "-f", file]);
    assert!(!r.ok);
    assert!(
        r.stderr.contains("The Pod \"ap\" is invalid: spec: Forbidden: pod updates may not change fields other than `spec.containers[*].image`"),
        "{}",
        r.stderr
    );
}

#[test]
fn kubectl_apply_server_side_twice() {
    let s = TestServer::start();
    let path = s.scratch().join("ssa.yaml");
    std::fs::write(&path, pod_yaml("ssa")).unwrap();
    let file = path.to_str().unwrap();
    for _ in 0..2 {
        let out = s.kubectl_ok(&["apply", "--server-side", "-f", file]);
        assert_eq!(out.trim(), "pod/ssa serverside-applied");
    }
    std::fs::write(
        &path,
        pod_yaml("ssa").replace("app: ssa", "app: ssa\n    tier: web"),
    )
    .unwrap();
    s.kubectl_ok(&["apply", "--server-side", "-f", file]);
    let pod: Value = serde_json::from_str(&s.kubectl_ok(&[
        "get",
        "pod",
        "ssa",
        "-o",
        "json",
        "--show-managed-fields",
    ]))
    .unwrap();
    assert_eq!(
        pod["metadata"]["labels"],
        json!({"app": "ssa", "tier": "web"})
    );
    assert_eq!(pod["metadata"]["generation"], 1);
    let managers = pod["metadata"]["managedFields"].as_array().unwrap();
    assert!(
        managers
            .iter()
            .any(|m| m["manager"] == "kubectl" && m["operation"] == "Apply"),
        "{managers:?}"
    );
    // A label dropped from the applied configuration goes; one another manager set stays.
    s.kubectl_ok(&["label", "pod", "ssa", "owner=ops"]);
    std::fs::write(&path, pod_yaml("ssa")).unwrap();
    s.kubectl_ok(&["apply", "--server-side", "-f", file]);
    assert_eq!(
        s.kubectl_ok(&["get", "pod", "ssa", "-o", "jsonpath={.metadata.labels}"]),
        r#"{"app":"ssa","owner":"ops"}"#
    );
}

#[test]
fn kubectl_patch_active_deadline_seconds() {
    let s = TestServer::start();
    s.create(&pod_yaml("web"));
    let deadline = || {
        s.kubectl_ok(&[
            "get",
            "pod",
            "web",
            "-o",
            "jsonpath={.spec.activeDeadlineSeconds} {.metadata.generation}",
        ])
    };
    s.kubectl_ok(&[
        "patch",
        "pod",
        "web",
        "-p",
        r#"{"spec":{"activeDeadlineSeconds":300}}"#,
    ]);
    assert_eq!(deadline(), "300 2");
    s.kubectl_ok(&[
        "patch",
        "pod",
        "web",
        "--type=merge",
        "-p",
        r#"{"spec":{"activeDeadlineSeconds":200}}"#,
    ]);
    assert_eq!(deadline(), "200 3");
    s.kubectl_ok(&[
        "patch",
        "pod",
        "web",
        "--type=json",
        "-p",
        r#"[{"op":"replace","path":"/spec/activeDeadlineSeconds","value":100}]"#,
    ]);
    assert_eq!(deadline(), "100 4");
    let r = s.kubectl(&[
        "patch",
        "pod",
        "web",
        "-p",
        r#"{"spec":{"activeDeadlineSeconds":400}}"#,
    ]);
    assert!(!r.ok);
    assert_eq!(
        r.stderr.trim(),
        "The Pod \"web\" is invalid: spec.activeDeadlineSeconds: Invalid value: 400: must be less than or equal to previous value"
    );
    // Image changes are allowed (strategic merge by container name).
    s.kubectl_ok(&[
        "patch",
        "pod",
        "web",
        "-p",
        r#"{"spec":{"containers":[{"name":"app","image":"busybox:1.37"}]}}"#,
    ]);
    let image = s.kubectl_ok(&[
        "get",
        "pod",
        "web",
        "-o",
        "jsonpath={.spec.containers[0].image} {.spec.containers[0].command}",
    ]);
    assert_eq!(image, r#"busybox:1.37 ["sleep","3600"]"#);
}

#[test]
fn kubectl_replace_with_an_immutable_change_is_forbidden() {
    let s = TestServer::start();
    s.create(&pod_yaml("web"));
    let live = s.kubectl_ok(&["get", "pod", "web", "-o", "yaml"]);
    let changed = live.replace("restartPolicy: Always", "restartPolicy: Never");
    let r = s.kubectl_stdin(&["replace", "-f", "-"], &changed);
    assert!(!r.ok);
    assert!(
        r.stderr.starts_with(
            "The Pod \"web\" is invalid: spec: Forbidden: pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)"
        ),
        "{}",
        r.stderr
    );
    assert!(
        r.stderr.contains("+ spec.restartPolicy: \"Never\""),
        "{}",
        r.stderr
    );
    // A stale resourceVersion is a conflict.
    let image = live.replace("image: busybox", "image: busybox:2");
    s.kubectl_ok(&["label", "pod", "web", "x=y"]);
    let r = s.kubectl_stdin(&["replace", "-f", "-"], &image);
    assert!(!r.ok);
    assert!(
        r.stderr.contains("Operation cannot be fulfilled on pods \"web\": the object has been modified; please apply your changes to the latest version and try again"),
        "{}",
        r.stderr
    );
}

#[test]
fn kubectl_errors_for_missing_invalid_and_unknown() {
    let s = TestServer::start();
    let r = s.kubectl(&["get", "pod", "nope"]);
    assert!(!r.ok);
    assert_eq!(
        r.stderr.trim(),
        "Error from server (NotFound): pods \"nope\" not found"
    );

    let bad = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: bad\nspec:\n  restartPolicy: Sometimes\n  containers:\n  - name: app\n    image: \"\"\n";
    let r = s.kubectl_stdin(&["create", "-f", "-"], bad);
    assert!(!r.ok);
    assert_eq!(
        r.stderr.trim(),
        "The Pod \"bad\" is invalid: \n* spec.containers[0].image: Required value\n* spec.restartPolicy: Unsupported value: \"Sometimes\": supported values: \"Always\", \"OnFailure\", \"Never\""
    );

    let unknown = pod_yaml("unk").replace("spec:\n", "spec:\n  foo: bar\n");
    let r = s.kubectl_stdin(&["create", "-f", "-"], &unknown);
    assert!(!r.ok);
    assert_eq!(
        r.stderr.trim(),
        "Error from server (BadRequest): error when creating \"STDIN\": Pod in version \"v1\" cannot be handled as a Pod: strict decoding error: unknown field \"spec.foo\""
    );
    let r = s.kubectl_stdin(&["create", "--validate=warn", "-f", "-"], &unknown);
    assert!(r.ok, "{}", r.stderr);
    assert_eq!(r.stderr.trim(), "Warning: unknown field \"spec.foo\"");

    let r = s.kubectl_stdin(&["create", "-n", "missing", "-f", "-"], &pod_yaml("web"));
    assert!(!r.ok);
    assert!(
        r.stderr.contains("namespaces \"missing\" not found"),
        "{}",
        r.stderr
    );
}

#[test]
fn kubectl_delete_marks_then_force_removes() {
    let s = TestServer::start();
    s.create(&pod_yaml("web"));
    let out = s.kubectl_ok(&["delete", "pod", "web", "--wait=false"]);
    // kubectl 1.34 adds " from default namespace".
    assert!(out.starts_with("pod \"web\" deleted"), "{out}");
    let meta = s.kubectl_ok(&[
        "get",
        "pod",
        "web",
        "-o",
        "jsonpath={.metadata.deletionGracePeriodSeconds} {.metadata.deletionTimestamp}",
    ]);
    let (grace, ts) = meta.split_once(' ').unwrap();
    assert_eq!(grace, "30");
    let ts: jiff::Timestamp = ts.parse().unwrap();
    let ahead = ts.duration_since(jiff::Timestamp::now()).as_secs();
    assert!((25..=31).contains(&ahead), "{ahead}");
    assert_eq!(
        &row(&s.kubectl_ok(&["get", "pods"]), "web")[1..3],
        ["0/1", "Terminating"]
    );
    // A longer grace does not extend it; a shorter one shortens it.
    s.kubectl_ok(&["delete", "pod", "web", "--wait=false", "--grace-period=60"]);
    s.kubectl_ok(&["delete", "pod", "web", "--wait=false", "--grace-period=5"]);
    let grace = s.kubectl_ok(&[
        "get",
        "pod",
        "web",
        "-o",
        "jsonpath={.metadata.deletionGracePeriodSeconds}",
    ]);
    assert_eq!(grace, "5");
    let r = s.kubectl(&["delete", "pod", "web", "--grace-period=0", "--force"]);
    assert!(r.ok, "{}", r.stderr);
    assert!(
        r.stdout.starts_with("pod \"web\" force deleted"),
        "{}",
        r.stdout
    );
    let r = s.kubectl(&["get", "pod", "web"]);
    assert_eq!(
        r.stderr.trim(),
        "Error from server (NotFound): pods \"web\" not found"
    );
}

#[test]
fn kubectl_lists_in_chunks() {
    let s = TestServer::start();
    for name in ["c1", "c2", "c3"] {
        s.create(&pod_yaml(name));
    }
    // kubectl follows `continue` from page to page.
    let names = s.kubectl_ok(&["get", "pods", "--chunk-size=1", "-o", "name"]);
    assert_eq!(names.trim(), "pod/c1\npod/c2\npod/c3");
    let table = s.kubectl_ok(&["get", "pods", "--chunk-size=2"]);
    assert_eq!(table.lines().count(), 4, "{table}");
    // One page by hand: the token and the count of what is left.
    let page: Value = serde_json::from_str(&s.kubectl_ok(&[
        "get",
        "--raw",
        "/api/v1/namespaces/default/pods?limit=2",
    ]))
    .unwrap();
    assert_eq!(page["items"].as_array().unwrap().len(), 2);
    assert_eq!(page["metadata"]["remainingItemCount"], 1);
    let token = page["metadata"]["continue"].as_str().unwrap();
    let rest: Value = serde_json::from_str(&s.kubectl_ok(&[
        "get",
        "--raw",
        &format!("/api/v1/namespaces/default/pods?limit=2&continue={token}"),
    ]))
    .unwrap();
    assert_eq!(rest["items"][0]["metadata"]["name"], "c3");
    assert!(rest["metadata"].get("continue").is_none());
    assert_eq!(
        rest["metadata"]["resourceVersion"],
        page["metadata"]["resourceVersion"]
    );
}
