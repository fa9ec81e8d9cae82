//! Reproductions of the few Go formatting rules that leak into kubelet messages: `%q`
//! quoting, `time.Duration` printing, `strconv.Atoi` errors and OS error texts (the shared
//! ones live in `podvisor_api::gotext`).

pub(crate) use podvisor_api::gotext::{duration, os_error, quote, quote_bytes};

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
