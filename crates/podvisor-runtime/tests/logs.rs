//! CRI log files: containerd's writing rules (F/P records, 16 KiB split, two streams) and the
//! kubelet's reading rules (parse, tail, since, timestamps, limit bytes, fallback message).

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use jiff::Timestamp;
use podvisor_runtime::logs::{
    self, CriLogWriter, LogLine, MAX_LINE_SIZE, ReadOptions, SharedLogWriter, Stream,
};

/// A fresh directory under the system temp dir, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        let dir = std::env::temp_dir().join(format!(
            "podvisor-logs-test-{tag}-{}-{}",
            std::process::id(),
            Timestamp::now().as_nanosecond()
        ));
        fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }

    fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

fn ts(s: &str) -> Timestamp {
    s.parse().unwrap()
}

const T: &str = "2026-11-21T06:20:28.123456789Z";

/// The records of a log file as (stream, tag, content) triples.
fn records(path: &Path) -> Vec<(String, String, String)> {
    // Split on '\n' only: `str::lines` would also eat a '\r' that belongs to the content.
    fs::read_to_string(path)
        .unwrap()
        .split_terminator('\n')
        .map(|l| {
            let mut parts = l.splitn(4, ' ');
            let _time = parts.next().unwrap();
            (
                parts.next().unwrap().to_owned(),
                parts.next().unwrap().to_owned(),
                parts.next().unwrap().to_owned(),
            )
        })
        .collect()
}

fn rec(stream: &str, tag: &str, content: &str) -> (String, String, String) {
    (stream.into(), tag.into(), content.into())
}

#[test]
fn records_are_exactly_as_containerd_writes_them() {
    let dir = TempDir::new("format");
    let path = dir.path("nested/app/0.log");
    let mut w = CriLogWriter::create(&path).unwrap();
    w.write_at(Stream::Stdout, b"hello\n\nbye\r\n", ts(T))
        .unwrap();
    w.write_at(Stream::Stderr, b"oops\n", ts("2026-11-21T06:20:29Z"))
        .unwrap();
    w.write_at(Stream::Stdout, b"half", ts("2026-11-21T06:20:30.5Z"))
        .unwrap();
    w.finish_at(Stream::Stdout, ts("2026-11-21T06:20:30.500000001Z"))
        .unwrap();
    w.finish_at(Stream::Stderr, ts(T)).unwrap();
    assert_eq!(
        fs::read_to_string(&path).unwrap(),
        "2026-11-21T06:20:28.123456789Z stdout F hello\n\
         2026-11-21T06:20:28.123456789Z stdout F \n\
         2026-11-21T06:20:28.123456789Z stdout F bye\n\
         2026-11-21T06:20:29Z stderr F oops\n\
         2026-11-21T06:20:30.500000001Z stdout P half\n"
    );
    let mode = fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o640);

    // Appends to an existing file.
    let mut w = CriLogWriter::create(&path).unwrap();
    w.write_at(Stream::Stdout, b"again\n", ts(T)).unwrap();
    assert_eq!(records(&path).len(), 6);
    assert_eq!(
        logs::format_time(ts("2026-11-21T06:20:28.1234Z")),
        "2026-11-21T06:20:28.1234Z"
    );
}

#[test]
fn lines_arrive_in_pieces_and_carriage_returns_are_kept_inside_lines() {
    let dir = TempDir::new("pieces");
    let path = dir.path("0.log");
    let mut w = CriLogWriter::create(&path).unwrap();
    for piece in [
        &b"hel"[..],
        b"lo\nwor",
        b"ld\r",
        b"\n",
        b"a\rb\n",
        b"tail\r",
    ] {
        w.write(Stream::Stdout, piece).unwrap();
    }
    assert_eq!(
        records(&path),
        [
            rec("stdout", "F", "hello"),
            rec("stdout", "F", "world"),
            rec("stdout", "F", "a\rb")
        ]
    );
    w.finish(Stream::Stdout).unwrap();
    assert_eq!(records(&path)[3], rec("stdout", "P", "tail\r"));
    // Finishing twice, or an empty stream, writes nothing.
    w.finish(Stream::Stdout).unwrap();
    w.finish(Stream::Stderr).unwrap();
    assert_eq!(records(&path).len(), 4);
}

#[test]
fn long_lines_are_split_at_16_kib_with_partial_records() {
    let dir = TempDir::new("split");
    let path = dir.path("0.log");
    let mut w = CriLogWriter::create(&path).unwrap();
    let line = |n: usize, c: u8| vec![c; n];

    // Exactly the limit: one full record.
    w.write(
        Stream::Stdout,
        &[line(MAX_LINE_SIZE, b'a'), b"\n".to_vec()].concat(),
    )
    .unwrap();
    // One byte more: a partial record of exactly the limit, then the rest.
    w.write(
        Stream::Stdout,
        &[line(MAX_LINE_SIZE + 1, b'b'), b"\n".to_vec()].concat(),
    )
    .unwrap();
    // The limit followed by "\r\n" is still one full record.
    w.write(
        Stream::Stdout,
        &[line(MAX_LINE_SIZE, b'c'), b"\r\n".to_vec()].concat(),
    )
    .unwrap();
    let got: Vec<(String, String, usize)> = records(&path)
        .into_iter()
        .map(|(s, t, c)| (s, t, c.len()))
        .collect();
    let want = |t: &str, n: usize| ("stdout".to_owned(), t.to_owned(), n);
    assert_eq!(
        got,
        [
            want("F", MAX_LINE_SIZE),
            want("P", MAX_LINE_SIZE),
            want("F", 1),
            want("F", MAX_LINE_SIZE)
        ]
    );

    // A long line written in small pieces is cut as soon as it passes the limit.
    let dir = TempDir::new("split2");
    let path = dir.path("0.log");
    let mut w = CriLogWriter::create(&path).unwrap();
    let total = 40_000;
    for chunk in line(total, b'x').chunks(1000) {
        w.write(Stream::Stderr, chunk).unwrap();
    }
    let tags: Vec<(String, usize)> = records(&path)
        .into_iter()
        .map(|(_, t, c)| (t, c.len()))
        .collect();
    assert_eq!(
        tags,
        [
            ("P".to_owned(), MAX_LINE_SIZE),
            ("P".to_owned(), MAX_LINE_SIZE)
        ]
    );
    w.write(Stream::Stderr, b"\n").unwrap();
    assert_eq!(
        records(&path)[2],
        rec("stderr", "F", &"x".repeat(total - 2 * MAX_LINE_SIZE))
    );

    // A small limit, and an unterminated tail longer than it.
    let dir = TempDir::new("split3");
    let path = dir.path("0.log");
    let mut w = CriLogWriter::create(&path).unwrap().with_max_line(4);
    w.write(Stream::Stdout, b"abcdefghij\nklmnopqrs").unwrap();
    w.finish(Stream::Stdout).unwrap();
    assert_eq!(
        records(&path),
        [
            rec("stdout", "P", "abcd"),
            rec("stdout", "P", "efgh"),
            rec("stdout", "F", "ij"),
            rec("stdout", "P", "klmn"),
            rec("stdout", "P", "opqr"),
            rec("stdout", "P", "s"),
        ]
    );
}

#[test]
fn two_streams_buffer_separately() {
    let dir = TempDir::new("streams");
    let path = dir.path("0.log");
    let mut w = CriLogWriter::create(&path).unwrap();
    w.write(Stream::Stdout, b"out-").unwrap();
    w.write(Stream::Stderr, b"err-1\nerr-").unwrap();
    w.write(Stream::Stdout, b"1\n").unwrap();
    w.write(Stream::Stderr, b"2\n").unwrap();
    assert_eq!(
        records(&path),
        [
            rec("stderr", "F", "err-1"),
            rec("stdout", "F", "out-1"),
            rec("stderr", "F", "err-2")
        ]
    );
}

#[test]
fn shared_writer_keeps_records_whole_across_threads() {
    let dir = TempDir::new("shared");
    let path = dir.path("0.log");
    let shared = SharedLogWriter::create(&path).unwrap();
    let lines = 2000;
    let threads: Vec<_> = [Stream::Stdout, Stream::Stderr]
        .into_iter()
        .map(|stream| {
            let shared = shared.clone();
            std::thread::spawn(move || {
                let text: String = (0..lines)
                    .map(|i| format!("{}-line-{i}\n", stream.as_str()))
                    .collect();
                // Odd-sized pieces so that lines straddle writes.
                for piece in text.as_bytes().chunks(7) {
                    shared.write(stream, piece).unwrap();
                }
                shared.write(stream, b"no newline").unwrap();
                shared.finish(stream).unwrap();
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let text = fs::read_to_string(&path).unwrap();
    for stream in [Stream::Stdout, Stream::Stderr] {
        let mine: Vec<LogLine> = text
            .lines()
            .map(|l| logs::parse_line(l).expect("every record parses"))
            .filter(|l| l.stream == stream)
            .collect();
        assert_eq!(mine.len(), lines + 1);
        for (i, l) in mine.iter().take(lines).enumerate() {
            assert_eq!(l.content, format!("{}-line-{i}", stream.as_str()));
            assert!(!l.partial);
        }
        assert_eq!(mine[lines].content, "no newline");
        assert!(mine[lines].partial);
    }
}

#[test]
fn pump_copies_a_pipe_and_finishes_the_stream() {
    let dir = TempDir::new("pump");
    let path = dir.path("0.log");
    let shared = SharedLogWriter::create(&path).unwrap();
    shared
        .pump(Stream::Stdout, &b"one\ntwo\nthree"[..])
        .unwrap();
    let mut w = shared.stream(Stream::Stderr);
    std::io::Write::write_all(&mut w, b"via io::Write\n").unwrap();
    assert_eq!(
        records(&path),
        [
            rec("stdout", "F", "one"),
            rec("stdout", "F", "two"),
            rec("stdout", "P", "three"),
            rec("stderr", "F", "via io::Write")
        ]
    );
}

#[test]
fn parse_round_trip_and_malformed_records() {
    let dir = TempDir::new("parse");
    let path = dir.path("0.log");
    let mut w = CriLogWriter::create(&path).unwrap().with_max_line(5);
    let input = "first line\nsecond\n\nü-nicode ok\n";
    w.write_at(Stream::Stdout, input.as_bytes(), ts(T)).unwrap();
    let parsed: Vec<LogLine> = fs::read_to_string(&path)
        .unwrap()
        .lines()
        .map(|l| logs::parse_line(l).unwrap())
        .collect();
    let mut rebuilt = String::new();
    for l in &parsed {
        assert_eq!(l.time, ts(T));
        assert_eq!(l.stream, Stream::Stdout);
        rebuilt.push_str(&l.content);
        if !l.partial {
            rebuilt.push('\n');
        }
    }
    assert_eq!(rebuilt, input);

    let line =
        logs::parse_line("2016-10-06T00:17:09.669794202Z stderr P:x content with  spaces \n")
            .unwrap();
    assert_eq!(
        line,
        LogLine {
            time: ts("2016-10-06T00:17:09.669794202Z"),
            stream: Stream::Stderr,
            partial: true,
            content: "content with  spaces ".into(),
        }
    );
    let offset = logs::parse_line("2016-10-06T02:17:09+02:00 stdout F x").unwrap();
    assert_eq!(offset.time, ts("2016-10-06T00:17:09Z"));
    assert!(!offset.partial);
    for bad in [
        "",
        "garbage",
        "2016-10-06T00:17:09Z stdin F x",
        "yesterday stdout F x",
        "2016-10-06T00:17:09Z stdout",
        "2016-10-06T00:17:09Z stdout F",
    ] {
        assert_eq!(logs::parse_line(bad), None, "{bad:?}");
    }
    // An empty full line has an empty content after the tag's space.
    assert_eq!(
        logs::parse_line("2016-10-06T00:17:09Z stdout F ")
            .unwrap()
            .content,
        ""
    );
}

/// A log with ten records a second apart: stdout `line-0` .. `line-9`, stderr for odd ones,
/// line 4 split into two partial records.
fn sample_log(dir: &TempDir) -> PathBuf {
    let path = dir.path("sample.log");
    let mut w = CriLogWriter::create(&path).unwrap();
    for i in 0..10u8 {
        let t = ts(&format!("2026-11-21T06:00:0{i}.5Z"));
        let stream = if i % 2 == 1 {
            Stream::Stderr
        } else {
            Stream::Stdout
        };
        if i == 4 {
            w.write_at(stream, b"line-", t).unwrap();
            w.finish_at(stream, t).unwrap();
            w.write_at(stream, b"4\n", t).unwrap();
        } else {
            w.write_at(stream, format!("line-{i}\n").as_bytes(), t)
                .unwrap();
        }
    }
    path
}

fn read(path: &Path, opts: ReadOptions) -> String {
    String::from_utf8(logs::read_log(path, &opts).unwrap()).unwrap()
}

#[test]
fn read_log_like_kubectl_logs() {
    let dir = TempDir::new("read");
    let path = sample_log(&dir);
    let all: String = (0..10).map(|i| format!("line-{i}\n")).collect();
    assert_eq!(read(&path, ReadOptions::default()), all);

    // Tail counts records: the split line 4 is two.
    let tail = |n| {
        read(
            &path,
            ReadOptions {
                tail_lines: Some(n),
                ..ReadOptions::default()
            },
        )
    };
    assert_eq!(tail(0), "");
    assert_eq!(tail(1), "line-9\n");
    assert_eq!(tail(3), "line-7\nline-8\nline-9\n");
    assert_eq!(tail(6), "4\nline-5\nline-6\nline-7\nline-8\nline-9\n");
    assert_eq!(tail(7), "line-4\nline-5\nline-6\nline-7\nline-8\nline-9\n");
    assert_eq!(tail(100), all);

    assert_eq!(
        read(
            &path,
            ReadOptions {
                since: Some(ts("2026-11-21T06:00:08Z")),
                ..ReadOptions::default()
            }
        ),
        "line-8\nline-9\n"
    );
    assert_eq!(
        read(
            &path,
            ReadOptions {
                tail_lines: Some(2),
                timestamps: true,
                ..ReadOptions::default()
            }
        ),
        "2026-11-21T06:00:08.500000000Z line-8\n2026-11-21T06:00:09.500000000Z line-9\n"
    );
    assert_eq!(
        read(
            &path,
            ReadOptions {
                limit_bytes: Some(10),
                ..ReadOptions::default()
            }
        ),
        "line-0\nlin"
    );
    assert_eq!(
        read(
            &path,
            ReadOptions {
                stream: Some(Stream::Stderr),
                tail_lines: Some(2),
                ..ReadOptions::default()
            }
        ),
        "line-7\nline-9\n"
    );
    assert_eq!(
        read(
            &path,
            ReadOptions {
                stream: Some(Stream::Stdout),
                ..ReadOptions::default()
            }
        ),
        "line-0\nline-2\nline-4\nline-6\nline-8\n"
    );
}

#[test]
fn read_log_resumes_from_an_offset_and_leaves_incomplete_records_to_followers() {
    let dir = TempDir::new("follow");
    let path = sample_log(&dir);
    let mut out = Vec::new();
    let follow = ReadOptions {
        tail_lines: Some(1),
        follow: true,
        ..ReadOptions::default()
    };
    let progress = logs::read_log_to(&path, &follow, &mut out).unwrap();
    assert_eq!(String::from_utf8_lossy(&out), "line-9\n");
    assert_eq!(progress.offset, fs::metadata(&path).unwrap().len());

    // A writer in the middle of a record: the follower waits for its end.
    let full = "2026-11-21T06:00:10Z stdout F line-10\n";
    let mut f = fs::OpenOptions::new().append(true).open(&path).unwrap();
    std::io::Write::write_all(&mut f, &full.as_bytes()[..20]).unwrap();
    let resume = ReadOptions {
        start_offset: Some(progress.offset),
        follow: true,
        ..ReadOptions::default()
    };
    let mut out = Vec::new();
    let p2 = logs::read_log_to(&path, &resume, &mut out).unwrap();
    assert_eq!((p2.offset, p2.written), (progress.offset, 0));
    // Not following, the kubelet writes an incomplete last record as it is.
    let once = ReadOptions {
        start_offset: Some(progress.offset),
        ..ReadOptions::default()
    };
    std::io::Write::write_all(&mut f, &full.as_bytes()[20..full.len() - 1]).unwrap();
    assert_eq!(read(&path, once), "line-10");
    std::io::Write::write_all(&mut f, b"\n").unwrap();
    let mut out = Vec::new();
    let p3 = logs::read_log_to(&path, &resume, &mut out).unwrap();
    assert_eq!(String::from_utf8_lossy(&out), "line-10\n");
    assert_eq!(p3.offset, fs::metadata(&path).unwrap().len());

    let missing = logs::read_log(&dir.path("nope.log"), &ReadOptions::default()).unwrap_err();
    assert!(
        missing.to_string().starts_with("failed to open log file"),
        "{missing}"
    );
}

#[test]
fn tail_for_fallback_to_logs_on_error() {
    let dir = TempDir::new("tail");
    let path = dir.path("0.log");
    let mut w = CriLogWriter::create(&path).unwrap();
    let text: String = (0..100).map(|i| format!("l{i}\n")).collect();
    w.write(Stream::Stdout, text.as_bytes()).unwrap();
    let want: String = (20..100).map(|i| format!("l{i}\n")).collect();
    assert_eq!(
        logs::tail(&path, logs::FALLBACK_LOG_LINES, logs::FALLBACK_LOG_BYTES),
        want,
        "at most 80 records"
    );

    // At most 2048 bytes: the end of the output is kept, partial records are joined.
    let dir = TempDir::new("tail2");
    let path = dir.path("0.log");
    let mut w = CriLogWriter::create(&path).unwrap().with_max_line(1000);
    w.write(Stream::Stderr, "y".repeat(3000).as_bytes())
        .unwrap();
    w.write(Stream::Stderr, b"z\nfatal: boom\n").unwrap();
    let got = logs::tail(&path, 80, 2048);
    assert_eq!(got.len(), 2048);
    assert!(got.ends_with("yyyz\nfatal: boom\n"), "{got:?}");
    assert_eq!(logs::tail(&path, 1, 2048), "fatal: boom\n");
    assert_eq!(logs::tail(&path, 2, 5), "boom\n");

    let missing = logs::tail(&dir.path("missing.log"), 80, 2048);
    assert!(
        missing
            .starts_with("Error on reading termination message from logs: failed to open log file"),
        "{missing}"
    );
}
