//! helm 4 (`PODVISOR_HELM`, from the wheel `scripts/install-test-deps` unpacks) against a
//! real `podvisor serve`: install, upgrade, rollback, list, status, history and uninstall of
//! a chart of a Pod, a ConfigMap and a Secret, with helm's default Secret storage; and a
//! chart holding a kind podvisor does not serve fails with helm's usual message.

#![allow(missing_docs)]

use crate::serve_common;

use serve_common::ServeCtx;
use std::path::PathBuf;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

fn helm_binary() -> PathBuf {
    std::env::var_os("PODVISOR_HELM")
        .filter(|p| !p.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            let cached = PathBuf::from(std::env::var_os("HOME")?).join(".cache/podvisor-test/helm-4/helm");
            cached.exists().then_some(cached)
        })
        .expect("helm is not installed: scripts/install-test-deps puts it under ~/.cache/podvisor-test (PODVISOR_HELM names it)")
}

fn helm(ctx: &ServeCtx, args: &[&str]) -> Output {
    let cache = ctx.dir.join("helm-cache");
    Command::new(helm_binary())
        .args(args)
        .arg("--kubeconfig")
        .arg(ctx.kubeconfig())
        .env("HELM_CACHE_HOME", &cache)
        .env("HELM_CONFIG_HOME", cache.join("config"))
        .env("HELM_DATA_HOME", cache.join("data"))
        .env_remove("KUBECONFIG")
        .output()
        .expect("helm runs")
}

fn helm_ok(ctx: &ServeCtx, args: &[&str]) -> String {
    let out = helm(ctx, args);
    assert!(
        out.status.success(),
        "helm {args:?} failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn chart() -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/helm/demo")
        .display()
        .to_string()
}

#[test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
fn helm_installs_upgrades_rolls_back_and_uninstalls_a_chart() {
    let mut ctx = ServeCtx::new("helm");
    ctx.start(&[]);
    let chart = chart();
    let marker = format!("marker={}", ctx.marker);
    let out = helm_ok(
        &ctx,
        &[
            "install",
            "demo",
            &chart,
            "--set",
            &marker,
            "--wait",
            "--timeout",
            "60s",
        ],
    );
    assert!(out.contains("STATUS: deployed"), "{out}");
    let cm = |ctx: &ServeCtx| {
        ctx.kubectl_ok(&[
            "get",
            "configmap",
            "demo-cfg",
            "-o",
            "jsonpath={.data.message}",
        ])
    };
    assert_eq!(cm(&ctx), "hello");
    let phase = ctx.kubectl_ok(&["get", "pod", "demo-pod", "-o", "jsonpath={.status.phase}"]);
    assert_eq!(phase, "Running");
    // helm's release record: a Secret of type helm.sh/release.v1, labelled owner=helm.
    let releases = ctx.kubectl_ok(&["get", "secrets", "-l", "owner=helm", "-o", "name"]);
    assert_eq!(releases.trim(), "secret/sh.helm.release.v1.demo.v1");

    let out = helm_ok(
        &ctx,
        &[
            "upgrade",
            "demo",
            &chart,
            "--set",
            &marker,
            "--set",
            "message=again",
        ],
    );
    assert!(out.contains("REVISION: 2"), "{out}");
    assert_eq!(cm(&ctx), "again");
    let out = helm_ok(&ctx, &["rollback", "demo", "1"]);
    assert!(out.contains("Rollback was a success"), "{out}");
    assert_eq!(cm(&ctx), "hello");

    let list = helm_ok(&ctx, &["list"]);
    assert!(
        list.lines()
            .any(|l| l.starts_with("demo") && l.contains("deployed") && l.contains("demo-0.1.0")),
        "{list}"
    );
    let status = helm_ok(&ctx, &["status", "demo"]);
    assert!(status.contains("REVISION: 3"), "{status}");
    let history = helm_ok(&ctx, &["history", "demo"]);
    assert!(history.contains("Rollback to 1"), "{history}");

    let out = helm_ok(&ctx, &["uninstall", "demo", "--wait", "--timeout", "60s"]);
    assert!(out.contains("release \"demo\" uninstalled"), "{out}");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let left = ctx.kubectl_ok(&["get", "pods,configmaps,secrets", "-o", "name"]);
        let left: Vec<&str> = left
            .lines()
            .filter(|l| !l.contains("kube-root-ca.crt"))
            .collect();
        if left.is_empty() {
            break;
        }
        assert!(Instant::now() < deadline, "left after uninstall: {left:?}");
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(helm_ok(&ctx, &["list"]).lines().count() <= 1);

    // A chart with a kind podvisor does not serve: helm's own message, nothing half-made; a
    // chart with a Service: serve's own (it runs no service proxy).
    for (chart, template, error) in [
        (
            "unserved",
            "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec: {selector: {matchLabels: {app: web}}, template: {metadata: {labels: {app: web}}, spec: {containers: [{name: web, image: busybox}]}}}\n",
            "no matches for kind \"Deployment\" in version \"apps/v1\"",
        ),
        (
            "service",
            "apiVersion: v1\nkind: Service\nmetadata: {name: web}\nspec: {ports: [{port: 80}]}\n",
            "podvisor serve runs no service proxy",
        ),
    ] {
        let dir = ctx.dir.join(chart);
        std::fs::create_dir_all(dir.join("templates")).unwrap();
        std::fs::write(
            dir.join("Chart.yaml"),
            format!("apiVersion: v2\nname: {chart}\nversion: 0.1.0\n"),
        )
        .unwrap();
        std::fs::write(dir.join("templates/object.yaml"), template).unwrap();
        let out = helm(&ctx, &["install", chart, dir.to_str().unwrap()]);
        assert!(!out.status.success());
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(error), "{stderr}");
    }
    assert_eq!(ctx.stop(Duration::from_secs(10)), Some(0));
}
