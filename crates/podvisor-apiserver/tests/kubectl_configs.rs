//! ConfigMaps and Secrets through the real kubectl: `create configmap|secret`, get (the
//! server's table), describe, apply, edit by patch, immutable, validation errors, selectors,
//! delete.

use crate::common;

use common::TestServer;
use serde_json::{Value, json};

fn b64(s: &str) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(s)
}

#[test]
fn configmap_create_get_describe_patch_delete() {
    let s = TestServer::start();
    let out = s.kubectl_ok(&[
        "create",
        "configmap",
        "app-config",
        "--from-literal=mode=fast",
        "--from-literal=level=3",
    ]);
    assert_eq!(out.trim(), "configmap/app-config created");
    let out = s.kubectl_ok(&["get", "cm"]);
    let lines: Vec<&str> = out.lines().collect();
    assert!(
        lines[0].starts_with("NAME") && lines[0].contains("DATA") && lines[0].contains("AGE"),
        "{out}"
    );
    let row: Vec<&str> = lines[1].split_whitespace().collect();
    assert_eq!(&row[..2], ["app-config", "2"], "{out}");
    let value: Value =
        serde_json::from_str(&s.kubectl_ok(&["get", "configmap", "app-config", "-o", "json"]))
            .unwrap();
    assert_eq!(value["data"], json!({"level": "3", "mode": "fast"}));
    // kubectl's protobuf body carries an empty generateName, which JSON omits.
    assert!(
        value["metadata"].get("generateName").is_none(),
        "{}",
        value["metadata"]
    );
    assert!(
        value["metadata"]["uid"]
            .as_str()
            .is_some_and(|u| !u.is_empty())
    );
    let out = s.kubectl_ok(&["describe", "configmap", "app-config"]);
    assert!(
        out.contains("Name:")
            && out.contains("app-config")
            && out.contains("mode:")
            && out.contains("fast"),
        "{out}"
    );
    s.kubectl_ok(&[
        "patch",
        "configmap",
        "app-config",
        "-p",
        r#"{"data":{"mode":"slow"}}"#,
    ]);
    s.kubectl_ok(&[
        "patch",
        "configmap",
        "app-config",
        "--type=merge",
        "-p",
        r#"{"data":{"level":null}}"#,
    ]);
    s.kubectl_ok(&[
        "patch",
        "configmap",
        "app-config",
        "--type=json",
        "-p",
        r#"[{"op":"add","path":"/data/extra","value":"x"}]"#,
    ]);
    let data = s.kubectl_ok(&["get", "cm", "app-config", "-o", "jsonpath={.data}"]);
    assert_eq!(
        serde_json::from_str::<Value>(&data).unwrap(),
        json!({"mode": "slow", "extra": "x"})
    );
    let out = s.kubectl_ok(&["delete", "configmap", "app-config"]);
    // kubectl 1.34 adds "from default namespace".
    assert!(
        out.trim().starts_with("configmap \"app-config\" deleted"),
        "{out}"
    );
    let r = s.kubectl(&["get", "cm", "app-config"]);
    assert_eq!(
        r.stderr.trim(),
        "Error from server (NotFound): configmaps \"app-config\" not found"
    );
}

#[test]
fn apply_updates_and_selectors_list() {
    let s = TestServer::start();
    let cm = |v: &str| {
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web\n  labels: {{app: web}}\ndata:\n  index.html: {v}\n"
        )
    };
    for server_side in [false, true] {
        let mut args = vec!["apply", "-f", "-"];
        if server_side {
            args.push("--server-side");
        }
        let r = s.kubectl_stdin(&args, &cm(if server_side { "two" } else { "one" }));
        assert!(r.ok, "{}{}", r.stdout, r.stderr);
    }
    assert_eq!(
        s.kubectl_ok(&["get", "cm", "web", "-o", "jsonpath={.data.index\\.html}"]),
        "two"
    );
    s.kubectl_ok(&["create", "configmap", "other", "--from-literal=a=b"]);
    let out = s.kubectl_ok(&["get", "cm", "-l", "app=web", "-o", "name"]);
    assert_eq!(out.trim(), "configmap/web");
    let out = s.kubectl_ok(&[
        "get",
        "cm",
        "--field-selector",
        "metadata.name=other",
        "-o",
        "name",
    ]);
    assert_eq!(out.trim(), "configmap/other");
    let out = s.kubectl_ok(&["delete", "cm", "--all"]);
    assert!(
        out.contains("configmap \"web\" deleted") && out.contains("configmap \"other\" deleted"),
        "{out}"
    );
}

#[test]
fn secrets_of_each_kind_from_kubectl_create() {
    let s = TestServer::start();
    let dir = s.scratch();
    s.kubectl_ok(&[
        "create",
        "secret",
        "generic",
        "db",
        "--from-literal=user=admin",
        "--from-literal=password=s3cret",
    ]);
    s.kubectl_ok(&[
        "create",
        "secret",
        "docker-registry",
        "regcred",
        "--docker-server=registry.example:5000",
        "--docker-username=u",
        "--docker-password=p",
    ]);
    let pair = rcgen::generate_simple_self_signed(vec!["web.example".to_owned()]).unwrap();
    let cert = dir.join("tls.crt");
    let key = dir.join("tls.key");
    std::fs::write(&cert, pair.cert.pem()).unwrap();
    std::fs::write(&key, pair.signing_key.serialize_pem()).unwrap();
    s.kubectl_ok(&[
        "create",
        "secret",
        "tls",
        "web-tls",
        &format!("--cert={}", cert.display()),
        &format!("--key={}", key.display()),
    ]);
    let out = s.kubectl_ok(&["get", "secrets"]);
    let lines: Vec<Vec<&str>> = out
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(&lines[0][..4], ["NAME", "TYPE", "DATA", "AGE"], "{out}");
    assert_eq!(&lines[1][..3], ["db", "Opaque", "2"], "{out}");
    assert_eq!(
        &lines[2][..3],
        ["regcred", "kubernetes.io/dockerconfigjson", "1"],
        "{out}"
    );
    assert_eq!(
        &lines[3][..3],
        ["web-tls", "kubernetes.io/tls", "2"],
        "{out}"
    );
    assert_eq!(
        s.kubectl_ok(&["get", "secret", "db", "-o", "jsonpath={.data.user}"]),
        b64("admin")
    );
    let out = s.kubectl_ok(&[
        "get",
        "secrets",
        "--field-selector",
        "type=kubernetes.io/tls",
        "-o",
        "name",
    ]);
    assert_eq!(out.trim(), "secret/web-tls");
    // describe shows sizes, never values.
    let out = s.kubectl_ok(&["describe", "secret", "db"]);
    assert!(
        out.contains("password:  6 bytes") && !out.contains("s3cret"),
        "{out}"
    );
}

#[test]
fn string_data_is_merged_and_never_stored() {
    let s = TestServer::start();
    s.create("apiVersion: v1\nkind: Secret\nmetadata: {name: s}\nstringData: {token: abc}\ndata: {other: eA==}\n");
    let v: Value =
        serde_json::from_str(&s.kubectl_ok(&["get", "secret", "s", "-o", "json"])).unwrap();
    assert_eq!(v["data"], json!({"token": b64("abc"), "other": "eA=="}));
    assert_eq!(v["type"], "Opaque");
    assert!(v.get("stringData").is_none());
    let r = s.kubectl_stdin(
        &["create", "-f", "-"],
        "apiVersion: v1\nkind: Secret\nmetadata: {name: bad}\ndata: {k: '!!!'}\n",
    );
    assert!(
        !r.ok
            && r.stderr
                .contains("Secret in version \"v1\" cannot be handled as a Secret"),
        "{}",
        r.stderr
    );
}

#[test]
fn immutable_objects_keep_their_data() {
    let s = TestServer::start();
    s.create("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: frozen}\nimmutable: true\ndata: {a: b}\n");
    let r = s.kubectl(&["patch", "cm", "frozen", "-p", r#"{"data":{"a":"c"}}"#]);
    assert_eq!(
        r.stderr.trim(),
        "The ConfigMap \"frozen\" is invalid: data: Forbidden: field is immutable when `immutable` is set"
    );
    let r = s.kubectl(&[
        "patch",
        "cm",
        "frozen",
        "--type=merge",
        "-p",
        r#"{"immutable":false}"#,
    ]);
    assert_eq!(
        r.stderr.trim(),
        "The ConfigMap \"frozen\" is invalid: immutable: Forbidden: field is immutable when `immutable` is set"
    );
    // Labels may still change.
    s.kubectl_ok(&["label", "cm", "frozen", "tier=a"]);
    s.create("apiVersion: v1\nkind: Secret\nmetadata: {name: typed}\ntype: kubernetes.io/basic-auth\nstringData: {username: u}\n");
    let r = s.kubectl(&[
        "patch",
        "secret",
        "typed",
        "--type=merge",
        "-p",
        r#"{"type":"Opaque"}"#,
    ]);
    assert_eq!(
        r.stderr.trim(),
        "The Secret \"typed\" is invalid: type: Invalid value: \"Opaque\": field is immutable"
    );
}

#[test]
fn validation_errors_name_their_fields() {
    let s = TestServer::start();
    let r = s.kubectl_stdin(
        &["create", "-f", "-"],
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: bad}\ndata: {'a b': x}\n",
    );
    assert_eq!(
        r.stderr.trim(),
        "The ConfigMap \"bad\" is invalid: data[a b]: Invalid value: \"a b\": a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')"
    );
    let r = s.kubectl_stdin(
        &["create", "-f", "-"],
        "apiVersion: v1\nkind: Secret\nmetadata: {name: tls}\ntype: kubernetes.io/tls\ndata: {}\n",
    );
    assert_eq!(
        r.stderr.trim(),
        "The Secret \"tls\" is invalid: \n* data[tls.crt]: Required value\n* data[tls.key]: Required value"
    );
    let r = s.kubectl_stdin(&["create", "-f", "-"], "apiVersion: v1\nkind: Secret\nmetadata: {name: reg}\ntype: kubernetes.io/dockerconfigjson\nstringData: {.dockerconfigjson: 'not json'}\n");
    assert!(
        r.stderr
            .contains("data[.dockerconfigjson]: Invalid value: \"<secret contents redacted>\""),
        "{}",
        r.stderr
    );
    let r = s.kubectl_stdin(&["create", "-f", "-"], "apiVersion: v1\nkind: Secret\nmetadata: {name: sa}\ntype: kubernetes.io/service-account-token\n");
    assert_eq!(
        r.stderr.trim(),
        "The Secret \"sa\" is invalid: metadata.annotations[kubernetes.io/service-account.name]: Required value"
    );
    let big = "x".repeat(1024 * 1024 + 1);
    let body = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "big"}, "data": {"k": big}});
    let (code, status) = s.json("POST", "/api/v1/namespaces/default/configmaps", Some(&body));
    assert_eq!(code, 422);
    assert_eq!(
        status["message"],
        "ConfigMap \"big\" is invalid: : Too long: may not be more than 1048576 bytes"
    );
}

#[test]
fn configmaps_are_watched() {
    let s = TestServer::start();
    let mut watch = s
        .kubectl_command(&["get", "cm", "--watch", "-o", "name"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1500));
    s.kubectl_ok(&["create", "configmap", "seen", "--from-literal=a=b"]);
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let _ = watch.kill();
    let out = watch.wait_with_output().unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains("configmap/seen"));
}

/// Server-side apply conflicts through the real kubectl: a field another manager owns and
/// this apply would change is a 409 with the API server's words, unless
/// `--force-conflicts`, which moves the field to the applier.
#[test]
fn server_side_apply_conflicts_unless_forced() {
    let s = TestServer::start();
    let file = s.dir.path().join("cm.yaml");
    let write = |a: &str| {
        std::fs::write(
            &file,
            format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: shared}}\ndata: {{a: '{a}', b: 'x'}}\n"),
        )
        .unwrap();
    };
    let path = file.to_str().unwrap().to_owned();
    write("1");
    s.kubectl_ok(&[
        "apply",
        "--server-side",
        "--field-manager=first",
        "-f",
        &path,
    ]);
    // The same values under another manager: shared ownership, no conflict.
    s.kubectl_ok(&[
        "apply",
        "--server-side",
        "--field-manager=second",
        "-f",
        &path,
    ]);
    write("2");
    let r = s.kubectl(&[
        "apply",
        "--server-side",
        "--field-manager=second",
        "-f",
        &path,
    ]);
    assert!(!r.ok);
    assert!(
        r.stderr
            .contains("Apply failed with 1 conflict: conflict with \"first\": .data.a"),
        "{}",
        r.stderr
    );
    // A plain update (kubectl patch) is a manager too.
    s.kubectl_ok(&[
        "patch",
        "configmap",
        "shared",
        "--type=merge",
        "-p",
        r#"{"data":{"b":"y"}}"#,
    ]);
    write("2");
    let r = s.kubectl(&[
        "apply",
        "--server-side",
        "--field-manager=first",
        "-f",
        &path,
    ]);
    assert!(!r.ok);
    assert!(
        r.stderr
            .contains("Apply failed with 1 conflict: conflict with \"kubectl-patch\" using v1"),
        "{}",
        r.stderr
    );
    assert!(r.stderr.contains(": .data.b"), "{}", r.stderr);

    // Forced: the applier takes the fields over.
    let out = s.kubectl_ok(&[
        "apply",
        "--server-side",
        "--field-manager=first",
        "--force-conflicts",
        "-f",
        &path,
    ]);
    assert!(out.contains("serverside-applied"), "{out}");
    let cm = s
        .json("GET", "/api/v1/namespaces/default/configmaps/shared", None)
        .1;
    assert_eq!(cm["data"]["a"], "2");
    assert_eq!(cm["data"]["b"], "x");
    let entries = cm["metadata"]["managedFields"].as_array().unwrap();
    let owner_of_b: Vec<&str> = entries
        .iter()
        .filter(|e| e["fieldsV1"]["f:data"].get("f:b").is_some())
        .map(|e| e["manager"].as_str().unwrap())
        .collect();
    assert_eq!(owner_of_b, ["first"], "{cm}");
    // `second` now applies a=1 again against `first`'s a=2: a conflict the other way.
    write("1");
    let r = s.kubectl(&[
        "apply",
        "--server-side",
        "--field-manager=second",
        "-f",
        &path,
    ]);
    assert!(
        r.stderr.contains("conflict with \"first\": .data.a"),
        "{}",
        r.stderr
    );
}
