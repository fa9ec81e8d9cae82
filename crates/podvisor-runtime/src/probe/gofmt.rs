//! Reproductions of the few Go formatting rules that leak into kubelet messages: `%q`
//! quoting, `time.Duration` printing, `strconv.Atoi` errors and OS error texts.

pub(crate) use podvisor_api::gotext::{duration, quote, quote_bytes};

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
