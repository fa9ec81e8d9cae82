//! Container log files in the CRI format, written as containerd writes them and read as the
//! kubelet reads them.
//!
//! One record per line: `<RFC3339Nano UTC> <stdout|stderr> <F|P> <content>\n`. `F` ends a
//! line of output; `P` is a piece of a longer line: a line over [`MAX_LINE_SIZE`] bytes is cut
//! into `P` records of exactly that size followed by an `F` record with the rest, and output
//! that ends without a newline is flushed as a final `P` record. A `\r\n` ending counts as a
//! newline. Timestamps are Go's `RFC3339Nano` (trailing zeros of the fraction dropped), in UTC.
//!
//! Writing: [`CriLogWriter`] (one owner) or [`SharedLogWriter`] (stdout and stderr pumped
//! from two threads into one file). Reading: [`parse_line`], [`read_log`] (what
//! `kubectl logs` needs: tail, since, timestamps, limit bytes) and [`tail`] (the message for
//! `FallbackToLogsOnError`); [`follow::LogFollower`] follows one container's file across
//! rotations. Rotation itself (the kubelet's container log manager) is [`rotation`] and
//! [`manager`].

pub mod follow;
pub mod manager;
pub mod rotation;

use std::fs::{self, File, OpenOptions};
use std::io::{self, BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use jiff::Timestamp;

/// containerd's default `max_container_log_line_size`: longer lines are split.
pub const MAX_LINE_SIZE: usize = 16 * 1024;

/// The kubelet's `MaxContainerTerminationMessageLogLines`.
pub const FALLBACK_LOG_LINES: usize = 80;

/// The kubelet's `MaxContainerTerminationMessageLogLength`.
pub const FALLBACK_LOG_BYTES: usize = 2048;

/// An output stream of a container.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Stream {
    /// Standard output.
    Stdout,
    /// Standard error.
    Stderr,
}

impl Stream {
    /// The word used in log records: `stdout` or `stderr`.
    pub fn as_str(self) -> &'static str {
        match self {
            Stream::Stdout => "stdout",
            Stream::Stderr => "stderr",
        }
    }

    fn index(self) -> usize {
        match self {
            Stream::Stdout => 0,
            Stream::Stderr => 1,
        }
    }
}

/// Writes one container's stdout and stderr into a CRI log file.
///
/// Output is buffered per stream until a line is complete, so lines of the two streams never
/// mix; each call writes its complete records with one `write(2)` on a file opened with
/// `O_APPEND`.
#[derive(Debug)]
pub struct CriLogWriter {
    file: File,
    path: PathBuf,
    pending: [Vec<u8>; 2],
    max_line: usize,
}

impl CriLogWriter {
    /// Opens `path` for appending (creating it with mode 0640 and its parent directories),
    /// close-on-exec.
    pub fn create(path: &Path) -> io::Result<Self> {
        if let Some(dir) = path.parent() {
            fs::create_dir_all(dir).map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!("creating log directory {}: {e}", dir.display()),
                )
            })?;
        }
        Ok(CriLogWriter {
            file: open_for_append(path)?,
            path: path.to_path_buf(),
            pending: [Vec::new(), Vec::new()],
            max_line: MAX_LINE_SIZE,
        })
    }

    /// Changes the line size above which lines are split (0: never split).
    #[must_use]
    pub fn with_max_line(mut self, max_line: usize) -> Self {
        self.max_line = max_line;
        self
    }

    /// The log file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Opens the log's path again (creating it) and writes there from now on: the CRI's
    /// `ReopenContainerLog`, after the node renamed the file to rotate it. Output buffered
    /// for an unfinished line goes to the new file.
    pub fn reopen(&mut self) -> io::Result<()> {
        self.file = open_for_append(&self.path)?;
        Ok(())
    }

    /// Adds output of `stream`, writing every record it completes, stamped now.
    pub fn write(&mut self, stream: Stream, bytes: &[u8]) -> io::Result<()> {
        self.write_at(stream, bytes, Timestamp::now())
    }

    /// [`CriLogWriter::write`] with the time to stamp on the records it completes.
    pub fn write_at(&mut self, stream: Stream, bytes: &[u8], now: Timestamp) -> io::Result<()> {
        let max = self.max_line;
        let pending = &mut self.pending[stream.index()];
        pending.extend_from_slice(bytes);
        let time = format_time(now);
        let mut out = Vec::new();
        let mut start = 0;
        while let Some(nl) = pending[start..].iter().position(|b| *b == b'\n') {
            let end = start + nl;
            let content_end = if end > start && pending[end - 1] == b'\r' {
                end - 1
            } else {
                end
            };
            let mut line = &pending[start..content_end];
            while max > 0 && line.len() > max {
                record(&mut out, &time, stream, b'P', &line[..max]);
                line = &line[max..];
            }
            record(&mut out, &time, stream, b'F', line);
            start = end + 1;
        }
        // An incomplete line longer than the limit is cut already. A trailing '\r' is not
        // counted: it may turn out to be half of a "\r\n".
        if max > 0 {
            loop {
                let rest = &pending[start..];
                let counted = rest.len() - usize::from(rest.last() == Some(&b'\r'));
                if counted <= max {
                    break;
                }
                record(&mut out, &time, stream, b'P', &rest[..max]);
                start += max;
            }
        }
        pending.drain(..start);
        self.emit(&out)
    }

    /// Ends `stream` (its pipe reached EOF): output after the last newline becomes a final `P`
    /// record, as containerd writes it.
    pub fn finish(&mut self, stream: Stream) -> io::Result<()> {
        self.finish_at(stream, Timestamp::now())
    }

    /// [`CriLogWriter::finish`] with the time to stamp.
    pub fn finish_at(&mut self, stream: Stream, now: Timestamp) -> io::Result<()> {
        let pending = std::mem::take(&mut self.pending[stream.index()]);
        if pending.is_empty() {
            return Ok(());
        }
        let time = format_time(now);
        let mut out = Vec::new();
        let step = if self.max_line == 0 {
            pending.len()
        } else {
            self.max_line
        };
        for piece in pending.chunks(step) {
            record(&mut out, &time, stream, b'P', piece);
        }
        self.emit(&out)
    }

    fn emit(&mut self, out: &[u8]) -> io::Result<()> {
        if out.is_empty() {
            return Ok(());
        }
        self.file.write_all(out).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("writing log file {}: {e}", self.path.display()),
            )
        })
    }
}

/// Opens (creating, mode 0640) a log file for appending; std opens it close-on-exec.
fn open_for_append(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o640)
        .open(path)
        .map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("opening log file {}: {e}", path.display()),
            )
        })
}

fn record(out: &mut Vec<u8>, time: &str, stream: Stream, tag: u8, content: &[u8]) {
    out.extend_from_slice(time.as_bytes());
    out.push(b' ');
    out.extend_from_slice(stream.as_str().as_bytes());
    out.push(b' ');
    out.push(tag);
    out.push(b' ');
    out.extend_from_slice(content);
    out.push(b'\n');
}

/// Go's `time.RFC3339Nano` in UTC: `2026-11-21T06:20:28.123456789Z`, trailing zeros of the
/// fraction dropped (and the fraction with them when zero), as containerd stamps records.
pub fn format_time(t: Timestamp) -> String {
    t.strftime("%Y-%m-%dT%H:%M:%S%.fZ").to_string()
}

/// The kubelet's `RFC3339NanoFixed` (always nine fraction digits), used by `--timestamps`.
pub fn format_time_fixed(t: Timestamp) -> String {
    t.strftime("%Y-%m-%dT%H:%M:%S.%9fZ").to_string()
}

/// A [`CriLogWriter`] shared by the threads pumping a container's stdout and stderr.
#[derive(Debug, Clone)]
pub struct SharedLogWriter {
    inner: Arc<Mutex<CriLogWriter>>,
}

impl SharedLogWriter {
    /// Shares `writer`.
    pub fn new(writer: CriLogWriter) -> Self {
        SharedLogWriter {
            inner: Arc::new(Mutex::new(writer)),
        }
    }

    /// Opens `path` like [`CriLogWriter::create`] and shares the writer.
    pub fn create(path: &Path) -> io::Result<Self> {
        CriLogWriter::create(path).map(Self::new)
    }

    /// [`CriLogWriter::write`].
    pub fn write(&self, stream: Stream, bytes: &[u8]) -> io::Result<()> {
        self.lock().write(stream, bytes)
    }

    /// [`CriLogWriter::finish`].
    pub fn finish(&self, stream: Stream) -> io::Result<()> {
        self.lock().finish(stream)
    }

    /// The log file's path.
    pub fn path(&self) -> PathBuf {
        self.lock().path().to_path_buf()
    }

    /// [`CriLogWriter::reopen`]: under the writers' lock, so no record is split between the
    /// renamed file and the new one.
    pub fn reopen(&self) -> io::Result<()> {
        self.lock().reopen()
    }

    /// An [`io::Write`] for one stream (for `io::copy`); `flush` does nothing because only
    /// [`SharedLogWriter::finish`] may end a line early.
    pub fn stream(&self, stream: Stream) -> StreamWriter {
        StreamWriter {
            shared: self.clone(),
            stream,
        }
    }

    /// Copies `reader` (a container's stdout or stderr pipe) into the log until EOF, then
    /// finishes the stream. Like containerd it keeps draining after a failed write, so the
    /// container never blocks on a full pipe, and returns the first write error at the end.
    pub fn pump(&self, stream: Stream, mut reader: impl Read) -> io::Result<()> {
        let mut buf = vec![0u8; 32 * 1024];
        let mut first_error = None;
        loop {
            match reader.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    if let Err(e) = self.write(stream, &buf[..n]) {
                        first_error.get_or_insert(e);
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    first_error.get_or_insert(io::Error::new(
                        e.kind(),
                        format!("reading container {}: {e}", stream.as_str()),
                    ));
                    break;
                }
            }
        }
        if let Err(e) = self.finish(stream) {
            first_error.get_or_insert(e);
        }
        first_error.map_or(Ok(()), Err)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, CriLogWriter> {
        // A panic while holding the lock leaves the buffers consistent enough to go on.
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// One stream of a [`SharedLogWriter`] as an [`io::Write`].
#[derive(Debug, Clone)]
pub struct StreamWriter {
    shared: SharedLogWriter,
    stream: Stream,
}

impl Write for StreamWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.shared.write(self.stream, buf)?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// One parsed log record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogLine {
    /// When the record was written.
    pub time: Timestamp,
    /// Which stream it came from.
    pub stream: Stream,
    /// A `P` record: the line continues in the next record of the same stream.
    pub partial: bool,
    /// The content, without the record's newline (invalid UTF-8 replaced).
    pub content: String,
}

/// Parses one record (with or without its trailing newline) as the kubelet does
/// (`parseCRILog`): any RFC 3339 timestamp, `stdout` or `stderr`, and a tag list whose first
/// tag `P` marks a partial line (anything else is a full line). `None` when malformed.
pub fn parse_line(line: &str) -> Option<LogLine> {
    let raw = parse_raw(line.as_bytes())?;
    Some(LogLine {
        time: raw.time,
        stream: raw.stream,
        partial: raw.partial,
        content: String::from_utf8_lossy(raw.content).into_owned(),
    })
}

struct RawLine<'a> {
    time: Timestamp,
    stream: Stream,
    partial: bool,
    /// Without the record's newline.
    content: &'a [u8],
}

fn parse_raw(line: &[u8]) -> Option<RawLine<'_>> {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    let (time, rest) = split_space(line)?;
    let time: Timestamp = std::str::from_utf8(time).ok()?.parse().ok()?;
    let (stream, rest) = split_space(rest)?;
    let stream = match stream {
        b"stdout" => Stream::Stdout,
        b"stderr" => Stream::Stderr,
        _ => return None,
    };
    let (tags, content) = split_space(rest)?;
    let partial = tags.split(|b| *b == b':').next() == Some(b"P");
    Some(RawLine {
        time,
        stream,
        partial,
        content,
    })
}

fn split_space(s: &[u8]) -> Option<(&[u8], &[u8])> {
    let i = s.iter().position(|b| *b == b' ')?;
    Some((&s[..i], &s[i + 1..]))
}

/// What to read from a log file (the kubelet's `LogOptions`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReadOptions {
    /// Only the last N records (`tailLines`). Records, not lines of output: a line split
    /// into `P` records counts once per record, as in the kubelet.
    pub tail_lines: Option<usize>,
    /// Skip records older than this (`sinceTime`, or now minus `sinceSeconds`).
    pub since: Option<Timestamp>,
    /// Prefix every record with its time (`RFC3339NanoFixed`) and a space (`timestamps`).
    pub timestamps: bool,
    /// Stop after this many bytes of output, cutting the last record (`limitBytes`).
    pub limit_bytes: Option<usize>,
    /// Only this stream (CRI `stream`); `None` for both.
    pub stream: Option<Stream>,
    /// Start reading at this byte offset (a previous [`ReadProgress::offset`]) instead of
    /// looking for the tail.
    pub start_offset: Option<u64>,
    /// The caller follows the file: an incomplete last record is left for the next call
    /// instead of being written, and `tail_lines` only chooses where to start.
    pub follow: bool,
}

/// Where a [`read_log_to`] call stopped.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReadProgress {
    /// The offset after the last record consumed: pass it as [`ReadOptions::start_offset`]
    /// to continue.
    pub offset: u64,
    /// Bytes written to the output.
    pub written: u64,
    /// [`ReadOptions::limit_bytes`] was reached.
    pub limit_reached: bool,
}

/// Reads a CRI log file into `out` as `kubectl logs` shows it (the kubelet's `ReadLogs`
/// without follow): full lines end with a newline, partial records are joined, malformed
/// records are skipped.
pub fn read_log_to(
    path: &Path,
    opts: &ReadOptions,
    out: &mut impl Write,
) -> io::Result<ReadProgress> {
    let file = File::open(path).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!(
                "failed to open log file {:?}: {e}",
                path.display().to_string()
            ),
        )
    })?;
    read_open_log_to(&file, opts, out)
}

/// [`read_log_to`] over a log file already open (the one a follower holds, which may have
/// been renamed since).
pub fn read_open_log_to(
    file: &File,
    opts: &ReadOptions,
    out: &mut impl Write,
) -> io::Result<ReadProgress> {
    let start = match (opts.start_offset, opts.tail_lines) {
        (Some(offset), _) => offset,
        (None, Some(n)) => tail_start(file, n, opts.stream)?,
        (None, None) => 0,
    };
    let mut reader = BufReader::new(file);
    reader.seek(SeekFrom::Start(start))?;
    let mut progress = ReadProgress {
        offset: start,
        ..ReadProgress::default()
    };
    let mut remaining_lines = match opts.tail_lines {
        Some(n) if !opts.follow && opts.start_offset.is_none() => Some(n),
        _ => None,
    };
    let mut remaining_bytes = opts.limit_bytes.unwrap_or(usize::MAX);
    if remaining_bytes == 0 {
        progress.limit_reached = true;
        return Ok(progress);
    }
    let mut line = Vec::new();
    loop {
        if remaining_lines == Some(0) {
            return Ok(progress);
        }
        line.clear();
        let n = reader.read_until(b'\n', &mut line)?;
        if n == 0 {
            return Ok(progress);
        }
        let complete = line.last() == Some(&b'\n');
        if !complete && opts.follow {
            return Ok(progress);
        }
        progress.offset += n as u64;
        let Some(raw) = parse_raw(&line) else {
            continue;
        };
        if opts.stream.is_some_and(|s| s != raw.stream) {
            continue;
        }
        if let Some(r) = remaining_lines.as_mut() {
            *r -= 1;
        }
        if opts.since.is_some_and(|since| raw.time < since) {
            continue;
        }
        let mut text = Vec::with_capacity(raw.content.len() + 32);
        if opts.timestamps {
            text.extend_from_slice(format_time_fixed(raw.time).as_bytes());
            text.push(b' ');
        }
        text.extend_from_slice(raw.content);
        if !raw.partial && complete {
            text.push(b'\n');
        }
        let take = text.len().min(remaining_bytes);
        out.write_all(&text[..take])?;
        progress.written += take as u64;
        remaining_bytes -= take;
        if remaining_bytes == 0 {
            progress.limit_reached = true;
            return Ok(progress);
        }
        if !complete {
            return Ok(progress);
        }
    }
}

/// [`read_log_to`] into a buffer.
pub fn read_log(path: &Path, opts: &ReadOptions) -> io::Result<Vec<u8>> {
    let mut out = Vec::new();
    read_log_to(path, opts, &mut out)?;
    Ok(out)
}

/// The offset of the `n`-th last complete record (of `stream`, if given); an incomplete
/// last record is not counted (the kubelet's `FindTailLineStartIndex`).
fn tail_start(file: &File, n: usize, stream: Option<Stream>) -> io::Result<u64> {
    const BLOCK: u64 = 64 * 1024;
    let size = file.metadata()?.len();
    let matches = |line_start: u64| -> io::Result<bool> {
        let Some(stream) = stream else {
            return Ok(true);
        };
        // The stream word sits right after the timestamp: 64 bytes are plenty.
        let mut head = [0u8; 64];
        let got = file.read_at(&mut head, line_start)?;
        Ok(parse_stream_word(&head[..got]) == Some(stream))
    };
    let mut count = 0;
    let mut seen_newline = false;
    let mut block_end = size;
    let mut buf = vec![0u8; BLOCK as usize];
    while block_end > 0 {
        let block_start = block_end.saturating_sub(BLOCK);
        let len = (block_end - block_start) as usize;
        file.read_exact_at(&mut buf[..len], block_start)?;
        for i in (0..len).rev() {
            if buf[i] != b'\n' {
                continue;
            }
            let line_start = block_start + i as u64 + 1;
            // Every newline but the last one ends the record that starts after it.
            if seen_newline {
                if matches(line_start)? {
                    count += 1;
                    if count == n {
                        return Ok(line_start);
                    }
                }
            } else {
                if n == 0 {
                    return Ok(line_start);
                }
                seen_newline = true;
            }
        }
        block_end = block_start;
    }
    Ok(0)
}

fn parse_stream_word(head: &[u8]) -> Option<Stream> {
    let (_, rest) = split_space(head)?;
    let (word, _) = split_space(rest)?;
    match word {
        b"stdout" => Some(Stream::Stdout),
        b"stderr" => Some(Stream::Stderr),
        _ => None,
    }
}

/// The message the kubelet uses for `FallbackToLogsOnError`
/// (`readLastStringFromContainerLogs`): the output of the last `max_lines` records, of which
/// the last `max_bytes` bytes are kept (full lines keep their newline, partial records are
/// joined). The kubelet uses 80 lines and 2048 bytes ([`FALLBACK_LOG_LINES`],
/// [`FALLBACK_LOG_BYTES`]). A read failure gives the kubelet's error text instead.
pub fn tail(path: &Path, max_lines: usize, max_bytes: usize) -> String {
    let opts = ReadOptions {
        tail_lines: Some(max_lines),
        ..ReadOptions::default()
    };
    match read_log(path, &opts) {
        Ok(out) => {
            let keep = &out[out.len().saturating_sub(max_bytes)..];
            String::from_utf8_lossy(keep).into_owned()
        }
        Err(e) => format!("Error on reading termination message from logs: {e}"),
    }
}
