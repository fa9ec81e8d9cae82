//! String-syntax checks with Kubernetes' exact messages
//! (`k8s.io/apimachinery/pkg/util/validation`). Each returns the list of
//! problems; an empty list means valid.

const DNS1123_LABEL_FMT: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
const DNS1123_LABEL_MSG: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character";
const DNS1123_SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character";
const QUALIFIED_NAME_FMT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const QUALIFIED_NAME_MSG: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const LABEL_VALUE_MSG: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const RELAXED_ENV_VAR_NAME_MSG: &str = "a valid environment variable name must consist only of printable ASCII characters other than '='";
const CONFIG_MAP_KEY_FMT: &str = "[-._a-zA-Z0-9]+";
const CONFIG_MAP_KEY_MSG: &str =
    "a valid config key must consist of alphanumeric characters, '-', '_' or '.'";
const HTTP_HEADER_NAME_FMT: &str = "[-A-Za-z0-9]+";
const HTTP_HEADER_NAME_MSG: &str =
    "a valid HTTP header must consist of alphanumeric characters or '-'";

/// Longest DNS-1123 label.
pub const DNS1123_LABEL_MAX: usize = 63;
/// Longest DNS-1123 subdomain.
pub const DNS1123_SUBDOMAIN_MAX: usize = 253;
const QUALIFIED_NAME_MAX: usize = 63;
const LABEL_VALUE_MAX: usize = 63;

/// Kubernetes' `RegexError`: the message plus examples and the regex.
#[must_use]
pub fn regex_error(msg: &str, fmt: &str, examples: &[&str]) -> String {
    if examples.is_empty() {
        return format!("{msg} (regex used for validation is '{fmt}')");
    }
    let mut out = format!("{msg} (e.g. ");
    for (i, ex) in examples.iter().enumerate() {
        if i > 0 {
            out.push_str(" or ");
        }
        out.push('\'');
        out.push_str(ex);
        out.push_str("', ");
    }
    out.push_str("regex used for validation is '");
    out.push_str(fmt);
    out.push_str("')");
    out
}

/// Kubernetes' `MaxLenError`.
#[must_use]
pub fn max_len_error(n: usize) -> String {
    format!("must be no more than {n} characters")
}

/// Kubernetes' `InclusiveRangeError`.
#[must_use]
pub fn inclusive_range_error(lo: i64, hi: i64) -> String {
    format!("must be between {lo} and {hi}, inclusive")
}

fn is_lower_alnum(b: u8) -> bool {
    b.is_ascii_lowercase() || b.is_ascii_digit()
}

/// Matches `[a-z0-9]([-a-z0-9]*[a-z0-9])?` exactly.
fn matches_dns_label(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && is_lower_alnum(b[0])
        && is_lower_alnum(b[b.len() - 1])
        && b.iter().all(|&c| is_lower_alnum(c) || c == b'-')
}

/// A DNS-1123 label (container, volume and port names, namespaces).
#[must_use]
pub fn is_dns1123_label(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > DNS1123_LABEL_MAX {
        errs.push(max_len_error(DNS1123_LABEL_MAX));
    }
    if !matches_dns_label(value) {
        errs.push(regex_error(
            DNS1123_LABEL_MSG,
            DNS1123_LABEL_FMT,
            &["my-name", "123-abc"],
        ));
    }
    errs
}

/// A DNS-1123 subdomain (object names, hostnames).
#[must_use]
pub fn is_dns1123_subdomain(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > DNS1123_SUBDOMAIN_MAX {
        errs.push(max_len_error(DNS1123_SUBDOMAIN_MAX));
    }
    if !value.split('.').all(matches_dns_label) {
        let fmt = format!("{DNS1123_LABEL_FMT}(\\.{DNS1123_LABEL_FMT})*");
        errs.push(regex_error(DNS1123_SUBDOMAIN_MSG, &fmt, &["example.com"]));
    }
    errs
}

/// Kubernetes' `NameIsDNSSubdomain`: with `prefix` (a `generateName`), a
/// trailing dash is allowed.
#[must_use]
pub fn name_is_dns_subdomain(value: &str, prefix: bool) -> Vec<String> {
    if prefix {
        is_dns1123_subdomain(&mask_trailing_dash(value))
    } else {
        is_dns1123_subdomain(value)
    }
}

fn mask_trailing_dash(name: &str) -> String {
    if name.len() > 1 && name.ends_with('-') {
        format!("{}a", &name[..name.len() - 1])
    } else {
        name.to_owned()
    }
}

fn matches_qualified_name_part(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter()
            .all(|&c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
}

fn qualified_name_regex_error() -> String {
    regex_error(
        QUALIFIED_NAME_MSG,
        QUALIFIED_NAME_FMT,
        &["MyName", "my.name", "123-abc"],
    )
}

/// A qualified name: `[prefix/]name` (label keys, annotation keys, condition
/// types).
#[must_use]
pub fn is_qualified_name(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    let parts: Vec<&str> = value.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                errs.push("prefix part must be non-empty".to_owned());
            } else {
                for msg in is_dns1123_subdomain(prefix) {
                    errs.push(format!("prefix part {msg}"));
                }
            }
            *name
        }
        _ => {
            errs.push(format!(
                "a qualified name {} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
                qualified_name_regex_error()
            ));
            return errs;
        }
    };
    if name.is_empty() {
        errs.push("name part must be non-empty".to_owned());
    } else if name.len() > QUALIFIED_NAME_MAX {
        errs.push(format!("name part {}", max_len_error(QUALIFIED_NAME_MAX)));
    }
    if !matches_qualified_name_part(name) {
        errs.push(format!("name part {}", qualified_name_regex_error()));
    }
    errs
}

/// A label value: empty, or a qualified-name-like string of at most 63 chars.
#[must_use]
pub fn is_valid_label_value(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > LABEL_VALUE_MAX {
        errs.push(max_len_error(LABEL_VALUE_MAX));
    }
    if !value.is_empty() && !matches_qualified_name_part(value) {
        errs.push(regex_error(
            LABEL_VALUE_MSG,
            &format!("({QUALIFIED_NAME_FMT})?"),
            &["MyValue", "my_value", "12345"],
        ));
    }
    errs
}

/// An IANA_SVC_NAME (port names).
#[must_use]
pub fn is_valid_port_name(port: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if port.len() > 15 {
        errs.push(max_len_error(15));
    }
    let b = port.as_bytes();
    if b.is_empty() || !b.iter().all(|&c| is_lower_alnum(c) || c == b'-') {
        errs.push(
            "must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)".to_owned(),
        );
    }
    if !b.iter().any(u8::is_ascii_lowercase) {
        errs.push("must contain at least one letter (a-z)".to_owned());
    }
    if port.contains("--") {
        errs.push("must not contain consecutive hyphens".to_owned());
    }
    if !b.is_empty() && (b[0] == b'-' || b[b.len() - 1] == b'-') {
        errs.push("must not begin or end with a hyphen".to_owned());
    }
    errs
}

/// A port number, 1-65535.
#[must_use]
pub fn is_valid_port_num(port: i64) -> Vec<String> {
    if (1..=65535).contains(&port) {
        Vec::new()
    } else {
        vec![inclusive_range_error(1, 65535)]
    }
}

fn has_chdir_prefix(value: &str) -> Vec<String> {
    match value {
        "." => vec!["must not be '.'".to_owned()],
        ".." => vec!["must not be '..'".to_owned()],
        v if v.starts_with("..") => vec!["must not start with '..'".to_owned()],
        _ => Vec::new(),
    }
}

/// An environment variable name (V11, `RelaxedEnvironmentVariableValidation`
/// GA in 1.34): printable ASCII other than `=`. The older C-identifier rule
/// no longer applies to any object, as the gate is locked on.
#[must_use]
pub fn is_relaxed_env_var_name(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.is_empty() {
        errs.push("environment variable name must be non-empty".to_owned());
    }
    if value
        .chars()
        .any(|c| !c.is_ascii() || c.is_ascii_control() || c == '=')
    {
        errs.push(RELAXED_ENV_VAR_NAME_MSG.to_owned());
    }
    errs
}

/// A ConfigMap or Secret key.
#[must_use]
pub fn is_config_map_key(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > DNS1123_SUBDOMAIN_MAX {
        errs.push(max_len_error(DNS1123_SUBDOMAIN_MAX));
    }
    let ok = !value.is_empty()
        && value
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'.' | b'_'));
    if !ok {
        errs.push(regex_error(
            CONFIG_MAP_KEY_MSG,
            CONFIG_MAP_KEY_FMT,
            &["key.name", "KEY_NAME", "key-name"],
        ));
    }
    errs.extend(has_chdir_prefix(value));
    errs
}

/// An HTTP header name.
#[must_use]
pub fn is_http_header_name(value: &str) -> Vec<String> {
    let ok = !value.is_empty()
        && value
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || c == b'-');
    if ok {
        Vec::new()
    } else {
        vec![regex_error(
            HTTP_HEADER_NAME_MSG,
            HTTP_HEADER_NAME_FMT,
            &["X-Header-Name"],
        )]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dns_label_message_is_upstreams() {
        assert_eq!(
            is_dns1123_label("App"),
            vec![
                "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
            ]
        );
        assert!(is_dns1123_label("a-1").is_empty());
        assert_eq!(is_dns1123_label(&"a".repeat(64)).len(), 1);
    }

    #[test]
    fn subdomains_and_qualified_names() {
        assert!(is_dns1123_subdomain("web.example").is_empty());
        assert!(!is_dns1123_subdomain("web..example").is_empty());
        assert!(is_qualified_name("example.com/My_Name").is_empty());
        assert!(!is_qualified_name("a/b/c").is_empty());
        assert_eq!(
            is_qualified_name("/x"),
            vec!["prefix part must be non-empty"]
        );
        assert!(is_valid_label_value("").is_empty());
        assert!(!is_valid_label_value("-x").is_empty());
        assert!(name_is_dns_subdomain("web-", true).is_empty());
    }

    #[test]
    fn port_names() {
        assert!(is_valid_port_name("http").is_empty());
        assert_eq!(
            is_valid_port_name("8080"),
            vec!["must contain at least one letter (a-z)"]
        );
        assert_eq!(
            is_valid_port_name("a--b"),
            vec!["must not contain consecutive hyphens"]
        );
    }

    #[test]
    fn env_names() {
        assert!(is_relaxed_env_var_name("1 X").is_empty());
        assert_eq!(is_relaxed_env_var_name("A=B").len(), 1);
    }
}
