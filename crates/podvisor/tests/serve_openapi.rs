//! The OpenAPI documents under `podvisor serve`, with every kubectl of the matrix:
//! `kubectl explain serviceaccount` and `explain runtimeclass` (v3, or v2 for kubectl 1.20),
//! and what kubectl 1.20 reads from `/openapi/v2` (protobuf): client-side validation of
//! unknown fields, and the server-side dry-run its `apply` and `create` check support for.

use crate::kubectl_matrix::kubectls;
use crate::serve_common::ServeCtx;
use std::path::Path;
use std::process::{Command, Output};

fn run(kubectl: &Path, ctx: &ServeCtx, args: &[&str]) -> Output {
    Command::new(kubectl)
        .arg("--kubeconfig")
        .arg(ctx.kubeconfig())
        .arg("--cache-dir")
        .arg(
            ctx.dir
                .join(format!("cache-{}", kubectl.display().to_string().len())),
        )
        .args(args)
        .env_remove("KUBECONFIG")
        .output()
        .unwrap()
}

fn ok(kubectl: &Path, ctx: &ServeCtx, args: &[&str]) -> String {
    let out = run(kubectl, ctx, args);
    assert!(
        out.status.success(),
        "{} {args:?}: {}",
        kubectl.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
#[ignore = "needs root"]
fn every_kubectl_explains_service_accounts_and_runtime_classes() {
    let mut ctx = ServeCtx::new("explain");
    ctx.start(&[]);
    for (version, kubectl) in kubectls() {
        let sa = ok(&kubectl, &ctx, &["explain", "serviceaccount"]);
        assert!(
            sa.contains("ServiceAccount binds together"),
            "kubectl {version}: {sa}"
        );
        let rc = ok(&kubectl, &ctx, &["explain", "runtimeclass.handler"]);
        assert!(
            rc.contains("RuntimeClass") && rc.contains("handler"),
            "kubectl {version}: {rc}"
        );
        let pod = ok(
            &kubectl,
            &ctx,
            &["explain", "pod.spec.containers.livenessProbe"],
        );
        assert!(pod.contains("failureThreshold"), "kubectl {version}: {pod}");
    }
}

#[test]
#[ignore = "needs root"]
fn kubectl_120_validates_and_dry_runs_from_openapi_v2() {
    let mut ctx = ServeCtx::new("oapiv2");
    ctx.start(&[]);
    let kubectl = kubectls()
        .into_iter()
        .find(|(v, _)| *v == "1.20")
        .map(|(_, k)| k)
        .unwrap();
    // Client-side validation: an unknown field is kubectl's own error, nothing is sent.
    let bad = ctx.manifest(
        "bad",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\ndata: {a: b}\nbogus: 1\n",
    );
    let out = run(&kubectl, &ctx, &["apply", "-f", bad.to_str().unwrap()]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains(
            "error validating data: ValidationError(ConfigMap): unknown field \"bogus\" in io.k8s.api.core.v1.ConfigMap"
        ),
        "{out:?}"
    );
    assert!(
        !run(&kubectl, &ctx, &["get", "cm", "settings"])
            .status
            .success()
    );

    // Server-side dry-run, which kubectl 1.20 allows only for kinds whose patch operation
    // takes `dryRun`: nothing is written.
    let pod = ctx.manifest(
        "pod",
        &format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: dry}}\nspec:\n  containers: [{{name: c, image: busybox, command: [sh, -c, ': {}; sleep 60']}}]\n",
            ctx.marker
        ),
    );
    let out = ok(
        &kubectl,
        &ctx,
        &["apply", "--dry-run=server", "-f", pod.to_str().unwrap()],
    );
    assert_eq!(out.trim(), "pod/dry created (server dry run)");
    let out = ok(
        &kubectl,
        &ctx,
        &["create", "configmap", "dry", "--dry-run=server"],
    );
    assert_eq!(out.trim(), "configmap/dry created (server dry run)");
    assert!(!run(&kubectl, &ctx, &["get", "pod", "dry"]).status.success());
    assert!(!run(&kubectl, &ctx, &["get", "cm", "dry"]).status.success());

    // A kind the document does not have (not served) is not validated client-side: kubectl
    // names it as before.
    let deployment = ctx.manifest(
        "deploy",
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec:\n  selector: {matchLabels: {app: web}}\n  template:\n    metadata: {labels: {app: web}}\n    spec: {containers: [{name: web, image: busybox}]}\n",
    );
    let out = run(
        &kubectl,
        &ctx,
        &["apply", "-f", deployment.to_str().unwrap()],
    );
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("no matches for kind \"Deployment\" in version \"apps/v1\""),
        "{out:?}"
    );
}

/// A core/v1 kind podvisor does not serve is in neither document: kubectl's field
/// validation and dry-run checks then look for a CustomResourceDefinition of it (an empty
/// list here), and every kubectl names the kind as for any unserved kind.
#[test]
#[ignore = "needs root"]
fn every_kubectl_names_an_unserved_core_kind() {
    let mut ctx = ServeCtx::new("unservedcore");
    ctx.start(&[]);
    let pvc = ctx.manifest(
        "pvc",
        "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: data}\nspec:\n  accessModes: [ReadWriteOnce]\n  resources: {requests: {storage: 1Gi}}\n",
    );
    for (version, kubectl) in kubectls() {
        for extra in [&[][..], &["--dry-run=server"]] {
            let mut args = vec!["apply", "-f", pvc.to_str().unwrap()];
            args.extend_from_slice(extra);
            let out = run(&kubectl, &ctx, &args);
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(
                stderr.contains("no matches for kind \"PersistentVolumeClaim\" in version \"v1\""),
                "kubectl {version} {extra:?}: {stderr}"
            );
        }
    }
}
