//! What the conformance scenarios of `conformance_kubectl.rs` share that is not about kubectl:
//! the pieces of section 0 of `conformance-examples.md` that do not depend on how the engine
//! is driven.
//!
//! - [`require_root`]: the scenarios run real pods and need root.
//! - [`manifest`]: the manifests under `tests/conformance/`, verbatim from the document.
//! - [`scratch_dir`], [`remove_dir`]: the scratch directory `/tmp/kpl/<id>` of a scenario
//!   (section 0.3), emptied before and removed after.
//! - [`pod_name`]: `metadata.name` of a manifest.
//! - [`EvLog`]: the event log `/tmp/kpl/<id>/ev.log` (section 0.3) parsed, with the ordering
//!   predicates of section 0.4 (`first`, `last`, StartsBefore, ExitsBefore, Overlap, ...).
//! - [`Checks`]: the failed checks of a scenario, reported all at once; [`secs`].

use std::path::{Path, PathBuf};
use std::time::Duration;

/// Checks that the test runs as root: it starts real containers (cgroups, mount namespaces).
/// The tests that call it are `#[ignore]`d, so only a run as root with `--include-ignored`
/// gets here; anything else fails (a skip must never count as a pass).
pub fn require_root(test: &str) {
    let euid = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .and_then(|l| l.split_whitespace().nth(2).map(str::to_string))
        })
        .and_then(|u| u.parse::<u32>().ok());
    assert_eq!(
        euid,
        Some(0),
        "{test}: needs root: this test is #[ignore]d unless run as root with --include-ignored"
    );
}

/// The manifest `tests/conformance/<file>`, verbatim from `conformance-examples.md`.
pub fn manifest(file: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/conformance")
        .join(file);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
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

    /// Takes over the failures of `other` (a part of the scenario), each prefixed with
    /// `prefix`.
    pub fn merge(&mut self, prefix: &str, other: Checks) {
        self.failed
            .extend(other.failed.into_iter().map(|f| format!("{prefix}: {f}")));
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
