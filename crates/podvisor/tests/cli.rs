//! `podvisor apply/get/describe/logs/delete` (the CLI for people without kubectl) against a real
//! `podvisor serve`, each compared with what the kubectl on PATH prints for the same pods at the
//! same moment: identical, except the AGE column and the events' ages (kubectl computes them
//! a few milliseconds later). Root only (the process runtime needs it); every process and
//! directory the test made is removed at the end.

#![allow(missing_docs)]

use crate::common;

use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::{Ctx, MARKER_ENV};

static KUBECTL: std::sync::LazyLock<std::path::PathBuf> =
    std::sync::LazyLock::new(podvisor_testkit::kubectl);
/// The longest any single state may take to be reached.
const WAIT: Duration = Duration::from_secs(20);

/// One `serve` with its directory; stops it (draining its pods) and cleans up on drop.
struct Session {
    serve: Child,
    /// Dropped last: kills whatever is left and removes the directory.
    ctx: Ctx,
}

impl Session {
    fn start() -> Session {
        let ctx = Ctx::new("cli");
        assert!(
            KUBECTL.exists(),
            "{} is not installed (scripts/test installs it)",
            KUBECTL.display()
        );
        let log = std::fs::File::create(ctx.path("serve.log")).unwrap();
        let serve = Command::new(env!("CARGO_BIN_EXE_podvisor"))
            .arg("serve")
            .arg("--state-dir")
            .arg(ctx.path("state"))
            .args(["--listen", "127.0.0.1:0", "--drain-on-exit"])
            // The host's own disk level must not evict this test's pods.
            .arg("--eviction-hard=")
            .env(MARKER_ENV, &ctx.marker)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("podvisor serve starts");
        let mut session = Session { serve, ctx };
        let started = Instant::now();
        while !session.kubeconfig().exists() {
            if let Some(status) = session.serve.try_wait().unwrap() {
                panic!("serve exited with {status}:\n{}", session.log());
            }
            assert!(
                started.elapsed() < WAIT,
                "no kubeconfig:\n{}",
                session.log()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        session
    }

    fn kubeconfig(&self) -> PathBuf {
        self.ctx.path("state/kubeconfig")
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.ctx.path("serve.log")).unwrap_or_default()
    }

    fn podvisor_cmd(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_podvisor"));
        cmd.args(args)
            .arg("--kubeconfig")
            .arg(self.kubeconfig())
            .stdin(Stdio::null());
        cmd
    }

    fn kubectl_cmd(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(&*KUBECTL);
        cmd.arg("--kubeconfig")
            .arg(self.kubeconfig())
            .arg("--cache-dir")
            .arg(self.ctx.path("kube-cache"))
            .args(args)
            .stdin(Stdio::null());
        cmd
    }

    fn podvisor(&self, args: &[&str]) -> Output {
        self.podvisor_cmd(args).output().unwrap()
    }

    fn kubectl(&self, args: &[&str]) -> Output {
        self.kubectl_cmd(args).output().unwrap()
    }

    /// Writes a manifest (every container carries the clean-up marker) and returns its path.
    fn manifest(&self, file: &str, text: &str) -> String {
        let marked = text.replace("MARKER", &self.ctx.marker);
        let path = self.ctx.path(file);
        std::fs::write(&path, marked).unwrap();
        path.display().to_string()
    }

    /// Polls kubectl until `check` holds for its stdout.
    fn wait_for(&self, what: &str, args: &[&str], check: impl Fn(&str) -> bool) {
        let start = Instant::now();
        loop {
            let out = self.kubectl(args);
            if check(&text(&out.stdout)) {
                return;
            }
            assert!(
                start.elapsed() < WAIT,
                "{what}: not after {WAIT:?}: {}{}\n{}",
                text(&out.stdout),
                text(&out.stderr),
                self.log()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Runs `args` with podvisor and with kubectl; asserts the same exit status, stdout and
    /// stderr once ages are taken out. The pods are settled, but a status write landing
    /// between the two runs is retried rather than reported.
    fn same(&self, args: &[&str]) {
        let mut last = String::new();
        for _ in 0..3 {
            let ours = self.podvisor(args);
            let theirs = self.kubectl(args);
            let (a, b) = (normalize(&ours), normalize(&theirs));
            if a == b {
                return;
            }
            last = format!("podvisor:\n{a}\nkubectl:\n{b}");
            std::thread::sleep(Duration::from_millis(300));
        }
        panic!("{args:?} differs from kubectl\n{last}");
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        // SIGTERM: serve deletes its pods gracefully (--drain-on-exit), then exits.
        podvisor_testkit::signal(self.serve.id(), podvisor_testkit::Signal::TERM);
        let start = Instant::now();
        while self.serve.try_wait().ok().flatten().is_none() && start.elapsed() < WAIT {
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.serve.kill();
        let _ = self.serve.wait();
        if std::thread::panicking() {
            eprintln!("--- serve log ---\n{}", self.log());
        }
    }
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Exit status, stdout and stderr with the ages removed: the AGE column of `get` tables (cells
/// are at least three spaces apart and never hold two spaces) and the Age column of
/// `describe`'s events (two spaces apart).
fn normalize(out: &Output) -> String {
    let stdout = text(&out.stdout);
    let mut lines = Vec::new();
    let mut age_column: Option<usize> = None;
    let mut in_events = false;
    for line in stdout.lines() {
        let cells: Vec<&str> = line
            .split("  ")
            .map(str::trim)
            .filter(|c| !c.is_empty())
            .collect();
        if line.starts_with("NAME ") || line.starts_with("NAMESPACE ") {
            age_column = cells.iter().position(|c| *c == "AGE");
        }
        if line == "Events:" {
            in_events = true;
        }
        let drop = if in_events && line.starts_with("  ") {
            Some(2)
        } else if line.starts_with("  ") || line.contains(": ") {
            None
        } else {
            age_column
        };
        match drop {
            Some(i) if cells.len() > i => {
                let kept: Vec<&str> = cells
                    .iter()
                    .enumerate()
                    .filter(|(j, _)| *j != i)
                    .map(|(_, c)| *c)
                    .collect();
                lines.push(kept.join(" | "));
            }
            _ => lines.push(line.to_owned()),
        }
    }
    format!(
        "exit {:?}\n{}\n--- stderr\n{}",
        out.status.code(),
        lines.join("\n"),
        text(&out.stderr)
    )
}

const WEB: &str = r#"apiVersion: v1
kind: Pod
metadata:
  name: web
  labels: {app: web}
spec:
  terminationGracePeriodSeconds: 5
  containers:
  - name: app
    image: busybox
    command: [sh, -c, 'echo started; trap "exit 0" TERM; while true; do sleep 1; done']
    readinessProbe:
      exec: {command: ["true"]}
      periodSeconds: 1
    env: [{name: PODVISOR_E2E_MARKER, value: MARKER}]
"#;

const ONCE: &str = r#"apiVersion: v1
kind: Pod
metadata:
  name: once
spec:
  restartPolicy: Never
  containers:
  - name: app
    image: busybox
    command: [sh, -c, 'printf "hello\nworld\n"']
    env: [{name: PODVISOR_E2E_MARKER, value: MARKER}]
"#;

const INVALID: &str = r#"apiVersion: v1
kind: Pod
metadata:
  name: bad
spec:
  containers:
  - name: app
    command: ["true"]
"#;

fn stdout_of(out: &Output) -> String {
    assert!(
        out.status.success(),
        "failed: {}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    text(&out.stdout)
}

/// Reads a child's stdout lines into a channel.
fn lines_of(child: &mut Child) -> mpsc::Receiver<String> {
    use std::io::BufRead;
    let (tx, rx) = mpsc::channel();
    let stdout = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

/// Collects lines from `rx` until `done` holds for them (or [`WAIT`] passes).
fn collect_until(rx: &mpsc::Receiver<String>, done: impl Fn(&[String]) -> bool) -> Vec<String> {
    let start = Instant::now();
    let mut lines = Vec::new();
    while !done(&lines) && start.elapsed() < WAIT {
        if let Ok(line) = rx.recv_timeout(Duration::from_millis(100)) {
            lines.push(line);
        }
    }
    lines
}

#[test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
fn cli_against_serve_matches_kubectl() {
    let s = Session::start();
    let web = s.manifest("web.yaml", WEB);
    let once = s.manifest("once.yaml", ONCE);

    // apply: create, no-op, change; kubectl sees podvisor's apply as its own.
    assert_eq!(
        stdout_of(&s.podvisor(&["apply", "-f", &web])),
        "pod/web created\n"
    );
    assert_eq!(
        stdout_of(&s.podvisor(&["apply", "-f", &once])),
        "pod/once created\n"
    );
    assert_eq!(
        stdout_of(&s.podvisor(&["apply", "-f", &web])),
        "pod/web unchanged\n"
    );
    let web2 = s.manifest(
        "web2.yaml",
        &WEB.replace("{app: web}", "{app: web, tier: front}"),
    );
    assert_eq!(
        stdout_of(&s.podvisor(&["apply", "-f", &web2])),
        "pod/web configured\n"
    );
    assert_eq!(
        stdout_of(&s.kubectl(&["apply", "-f", &web2])),
        "pod/web unchanged\n"
    );
    assert_eq!(
        stdout_of(&s.kubectl(&[
            "get",
            "pod",
            "web",
            "-o",
            "jsonpath={.metadata.labels.tier}"
        ])),
        "front"
    );

    // An invalid manifest is refused before anything is sent.
    let bad = s.manifest("bad.yaml", INVALID);
    let out = s.podvisor(&["apply", "-f", &bad]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("spec.containers[0].image: Required value"),
        "{}",
        text(&out.stderr)
    );
    s.same(&["get", "pod", "bad"]);

    // Settle: web running and ready, once completed.
    s.wait_for(
        "web ready",
        &[
            "get",
            "pod",
            "web",
            "-o",
            "jsonpath={.status.containerStatuses[0].ready}",
        ],
        |o| o == "true",
    );
    s.wait_for(
        "once done",
        &["get", "pod", "once", "-o", "jsonpath={.status.phase}"],
        |o| o == "Succeeded",
    );

    for args in [
        &["get", "pods"][..],
        &["get", "pods", "-o", "wide"],
        &["get", "pods", "-A"],
        &["get", "pod", "web"],
        &["get", "pod/once", "-o", "wide"],
        &["get", "pods", "-o", "name"],
        &["get", "pods", "-o", "yaml"],
        &["get", "pod", "web", "-o", "json"],
        &["get", "pods", "-n", "elsewhere"],
        &["get", "pod", "nosuch"],
        &["get", "deployments"],
        &["describe", "pod", "web"],
        &["describe", "pod", "once"],
        &["describe", "pod", "nosuch"],
        &["describe", "pods"],
        &["logs", "once"],
        &["logs", "once", "--tail", "1"],
        &["logs", "-f", "once"],
        &["logs", "once", "--timestamps"],
        &["logs", "once", "--previous"],
        &["logs", "web", "-c", "app"],
        &["logs", "nosuch"],
    ] {
        s.same(args);
    }

    // get -w: the listed pods, then a line per change, as kubectl prints them.
    let mut ours = s
        .podvisor_cmd(&["get", "pods", "-w"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut theirs = s
        .kubectl_cmd(&["get", "pods", "-w"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let (our_rx, their_rx) = (lines_of(&mut ours), lines_of(&mut theirs));
    let listed = |l: &[String]| l.len() >= 3;
    let our_list = collect_until(&our_rx, listed);
    let their_list = collect_until(&their_rx, listed);
    assert_eq!(
        stdout_of(&s.podvisor(&["delete", "pod", "once"])),
        "pod \"once\" deleted\n"
    );
    // Deleting a completed pod is one update: the watch shows it once more, then it is gone.
    let changed = |l: &[String]| l.iter().any(|x| x.starts_with("once "));
    let our_more = collect_until(&our_rx, changed);
    let their_more = collect_until(&their_rx, changed);
    let _ = (ours.kill(), theirs.kill());
    let _ = (ours.wait(), theirs.wait());
    let as_output = |lines: Vec<String>| Output {
        status: std::os::unix::process::ExitStatusExt::from_raw(0),
        stdout: (lines.join("\n") + "\n").into_bytes(),
        stderr: Vec::new(),
    };
    assert_eq!(
        normalize(&as_output([our_list, our_more].concat())),
        normalize(&as_output([their_list, their_more].concat()))
    );
    s.same(&["get", "pod", "once"]);

    // delete waits until the pod is gone; errors as kubectl's.
    assert_eq!(
        stdout_of(&s.podvisor(&["delete", "pod", "web"])),
        "pod \"web\" deleted\n"
    );
    let out = s.kubectl(&["get", "pod", "web"]);
    assert!(
        text(&out.stderr).contains("NotFound"),
        "{}",
        text(&out.stderr)
    );
    let out = s.podvisor(&["delete", "pod", "web"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        text(&out.stderr),
        "Error from server (NotFound): pods \"web\" not found\n"
    );
    s.same(&["get", "pods"]);
}

#[test]
fn normalize_drops_only_ages() {
    let out = |stdout: &str| Output {
        status: std::os::unix::process::ExitStatusExt::from_raw(0),
        stdout: stdout.as_bytes().to_vec(),
        stderr: Vec::new(),
    };
    let a = "NAME   READY   STATUS    RESTARTS   AGE   IP\nweb    1/1     Running   0          9s    10.0.0.1\n";
    let b = "NAME   READY   STATUS    RESTARTS   AGE   IP\nweb    1/1     Running   0          10s   10.0.0.1\n";
    let c = "NAME   READY   STATUS    RESTARTS   AGE   IP\nweb    0/1     Running   0          9s    10.0.0.1\n";
    assert_eq!(normalize(&out(a)), normalize(&out(b)));
    assert_ne!(normalize(&out(a)), normalize(&out(c)));
    let e1 = "Events:\n  Type    Reason   Age   From     Message\n  Normal  Started  9s    kubelet  Started container app\n";
    let e2 = "Events:\n  Type    Reason   Age   From     Message\n  Normal  Started  10s   kubelet  Started container app\n";
    let e3 = "Events:\n  Type    Reason   Age   From     Message\n  Normal  Started  10s   kubelet  Started container web\n";
    assert_eq!(normalize(&out(e1)), normalize(&out(e2)));
    assert_ne!(normalize(&out(e1)), normalize(&out(e3)));
}
