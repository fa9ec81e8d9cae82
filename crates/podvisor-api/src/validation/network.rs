//! Naming and DNS of the pod: `hostnameOverride` (V16) and `dnsConfig`
//! (V18, with `RelaxedDNSSearchValidation` GA in 1.34).

use std::net::IpAddr;

use k8s_openapi::api::core::v1::PodSpec;

use super::field::{BadValue, FieldError, Path, go_quote};
use super::names::{is_dns1123_subdomain, max_len_error, regex_error};

/// Longest `hostnameOverride` (a Linux host name, `HOST_NAME_MAX` + 1).
const MAX_HOSTNAME_OVERRIDE: usize = 64;
const MAX_DNS_NAMESERVERS: usize = 3;
const MAX_DNS_SEARCH_PATHS: usize = 32;
const MAX_DNS_SEARCH_LIST_CHARS: usize = 2048;
const IP_MSG: &str = "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)";
const SUBDOMAIN_WITH_UNDERSCORE_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '_', '-' or '.', and must start and end with an alphanumeric character";
const LABEL_WITH_UNDERSCORE_FMT: &str = "_?[a-z0-9]([-_a-z0-9]*[a-z0-9])?";

/// V16 (HostnameOverride, beta and on in 1.35).
pub(crate) fn validate_hostname_override(spec: &PodSpec, path: &Path) -> Vec<FieldError> {
    let Some(name) = spec.hostname_override.as_deref() else {
        return Vec::new();
    };
    let p = path.child("hostnameOverride");
    let mut errs = Vec::new();
    if name.len() > MAX_HOSTNAME_OVERRIDE {
        errs.push(FieldError::too_long(&p, MAX_HOSTNAME_OVERRIDE));
    }
    for msg in is_dns1123_subdomain(name) {
        errs.push(FieldError::invalid(&p, name, msg));
    }
    if spec.set_hostname_as_fqdn == Some(true) {
        errs.push(FieldError::forbidden(
            &p,
            "may not be specified when setHostnameAsFQDN is true",
        ));
    }
    if spec.host_network == Some(true) {
        errs.push(FieldError::forbidden(
            &p,
            "may not be specified when hostNetwork is true",
        ));
    }
    errs
}

/// A string list printed as Go's `%#v` does: `[]string{"a", "b"}`.
fn go_string_slice(items: &[String]) -> BadValue {
    let quoted: Vec<String> = items.iter().map(|s| go_quote(s)).collect();
    BadValue::Raw(format!("[]string{{{}}}", quoted.join(", ")))
}

/// One DNS label that may hold `_` (SRV-style names such as `_tcp`).
fn is_label_with_underscore(label: &str) -> bool {
    let body = label.strip_prefix('_').unwrap_or(label).as_bytes();
    let alnum = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    !body.is_empty()
        && alnum(&body[0])
        && alnum(&body[body.len() - 1])
        && body.iter().all(|c| alnum(c) || *c == b'-' || *c == b'_')
}

/// `IsDNS1123SubdomainWithUnderscore`.
fn is_dns1123_subdomain_with_underscore(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > 253 {
        errs.push(max_len_error(253));
    }
    if !value.split('.').all(is_label_with_underscore) {
        let fmt = format!("{LABEL_WITH_UNDERSCORE_FMT}(\\.{LABEL_WITH_UNDERSCORE_FMT})*");
        errs.push(regex_error(
            SUBDOMAIN_WITH_UNDERSCORE_MSG,
            &fmt,
            &["example.com"],
        ));
    }
    errs
}

/// `validatePodDNSConfig` (V18).
pub(crate) fn validate_dns_config(spec: &PodSpec, path: &Path) -> Vec<FieldError> {
    let config = spec.dns_config.as_ref();
    if spec.dns_policy.as_deref() == Some("None") {
        let Some(config) = config else {
            return vec![FieldError::required(
                path,
                "must provide `dnsConfig` when `dnsPolicy` is None",
            )];
        };
        if config.nameservers.as_ref().is_none_or(Vec::is_empty) {
            return vec![FieldError::required(
                &path.child("nameservers"),
                "must provide at least one DNS nameserver when `dnsPolicy` is None",
            )];
        }
    }
    let Some(config) = config else {
        return Vec::new();
    };
    let mut errs = Vec::new();
    let nameservers = config.nameservers.as_deref().unwrap_or_default();
    let ns_path = path.child("nameservers");
    if nameservers.len() > MAX_DNS_NAMESERVERS {
        errs.push(FieldError::invalid(
            &ns_path,
            go_string_slice(nameservers),
            format!("must not have more than {MAX_DNS_NAMESERVERS} nameservers"),
        ));
    }
    for (i, ns) in nameservers.iter().enumerate() {
        if ns.parse::<IpAddr>().is_err() {
            errs.push(FieldError::invalid(&ns_path.index(i), ns, IP_MSG));
        }
    }
    let searches = config.searches.as_deref().unwrap_or_default();
    let search_path = path.child("searches");
    if searches.len() > MAX_DNS_SEARCH_PATHS {
        errs.push(FieldError::invalid(
            &search_path,
            go_string_slice(searches),
            format!("must not have more than {MAX_DNS_SEARCH_PATHS} search paths"),
        ));
    }
    // The spaces between the entries count.
    if searches.join(" ").len() > MAX_DNS_SEARCH_LIST_CHARS {
        errs.push(FieldError::invalid(
            &search_path,
            go_string_slice(searches),
            format!(
                "must not have more than {MAX_DNS_SEARCH_LIST_CHARS} characters (including spaces) in the search list"
            ),
        ));
    }
    for (i, search) in searches.iter().enumerate() {
        // "." (the root) is allowed; otherwise one trailing dot is.
        if search == "." {
            continue;
        }
        let trimmed = search.strip_suffix('.').unwrap_or(search);
        for msg in is_dns1123_subdomain_with_underscore(trimmed) {
            errs.push(FieldError::invalid(&search_path.index(i), trimmed, msg));
        }
    }
    for (i, option) in config.options.iter().flatten().enumerate() {
        if option.name.as_deref().unwrap_or("").is_empty() {
            errs.push(FieldError::required(
                &path.child("options").index(i),
                "must not be empty",
            ));
        }
    }
    errs
}
