//! The slice of Go's `net/url` that HTTP probes and hooks depend on: building the probe URL
//! from `scheme`, host, port and `path` (`formatURL` in `pkg/probe/http/request.go`), its
//! string form in error messages, and resolving a redirect's `Location` against it.

use std::fmt;

/// An `http`/`https` URL as the prober sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ProbeUrl {
    /// Lower-case scheme.
    pub(crate) scheme: String,
    /// `host[:port]` as it appears in the URL (IPv6 literals in brackets).
    pub(crate) authority: String,
    /// The escaped path, always starting with `/`.
    pub(crate) path: String,
    /// The raw query (without `?`), if the URL has a `?`.
    pub(crate) query: Option<String>,
}

impl ProbeUrl {
    /// Builds `<scheme>://<host:port><path>`; `path` may carry a query (R19).
    pub(crate) fn build(scheme: &str, host_port: &str, path: &str) -> ProbeUrl {
        let (path, query) = split_path(path);
        ProbeUrl {
            scheme: scheme.to_string(),
            authority: host_port.to_string(),
            path,
            query,
        }
    }

    /// The request target: escaped path and query.
    pub(crate) fn request_uri(&self) -> String {
        match &self.query {
            Some(q) => format!("{}?{}", self.path, escape_query(q)),
            None => self.path.clone(),
        }
    }

    /// The host name without port or brackets (Go's `URL.Hostname`).
    pub(crate) fn hostname(&self) -> &str {
        let a = self.authority.as_str();
        if let Some(rest) = a.strip_prefix('[') {
            return rest.split(']').next().unwrap_or(rest);
        }
        a.rsplit_once(':').map_or(a, |(h, _)| h)
    }

    /// The port to dial: explicit, or the scheme's default.
    pub(crate) fn port(&self) -> Result<u16, String> {
        let explicit = if self.authority.starts_with('[') {
            self.authority.rsplit_once("]:").map(|(_, p)| p)
        } else {
            self.authority.rsplit_once(':').map(|(_, p)| p)
        };
        match explicit {
            Some(p) if !p.is_empty() => p
                .parse()
                .map_err(|_| format!("invalid port {}", super::gofmt::quote(&format!(":{p}")))),
            _ if self.scheme == "https" => Ok(443),
            _ => Ok(80),
        }
    }

    /// Resolves a `Location` header against this URL (RFC 3986 section 5.2, as Go's
    /// `URL.Parse` does); the fragment is dropped.
    pub(crate) fn join(&self, location: &str) -> ProbeUrl {
        let location = location.split('#').next().unwrap_or_default();
        if let Some((scheme, rest)) = split_scheme(location) {
            let scheme = scheme.to_ascii_lowercase();
            let (authority, rest) = split_authority(rest).unwrap_or(("", rest));
            let (path, query) = split_path(rest);
            return ProbeUrl {
                scheme,
                authority: authority.to_string(),
                path: normalize(&path),
                query,
            };
        }
        if let Some((authority, rest)) = split_authority(location) {
            let (path, query) = split_path(rest);
            return ProbeUrl {
                scheme: self.scheme.clone(),
                authority: authority.to_string(),
                path: normalize(&path),
                query,
            };
        }
        let mut next = self.clone();
        if location.is_empty() {
            return next;
        }
        let (rel_path, rel_query) = match location.split_once('?') {
            Some((p, q)) => (p, Some(q.to_string())),
            None => (location, None),
        };
        next.query = rel_query;
        if rel_path.is_empty() {
            return next;
        }
        let merged = if rel_path.starts_with('/') {
            rel_path.to_string()
        } else {
            let dir = &self.path[..self.path.rfind('/').map_or(0, |i| i + 1)];
            format!("{dir}{rel_path}")
        };
        next.path = normalize(&escape_path(&merged));
        next
    }
}

impl fmt::Display for ProbeUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}://{}{}", self.scheme, self.authority, self.path)?;
        if let Some(q) = &self.query {
            write!(f, "?{q}")?;
        }
        Ok(())
    }
}

/// `scheme:` prefix of an absolute reference.
fn split_scheme(s: &str) -> Option<(&str, &str)> {
    let (scheme, rest) = s.split_once(':')?;
    let mut chars = scheme.chars();
    let valid = chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
    valid.then_some((scheme, rest))
}

/// `//authority` prefix of a network-path reference.
fn split_authority(s: &str) -> Option<(&str, &str)> {
    let rest = s.strip_prefix("//")?;
    let end = rest.find(['/', '?']).unwrap_or(rest.len());
    Some((&rest[..end], &rest[end..]))
}

/// Splits a probe `path` into escaped path and raw query the way `url.Parse(path)` followed
/// by `URL.String()` and a re-parse does. A path Go cannot parse (bad `%` escape, control
/// character) is kept literally, `?` included, and escaped.
fn split_path(input: &str) -> (String, Option<String>) {
    if has_bad_escape(input) || input.bytes().any(|b| b < 0x20 || b == 0x7f) {
        return (with_slash(escape_all(input.as_bytes())), None);
    }
    let without_fragment = input.split('#').next().unwrap_or_default();
    // An absolute URL or `//host/...` as path: Go replaces scheme and host, keeps the rest.
    let rest = match split_scheme(without_fragment) {
        Some((_, rest)) if rest.starts_with("//") => rest,
        _ => without_fragment,
    };
    let rest = split_authority(rest).map_or(rest, |(_, rest)| rest);
    let (path, query) = match rest.split_once('?') {
        Some((p, q)) => (p, Some(q.to_string())),
        None => (rest, None),
    };
    (with_slash(escape_path(path)), query)
}

fn with_slash(path: String) -> String {
    if path.starts_with('/') {
        path
    } else {
        format!("/{path}")
    }
}

fn has_bad_escape(s: &str) -> bool {
    let b = s.as_bytes();
    b.iter().enumerate().any(|(i, c)| {
        *c == b'%'
            && !(b.get(i + 1).is_some_and(u8::is_ascii_hexdigit)
                && b.get(i + 2).is_some_and(u8::is_ascii_hexdigit))
    })
}

/// Go's `validEncoded(path, encodePath)`: may the path be sent verbatim?
fn valid_encoded(s: &str) -> bool {
    s.bytes()
        .all(|c| c.is_ascii_alphanumeric() || b"-._~!$&'()*+,;=:@[]%/".contains(&c))
}

/// Go's `EscapedPath`: verbatim when validly encoded, else unescaped and re-escaped.
fn escape_path(path: &str) -> String {
    if valid_encoded(path) {
        return path.to_string();
    }
    escape_all(&unescape(path))
}

/// Go's `escape(s, encodePath)`.
fn escape_all(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len());
    for &c in bytes {
        if c.is_ascii_alphanumeric() || b"-._~$&+,/:;=@".contains(&c) {
            out.push(c as char);
        } else {
            out.push_str(&format!("%{c:02X}"));
        }
    }
    out
}

fn unescape(s: &str) -> Vec<u8> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%'
            && let (Some(hi), Some(lo)) = (hex_value(b.get(i + 1)), hex_value(b.get(i + 2)))
        {
            out.push(hi << 4 | lo);
            i += 3;
            continue;
        }
        out.push(b[i]);
        i += 1;
    }
    out
}

fn hex_value(b: Option<&u8>) -> Option<u8> {
    char::from(*b?).to_digit(16).map(|d| d as u8)
}

/// Go writes the raw query into the request line unchanged; only bytes that cannot appear
/// in a request line at all are escaped here.
fn escape_query(q: &str) -> String {
    let mut out = String::with_capacity(q.len());
    for c in q.bytes() {
        if (0x21..0x7f).contains(&c) && c != b'#' {
            out.push(c as char);
        } else {
            out.push_str(&format!("%{c:02X}"));
        }
    }
    out
}

/// Removes `.` and `..` segments (RFC 3986 section 5.2.4).
fn normalize(path: &str) -> String {
    if path.is_empty() {
        return "/".to_string();
    }
    let mut out: Vec<&str> = Vec::new();
    let segments: Vec<&str> = path.split('/').collect();
    let last = segments.len() - 1;
    for (i, seg) in segments.iter().enumerate() {
        match *seg {
            "." => {
                if i == last {
                    out.push("");
                }
            }
            ".." => {
                if out.len() > 1 {
                    out.pop();
                }
                if i == last {
                    out.push("");
                }
            }
            s => out.push(s),
        }
    }
    let joined = out.join("/");
    if joined.starts_with('/') {
        joined
    } else {
        format!("/{joined}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(path: &str) -> ProbeUrl {
        ProbeUrl::build("http", "127.0.0.1:8080", path)
    }

    #[test]
    fn builds_like_format_url() {
        assert_eq!(url("/healthz").to_string(), "http://127.0.0.1:8080/healthz");
        assert_eq!(url("healthz").request_uri(), "/healthz");
        assert_eq!(url("").request_uri(), "/");
        assert_eq!(url("/q?x=1&y=2#frag").request_uri(), "/q?x=1&y=2");
        assert_eq!(url("/a b").request_uri(), "/a%20b");
        assert_eq!(url("/%41").request_uri(), "/%41");
        assert_eq!(url("/%zz?x").request_uri(), "/%25zz%3Fx");
        assert_eq!(
            url("http://other:1/x?y").to_string(),
            "http://127.0.0.1:8080/x?y"
        );
    }

    #[test]
    fn hostname_and_port() {
        let u = ProbeUrl::build("https", "[::1]:8443", "/");
        assert_eq!(u.hostname(), "::1");
        assert_eq!(u.port(), Ok(8443));
        let u = ProbeUrl::build("https", "example.com", "/");
        assert_eq!(u.hostname(), "example.com");
        assert_eq!(u.port(), Ok(443));
    }

    #[test]
    fn joins_locations() {
        let base = url("/a/b?q");
        assert_eq!(base.join("/c").to_string(), "http://127.0.0.1:8080/c");
        assert_eq!(base.join("c?d").to_string(), "http://127.0.0.1:8080/a/c?d");
        assert_eq!(base.join("../c").to_string(), "http://127.0.0.1:8080/c");
        assert_eq!(base.join("?z").to_string(), "http://127.0.0.1:8080/a/b?z");
        assert_eq!(
            base.join("//localhost:9/x").to_string(),
            "http://localhost:9/x"
        );
        assert_eq!(base.join("HTTPS://h/").to_string(), "https://h/");
        assert_eq!(base.join("https://h").to_string(), "https://h/");
    }
}
