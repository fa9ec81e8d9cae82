//! Reproductions of the few Go formatting rules that leak into kubelet messages: `%q`
//! quoting, `time.Duration` printing, `strconv.Atoi` errors and OS error texts.

use std::fmt::Write as _;
use std::time::Duration;

/// Quotes `s` like Go's `strconv.Quote` / `%q`.
pub(crate) fn quote(s: &str) -> String {
    quote_bytes(s.as_bytes())
}

/// Quotes raw bytes like Go's `%q` of a string holding them (invalid UTF-8 becomes `\xNN`).
pub(crate) fn quote_bytes(bytes: &[u8]) -> String {
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
        c if is_go_printable(c) => out.push(c),
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
fn is_go_printable(c: char) -> bool {
    !(c.is_control()
        || c.is_whitespace()
        || matches!(c, '\u{ad}' | '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}'
            | '\u{2060}'..='\u{2064}' | '\u{feff}' | '\u{fff9}'..='\u{fffb}'))
}

/// Formats a duration like Go's `time.Duration.String` (whole and fractional seconds).
pub(crate) fn duration(d: Duration) -> String {
    let total_ms = d.as_millis();
    if total_ms == 0 {
        return "0s".to_string();
    }
    if d < Duration::from_secs(1) {
        return format!("{total_ms}ms");
    }
    let secs = d.as_secs();
    let frac_ms = d.subsec_millis();
    let (h, m, s) = (secs / 3600, (secs / 60) % 60, secs % 60);
    let mut out = String::new();
    if h > 0 {
        let _ = write!(out, "{h}h");
    }
    if h > 0 || m > 0 {
        let _ = write!(out, "{m}m");
    }
    if frac_ms == 0 {
        let _ = write!(out, "{s}s");
    } else {
        let frac = format!("{frac_ms:03}");
        let _ = write!(out, "{s}.{}s", frac.trim_end_matches('0'));
    }
    out
}

/// Parses like Go's `strconv.Atoi`, returning Go's error text on failure.
pub(crate) fn atoi(s: &str) -> Result<i64, String> {
    let digits = s.strip_prefix(['+', '-']).unwrap_or(s);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!(
            "strconv.Atoi: parsing {}: invalid syntax",
            quote(s)
        ));
    }
    s.parse::<i64>()
        .map_err(|_| format!("strconv.Atoi: parsing {}: value out of range", quote(s)))
}

/// The text Go prints for an OS error: the `strerror` message, lower-cased like Go's table
/// (`connection refused`, `no route to host`), without Rust's `(os error N)` suffix.
pub(crate) fn os_error(e: &std::io::Error) -> String {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quote_matches_go() {
        assert_eq!(quote("sh -c sleep 5"), r#""sh -c sleep 5""#);
        assert_eq!(quote("a\"b\\c\n\t\u{1}é"), r#""a\"b\\c\n\t\x01é""#);
        assert_eq!(quote("\u{a0}"), r#""\u00a0""#);
        assert_eq!(quote_bytes(b"\xff"), r#""\xff""#);
    }

    #[test]
    fn duration_matches_go() {
        assert_eq!(duration(Duration::from_secs(1)), "1s");
        assert_eq!(duration(Duration::from_secs(59)), "59s");
        assert_eq!(duration(Duration::from_secs(60)), "1m0s");
        assert_eq!(duration(Duration::from_secs(3661)), "1h1m1s");
        assert_eq!(duration(Duration::from_millis(1500)), "1.5s");
        assert_eq!(duration(Duration::from_millis(250)), "250ms");
    }

    #[test]
    fn atoi_matches_go() {
        assert_eq!(atoi("8080"), Ok(8080));
        assert_eq!(atoi("-1"), Ok(-1));
        assert_eq!(
            atoi("http").unwrap_err(),
            r#"strconv.Atoi: parsing "http": invalid syntax"#
        );
        assert_eq!(
            atoi("").unwrap_err(),
            r#"strconv.Atoi: parsing "": invalid syntax"#
        );
        assert_eq!(
            atoi("99999999999999999999").unwrap_err(),
            r#"strconv.Atoi: parsing "99999999999999999999": value out of range"#
        );
    }

    #[test]
    fn os_error_is_lower_case_without_suffix() {
        let e = std::io::Error::from_raw_os_error(111);
        assert_eq!(os_error(&e), "connection refused");
    }
}
