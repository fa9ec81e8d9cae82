//! The official Python `kubernetes` client against a real `podvisor serve`
//! (`tests/python/smoke.py`): create a pod, list, watch until Running, read its logs, delete it
//! with `gracePeriodSeconds` in the query (as the client sends it), watch it disappear.
//!
//! The interpreter is `PODVISOR_PYTHON` (set by `scripts/test`, a venv that
//! `scripts/install-test-deps` fills), else the venv under `~/.cache/podvisor-test`, else
//! `python3`; the test fails, saying why, when that interpreter has no `kubernetes`
//! module.

#![allow(missing_docs)]

use crate::serve_common;

use serve_common::ServeCtx;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The smoke script may take this long in all.
const SCRIPT_TIMEOUT: Duration = Duration::from_secs(90);

fn python() -> PathBuf {
    if let Some(p) = std::env::var_os("PODVISOR_PYTHON").filter(|p| !p.is_empty()) {
        return PathBuf::from(p);
    }
    let cached = std::env::var_os("HOME")
        .map(PathBuf::from)
        .map(|h| h.join(".cache/podvisor-test/venv/bin/python"));
    match cached {
        Some(p) if p.exists() => p,
        _ => PathBuf::from("python3"),
    }
}

fn has_kubernetes_client(python: &PathBuf) -> bool {
    Command::new(python)
        .args(["-c", "import kubernetes"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

#[test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
fn python_kubernetes_client_creates_watches_logs_and_deletes_a_pod() {
    let python = python();
    assert!(
        has_kubernetes_client(&python),
        "the Python kubernetes client is not installed for {} (scripts/install-test-deps \
         installs it; PODVISOR_PYTHON picks the interpreter)",
        python.display()
    );
    let mut ctx = ServeCtx::new("py");
    let took = ctx.start(&["--backoff", "reduced"]);
    eprintln!("serve answered after {} ms", took.as_millis());

    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/python/smoke.py");
    let started = Instant::now();
    let mut child = Command::new(&python)
        .arg(&script)
        .arg(ctx.kubeconfig())
        .arg("py-smoke")
        .arg(&ctx.marker)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env_remove("KUBECONFIG")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python starts");
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > SCRIPT_TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            let out = child.wait_with_output().unwrap();
            panic!(
                "smoke.py did not finish within {SCRIPT_TIMEOUT:?}:\n{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    eprintln!(
        "smoke.py took {} ms:\n{stdout}",
        started.elapsed().as_millis()
    );
    assert!(
        status.success(),
        "smoke.py failed ({status}):\n{stdout}{stderr}"
    );
    for step in [
        "ok: created py-smoke",
        "ok: listed ['py-smoke']",
        "ok: watched it to Running",
        "ok: read logs 'hello from python\\n'",
        "ok: deleted it with gracePeriodSeconds=5",
        "ok: watched it disappear",
    ] {
        assert!(stdout.contains(step), "missing {step:?}:\n{stdout}{stderr}");
    }

    // The API's view agrees (when kubectl is here to ask), and the pod's processes are gone.
    if serve_common::kubectl_binary().exists() {
        assert_eq!(ctx.kubectl_ok(&["get", "pods", "-o", "name"]), "");
    }
    assert_eq!(ctx.stop(Duration::from_secs(10)), Some(0));
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let left: Vec<_> = ctx
            .processes()
            .into_iter()
            .filter(|p| p.state != 'Z')
            .collect();
        if left.is_empty() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "processes left after the pod was deleted and serve stopped: {left:#?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The Python client's `EventsV1Api` (events.k8s.io/v1, the same objects as core/v1
/// Events) and `VersionApi` (`/version/`), through `tests/python/events_v1.py`.
#[test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
fn python_events_v1_api_and_version_api() {
    let python = python();
    assert!(
        has_kubernetes_client(&python),
        "the Python kubernetes client is not installed for {}",
        python.display()
    );
    let mut ctx = ServeCtx::new("pyev");
    ctx.start(&[]);
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/python/events_v1.py");
    let out = Command::new(&python)
        .arg(&script)
        .arg(ctx.kubeconfig())
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env_remove("KUBECONFIG")
        .stdin(Stdio::null())
        .output()
        .expect("python starts");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "events_v1.py failed:\n{stdout}{stderr}"
    );
    for step in [
        "ok: version v1.35.0-podvisor",
        "ok: created thing.1",
        "ok: read it as a core/v1 Event",
        "ok: patched its series",
        "ok: listed it by regarding.name",
        "ok: refused one without reportingController",
        "ok: deleted it",
    ] {
        assert!(stdout.contains(step), "missing {step:?}:\n{stdout}{stderr}");
    }
    assert_eq!(ctx.stop(Duration::from_secs(10)), Some(0));
}
