//! The node's record of each pod's status transitions, for the timeline (`podvisor
//! dashboard`): what the pod workers published, with the time, kept on disk so it outlives a
//! restart of the agent, bounded per pod.
//!
//! One JSON-lines file per pod UID under the directory (`<state>/history/<uid>.jsonl`), one
//! [`Transition`] a line, appended as the status writer sees each status (every one the pod
//! worker published, not only the ones that reached the store after batching, up to a few a
//! write in a burst: `node/pending.rs`); a status equal to the last one recorded is not
//! recorded again. Once a file holds twice [`HISTORY_LIMIT`] lines or twice
//! [`HISTORY_MAX_BYTES`] it is rewritten with the newest lines within both (write then
//! rename), a line at a time: a large pod's file is never held in memory whole. The file goes when the pod's object is removed, and files of pods the store no
//! longer has are removed when the node starts.
//!
//! It belongs to the node, not to the API server: the server reads it through a narrow
//! interface (`podvisor_apiserver::PodHistory`), so an agent in a real cluster keeps it too.

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
pub use podvisor_lifecycle::timeline::{HISTORY_LIMIT, Transition};
use std::collections::{HashMap, HashSet};
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// Errors of the history store.
#[derive(Debug, thiserror::Error)]
pub enum HistoryError {
    /// A UID that cannot be a file name (the API server makes UUIDs; anything else is refused).
    #[error("pod uid {0:?}: not a UID (letters, digits and '-' only)")]
    BadUid(String),
    /// Reading or writing the pod's file.
    #[error("pod history {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// What is remembered of a pod's file between writes.
#[derive(Debug, Default)]
struct Tail {
    lines: usize,
    bytes: u64,
    last: Option<Transition>,
}

/// The most bytes of a pod's file a compaction keeps (the newest line always stays): a large
/// pod's status is hundreds of KiB, and [`HISTORY_LIMIT`] of them would be hundreds of MiB.
pub const HISTORY_MAX_BYTES: u64 = 8 << 20;

/// The history of every pod of the node (see the module docs).
#[derive(Debug)]
pub struct HistoryStore {
    dir: PathBuf,
    limit: usize,
    max_bytes: u64,
    tails: Mutex<HashMap<String, Tail>>,
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> HistoryError + '_ {
    move |source| HistoryError::Io {
        path: path.to_path_buf(),
        source,
    }
}

impl HistoryStore {
    /// The store in `dir` (created, mode 0700), keeping [`HISTORY_LIMIT`] transitions a pod.
    ///
    /// # Errors
    ///
    /// The directory cannot be created.
    pub fn open(dir: &Path) -> Result<HistoryStore, HistoryError> {
        Self::with_limit(dir, HISTORY_LIMIT)
    }

    /// Like [`HistoryStore::open`], keeping `limit` transitions a pod.
    ///
    /// # Errors
    ///
    /// The directory cannot be created.
    pub fn with_limit(dir: &Path, limit: usize) -> Result<HistoryStore, HistoryError> {
        Self::with_bounds(dir, limit, HISTORY_MAX_BYTES)
    }

    /// Like [`HistoryStore::open`], keeping `limit` transitions and `max_bytes` of them a pod.
    ///
    /// # Errors
    ///
    /// The directory cannot be created.
    pub fn with_bounds(
        dir: &Path,
        limit: usize,
        max_bytes: u64,
    ) -> Result<HistoryStore, HistoryError> {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(io(dir))?;
        Ok(HistoryStore {
            dir: dir.to_path_buf(),
            limit: limit.max(1),
            max_bytes,
            tails: Mutex::new(HashMap::new()),
        })
    }

    fn path(&self, uid: &str) -> Result<PathBuf, HistoryError> {
        if uid.is_empty() || !uid.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') {
            return Err(HistoryError::BadUid(uid.to_string()));
        }
        Ok(self.dir.join(format!("{uid}.jsonl")))
    }

    /// Records `pod`'s status as of `now`, unless it equals the last one recorded.
    ///
    /// # Errors
    ///
    /// A bad UID, or the file cannot be written.
    pub fn record(&self, uid: &str, pod: &Pod, now: Timestamp) -> Result<(), HistoryError> {
        self.record_transition(uid, Transition::of(pod, now))
    }

    /// Records `transition` of pod `uid`, unless its status equals the last one recorded.
    ///
    /// # Errors
    ///
    /// A bad UID, or the file cannot be written.
    pub fn record_transition(&self, uid: &str, transition: Transition) -> Result<(), HistoryError> {
        let path = self.path(uid)?;
        let mut tails = self
            .tails
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if !tails.contains_key(uid) {
            // First write since the agent started: the file's count, size and last line,
            // read a line at a time (a large pod's file is never held whole).
            tails.insert(uid.to_string(), scan(&path)?);
        }
        let tail = tails.get_mut(uid).expect("inserted above");
        if tail.last.as_ref().is_some_and(|last| {
            last.status == transition.status
                && last.deletion_timestamp == transition.deletion_timestamp
        }) {
            return Ok(());
        }
        let mut line = serde_json::to_vec(&transition).map_err(|e| HistoryError::Io {
            path: path.clone(),
            source: std::io::Error::other(e),
        })?;
        line.push(b'\n');
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(io(&path))?;
        file.write_all(&line).map_err(io(&path))?;
        tail.lines += 1;
        tail.bytes += line.len() as u64;
        tail.last = Some(transition);
        if tail.lines >= 2 * self.limit || tail.bytes >= 2 * self.max_bytes {
            (tail.lines, tail.bytes) = compact(&path, self.limit, self.max_bytes)?;
        }
        Ok(())
    }

    /// The pod's transitions, oldest first (at most the limit; none for an unknown pod).
    ///
    /// # Errors
    ///
    /// A bad UID, or the file cannot be read.
    pub fn read(&self, uid: &str) -> Result<Vec<Transition>, HistoryError> {
        let path = self.path(uid)?;
        // Under the lock: a compaction's rename is never half seen.
        let _tails = self
            .tails
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut all = read_file(&path)?;
        let excess = all.len().saturating_sub(self.limit);
        all.drain(..excess);
        Ok(all)
    }

    /// Forgets the pod (its object is gone).
    pub fn remove(&self, uid: &str) {
        let Ok(path) = self.path(uid) else { return };
        let mut tails = self
            .tails
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        tails.remove(uid);
        let _ = std::fs::remove_file(path);
    }

    /// Removes the history of every pod not in `uids` (on start: pods removed meanwhile).
    pub fn retain(&self, uids: &HashSet<String>) {
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return;
        };
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some(uid) = name.to_str().and_then(|n| n.strip_suffix(".jsonl")) else {
                continue;
            };
            if !uids.contains(uid) {
                self.remove(uid);
            }
        }
    }
}

/// Every transition of a file (none if there is no file). A line that does not parse (a write
/// cut short by a crash) is skipped.
/// The lines, bytes and last transition of a pod's file, read a line at a time.
fn scan(path: &Path) -> Result<Tail, HistoryError> {
    let file = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Tail::default()),
        Err(e) => return Err(io(path)(e)),
    };
    let mut reader = std::io::BufReader::new(file);
    let mut tail = Tail::default();
    let (mut line, mut last) = (Vec::new(), Vec::new());
    loop {
        line.clear();
        let n = reader.read_until(b'\n', &mut line).map_err(io(path))?;
        if n == 0 {
            break;
        }
        tail.lines += 1;
        tail.bytes += n as u64;
        std::mem::swap(&mut line, &mut last);
    }
    tail.last = serde_json::from_slice(&last).ok();
    Ok(tail)
}

/// Rewrites a pod's file with its newest lines, at most `limit` of them and `max_bytes` (the
/// newest always stays), copied a line at a time (write then rename); the lines and bytes
/// kept.
fn compact(path: &Path, limit: usize, max_bytes: u64) -> Result<(usize, u64), HistoryError> {
    let open = || std::fs::File::open(path).map(std::io::BufReader::new);
    let mut sizes = Vec::new();
    let mut reader = open().map_err(io(path))?;
    let mut line = Vec::new();
    loop {
        line.clear();
        let n = reader.read_until(b'\n', &mut line).map_err(io(path))?;
        if n == 0 {
            break;
        }
        sizes.push(n as u64);
    }
    let (mut keep, mut bytes) = (0, 0);
    for size in sizes.iter().rev() {
        if keep == limit || (keep > 0 && bytes + size > max_bytes) {
            break;
        }
        keep += 1;
        bytes += size;
    }
    let tmp = path.with_extension("jsonl.tmp");
    let mut out = std::io::BufWriter::new(std::fs::File::create(&tmp).map_err(io(&tmp))?);
    let mut reader = open().map_err(io(path))?;
    for index in 0..sizes.len() {
        line.clear();
        reader.read_until(b'\n', &mut line).map_err(io(path))?;
        if index >= sizes.len() - keep {
            out.write_all(&line).map_err(io(&tmp))?;
        }
    }
    out.flush().map_err(io(&tmp))?;
    drop(out);
    std::fs::rename(&tmp, path).map_err(io(path))?;
    Ok((keep, bytes))
}

fn read_file(path: &Path) -> Result<Vec<Transition>, HistoryError> {
    let file = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io(path)(e)),
    };
    let mut out = Vec::new();
    for line in std::io::BufReader::new(file).lines() {
        let line = line.map_err(io(path))?;
        if let Ok(t) = serde_json::from_str(&line) {
            out.push(t);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(phase: &str) -> Pod {
        serde_json::from_value(json!({"metadata": {"name": "p", "uid": "u-1"},
            "status": {"phase": phase}}))
        .unwrap()
    }

    fn dir(name: &str) -> PathBuf {
        let d =
            std::env::temp_dir().join(format!("podvisor-history-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    #[test]
    fn records_changes_only_and_survives_a_new_store() {
        let d = dir("survive");
        let h = HistoryStore::open(&d).unwrap();
        let t0 = Timestamp::from_second(1_767_225_600).unwrap();
        h.record("u-1", &pod("Pending"), t0).unwrap();
        h.record("u-1", &pod("Pending"), t0).unwrap();
        h.record("u-1", &pod("Running"), t0).unwrap();
        drop(h);
        let h = HistoryStore::open(&d).unwrap();
        h.record("u-1", &pod("Running"), t0).unwrap();
        let phases: Vec<_> = h
            .read("u-1")
            .unwrap()
            .into_iter()
            .map(|t| t.status.phase.unwrap())
            .collect();
        assert_eq!(phases, ["Pending", "Running"]);
        h.remove("u-1");
        assert!(h.read("u-1").unwrap().is_empty());
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn keeps_the_newest_limit_transitions() {
        let d = dir("bound");
        let h = HistoryStore::with_limit(&d, 3).unwrap();
        let t0 = Timestamp::from_second(1_767_225_600).unwrap();
        for i in 0..10 {
            h.record("u-1", &pod(&format!("P{i}")), t0).unwrap();
        }
        let phases: Vec<_> = h
            .read("u-1")
            .unwrap()
            .into_iter()
            .map(|t| t.status.phase.unwrap())
            .collect();
        assert_eq!(phases, ["P7", "P8", "P9"]);
        let lines = std::fs::read_to_string(d.join("u-1.jsonl"))
            .unwrap()
            .lines()
            .count();
        assert!(lines < 6, "the file is compacted: {lines} lines");
        let _ = std::fs::remove_dir_all(&d);
    }

    /// A large pod's statuses are bounded by bytes too: the file never grows past twice the
    /// bound, a compaction keeps the newest within it, and a new store picks up the count and
    /// size of what is there.
    #[test]
    fn a_large_pods_history_is_bounded_by_bytes() {
        let d = dir("bytes");
        let big = |i: usize| {
            let mut p = pod(&format!("P{i}"));
            p.status.as_mut().unwrap().message = Some("x".repeat(1000));
            p
        };
        let h = HistoryStore::with_bounds(&d, 500, 4000).unwrap();
        let t0 = Timestamp::from_second(1_767_225_600).unwrap();
        for i in 0..30 {
            h.record("u-1", &big(i), t0).unwrap();
            let size = std::fs::metadata(d.join("u-1.jsonl")).unwrap().len();
            assert!(size < 8000, "after {i}: {size} bytes");
        }
        let phases: Vec<_> = h
            .read("u-1")
            .unwrap()
            .into_iter()
            .map(|t| t.status.phase.unwrap())
            .collect();
        // ~1.1 KB a line: at most 7 lines before a compaction, 3 after it.
        assert!((3..=7).contains(&phases.len()), "{phases:?}");
        assert_eq!(phases.last().map(String::as_str), Some("P29"));
        drop(h);
        let h = HistoryStore::with_bounds(&d, 500, 4000).unwrap();
        h.record("u-1", &big(29), t0).unwrap();
        h.record("u-1", &big(30), t0).unwrap();
        let last = h.read("u-1").unwrap().pop().unwrap();
        assert_eq!(last.status.phase.as_deref(), Some("P30"));
        let size = std::fs::metadata(d.join("u-1.jsonl")).unwrap().len();
        assert!(size < 8000, "{size} bytes");
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn refuses_a_uid_that_is_not_one_and_prunes_unknown_pods() {
        let d = dir("uid");
        let h = HistoryStore::open(&d).unwrap();
        let t0 = Timestamp::from_second(1_767_225_600).unwrap();
        assert!(matches!(
            h.record("../x", &pod("Pending"), t0),
            Err(HistoryError::BadUid(_))
        ));
        h.record("keep", &pod("Pending"), t0).unwrap();
        h.record("gone", &pod("Pending"), t0).unwrap();
        h.retain(&HashSet::from(["keep".to_string()]));
        assert_eq!(h.read("keep").unwrap().len(), 1);
        assert!(h.read("gone").unwrap().is_empty());
        let _ = std::fs::remove_dir_all(&d);
    }
}
