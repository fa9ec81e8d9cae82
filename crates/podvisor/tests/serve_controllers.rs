//! The controllers pods rely on, under `podvisor serve` with the real kubectl: every
//! namespace's `kube-root-ca.crt` and `default` ServiceAccount come back when deleted or
//! edited; a `kubernetes.io/service-account-token` Secret gets its long-lived token, which
//! the API accepts until the account goes (and the Secret with it); objects made by `kubectl
//! create` carry no empty `generateName`; `kubectl create deployment|job` name the kind that
//! is not served as `kubectl apply` does.

use crate::kubectl_matrix::kubectls;
use crate::serve_common::ServeCtx;
use std::time::{Duration, Instant};

/// How long a controller may take to put an object back (it reacts to the watch event at
/// once; this only bounds a hung test).
const CONVERGE: Duration = Duration::from_secs(30);

fn wait_for(what: &str, mut check: impl FnMut() -> Option<String>) -> String {
    let deadline = Instant::now() + CONVERGE;
    loop {
        if let Some(v) = check() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn jsonpath(ctx: &ServeCtx, args: &[&str], path: &str) -> String {
    let p = format!("jsonpath={path}");
    let mut all = vec!["get"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["-o", &p]);
    String::from_utf8_lossy(&ctx.kubectl(&all).stdout).into_owned()
}

#[test]
#[ignore = "needs root"]
fn deleted_or_edited_root_ca_and_default_account_come_back() {
    let mut ctx = ServeCtx::new("nsdefaults");
    ctx.start(&[]);
    ctx.kubectl_ok(&["create", "namespace", "team"]);
    let ca = jsonpath(
        &ctx,
        &["cm", "kube-root-ca.crt", "-n", "team"],
        "{.data.ca\\.crt}",
    );
    assert!(ca.starts_with("-----BEGIN CERTIFICATE-----"), "{ca}");
    let sa_uid = jsonpath(&ctx, &["sa", "default", "-n", "team"], "{.metadata.uid}");
    assert!(!sa_uid.is_empty());

    // What broke every new pod of the namespace.
    ctx.kubectl_ok(&["delete", "cm", "--all", "-n", "team"]);
    ctx.kubectl_ok(&["delete", "sa", "default", "-n", "team"]);
    wait_for("kube-root-ca.crt to come back", || {
        let back = jsonpath(
            &ctx,
            &["cm", "kube-root-ca.crt", "-n", "team"],
            "{.data.ca\\.crt}",
        );
        (back == ca).then_some(back)
    });
    wait_for("the default account to come back", || {
        let uid = jsonpath(&ctx, &["sa", "default", "-n", "team"], "{.metadata.uid}");
        (!uid.is_empty() && uid != sa_uid).then_some(uid)
    });

    // An edit is undone.
    ctx.kubectl_ok(&[
        "patch",
        "cm",
        "kube-root-ca.crt",
        "-n",
        "team",
        "--type=merge",
        "-p",
        r#"{"data":{"ca.crt":"forged"}}"#,
    ]);
    wait_for("the CA to be published again", || {
        let back = jsonpath(
            &ctx,
            &["cm", "kube-root-ca.crt", "-n", "team"],
            "{.data.ca\\.crt}",
        );
        (back == ca).then_some(back)
    });
    // A pod of the namespace is admitted and mounts its token (the account and the
    // ConfigMap its projected volume reads exist).
    ctx.kubectl_ok(&[
        "run",
        "-n",
        "team",
        "probe",
        "--image=busybox",
        "--restart=Never",
        "--command",
        "--",
        "true",
    ]);
    wait_for("the pod to succeed", || {
        let phase = jsonpath(&ctx, &["pod", "probe", "-n", "team"], "{.status.phase}");
        (phase == "Succeeded").then_some(phase)
    });
}

#[test]
#[ignore = "needs root"]
fn legacy_token_secret_authenticates_until_its_account_goes() {
    let mut ctx = ServeCtx::new("legacytok");
    ctx.start(&[]);
    ctx.kubectl_ok(&["create", "serviceaccount", "build"]);
    let secret = ctx.manifest(
        "build-token",
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: build-token\n  annotations:\n    kubernetes.io/service-account.name: build\ntype: kubernetes.io/service-account-token\n",
    );
    ctx.kubectl_ok(&["apply", "-f", secret.to_str().unwrap()]);
    // Fails (empty output) while the key is missing.
    let decoded = |key: &str| {
        let out = ctx.kubectl(&[
            "get",
            "secret",
            "build-token",
            "-o",
            &format!("go-template={{{{index .data \"{key}\" | base64decode}}}}"),
        ]);
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let token = wait_for("the token", || {
        let token = decoded("token");
        (!token.is_empty() && !token.contains("no value")).then_some(token)
    });
    assert_eq!(token.split('.').count(), 3, "{token}");
    let uid = jsonpath(&ctx, &["sa", "build"], "{.metadata.uid}");
    assert_eq!(
        jsonpath(
            &ctx,
            &["secret", "build-token"],
            "{.metadata.annotations.kubernetes\\.io/service-account\\.uid} {.data.namespace}"
        ),
        format!("{uid} ZGVmYXVsdA==")
    );
    let ca = jsonpath(&ctx, &["cm", "kube-root-ca.crt"], "{.data.ca\\.crt}");
    assert_eq!(decoded("ca.crt"), ca);

    let api = ctx.kubectl(&["--token", &token, "get", "--raw", "/api"]);
    assert!(api.status.success(), "{api:?}");
    let whoami = ctx.kubectl_ok(&[
        "--token",
        &token,
        "auth",
        "whoami",
        "-o",
        "jsonpath={.status.userInfo.username}",
    ]);
    assert_eq!(whoami, "system:serviceaccount:default:build");

    // A Secret naming an account that does not exist is deleted.
    let orphan = ctx.manifest(
        "orphan-token",
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: orphan-token\n  annotations:\n    kubernetes.io/service-account.name: nobody\ntype: kubernetes.io/service-account-token\n",
    );
    ctx.kubectl_ok(&["apply", "-f", orphan.to_str().unwrap()]);
    wait_for("the orphan's secret to be deleted", || {
        let out = ctx.kubectl(&["get", "secret", "orphan-token"]);
        String::from_utf8_lossy(&out.stderr)
            .contains("NotFound")
            .then_some(String::new())
    });

    // The account goes: its Secret goes, and the token is refused.
    ctx.kubectl_ok(&["delete", "sa", "build"]);
    wait_for("the token secret to be deleted", || {
        let out = ctx.kubectl(&["get", "secret", "build-token"]);
        String::from_utf8_lossy(&out.stderr)
            .contains("NotFound")
            .then_some(String::new())
    });
    let refused = ctx.kubectl(&["--token", &token, "get", "--raw", "/api"]);
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("Unauthorized"),
        "{refused:?}"
    );
}

#[test]
#[ignore = "needs root"]
fn kubectl_create_leaves_no_empty_generate_name() {
    let mut ctx = ServeCtx::new("genname");
    ctx.start(&[]);
    ctx.kubectl_ok(&["create", "configmap", "settings", "--from-literal=a=b"]);
    ctx.kubectl_ok(&["create", "serviceaccount", "robot"]);
    ctx.kubectl_ok(&["create", "namespace", "extra"]);
    for args in [
        &["configmap", "settings"][..],
        &["serviceaccount", "robot"],
        &["namespace", "extra"],
    ] {
        let mut all = vec!["get"];
        all.extend_from_slice(args);
        all.extend_from_slice(&["-o", "json"]);
        let json: serde_json::Value = serde_json::from_str(&ctx.kubectl_ok(&all)).unwrap();
        assert!(
            json["metadata"].get("generateName").is_none(),
            "{args:?}: {}",
            json["metadata"]
        );
        assert!(json["metadata"]["name"].is_string(), "{args:?}");
    }
}

#[test]
#[ignore = "needs root"]
fn kubectl_create_deployment_and_job_name_the_kind_as_apply_does() {
    let mut ctx = ServeCtx::new("unserved");
    ctx.start(&[]);
    let deployment = ctx.manifest(
        "deploy",
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec:\n  selector: {matchLabels: {app: web}}\n  template:\n    metadata: {labels: {app: web}}\n    spec: {containers: [{name: web, image: busybox}]}\n",
    );
    let applied = ctx.kubectl(&["apply", "-f", deployment.to_str().unwrap()]);
    let want = "no matches for kind \"Deployment\" in version \"apps/v1\"";
    assert!(
        String::from_utf8_lossy(&applied.stderr).contains(want),
        "{applied:?}"
    );
    for (version, kubectl) in kubectls() {
        let run = |args: &[&str]| {
            std::process::Command::new(&kubectl)
                .arg("--kubeconfig")
                .arg(ctx.kubeconfig())
                .arg("--cache-dir")
                .arg(ctx.dir.join(format!("cache-{version}")))
                .args(args)
                .env_remove("KUBECONFIG")
                .output()
                .unwrap()
        };
        let out = run(&["create", "deployment", "web", "--image=busybox"]);
        assert!(!out.status.success());
        assert_eq!(
            String::from_utf8_lossy(&out.stderr).trim(),
            format!("error: failed to create deployment: {want}"),
            "kubectl {version}"
        );
        let out = run(&["create", "job", "once", "--image=busybox"]);
        assert_eq!(
            String::from_utf8_lossy(&out.stderr).trim(),
            "error: failed to create job: no matches for kind \"Job\" in version \"batch/v1\"",
            "kubectl {version}"
        );
    }
}
