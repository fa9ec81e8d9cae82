//! The Go formatting rules that leak into Kubernetes messages, in one place: `%q` quoting
//! (`strconv.Quote`), `time.Duration`'s text, both ways, and OS error texts.

use std::fmt::Write as _;
use std::time::Duration;

/// Quotes `s` like Go's `strconv.Quote` / `%q`: `"` and `\` escaped, the C escapes, other
/// non-printable characters as `\xNN`, `\uNNNN` or `\UNNNNNNNN`; printable Unicode is kept.
#[must_use]
pub fn quote(s: &str) -> String {
    quote_bytes(s.as_bytes())
}

/// Quotes raw bytes like Go's `%q` of a string holding them (invalid UTF-8 becomes `\xNN`).
#[must_use]
pub fn quote_bytes(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() + 2);
    out.push('"');
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            push_quoted_char(&mut out, c);
        }
        for b in chunk.invalid() {
            let _ = write!(out, "\\x{b:02x}");
        }
    }
    out.push('"');
    out
}

fn push_quoted_char(out: &mut String, c: char) {
    match c {
        '"' => out.push_str("\\\""),
        '\\' => out.push_str("\\\\"),
        '\u{7}' => out.push_str("\\a"),
        '\u{8}' => out.push_str("\\b"),
        '\u{c}' => out.push_str("\\f"),
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        '\t' => out.push_str("\\t"),
        '\u{b}' => out.push_str("\\v"),
        c if c.is_ascii() => {
            if (' '..='~').contains(&c) {
                out.push(c);
            } else {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
        }
        c if is_printable(c) => out.push(c),
        c if (c as u32) < 0x10000 => {
            let _ = write!(out, "\\u{:04x}", c as u32);
        }
        c => {
            let _ = write!(out, "\\U{:08x}", c as u32);
        }
    }
}

/// An approximation of Go's `strconv.IsPrint` for non-ASCII characters: controls, spaces
/// other than U+0020 and the common format characters are not printable.
fn is_printable(c: char) -> bool {
    !(c.is_control()
        || c.is_whitespace()
        || matches!(c, '\u{ad}' | '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}'
            | '\u{2060}'..='\u{2064}' | '\u{feff}' | '\u{fff9}'..='\u{fffb}'))
}

/// Go's `time.Duration.String()` for a non-negative duration.
///
/// `0s`, `500ms`, `1.5s`, `10s`, `1m20s`, `2m40s`, `5m0s`, `1h0m0s`; below one second the unit
/// shrinks (`1.5ms`, `2µs`, `100ns`). Trailing zeros of the fraction are dropped.
#[must_use]
pub fn duration(d: Duration) -> String {
    let nanos = d.as_nanos();
    if nanos == 0 {
        return "0s".to_owned();
    }
    if nanos < 1_000_000_000 {
        // Below one second Go switches to the largest unit that keeps the integer part non-zero.
        let (unit, digits) = if nanos < 1_000 {
            ("ns", 0)
        } else if nanos < 1_000_000 {
            ("µs", 3)
        } else {
            ("ms", 6)
        };
        let (int, frac) = split_fraction(nanos, digits);
        return format!("{int}{frac}{unit}");
    }
    let (secs, frac) = split_fraction(nanos, 9);
    let mut out = String::new();
    let minutes = secs / 60;
    let hours = minutes / 60;
    if hours > 0 {
        let _ = write!(out, "{hours}h");
    }
    if minutes > 0 {
        let _ = write!(out, "{}m", minutes % 60);
    }
    let _ = write!(out, "{}{frac}s", secs % 60);
    out
}

/// Parses Go's `time.Duration` text (`10s`, `1m20s`, `5m0s`, `1.5s`, `300ms`, `2µs`) through
/// `jiff`'s friendly format, which reads Go's text as Go writes it. Negative durations and
/// calendar units are refused.
#[must_use]
pub fn parse_duration(text: &str) -> Option<Duration> {
    let d: jiff::SignedDuration = text.parse().ok()?;
    Duration::try_from(d).ok()
}

/// Splits `value / 10^digits` into its integer part and a `.fraction` suffix without trailing
/// zeros (empty when the fraction is zero), like Go's `fmtFrac`.
fn split_fraction(value: u128, digits: u32) -> (u128, String) {
    if digits == 0 {
        return (value, String::new());
    }
    let scale = 10u128.pow(digits);
    let frac = value % scale;
    if frac == 0 {
        return (value / scale, String::new());
    }
    let text = format!("{frac:0width$}", width = digits as usize);
    (value / scale, format!(".{}", text.trim_end_matches('0')))
}

/// The text Go prints for an OS error: the `strerror` message, lower-cased like Go's table
/// (`connection refused`, `no route to host`), without Rust's `(os error N)` suffix.
pub fn os_error(e: &std::io::Error) -> String {
    let text = match e.raw_os_error() {
        Some(code) => {
            let full = std::io::Error::from_raw_os_error(code).to_string();
            let suffix = format!(" (os error {code})");
            full.strip_suffix(&suffix).unwrap_or(&full).to_string()
        }
        None => e.to_string(),
    };
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_lowercase().chain(chars).collect(),
        None => text,
    }
}
