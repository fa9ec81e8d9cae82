//! Request plumbing shared by the handlers: query parameters, content negotiation, body
//! decoding, timestamps and random names.

use axum::http::HeaderMap;
use axum::http::header::{ACCEPT, CONTENT_TYPE};
use jiff::Timestamp;
use podvisor_api::FieldValidation;
use serde::Deserialize;
use serde_json::Value;

use crate::status::{ApiError, ApiResult};

/// Every query parameter the handlers read (unknown ones are ignored, as the API server
/// ignores parameters a verb does not use).
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Params {
    pub label_selector: Option<String>,
    pub limit: Option<String>,
    #[serde(rename = "continue")]
    pub continue_token: Option<String>,
    pub field_selector: Option<String>,
    pub resource_version: Option<String>,
    pub resource_version_match: Option<String>,
    pub watch: Option<String>,
    pub timeout_seconds: Option<String>,
    pub allow_watch_bookmarks: Option<String>,
    pub send_initial_events: Option<String>,
    pub include_object: Option<String>,
    pub dry_run: Option<String>,
    pub field_validation: Option<String>,
    pub field_manager: Option<String>,
    pub grace_period_seconds: Option<String>,
    /// Server-side apply: take the fields other managers own.
    pub force: Option<String>,
    // Log options.
    pub container: Option<String>,
    pub follow: Option<String>,
    pub previous: Option<String>,
    pub tail_lines: Option<String>,
    pub since_seconds: Option<String>,
    pub since_time: Option<String>,
    pub timestamps: Option<String>,
    pub limit_bytes: Option<String>,
}

/// A boolean query parameter as Go's `strconv.ParseBool` reads it.
pub(crate) fn flag(v: Option<&String>) -> bool {
    matches!(
        v.map(String::as_str),
        Some("1" | "t" | "T" | "true" | "TRUE" | "True")
    )
}

/// An integer query parameter; 400 when it is not a number.
pub(crate) fn int_param(name: &str, v: Option<&String>) -> ApiResult<Option<i64>> {
    match v {
        None => Ok(None),
        Some(s) if s.is_empty() => Ok(None),
        Some(s) => s.parse::<i64>().map(Some).map_err(|_| {
            ApiError::bad_request(format!(
                "{name}: Invalid value: {}: must be an integer",
                podvisor_api::validation::go_quote(s)
            ))
        }),
    }
}

impl Params {
    /// `dryRun=All`.
    pub(crate) fn dry_run(&self) -> ApiResult<bool> {
        match self.dry_run.as_deref() {
            None | Some("") => Ok(false),
            Some("All") => Ok(true),
            Some(other) => Err(ApiError::bad_request(format!(
                "dryRun: Unsupported value: \"{other}\": supported values: \"All\""
            ))),
        }
    }

    /// `fieldValidation` (default `Strict` for kubectl, but the API server's default for a
    /// request without the parameter is `Warn`).
    pub(crate) fn field_validation(&self) -> ApiResult<FieldValidation> {
        match self.field_validation.as_deref() {
            None | Some("") | Some("Warn") => Ok(FieldValidation::Warn),
            Some("Strict") => Ok(FieldValidation::Strict),
            Some("Ignore") => Ok(FieldValidation::Ignore),
            Some(other) => Err(ApiError::bad_request(format!(
                "fieldValidation: Unsupported value: \"{other}\": supported values: \"Ignore\", \"Strict\", \"Warn\""
            ))),
        }
    }
}

/// What representation the client asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Representation {
    /// The object itself.
    Object,
    /// A `meta.k8s.io` `Table` (`v1` or `v1beta1`).
    Table {
        /// Whether the client asked for `v1beta1`.
        beta: bool,
    },
}

/// Reads the `Accept` header: the first media type the server can produce wins.
pub(crate) fn representation(headers: &HeaderMap) -> Representation {
    let accept = headers
        .get(ACCEPT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    for media in accept.split(',') {
        let mut parts = media.split(';').map(str::trim);
        let base = parts.next().unwrap_or("");
        let (mut as_, mut g, mut v) = ("", "", "");
        for p in parts {
            if let Some((k, val)) = p.split_once('=') {
                match k.trim() {
                    "as" => as_ = val.trim(),
                    "g" => g = val.trim(),
                    "v" => v = val.trim(),
                    _ => {}
                }
            }
        }
        if base != "application/json" && base != "*/*" && base != "application/*" {
            continue;
        }
        if as_.is_empty() {
            return Representation::Object;
        }
        if as_ == "Table" && g == "meta.k8s.io" && (v == "v1" || v == "v1beta1") {
            return Representation::Table {
                beta: v == "v1beta1",
            };
        }
    }
    Representation::Object
}

/// The media type of the request body, without parameters.
pub(crate) fn content_type(headers: &HeaderMap) -> String {
    headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|v| {
            v.split(';')
                .next()
                .unwrap_or("")
                .trim()
                .to_ascii_lowercase()
        })
        .unwrap_or_default()
}

/// Parses a request body as JSON, or YAML when it is not JSON (`application/yaml`); a body
/// without a Content-Type is accepted (the Python client sends none).
/// A delete's `DeleteOptions` body as JSON: none (empty), JSON, or protobuf.
pub(crate) fn delete_options_body(body: &[u8]) -> ApiResult<Option<Value>> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    if body.starts_with(crate::protobuf::MAGIC) {
        return crate::protobuf::delete_options(body)
            .map(Some)
            .map_err(|e| ApiError::bad_request(format!("error decoding DeleteOptions: {e}")));
    }
    serde_json::from_slice(body)
        .map(Some)
        .map_err(|e| ApiError::bad_request(format!("error decoding DeleteOptions: {e}")))
}

pub(crate) fn parse_body(body: &[u8]) -> ApiResult<Value> {
    if body.starts_with(crate::protobuf::MAGIC) {
        return crate::protobuf::decode(body).map_err(|why| {
            let mut e =
                ApiError::unsupported_body_media_type("application/vnd.kubernetes.protobuf");
            e.message = format!("{}: {why}", e.message);
            e
        });
    }
    let text = std::str::from_utf8(body)
        .map_err(|_| ApiError::bad_request("the request body is not valid UTF-8"))?;
    let trimmed = text.trim_start();
    if trimmed.is_empty() {
        return Err(ApiError::bad_request("the request body is empty"));
    }
    if trimmed.starts_with('{') || trimmed.starts_with('[') {
        serde_json::from_str(text).map_err(|e| {
            ApiError::bad_request(format!("error decoding the request body as JSON: {e}"))
        })
    } else {
        serde_saphyr::from_str(text).map_err(|e| {
            ApiError::bad_request(format!(
                "error decoding the request body as YAML: {}",
                e.without_snippet()
            ))
        })
    }
}

pub(crate) use podvisor_api::meta::{name_suffix, new_uid};

/// The current time.
pub(crate) fn now() -> Timestamp {
    Timestamp::now()
}

pub(crate) use podvisor_lifecycle::event_object::time_text;

/// The keys a JSON document repeats within one object (the later value wins, as in Go's
/// decoder), each as the path the API server's strict decoding names (`metadata.name`,
/// `spec.containers[0].image`). Empty for anything that is not JSON.
pub(crate) fn duplicate_fields(body: &[u8]) -> Vec<String> {
    let mut found = Vec::new();
    let trimmed = body.trim_ascii_start();
    if !trimmed.starts_with(b"{") {
        return found;
    }
    let mut de = serde_json::Deserializer::from_slice(body);
    // A body that does not parse is reported by `parse_body`.
    let _ = serde::de::DeserializeSeed::deserialize(
        Duplicates {
            path: String::new(),
            found: &mut found,
        },
        &mut de,
    );
    found
}

/// Walks one JSON value, recording repeated object keys under `path`.
struct Duplicates<'a> {
    path: String,
    found: &'a mut Vec<String>,
}

impl<'de> serde::de::DeserializeSeed<'de> for Duplicates<'_> {
    type Value = ();

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> serde::de::Visitor<'de> for Duplicates<'_> {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut seen = std::collections::HashSet::new();
        while let Some(key) = map.next_key::<String>()? {
            let path = if self.path.is_empty() {
                key.clone()
            } else {
                format!("{}.{key}", self.path)
            };
            if !seen.insert(key) && !self.found.contains(&path) {
                self.found.push(path.clone());
            }
            map.next_value_seed(Duplicates {
                path,
                found: &mut *self.found,
            })?;
        }
        Ok(())
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let mut i = 0;
        while seq
            .next_element_seed(Duplicates {
                path: format!("{}[{i}]", self.path),
                found: &mut *self.found,
            })?
            .is_some()
        {
            i += 1;
        }
        Ok(())
    }

    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderValue;

    use super::*;

    #[test]
    fn table_accept_is_recognised() {
        let mut h = HeaderMap::new();
        h.insert(
            ACCEPT,
            HeaderValue::from_static(
                "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json",
            ),
        );
        assert_eq!(representation(&h), Representation::Table { beta: false });
        h.insert(
            ACCEPT,
            HeaderValue::from_static("application/vnd.kubernetes.protobuf, */*"),
        );
        assert_eq!(representation(&h), Representation::Object);
    }
}
