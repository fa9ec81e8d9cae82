//! `podvisor run`'s view of the containers' output: every line of every container's CRI log
//! file, as it is written, prefixed with the container's name (`pod/container` when the run
//! has several pods), as `docker compose up` shows its services' output.
//!
//! The files are the runtime's (`<state>/logs/<ns>_<pod>_<uid>/<container>/<attempt>.log`),
//! read from where the last poll stopped (in the new file once the container log manager
//! rotated one: `LogFollower`); a line split into partial (`P`) records is shown once whole.
//! Polled, not watched: a tenth of a second behind at most, and nothing to set up per file.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use podvisor_runtime::logs::follow::LogFollower;
use podvisor_runtime::logs::parse_line;

/// How far each log file has been read.
#[derive(Debug)]
struct Cursor {
    log: LogFollower,
    /// The content of `P` records waiting for their line's end, per stream.
    partial: HashMap<&'static str, String>,
}

/// Tails the log files under a state directory's `logs`.
#[derive(Debug)]
pub struct LogTail {
    dir: PathBuf,
    /// Show `pod/container` rather than `container`.
    with_pod: bool,
    cursors: HashMap<PathBuf, Cursor>,
}

impl LogTail {
    /// Tails `<state_dir>/logs`; `with_pod` when the run has several pods.
    #[must_use]
    pub fn new(state_dir: &Path, with_pod: bool) -> LogTail {
        LogTail {
            dir: state_dir.join("logs"),
            with_pod,
            cursors: HashMap::new(),
        }
    }

    /// The lines written since the last poll, prefixed (`name | line`), oldest attempt of each
    /// container first.
    pub fn poll(&mut self) -> Vec<String> {
        self.poll_shown(|_, _, _| true)
    }

    /// [`LogTail::poll`] of the attempts `shown(pod, container, attempt)` allows: the others
    /// are left unread until it does (a container's output after its start was said).
    pub fn poll_shown(&mut self, shown: impl Fn(&str, &str, u64) -> bool) -> Vec<String> {
        let mut out = Vec::new();
        for ((pod, container), files) in self.files() {
            let prefix = if self.with_pod {
                format!("{pod}/{container}")
            } else {
                container.clone()
            };
            for (attempt, path) in files {
                if !shown(&pod, &container, attempt) {
                    continue;
                }
                let cursor = self.cursors.entry(path.clone()).or_insert_with(|| Cursor {
                    log: LogFollower::new(&path),
                    partial: HashMap::new(),
                });
                for line in read_new(cursor) {
                    out.push(format!("{prefix} | {line}"));
                }
            }
        }
        out
    }

    /// Every log file by its pod and container, each container's in attempt order.
    fn files(&self) -> BTreeMap<(String, String), Vec<(u64, PathBuf)>> {
        let mut found: BTreeMap<(String, String), Vec<(u64, PathBuf)>> = BTreeMap::new();
        let Ok(pods) = std::fs::read_dir(&self.dir) else {
            return BTreeMap::new();
        };
        for pod in pods.flatten() {
            let dir_name = pod.file_name().to_string_lossy().into_owned();
            // `<namespace>_<name>_<uid>`: names and namespaces have no `_`.
            let pod_name = dir_name.split('_').nth(1).unwrap_or(&dir_name).to_owned();
            let Ok(containers) = std::fs::read_dir(pod.path()) else {
                continue;
            };
            for container in containers.flatten() {
                let name = container.file_name().to_string_lossy().into_owned();
                let key = (pod_name.clone(), name);
                let Ok(logs) = std::fs::read_dir(container.path()) else {
                    continue;
                };
                for log in logs.flatten() {
                    let file = log.file_name().to_string_lossy().into_owned();
                    if let Some(attempt) = file
                        .strip_suffix(".log")
                        .and_then(|n| n.parse::<u64>().ok())
                    {
                        found
                            .entry(key.clone())
                            .or_default()
                            .push((attempt, log.path()));
                    }
                }
            }
        }
        found
            .into_iter()
            .map(|(key, mut files)| {
                files.sort();
                (key, files)
            })
            .collect()
    }
}

/// The whole lines appended to the cursor's log since the last read, as the container wrote
/// them.
fn read_new(cursor: &mut Cursor) -> Vec<String> {
    let mut records = Vec::new();
    if cursor.log.read_records(&mut records).is_err() {
        return Vec::new();
    }
    let mut lines = Vec::new();
    for record in records.split_inclusive(|b| *b == b'\n') {
        let Some(parsed) = parse_line(&String::from_utf8_lossy(record)) else {
            continue;
        };
        let stream = parsed.stream.as_str();
        let partial = cursor.partial.entry(stream).or_default();
        partial.push_str(&parsed.content);
        if !parsed.partial {
            lines.push(std::mem::take(partial));
        }
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_prefixed_by_container_and_joined_from_partial_records() {
        let dir = std::env::temp_dir().join(format!("pv-run-logs-{}", std::process::id()));
        let c = dir.join("logs/default_web_0123/app");
        std::fs::create_dir_all(&c).unwrap();
        std::fs::write(
            c.join("0.log"),
            "2026-11-26T00:00:00.000000000Z stdout F hello\n\
             2026-11-26T00:00:00.100000000Z stderr P par\n",
        )
        .unwrap();
        let mut tail = LogTail::new(&dir, false);
        assert_eq!(tail.poll(), ["app | hello"]);
        assert!(tail.poll().is_empty(), "read once");
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(c.join("0.log"))
            .unwrap();
        std::io::Write::write_all(
            &mut f,
            b"2026-11-26T00:00:00.200000000Z stderr F tial\n2026-11-26T00:00:00",
        )
        .unwrap();
        assert_eq!(tail.poll(), ["app | partial"]);
        // Rotated by the container log manager: the rest of the old file, then the new one.
        std::io::Write::write_all(&mut f, b".300000000Z stdout F before\n").unwrap();
        std::fs::rename(c.join("0.log"), c.join("0.log.20261126-000000")).unwrap();
        std::io::Write::write_all(&mut f, b"2026-11-26T00:00:00.4Z stdout F renamed\n").unwrap();
        std::fs::write(c.join("0.log"), "2026-11-26T00:00:00.5Z stdout F after\n").unwrap();
        assert_eq!(
            tail.poll(),
            ["app | before", "app | renamed", "app | after"]
        );
        std::fs::rename(c.join("0.log.20261126-000000"), c.join("0.log")).unwrap();
        std::fs::write(
            c.join("1.log"),
            "2026-11-26T00:00:01.000000000Z stdout F again\n",
        )
        .unwrap();
        let mut several = LogTail::new(&dir, true);
        assert_eq!(
            several.poll(),
            [
                "web/app | hello",
                "web/app | partial",
                "web/app | before",
                "web/app | renamed",
                "web/app | again"
            ]
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
