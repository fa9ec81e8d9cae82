//! The harness of `tests/conformance.rs`: the abstract operations of section 0 of
//! `conformance-examples.md` mapped onto `podvisor run --output json`.
//!
//! - `CREATE(manifest)`: [`Scenario::create`] starts `podvisor run FILE --output json
//!   --state-dir DIR` (one pod per run, so a delete concerns that pod only).
//! - `GET(pod)`: the status lines the run prints (one per observed change; `t` is seconds since
//!   the run started, i.e. since `CREATE`): [`PodRun::wait_status`], [`PodRun::statuses`]. The
//!   event lines are `EVENTS(pod)`: [`PodRun::events`].
//! - `LOGS(pod, container[, previous])`: the CRI log files under the state directory,
//!   `<state>/logs/<ns>_<name>_<uid>/<container>/<restartCount>.log`: [`PodRun::logs`].
//! - `DELETE(pod[, gracePeriodSeconds])`: SIGTERM to the run, which deletes its pod with the
//!   grace period given by the hidden `--delete-grace` flag ([`Scenario::create_with`]) or the
//!   pod's own; the pod is gone (`GET` → not found) when the run exits: [`PodRun::wait_gone`].
//! - The event log `/tmp/kpl/sNN/ev.log` (section 0.3): podvisor gives each container a private
//!   mount namespace, so the file lives in the pod's emptyDir under the state directory, which
//!   podvisor removes as soon as the pod terminates. The harness hard-links the file out of the
//!   emptyDir as soon as it appears, so it reads every line ever appended, even after the
//!   pod is gone ([`PodRun::ev_log`]); a copy on the host path (an engine without mount
//!   isolation) is read instead when there is one.
//!
//! Every run is stopped (SIGTERM, then a forced second SIGTERM, then SIGKILL) and every
//! directory removed when the test ends, passing or not.

#![allow(dead_code)] // Not every test binary helper is used by every scenario.

use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Whether the tests can run: they start real containers (cgroups, mount namespaces), which
/// needs root. Prints why a test is skipped otherwise.
pub fn root_or_skip(test: &str) -> bool {
    let euid = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .and_then(|l| l.split_whitespace().nth(2).map(str::to_string))
        })
        .and_then(|u| u.parse::<u32>().ok());
    if euid == Some(0) {
        true
    } else {
        eprintln!("skipping {test}: conformance scenarios run real pods and need root");
        false
    }
}

/// The manifest `tests/conformance/<file>`, verbatim from `conformance-examples.md`.
pub fn manifest(file: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/conformance")
        .join(file);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// One scenario: its scratch directory `/tmp/kpl/<id>` (removed before and after) and a work
/// directory for its runs' state and files.
pub struct Scenario {
    id: String,
    work: PathBuf,
    runs: AtomicUsize,
}

impl Scenario {
    /// Starts scenario `id` (`s05`, `s55a`, ...): removes any leftover `/tmp/kpl/<id>`.
    pub fn new(id: &str) -> Scenario {
        let scratch = scratch_dir(id);
        remove_dir(&scratch);
        let work =
            std::env::temp_dir().join(format!("podvisor-conformance-{}-{id}", std::process::id()));
        remove_dir(&work);
        std::fs::create_dir_all(&work).expect("creating the work directory");
        Scenario {
            id: id.to_string(),
            work,
            runs: AtomicUsize::new(0),
        }
    }

    /// `CREATE(manifest)`.
    pub fn create(&self, manifest: &str) -> PodRun {
        self.create_with(manifest, &[])
    }

    /// `CREATE(manifest)` with more `podvisor run` flags (`--backoff reduced`,
    /// `--delete-grace N` for a later `DELETE(pod, N)`).
    pub fn create_with(&self, manifest: &str, flags: &[&str]) -> PodRun {
        let n = self.runs.fetch_add(1, Ordering::SeqCst);
        let dir = self.work.join(format!("run{n}"));
        std::fs::create_dir_all(&dir).expect("creating the run directory");
        PodRun::start(&self.id, &dir, manifest, flags)
    }
}

impl Drop for Scenario {
    fn drop(&mut self) {
        remove_dir(&self.work);
        remove_dir(&scratch_dir(&self.id));
    }
}

/// The scratch directory `/tmp/kpl/<id>` of a scenario (section 0.3).
pub fn scratch_dir(id: &str) -> PathBuf {
    PathBuf::from("/tmp/kpl").join(id)
}

/// Removes `dir` and everything in it; a missing directory is fine.
pub fn remove_dir(dir: &Path) {
    if let Err(e) = std::fs::remove_dir_all(dir)
        && e.kind() != std::io::ErrorKind::NotFound
    {
        eprintln!("warning: removing {}: {e}", dir.display());
    }
}

/// One line of the run's output, as observed.
#[derive(Debug, Clone)]
pub struct Line {
    /// The JSON object.
    pub v: Value,
    /// When the harness read it.
    pub seen: Instant,
}

impl Line {
    /// `t`: seconds since the run (the pod) started.
    pub fn t(&self) -> f64 {
        self.v["t"].as_f64().unwrap_or(f64::NAN)
    }

    /// The status of container `name` (status lines).
    pub fn container(&self, name: &str) -> &Value {
        container(&self.v, name)
    }
}

/// The status of container `name` in a status line (Null when absent).
pub fn container<'a>(status: &'a Value, name: &str) -> &'a Value {
    status["containers"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["name"] == name))
        .unwrap_or(&Value::Null)
}

/// `conditions[type]` of a status line ("True", "False", or "" when absent).
pub fn condition<'a>(status: &'a Value, type_: &str) -> &'a str {
    status["conditions"][type_].as_str().unwrap_or("")
}

#[derive(Default)]
struct Output {
    lines: Vec<Line>,
    /// Output lines that are not JSON objects (a bug in itself).
    garbage: Vec<String>,
    eof: bool,
}

struct Shared {
    out: Mutex<Output>,
    changed: Condvar,
}

/// A `podvisor run` of one pod.
pub struct PodRun {
    child: Child,
    exit: Option<ExitStatus>,
    shared: Arc<Shared>,
    reader: Option<JoinHandle<()>>,
    linker: Option<JoinHandle<()>>,
    dir: PathBuf,
    state: PathBuf,
    scratch: PathBuf,
    name: String,
    started: Instant,
    deleted: Option<Instant>,
}

impl PodRun {
    fn start(id: &str, dir: &Path, manifest: &str, flags: &[&str]) -> PodRun {
        let file = dir.join("pod.yaml");
        std::fs::write(&file, manifest).expect("writing the manifest");
        let state = dir.join("state");
        let name = pod_name(manifest);
        let stderr = std::fs::File::create(dir.join("stderr")).expect("creating stderr file");
        let started = Instant::now();
        let mut child = Command::new(env!("CARGO_BIN_EXE_podvisor"))
            .arg("run")
            .arg(&file)
            .args(["--output", "json", "--state-dir"])
            .arg(&state)
            .args(flags)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .expect("podvisor run starts");
        let shared = Arc::new(Shared {
            out: Mutex::new(Output::default()),
            changed: Condvar::new(),
        });
        let stdout = child.stdout.take().expect("piped stdout");
        let reader = {
            let shared = Arc::clone(&shared);
            std::thread::spawn(move || read_output(stdout, &shared))
        };
        let ev_copy = dir.join("ev.log");
        let linker = {
            let shared = Arc::clone(&shared);
            let state = state.clone();
            std::thread::spawn(move || link_ev_log(&state, &ev_copy, &shared))
        };
        PodRun {
            child,
            exit: None,
            shared,
            reader: Some(reader),
            linker: Some(linker),
            dir: dir.to_path_buf(),
            state,
            scratch: scratch_dir(id),
            name,
            started,
            deleted: None,
        }
    }

    /// `metadata.name`.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Every status line so far.
    pub fn statuses(&self) -> Vec<Line> {
        self.lines_of("status")
    }

    /// Every event line so far (`EVENTS(pod)`).
    pub fn events(&self) -> Vec<Line> {
        self.lines_of("event")
    }

    /// The latest status line.
    pub fn last_status(&self) -> Line {
        self.statuses()
            .pop()
            .unwrap_or_else(|| panic!("{}: no status line yet{}", self.name, self.diag()))
    }

    fn lines_of(&self, kind: &str) -> Vec<Line> {
        let out = self.shared.out.lock().unwrap();
        assert!(
            out.garbage.is_empty(),
            "podvisor run printed lines that are not JSON objects: {:?}",
            out.garbage
        );
        out.lines
            .iter()
            .filter(|l| l.v["kind"] == kind)
            .cloned()
            .collect()
    }

    /// Waits up to `within` (from `CREATE`) for a status line satisfying `pred`; returns its
    /// index among the status lines and the line. Panics, with the timeline, when the run
    /// ends or the time is up first.
    pub fn wait_status(
        &self,
        what: &str,
        within: Duration,
        pred: impl Fn(&Value) -> bool,
    ) -> (usize, Line) {
        self.wait_status_from(0, what, within, pred)
    }

    /// As [`PodRun::wait_status`], among the status lines from index `from` on.
    pub fn wait_status_from(
        &self,
        from: usize,
        what: &str,
        within: Duration,
        pred: impl Fn(&Value) -> bool,
    ) -> (usize, Line) {
        let deadline = self.started + within;
        let mut out = self.shared.out.lock().unwrap();
        loop {
            let found = out
                .lines
                .iter()
                .filter(|l| l.v["kind"] == "status")
                .enumerate()
                .skip(from)
                .find(|(_, l)| pred(&l.v));
            if let Some((i, line)) = found {
                let line = line.clone();
                drop(out);
                // The run's own clock agrees (it started a little after the harness's).
                assert!(
                    line.t() <= within.as_secs_f64(),
                    "{}: {what}: only at t = {} s, after {within:?}{}",
                    self.name,
                    line.t(),
                    self.diag()
                );
                return (i, line);
            }
            let now = Instant::now();
            if out.eof || now >= deadline {
                let why = if out.eof {
                    "the run ended"
                } else {
                    "time is up"
                };
                drop(out);
                panic!(
                    "{}: {what}: not within {within:?} ({why}){}",
                    self.name,
                    self.diag()
                );
            }
            out = self
                .shared
                .changed
                .wait_timeout(out, deadline - now)
                .unwrap()
                .0;
        }
    }

    /// Waits until an event line satisfies `pred`, up to `within` from `CREATE`.
    pub fn wait_event(&self, what: &str, within: Duration, pred: impl Fn(&Value) -> bool) -> Line {
        let deadline = self.started + within;
        let mut out = self.shared.out.lock().unwrap();
        loop {
            if let Some(l) = out
                .lines
                .iter()
                .find(|l| l.v["kind"] == "event" && pred(&l.v))
            {
                return l.clone();
            }
            let now = Instant::now();
            if out.eof || now >= deadline {
                drop(out);
                panic!(
                    "{}: {what}: not within {within:?}{}",
                    self.name,
                    self.diag()
                );
            }
            out = self
                .shared
                .changed
                .wait_timeout(out, deadline - now)
                .unwrap()
                .0;
        }
    }

    /// The index (among all output lines) of the first event `reason` about `container`.
    pub fn first_event(&self, reason: &str, container: &str) -> Option<usize> {
        let out = self.shared.out.lock().unwrap();
        out.lines.iter().position(|l| {
            l.v["kind"] == "event" && l.v["reason"] == reason && l.v["container"] == container
        })
    }

    /// Time since `CREATE`.
    pub fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }

    /// `DELETE(pod)`: SIGTERM to the run; the grace period is the `--delete-grace` the run was
    /// created with, or the pod's own.
    pub fn delete(&mut self) {
        assert!(
            self.try_exit().is_none(),
            "{}: DELETE: the run had already ended{}",
            self.name,
            self.diag()
        );
        self.deleted = Some(Instant::now());
        signal(self.child.id(), "TERM");
    }

    /// When [`PodRun::delete`] was called.
    pub fn deleted_at(&self) -> Option<Instant> {
        self.deleted
    }

    /// Waits until the pod is gone (the run exited, after its last status line), at most
    /// `within` after the delete (or after `CREATE` when it was not deleted); returns how long
    /// that took from the same anchor, and the run's exit status.
    pub fn wait_gone(&mut self, within: Duration) -> (Duration, ExitStatus) {
        let anchor = self.deleted.unwrap_or(self.started);
        let deadline = anchor + within;
        loop {
            if let Some(status) = self.try_exit() {
                let took = anchor.elapsed();
                self.join_reader();
                return (took, status);
            }
            if Instant::now() >= deadline {
                panic!(
                    "{}: still there {within:?} after {}{}",
                    self.name,
                    if self.deleted.is_some() {
                        "DELETE"
                    } else {
                        "CREATE"
                    },
                    self.diag()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn try_exit(&mut self) -> Option<ExitStatus> {
        if self.exit.is_none() {
            self.exit = self.child.try_wait().expect("waiting for podvisor run");
        }
        self.exit
    }

    fn join_reader(&mut self) {
        if let Some(r) = self.reader.take() {
            let _ = r.join();
        }
    }

    /// `LOGS(pod, container)` of instance `restart_count` (the current one is the container's
    /// `restart_count`, the previous one that minus one): the content of the CRI log, partial
    /// lines joined.
    pub fn logs(&self, container: &str, restart_count: u64) -> String {
        let Some(dir) = self.log_dir() else {
            return String::new();
        };
        let file = dir.join(container).join(format!("{restart_count}.log"));
        let Ok(text) = std::fs::read_to_string(&file) else {
            return String::new();
        };
        parse_cri_log(&text)
    }

    fn log_dir(&self) -> Option<PathBuf> {
        let prefix = format!("default_{}_", self.name);
        std::fs::read_dir(self.state.join("logs"))
            .ok()?
            .flatten()
            .find(|e| e.file_name().to_string_lossy().starts_with(&prefix))
            .map(|e| e.path())
    }

    /// The event log `/tmp/kpl/<id>/ev.log` as it is now (see the module docs).
    pub fn ev_log(&self) -> EvLog {
        let host = self.scratch.join("ev.log");
        let text = std::fs::read_to_string(&host)
            .ok()
            .filter(|t| !t.is_empty())
            .or_else(|| std::fs::read_to_string(self.dir.join("ev.log")).ok())
            .unwrap_or_default();
        EvLog::parse(&text)
    }

    /// The run's stderr so far.
    pub fn stderr(&self) -> String {
        std::fs::read_to_string(self.dir.join("stderr")).unwrap_or_default()
    }

    /// What to print when a check fails: the status timeline, the events, stderr.
    pub fn diag(&self) -> String {
        use std::fmt::Write;
        let out = self.shared.out.lock().unwrap();
        let mut s = String::from("\n--- podvisor run output:\n");
        for l in &out.lines {
            let v = &l.v;
            if v["kind"] == "status" {
                let cs: Vec<String> = v["containers"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|c| {
                        format!(
                            "{}={}{}{} rc={}{}{}",
                            c["name"].as_str().unwrap_or("?"),
                            c["state"].as_str().unwrap_or("?"),
                            c["reason"]
                                .as_str()
                                .map(|r| format!("/{r}"))
                                .unwrap_or_default(),
                            c["exit_code"]
                                .as_i64()
                                .map(|e| format!("({e})"))
                                .unwrap_or_default(),
                            c["restart_count"],
                            if c["ready"] == true { " ready" } else { "" },
                            if c["started"] == true { " started" } else { "" },
                        )
                    })
                    .collect();
                let _ = writeln!(
                    s,
                    "{:8.3} status {} {} {} conditions={} [{}]",
                    l.t(),
                    v["phase"].as_str().unwrap_or("?"),
                    v["status_text"].as_str().unwrap_or("?"),
                    v["ready"].as_str().unwrap_or("?"),
                    v["conditions"],
                    cs.join(", ")
                );
            } else {
                let _ = writeln!(
                    s,
                    "{:8.3} event  {} {} [{}] {}",
                    l.t(),
                    v["type"].as_str().unwrap_or("?"),
                    v["reason"].as_str().unwrap_or("?"),
                    v["container"].as_str().unwrap_or(""),
                    v["message"].as_str().unwrap_or("")
                );
            }
        }
        drop(out);
        let ev = self.ev_log();
        if !ev.lines.is_empty() {
            s.push_str("--- event log:\n");
            for e in &ev.lines {
                let _ = writeln!(s, "{:.6} {} {}", e.ts, e.actor, e.word);
            }
        }
        let _ = write!(s, "--- stderr:\n{}", self.stderr());
        s
    }
}

impl Drop for PodRun {
    /// Leaves no pod behind: delete, then force, then kill.
    fn drop(&mut self) {
        let mut attempts = [Some("TERM"), Some("TERM"), Some("KILL")].into_iter();
        let mut wait = Duration::ZERO;
        loop {
            let deadline = Instant::now() + wait;
            while self.try_exit().is_none() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
            if self.try_exit().is_some() {
                break;
            }
            match attempts.next().flatten() {
                Some(sig) => signal(self.child.id(), sig),
                None => break,
            }
            wait = Duration::from_secs(40);
        }
        let _ = self.child.wait();
        self.join_reader();
        if let Some(l) = self.linker.take() {
            let _ = l.join();
        }
    }
}

fn signal(pid: u32, sig: &str) {
    let _ = Command::new("kill")
        .arg(format!("-{sig}"))
        .arg(pid.to_string())
        .status();
}

/// `metadata.name` of a manifest (flow or block style).
pub fn pod_name(manifest: &str) -> String {
    manifest
        .lines()
        .find_map(|l| {
            let rest = l.trim_start().strip_prefix("metadata:")?;
            let i = rest.find("name:")?;
            let name = rest[i + 5..].trim_start();
            let end = name.find([',', '}', ' ']).unwrap_or(name.len());
            Some(name[..end].to_string())
        })
        .or_else(|| {
            // Block style: the first `  name:` under `metadata:`.
            let mut in_meta = false;
            manifest.lines().find_map(|l| {
                if l.starts_with("metadata:") {
                    in_meta = true;
                    return None;
                }
                if in_meta && let Some(n) = l.strip_prefix("  name:") {
                    return Some(n.trim().to_string());
                }
                None
            })
        })
        .expect("the manifest names its pod")
}

fn read_output(stdout: std::process::ChildStdout, shared: &Shared) {
    for line in BufReader::new(stdout).lines() {
        let Ok(line) = line else { break };
        let seen = Instant::now();
        let mut out = shared.out.lock().unwrap();
        match serde_json::from_str::<Value>(&line) {
            Ok(v) if v.is_object() => out.lines.push(Line { v, seen }),
            _ => out.garbage.push(line),
        }
        shared.changed.notify_all();
    }
    shared.out.lock().unwrap().eof = true;
    shared.changed.notify_all();
}

/// Hard-links `<state>/pods/*/volumes/scratch/ev.log` to `copy` as soon as it exists.
fn link_ev_log(state: &Path, copy: &Path, shared: &Shared) {
    loop {
        if let Ok(pods) = std::fs::read_dir(state.join("pods")) {
            for pod in pods.flatten() {
                let src = pod.path().join("volumes/scratch/ev.log");
                if src.exists() && std::fs::hard_link(&src, copy).is_ok() {
                    return;
                }
            }
        }
        if shared.out.lock().unwrap().eof {
            return;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// The content of a CRI log file (`<time> <stream> <F|P> <content>` lines).
pub fn parse_cri_log(text: &str) -> String {
    let mut out = String::new();
    for line in text.lines() {
        let mut parts = line.splitn(4, ' ');
        let (_time, _stream, tag) = (parts.next(), parts.next(), parts.next());
        let content = parts.next().unwrap_or("");
        out.push_str(content);
        if tag != Some("P") {
            out.push('\n');
        }
    }
    out
}

/// One line of the event log: `<unix-seconds.nanoseconds> <actor> <Word> [arg]`.
#[derive(Debug, Clone)]
pub struct Ev {
    /// The timestamp.
    pub ts: f64,
    /// Container, `PostStart-<c>`, `PreStop-<c>`, `Liveness-<c>`, `Readiness-<c>`.
    pub actor: String,
    /// `Starting`, `Started`, `Looping`, `Exiting`.
    pub word: String,
}

/// The event log, in file order (= event order), with the predicates of section 0.4.
#[derive(Debug, Clone, Default)]
pub struct EvLog {
    /// The lines.
    pub lines: Vec<Ev>,
}

impl EvLog {
    /// Parses the file (lines that do not have the shape are ignored).
    pub fn parse(text: &str) -> EvLog {
        let lines = text
            .lines()
            .filter_map(|l| {
                let mut p = l.split_whitespace();
                let ts = p.next()?.parse().ok()?;
                let actor = p.next()?.to_string();
                let word = p.next()?.to_string();
                Some(Ev { ts, actor, word })
            })
            .collect();
        EvLog { lines }
    }

    fn find_from(&self, from: usize, x: &str, w: &str) -> Option<usize> {
        self.lines
            .iter()
            .enumerate()
            .skip(from)
            .find(|(_, e)| e.actor == x && e.word == w)
            .map(|(i, _)| i)
    }

    /// `first(X W)`.
    pub fn first(&self, x: &str, w: &str) -> Option<usize> {
        self.find_from(0, x, w)
    }

    /// `last(X W)`.
    pub fn last(&self, x: &str, w: &str) -> Option<usize> {
        self.lines.iter().rposition(|e| e.actor == x && e.word == w)
    }

    /// How many `X W` lines.
    pub fn count(&self, x: &str, w: &str) -> usize {
        self.lines
            .iter()
            .filter(|e| e.actor == x && e.word == w)
            .count()
    }

    /// X completes before Y starts: `first(X Exiting) < first(Y Starting)`.
    pub fn completes_before(&self, x: &str, y: &str) -> bool {
        matches!((self.first(x, "Exiting"), self.first(y, "Starting")), (Some(a), Some(b)) if a < b)
    }

    /// StartsBefore(X, Y): some `Y Starting` comes after `first(X Started)`.
    pub fn starts_before(&self, x: &str, y: &str) -> bool {
        self.first(x, "Started")
            .is_some_and(|a| self.find_from(a + 1, y, "Starting").is_some())
    }

    /// ExitsBefore(X, Y): some `Y Exiting` comes after `first(X Exiting)`.
    pub fn exits_before(&self, x: &str, y: &str) -> bool {
        self.first(x, "Exiting")
            .is_some_and(|a| self.find_from(a + 1, y, "Exiting").is_some())
    }

    /// OverlapFrom(X, Y) (upstream `RunTogetherLhsFirst`).
    pub fn overlap_from(&self, x: &str, y: &str) -> bool {
        let Some(a) = self.first(x, "Started") else {
            return false;
        };
        let Some(b) = self.find_from(a + 1, y, "Started") else {
            return false;
        };
        let Some(c) = self.find_from(a + 1, x, "Exiting") else {
            return false;
        };
        self.find_from(b + 1, y, "Exiting").is_some() && b < c
    }

    /// Overlap(X, Y) (upstream `RunTogether`).
    pub fn overlap(&self, x: &str, y: &str) -> bool {
        self.overlap_from(x, y) || self.overlap_from(y, x)
    }

    /// NeverStarted(X).
    pub fn never_started(&self, x: &str) -> bool {
        self.first(x, "Started").is_none()
    }

    /// Restarted(X): at least 2 `X Starting` lines.
    pub fn restarted(&self, x: &str) -> bool {
        self.count(x, "Starting") >= 2
    }

    /// NotRestarted(X): exactly 1 `X Starting` line.
    pub fn not_restarted(&self, x: &str) -> bool {
        self.count(x, "Starting") == 1
    }

    /// TimeOfStart(X).
    pub fn time_of_start(&self, x: &str) -> Option<f64> {
        self.first(x, "Starting").map(|i| self.lines[i].ts)
    }

    /// TimeOfLastLoop(X).
    pub fn time_of_last_loop(&self, x: &str) -> Option<f64> {
        self.last(x, "Looping").map(|i| self.lines[i].ts)
    }

    /// The timestamp of `first(X W)`.
    pub fn time_of(&self, x: &str, w: &str) -> Option<f64> {
        self.first(x, w).map(|i| self.lines[i].ts)
    }
}

/// Collects the failed checks of a scenario, to report them all at once.
#[derive(Default)]
pub struct Checks {
    failed: Vec<String>,
}

impl Checks {
    /// A fresh list.
    pub fn new() -> Checks {
        Checks::default()
    }

    /// Records `what` as failed unless `ok`.
    pub fn check(&mut self, ok: bool, what: impl Into<String>) {
        if !ok {
            self.failed.push(what.into());
        }
    }

    /// Panics listing every failed check, followed by `context`.
    pub fn finish(self, scenario: &str, context: impl FnOnce() -> String) {
        assert!(
            self.failed.is_empty(),
            "{scenario}: failed checks:\n  - {}{}",
            self.failed.join("\n  - "),
            context()
        );
    }
}

/// Seconds.
pub fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}
