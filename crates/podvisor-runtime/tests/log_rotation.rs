//! Container log rotation on real files: a writer reopened after its file was renamed, the
//! kubelet's rotation steps (older rotated files gzip-compressed, at most `max_files` kept),
//! and a follower that goes on in the new file after a rotation, losing and repeating nothing.

use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};

use flate2::read::GzDecoder;
use jiff::Timestamp;
use podvisor_runtime::logs::follow::LogFollower;
use podvisor_runtime::logs::rotation::{self, LogRotatePolicy};
use podvisor_runtime::logs::{ReadOptions, SharedLogWriter, Stream};

struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        let dir = std::env::temp_dir().join(format!(
            "podvisor-rotation-test-{tag}-{}-{}",
            std::process::id(),
            Timestamp::now().as_nanosecond()
        ));
        fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().into_string().unwrap())
        .collect();
    v.sort();
    v
}

fn gunzip(path: &Path) -> String {
    let mut text = String::new();
    GzDecoder::new(fs::File::open(path).unwrap())
        .read_to_string(&mut text)
        .unwrap();
    text
}

/// The contents of the records of CRI log text.
fn contents(text: &str) -> Vec<String> {
    text.lines()
        .map(|l| l.splitn(4, ' ').nth(3).unwrap().to_owned())
        .collect()
}

#[test]
fn rotations_compress_older_files_and_keep_at_most_max_files() {
    let dir = TempDir::new("steps");
    let log = dir.0.join("0.log");
    let writer = SharedLogWriter::create(&log).unwrap();
    let policy = LogRotatePolicy::new(1, 3).unwrap();
    let mut n = 0;
    for stamp in ["20261207-200001", "20261207-200002", "20261207-200003"] {
        for _ in 0..3 {
            writer
                .write(Stream::Stdout, format!("line {n}\n").as_bytes())
                .unwrap();
            n += 1;
        }
        let rotated = rotation::prepare(&log, &policy, stamp).unwrap().unwrap();
        assert_eq!(rotated, dir.0.join(format!("0.log.{stamp}")));
        writer.reopen().unwrap();
    }
    writer.write(Stream::Stdout, b"line 9\n").unwrap();
    // 3 files: the current one, the newest rotated one as it is, the one before compressed.
    assert_eq!(
        names(&dir.0),
        ["0.log", "0.log.20261207-200002.gz", "0.log.20261207-200003"]
    );
    assert_eq!(
        contents(&gunzip(&dir.0.join("0.log.20261207-200002.gz"))),
        ["line 3", "line 4", "line 5"]
    );
    let newest = fs::read_to_string(dir.0.join("0.log.20261207-200003")).unwrap();
    assert_eq!(contents(&newest), ["line 6", "line 7", "line 8"]);
    assert_eq!(contents(&fs::read_to_string(&log).unwrap()), ["line 9"]);
    assert_eq!(
        rotation::all_logs(&log).unwrap(),
        [
            dir.0.join("0.log.20261207-200002.gz"),
            dir.0.join("0.log.20261207-200003"),
            log.clone()
        ]
    );
    // The compressed file keeps the log's mode.
    use std::os::unix::fs::PermissionsExt;
    let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&dir.0.join("0.log.20261207-200002.gz")), mode(&log));
}

#[test]
fn a_rotation_the_runtime_could_not_follow_is_renamed_back() {
    let dir = TempDir::new("undo");
    let log = dir.0.join("0.log");
    fs::write(&log, "2026-12-07T20:00:00Z stdout F kept\n").unwrap();
    let policy = LogRotatePolicy::default();
    let rotated = rotation::prepare(&log, &policy, "20261207-200000")
        .unwrap()
        .unwrap();
    assert!(!log.exists());
    rotation::undo(&log, &rotated).unwrap();
    assert_eq!(names(&dir.0), ["0.log"]);
}

#[test]
fn a_follower_goes_on_in_the_new_file_after_a_rotation() {
    let dir = TempDir::new("follow");
    let log = dir.0.join("0.log");
    let writer = SharedLogWriter::create(&log).unwrap();
    let mut follower = LogFollower::new(&log);
    let opts = ReadOptions {
        follow: true,
        ..ReadOptions::default()
    };
    let mut out = Vec::new();
    writer.write(Stream::Stdout, b"one\n").unwrap();
    follower.read(&opts, &mut out).unwrap();
    assert_eq!(String::from_utf8_lossy(&out), "one\n");

    // Renamed; written to before the runtime reopens; then written to the new file.
    let policy = LogRotatePolicy::new(1, 5).unwrap();
    rotation::prepare(&log, &policy, "20261207-200000")
        .unwrap()
        .unwrap();
    writer.write(Stream::Stdout, b"two\n").unwrap();
    // Between the rename and the reopen the follower still reads the old file.
    follower.read(&opts, &mut out).unwrap();
    assert_eq!(String::from_utf8_lossy(&out), "one\ntwo\n");
    writer.write(Stream::Stdout, b"three\n").unwrap();
    writer.reopen().unwrap();
    writer.write(Stream::Stdout, b"four\n").unwrap();
    follower.read(&opts, &mut out).unwrap();
    assert_eq!(String::from_utf8_lossy(&out), "one\ntwo\nthree\nfour\n");
    writer.write(Stream::Stdout, b"five\n").unwrap();
    follower.read(&opts, &mut out).unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out),
        "one\ntwo\nthree\nfour\nfive\n"
    );

    // The raw records, for `podvisor run`'s view, across a second rotation.
    let mut raw = LogFollower::new(&log);
    let mut records = Vec::new();
    raw.read_records(&mut records).unwrap();
    rotation::prepare(&log, &policy, "20261207-200001")
        .unwrap()
        .unwrap();
    writer.write(Stream::Stdout, b"six\n").unwrap();
    writer.reopen().unwrap();
    writer.write(Stream::Stderr, b"seven\n").unwrap();
    raw.read_records(&mut records).unwrap();
    assert_eq!(
        contents(&String::from_utf8_lossy(&records)),
        ["four", "five", "six", "seven"]
    );
}

#[test]
fn a_follower_limit_counts_both_files() {
    let dir = TempDir::new("limit");
    let log = dir.0.join("0.log");
    let writer = SharedLogWriter::create(&log).unwrap();
    let mut follower = LogFollower::new(&log);
    let mut out = Vec::new();
    follower.read(&ReadOptions::default(), &mut out).unwrap();
    assert!(out.is_empty());
    writer.write(Stream::Stdout, b"abc\n").unwrap();
    fs::rename(&log, dir.0.join("0.log.x")).unwrap();
    writer.reopen().unwrap();
    writer.write(Stream::Stdout, b"defgh\n").unwrap();
    let opts = ReadOptions {
        follow: true,
        limit_bytes: Some(6),
        ..ReadOptions::default()
    };
    let progress = follower.read(&opts, &mut out).unwrap();
    assert_eq!(String::from_utf8_lossy(&out), "abc\nde");
    assert!(progress.limit_reached);
}
