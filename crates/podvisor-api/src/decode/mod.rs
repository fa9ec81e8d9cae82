//! Manifest decoding: JSON or (multi-document) YAML text into Pods, with
//! kubectl-style strict field validation.
//!
//! Each document is parsed into a `serde_json::Value`, checked for
//! `apiVersion: v1` / `kind: Pod` (a `v1` `List` of Pods is accepted too),
//! then deserialized into [`Pod`] through `serde_ignored` so unknown fields
//! can be reported by path, e.g. `spec.containers[0].imagee`.

use std::fmt;

use k8s_openapi::api::core::v1::Pod;
use serde_json::Value;

mod yaml_lines;

/// What to do with fields the Pod schema does not know, like the API
/// server's `fieldValidation` parameter.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FieldValidation {
    /// Unknown fields are an error (kubectl's default).
    #[default]
    Strict,
    /// Unknown fields are returned as warnings in [`DecodedPod::unknown_fields`].
    Warn,
    /// Unknown fields are dropped silently.
    Ignore,
}

/// A decoded Pod and the unknown fields that were dropped from it.
#[derive(Clone, Debug, PartialEq)]
pub struct DecodedPod {
    /// The Pod.
    pub pod: Pod,
    /// Paths of unknown fields, e.g. `spec.containers[0].imagee` (empty
    /// under [`FieldValidation::Ignore`]).
    pub unknown_fields: Vec<String>,
    /// 1-based position of the document among the non-empty documents.
    pub document: usize,
    /// Position inside a `List` document, if the Pod came from one.
    pub item: Option<usize>,
}

/// Where in the input a problem is: the document (1-based, counting
/// non-empty documents) and, inside a `List`, the item (0-based).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DocumentRef {
    /// 1-based document number.
    pub document: usize,
    /// 0-based index in the `items` of a `List` document.
    pub item: Option<usize>,
}

impl fmt::Display for DocumentRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "document {}", self.document)?;
        if let Some(i) = self.item {
            write!(f, " item {i}")?;
        }
        Ok(())
    }
}

/// Why a manifest could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// The text is not valid YAML or JSON.
    #[error("{source_name}: document {document}: {} syntax error{}: {message}", if *.json { "JSON" } else { "YAML" }, line_col(*.line, *.column))]
    Syntax {
        /// The name of the input (file name, `-` for stdin).
        source_name: String,
        /// 1-based document number.
        document: usize,
        /// Whether the text was read as JSON.
        json: bool,
        /// 1-based line in the whole input, when known.
        line: Option<u64>,
        /// 1-based column, when known.
        column: Option<u64>,
        /// The parser's message.
        message: String,
    },
    /// A document is not a `v1` `Pod` (or a `v1` `List` of them).
    #[error("{source_name}: {at}: expected apiVersion \"v1\" and kind \"Pod\", found apiVersion {} and kind {}", quote_opt(.api_version), quote_opt(.kind))]
    WrongKind {
        /// The name of the input.
        source_name: String,
        /// The document (and item).
        at: DocumentRef,
        /// The `apiVersion` found, if any.
        api_version: Option<String>,
        /// The `kind` found, if any.
        kind: Option<String>,
    },
    /// Strict field validation found fields the Pod schema does not have.
    #[error("{source_name}: {at}: strict decoding error: {}", unknown_list(.fields))]
    UnknownFields {
        /// The name of the input.
        source_name: String,
        /// The document (and item).
        at: DocumentRef,
        /// Paths of the unknown fields.
        fields: Vec<String>,
    },
    /// A field has the wrong type or shape (e.g. a string where a number
    /// belongs).
    #[error("{source_name}: {at}{}: {}{message}", line_text(*.line), path_prefix(.path))]
    Shape {
        /// The name of the input.
        source_name: String,
        /// The document (and item).
        at: DocumentRef,
        /// The field, as kubectl names it: `spec.containers[0].command[0]` (empty: the
        /// object itself).
        path: Vec<PathSegment>,
        /// 1-based line of the field in the whole input, when known (YAML input).
        line: Option<u64>,
        /// The deserializer's message.
        message: String,
    },
    /// A workload `podvisor run` cannot make pods of (no template, a wrong `restartPolicy`).
    #[error("{source_name}: {at}: {message}")]
    Workload {
        /// The name of the input.
        source_name: String,
        /// The document (and item).
        at: DocumentRef,
        /// What is wrong, with the field.
        message: String,
    },
    /// The input holds no documents at all.
    #[error("{source_name}: no objects found")]
    Empty {
        /// The name of the input.
        source_name: String,
    },
}

/// One step of a field path: a key or a list index.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PathSegment {
    /// A map key (a field name).
    Key(String),
    /// A list index.
    Index(usize),
}

/// A field path as kubectl writes it: `spec.containers[0].command[0]`.
#[must_use]
pub fn path_text(path: &[PathSegment]) -> String {
    let mut out = String::new();
    for segment in path {
        match segment {
            PathSegment::Key(k) => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(k);
            }
            PathSegment::Index(i) => out.push_str(&format!("[{i}]")),
        }
    }
    out
}

/// Reads a path written as [`path_text`] writes it (keys without dots).
#[must_use]
pub fn parse_path(text: &str) -> Vec<PathSegment> {
    let mut out = Vec::new();
    for part in text.split('.').filter(|p| !p.is_empty()) {
        let mut pieces = part.split('[');
        if let Some(key) = pieces.next().filter(|k| !k.is_empty()) {
            out.push(PathSegment::Key(key.to_owned()));
        }
        for index in pieces {
            if let Ok(i) = index.trim_end_matches(']').parse() {
                out.push(PathSegment::Index(i));
            }
        }
    }
    out
}

fn path_prefix(path: &[PathSegment]) -> String {
    if path.is_empty() {
        String::new()
    } else {
        format!("{}: ", path_text(path))
    }
}

fn line_text(line: Option<u64>) -> String {
    line.map(|l| format!(", line {l}")).unwrap_or_default()
}

/// Deserializes `value` as `T`, pushing the paths of unknown fields to `unknown`; a type
/// error names the field (`spec.containers[0].command[0]`) beside serde's message.
pub(crate) fn deserialize_typed<T: serde::de::DeserializeOwned>(
    value: Value,
    unknown: &mut Vec<String>,
) -> Result<T, (Vec<PathSegment>, String)> {
    let mut note = |path: serde_ignored::Path<'_>| unknown.push(format_path(&path));
    let ignoring = serde_ignored::Deserializer::new(value, &mut note);
    serde_path_to_error::deserialize(ignoring).map_err(|e| {
        let path = e
            .path()
            .iter()
            .filter_map(|segment| match segment {
                serde_path_to_error::Segment::Map { key } => Some(PathSegment::Key(key.clone())),
                serde_path_to_error::Segment::Seq { index } => Some(PathSegment::Index(*index)),
                serde_path_to_error::Segment::Enum { .. }
                | serde_path_to_error::Segment::Unknown => None,
            })
            .collect();
        (path, e.into_inner().to_string())
    })
}

/// `e` with the line of its field when it is a [`DecodeError::Shape`] of YAML `text`.
#[must_use]
pub fn with_line(e: DecodeError, text: &str) -> DecodeError {
    match e {
        DecodeError::Shape {
            source_name,
            at,
            path,
            line: None,
            message,
        } if !path.is_empty() => {
            let line = yaml_line(text, at, &path);
            DecodeError::Shape {
                source_name,
                at,
                path,
                line,
                message,
            }
        }
        other => other,
    }
}

/// The line in `text` (YAML) of `path` inside document `at`.
fn yaml_line(text: &str, at: DocumentRef, path: &[PathSegment]) -> Option<u64> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    if text.trim_start().starts_with(['{', '[']) {
        return None;
    }
    let mut document = 0;
    for (first_line, chunk) in yaml_chunks(text) {
        if is_blank_chunk(&chunk)
            || matches!(
                serde_saphyr::from_str::<Value>(&chunk),
                Ok(Value::Null) | Err(_)
            )
        {
            continue;
        }
        document += 1;
        if document == at.document {
            let mut full = Vec::new();
            if let Some(i) = at.item {
                full.push(PathSegment::Key("items".to_owned()));
                full.push(PathSegment::Index(i));
            }
            full.extend_from_slice(path);
            return yaml_lines::line_of(&chunk, &full).map(|l| l + first_line - 1);
        }
    }
    None
}

fn line_col(line: Option<u64>, column: Option<u64>) -> String {
    match (line, column) {
        (Some(l), Some(c)) => format!(" at line {l} column {c}"),
        (Some(l), None) => format!(" at line {l}"),
        _ => String::new(),
    }
}

fn quote_opt(v: &Option<String>) -> String {
    v.as_deref()
        .map_or_else(|| "(none)".to_owned(), crate::validation::go_quote)
}

fn unknown_list(fields: &[String]) -> String {
    fields
        .iter()
        .map(|f| format!("unknown field {}", crate::validation::go_quote(f)))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Decodes every Pod in `text` with strict field validation.
///
/// `source` names the input in error messages (a file name, or `-`).
///
/// # Errors
///
/// The first syntax, kind, unknown-field or shape error, or
/// [`DecodeError::Empty`] when there is no document.
pub fn decode_pods(text: &str, source: &str) -> Result<Vec<Pod>, DecodeError> {
    Ok(decode_pods_with(text, source, FieldValidation::Strict)?
        .into_iter()
        .map(|d| d.pod)
        .collect())
}

/// Decodes every Pod in `text`, returning unknown fields as warnings
/// instead of failing ([`FieldValidation::Warn`]).
///
/// # Errors
///
/// As [`decode_pods`], except for unknown fields.
pub fn decode_pods_lenient(text: &str, source: &str) -> Result<Vec<DecodedPod>, DecodeError> {
    decode_pods_with(text, source, FieldValidation::Warn)
}

/// Decodes every Pod in `text` under the given field validation.
///
/// # Errors
///
/// As [`decode_pods`]; unknown fields are an error only under
/// [`FieldValidation::Strict`].
pub fn decode_pods_with(
    text: &str,
    source: &str,
    validation: FieldValidation,
) -> Result<Vec<DecodedPod>, DecodeError> {
    pods_with(text, source, validation).map_err(|e| with_line(e, text))
}

fn pods_with(
    text: &str,
    source: &str,
    validation: FieldValidation,
) -> Result<Vec<DecodedPod>, DecodeError> {
    let documents = parse_documents(text, source)?;
    if documents.is_empty() {
        return Err(DecodeError::Empty {
            source_name: source.to_owned(),
        });
    }
    let mut pods = Vec::new();
    for (i, doc) in documents.into_iter().enumerate() {
        let document = i + 1;
        let is_list = doc.get("apiVersion").and_then(Value::as_str) == Some("v1")
            && doc.get("kind").and_then(Value::as_str) == Some("List");
        if is_list {
            let items = match doc.get("items") {
                Some(Value::Array(items)) => items.clone(),
                None | Some(Value::Null) => Vec::new(),
                Some(_) => {
                    return Err(DecodeError::Shape {
                        source_name: source.to_owned(),
                        at: DocumentRef {
                            document,
                            item: None,
                        },
                        path: vec![PathSegment::Key("items".to_owned())],
                        line: None,
                        message: "expected a list".to_owned(),
                    });
                }
            };
            for (j, item) in items.into_iter().enumerate() {
                let at = DocumentRef {
                    document,
                    item: Some(j),
                };
                pods.push(decode_one(item, source, at, validation)?);
            }
        } else {
            let at = DocumentRef {
                document,
                item: None,
            };
            pods.push(decode_one(doc, source, at, validation)?);
        }
    }
    Ok(pods)
}

pub(crate) fn decode_one(
    value: Value,
    source: &str,
    at: DocumentRef,
    validation: FieldValidation,
) -> Result<DecodedPod, DecodeError> {
    let api_version = value.get("apiVersion").and_then(Value::as_str);
    let kind = value.get("kind").and_then(Value::as_str);
    if api_version != Some("v1") || kind != Some("Pod") {
        let describe =
            |v: Option<&Value>| v.map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_owned));
        return Err(DecodeError::WrongKind {
            source_name: source.to_owned(),
            at,
            api_version: describe(value.get("apiVersion")),
            kind: describe(value.get("kind")),
        });
    }
    let mut unknown = Vec::new();
    let pod: Pod =
        deserialize_typed(value, &mut unknown).map_err(|(path, message)| DecodeError::Shape {
            source_name: source.to_owned(),
            at,
            path,
            line: None,
            message,
        })?;
    match validation {
        FieldValidation::Strict if !unknown.is_empty() => Err(DecodeError::UnknownFields {
            source_name: source.to_owned(),
            at,
            fields: unknown,
        }),
        FieldValidation::Ignore => Ok(DecodedPod {
            pod,
            unknown_fields: Vec::new(),
            document: at.document,
            item: at.item,
        }),
        _ => Ok(DecodedPod {
            pod,
            unknown_fields: unknown,
            document: at.document,
            item: at.item,
        }),
    }
}

/// Renders a `serde_ignored` path the way kubectl does:
/// `spec.containers[0].imagee`.
pub(crate) fn format_path(path: &serde_ignored::Path<'_>) -> String {
    match path {
        serde_ignored::Path::Root => String::new(),
        serde_ignored::Path::Seq { parent, index } => format!("{}[{index}]", format_path(parent)),
        serde_ignored::Path::Map { parent, key } => {
            let p = format_path(parent);
            if p.is_empty() {
                key.clone()
            } else {
                format!("{p}.{key}")
            }
        }
        serde_ignored::Path::Some { parent }
        | serde_ignored::Path::NewtypeStruct { parent }
        | serde_ignored::Path::NewtypeVariant { parent } => format_path(parent),
    }
}

/// Splits the input into non-empty documents parsed as JSON values.
pub(crate) fn parse_documents(text: &str, source: &str) -> Result<Vec<Value>, DecodeError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    if text.trim_start().starts_with(['{', '[']) {
        parse_json_stream(text, source)
    } else {
        parse_yaml_documents(text, source)
    }
}

/// One or more concatenated JSON values (a JSON stream, as kubectl accepts).
fn parse_json_stream(text: &str, source: &str) -> Result<Vec<Value>, DecodeError> {
    let mut docs = Vec::new();
    for value in serde_json::Deserializer::from_str(text).into_iter::<Value>() {
        match value {
            Ok(Value::Null) => {}
            Ok(v) => docs.push(v),
            Err(e) => {
                return Err(DecodeError::Syntax {
                    source_name: source.to_owned(),
                    document: docs.len() + 1,
                    json: true,
                    line: (e.line() > 0).then(|| e.line() as u64),
                    column: (e.column() > 0).then(|| e.column() as u64),
                    message: json_message(&e),
                });
            }
        }
    }
    Ok(docs)
}

/// serde_json's message without its trailing " at line L column C".
fn json_message(e: &serde_json::Error) -> String {
    let full = e.to_string();
    match full.rfind(" at line ") {
        Some(i) => full[..i].to_owned(),
        None => full,
    }
}

/// Whether a line is a YAML document-start marker (`---` alone or followed
/// by whitespace).
fn is_document_marker(line: &str) -> bool {
    line.strip_prefix("---")
        .is_some_and(|rest| rest.is_empty() || rest.starts_with([' ', '\t', '\r', '\n']))
}

/// Whether a chunk holds nothing but blank lines, comments, directives and
/// document-end markers.
fn is_blank_chunk(chunk: &str) -> bool {
    chunk.lines().all(|l| {
        let t = l.trim();
        t.is_empty() || t.starts_with('#') || t == "..." || l.starts_with('%')
    })
}

/// Splits YAML on `---` lines (as kubectl's YAML reader does) and parses
/// each non-empty document on its own, so errors can name the document
/// and the line in the whole input.
fn parse_yaml_documents(text: &str, source: &str) -> Result<Vec<Value>, DecodeError> {
    let mut docs = Vec::new();
    for (first_line, chunk) in yaml_chunks(text) {
        if is_blank_chunk(&chunk) {
            continue;
        }
        match serde_saphyr::from_str::<Value>(&chunk) {
            Ok(Value::Null) => {}
            Ok(v) => docs.push(v),
            Err(e) => {
                let loc = e.location();
                return Err(DecodeError::Syntax {
                    source_name: source.to_owned(),
                    document: docs.len() + 1,
                    json: false,
                    line: loc.map(|l| l.line() + first_line - 1),
                    column: loc.map(|l| l.column()),
                    message: yaml_message(&e),
                });
            }
        }
    }
    Ok(docs)
}

/// The input split on `---` lines: each chunk with the number of its first line.
fn yaml_chunks(text: &str) -> Vec<(u64, String)> {
    let mut chunks: Vec<(u64, String)> = vec![(1, String::new())];
    for (i, line) in text.split_inclusive('\n').enumerate() {
        if is_document_marker(line) {
            // Keep any content after the marker, and the column numbers.
            let rest = format!("   {}", &line[3..]);
            chunks.push((i as u64 + 1, rest));
        } else if let Some((_, chunk)) = chunks.last_mut() {
            chunk.push_str(line);
        }
    }
    chunks
}

/// The first line of serde-saphyr's message, without its snippet and
/// location suffix.
fn yaml_message(e: &serde_saphyr::Error) -> String {
    let full = e.without_snippet().to_string();
    let mut first = full.lines().next().unwrap_or("").trim().to_owned();
    // Advice about the library's options means nothing to a manifest author.
    if let Some(i) = first.find(", set DuplicateKeyPolicy") {
        first.truncate(i);
    }
    match first.rfind(" at line ") {
        Some(i) => first[..i].to_owned(),
        None => first,
    }
}

/// What a manifest file holds for `podvisor run`: its Pods, and the ConfigMaps and Secrets
/// they may refer to.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Manifest {
    /// The Pods, in order.
    pub pods: Vec<Pod>,
    /// The ConfigMaps, in order.
    pub config_maps: Vec<k8s_openapi::api::core::v1::ConfigMap>,
    /// The Secrets, in order (`stringData` already merged into `data`, the type defaulted).
    pub secrets: Vec<k8s_openapi::api::core::v1::Secret>,
    /// What each workload was expanded into (`pods` holds its pods), one line each.
    pub expanded: Vec<String>,
}

/// Decodes Pods, ConfigMaps and Secrets (documents, or items of `v1` `List`s) with strict
/// field validation, as [`decode_pods`] decodes Pods.
///
/// # Errors
///
/// As [`decode_pods`]; a kind other than these three is [`DecodeError::WrongKind`].
pub fn decode_manifest(text: &str, source: &str) -> Result<Manifest, DecodeError> {
    manifest(text, source).map_err(|e| with_line(e, text))
}

fn manifest(text: &str, source: &str) -> Result<Manifest, DecodeError> {
    let documents = parse_documents(text, source)?;
    if documents.is_empty() {
        return Err(DecodeError::Empty {
            source_name: source.to_owned(),
        });
    }
    let mut out = Manifest::default();
    for (i, doc) in documents.into_iter().enumerate() {
        let document = i + 1;
        let is_list = doc.get("apiVersion").and_then(Value::as_str) == Some("v1")
            && doc.get("kind").and_then(Value::as_str) == Some("List");
        let items: Vec<(Value, Option<usize>)> = if is_list {
            match doc.get("items") {
                Some(Value::Array(items)) => items
                    .iter()
                    .cloned()
                    .enumerate()
                    .map(|(j, v)| (v, Some(j)))
                    .collect(),
                _ => Vec::new(),
            }
        } else {
            vec![(doc, None)]
        };
        for (value, item) in items {
            let at = DocumentRef { document, item };
            let v1 = value.get("apiVersion").and_then(Value::as_str) == Some("v1");
            let kind = value
                .get("kind")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned();
            let typed = |value: Value| -> Result<_, DecodeError> {
                let shape = |(path, message): (Vec<PathSegment>, String)| DecodeError::Shape {
                    source_name: source.to_owned(),
                    at,
                    path,
                    line: None,
                    message,
                };
                let mut unknown = Vec::new();
                match kind.as_str() {
                    "ConfigMap" => deserialize_typed(value, &mut unknown)
                        .map(|c| (Some(c), None, unknown))
                        .map_err(shape),
                    _ => deserialize_typed(value, &mut unknown)
                        .map(|s| (None, Some(s), unknown))
                        .map_err(shape),
                }
            };
            match (v1, kind.as_str()) {
                (true, "ConfigMap" | "Secret") => {
                    let (cm, secret, unknown) = typed(value)?;
                    if !unknown.is_empty() {
                        return Err(DecodeError::UnknownFields {
                            source_name: source.to_owned(),
                            at,
                            fields: unknown,
                        });
                    }
                    out.config_maps.extend(cm);
                    if let Some(mut s) = secret {
                        crate::config::prepare_secret(&mut s);
                        out.secrets.push(s);
                    }
                }
                _ => match crate::lint::workload_pods(&value, source, at) {
                    Some(expanded) => {
                        let (pods, note) = expanded?;
                        out.pods.extend(pods);
                        out.expanded.push(note);
                    }
                    None => out
                        .pods
                        .push(decode_one(value, source, at, FieldValidation::Strict)?.pod),
                },
            }
        }
    }
    Ok(out)
}
