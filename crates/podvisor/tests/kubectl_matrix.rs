//! The client matrix: every kubectl the machine has — Debian 12's 1.20
//! (`PODVISOR_KUBECTL_120`), the kubectl on PATH (1.32 here), 1.34 (`PODVISOR_KUBECTL_134`)
//! and 1.37 (`PODVISOR_KUBECTL_137`), installed by `scripts/install-test-deps` — runs the
//! everyday pod loop against one `podvisor serve`: apply, wait, get, logs, exec, describe,
//! exec (with stdin and an exit code), describe, create configmap, delete. kubectl 1.20 streams
//! exec over SPDY/3.1, the others over a WebSocket.

#![allow(missing_docs)]

use crate::serve_common;

use serve_common::ServeCtx;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

/// The kubectls to run, with their versions' names. Every one of them is installed by
/// `scripts/install-test-deps`, which CI runs: one missing is a failure, not a skip.
pub(crate) fn kubectls() -> Vec<(&'static str, PathBuf)> {
    let env = |name: &str| {
        std::env::var_os(name)
            .map(PathBuf::from)
            .filter(|p| p.exists())
    };
    let cached = |dir: &str| {
        let p = PathBuf::from(std::env::var_os("HOME")?)
            .join(".cache/podvisor-test")
            .join(dir)
            .join("kubectl");
        p.exists().then_some(p)
    };
    let all = [
        (
            "1.20",
            env("PODVISOR_KUBECTL_120").or_else(|| cached("kubectl-1.20")),
        ),
        (
            "system",
            Some(serve_common::kubectl_binary()).filter(|p| p.exists()),
        ),
        (
            "1.34",
            env("PODVISOR_KUBECTL_134").or_else(|| cached("kubectl-1.34")),
        ),
        (
            "1.37",
            env("PODVISOR_KUBECTL_137").or_else(|| cached("kubectl-1.37")),
        ),
    ];
    let missing: Vec<&str> = all
        .iter()
        .filter(|(_, k)| k.is_none())
        .map(|(v, _)| *v)
        .collect();
    assert!(
        missing.is_empty(),
        "kubectl {missing:?} missing: run scripts/install-test-deps"
    );
    all.into_iter().filter_map(|(v, k)| Some((v, k?))).collect()
}

fn run(kubectl: &PathBuf, ctx: &ServeCtx, args: &[&str], stdin: Option<&str>) -> Output {
    use std::io::Write as _;
    let mut child = Command::new(kubectl)
        .arg("--kubeconfig")
        .arg(ctx.kubeconfig())
        .arg("--cache-dir")
        .arg(ctx.dir.join(format!(
            "kubectl-cache-{}",
            kubectl.display().to_string().len()
        )))
        .args(args)
        .env_remove("KUBECONFIG")
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kubectl runs");
    if let Some(text) = stdin {
        child
            .stdin
            .take()
            .unwrap()
            .write_all(text.as_bytes())
            .unwrap();
    }
    child.wait_with_output().unwrap()
}

fn ok(kubectl: &PathBuf, ctx: &ServeCtx, args: &[&str], stdin: Option<&str>) -> String {
    let out = run(kubectl, ctx, args, stdin);
    assert!(
        out.status.success(),
        "{} {args:?} failed: {}{}",
        kubectl.display(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
fn every_kubectl_runs_the_pod_loop() {
    let mut ctx = ServeCtx::new("matrix");
    ctx.start(&[]);
    for (version, kubectl) in &kubectls() {
        let pod = format!("loop-{}", version.replace('.', ""));
        let manifest = format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: {pod}}}\nspec:\n  terminationGracePeriodSeconds: 1\n  containers:\n  - name: app\n    image: busybox\n    command: [sh, -c, ': {}; echo hello {version}; exec sleep 3600']\n",
            ctx.marker
        );
        let out = ok(kubectl, &ctx, &["apply", "-f", "-"], Some(&manifest));
        assert_eq!(
            out.trim(),
            format!("pod/{pod} created"),
            "kubectl {version}"
        );
        ok(
            kubectl,
            &ctx,
            &[
                "wait",
                "--for=condition=Ready",
                &format!("pod/{pod}"),
                "--timeout=30s",
            ],
            None,
        );
        let table = ok(kubectl, &ctx, &["get", "pods", &pod], None);
        assert!(
            table
                .lines()
                .nth(1)
                .is_some_and(|l| l.contains("1/1") && l.contains("Running")),
            "kubectl {version}: {table}"
        );
        let logs = ok(kubectl, &ctx, &["logs", &pod], None);
        assert_eq!(logs.trim(), format!("hello {version}"), "kubectl {version}");
        // 1.20 upgrades to SPDY/3.1, the others to a WebSocket (v5/v4.channel.k8s.io).
        let exec = run(kubectl, &ctx, &["exec", &pod, "--", "echo", "inside"], None);
        assert!(
            exec.status.success(),
            "kubectl {version} exec: {}",
            String::from_utf8_lossy(&exec.stderr)
        );
        assert_eq!(String::from_utf8_lossy(&exec.stdout).trim(), "inside");
        // Standard input to its end, both outputs, and the exit code.
        let exec = run(
            kubectl,
            &ctx,
            &[
                "exec",
                "-i",
                &pod,
                "--",
                "sh",
                "-c",
                "cat; echo err >&2; exit 3",
            ],
            Some("piped\n"),
        );
        assert_eq!(exec.status.code(), Some(3), "kubectl {version}: {exec:?}");
        assert_eq!(String::from_utf8_lossy(&exec.stdout), "piped\n");
        let stderr = String::from_utf8_lossy(&exec.stderr);
        assert!(
            stderr.starts_with("err\n") && stderr.contains("command terminated with exit code 3"),
            "kubectl {version}: {stderr}"
        );
        let described = ok(kubectl, &ctx, &["describe", "pod", &pod], None);
        assert!(
            described.contains("Started container app"),
            "kubectl {version}: {described}"
        );
        let cm = format!("cfg-{}", version.replace('.', ""));
        ok(
            kubectl,
            &ctx,
            &["create", "configmap", &cm, "--from-literal=a=b"],
            None,
        );
        let data = ok(
            kubectl,
            &ctx,
            &["get", "configmap", &cm, "-o", "jsonpath={.data.a}"],
            None,
        );
        assert_eq!(data, "b", "kubectl {version}");
        ok(kubectl, &ctx, &["delete", "configmap", &cm], None);
        let out = ok(kubectl, &ctx, &["delete", "pod", &pod, "--wait=true"], None);
        assert!(
            out.starts_with(&format!("pod \"{pod}\" deleted")),
            "kubectl {version}: {out}"
        );
    }
    assert_eq!(ctx.stop(std::time::Duration::from_secs(10)), Some(0));
}
