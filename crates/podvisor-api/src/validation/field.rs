//! Field errors shaped exactly like Kubernetes' `field.Error` and the API
//! server's "is invalid" status message.

use std::fmt;

/// The kind of a validation error; its `Display` is Kubernetes'
/// `field.ErrorType` text.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// `Not found`: a reference to something that does not exist.
    NotFound,
    /// `Required value`: a required field is empty.
    Required,
    /// `Duplicate value`: a value that must be unique is repeated.
    Duplicate,
    /// `Invalid value`: the value is malformed or out of range.
    Invalid,
    /// `Unsupported value`: the value is not one of an enumerated set.
    NotSupported,
    /// `Forbidden`: the field may not be set (here, or at all).
    Forbidden,
    /// `Too long`: the value is longer than allowed.
    TooLong,
    /// `Too many`: a list has more items than allowed.
    TooMany,
    /// `Internal error`: validation itself failed.
    Internal,
}

impl ErrorKind {
    /// The Kubernetes text for this kind, e.g. `Required value`.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::NotFound => "Not found",
            ErrorKind::Required => "Required value",
            ErrorKind::Duplicate => "Duplicate value",
            ErrorKind::Invalid => "Invalid value",
            ErrorKind::NotSupported => "Unsupported value",
            ErrorKind::Forbidden => "Forbidden",
            ErrorKind::TooLong => "Too long",
            ErrorKind::TooMany => "Too many",
            ErrorKind::Internal => "Internal error",
        }
    }

    /// Whether Kubernetes prints the offending value for this kind.
    fn shows_value(self) -> bool {
        !matches!(
            self,
            ErrorKind::Required | ErrorKind::Forbidden | ErrorKind::TooLong | ErrorKind::Internal
        )
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The offending value carried by a [`FieldError`], printed the way Go's
/// `field.Error` prints it: strings quoted, numbers and booleans bare.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BadValue {
    /// No value is shown.
    Omitted,
    /// A nil pointer; Kubernetes prints it as the quoted string `"null"`.
    Null,
    /// A string, printed with Go's `%q` quoting.
    Str(String),
    /// An integer, printed bare.
    Int(i64),
    /// A boolean, printed bare.
    Bool(bool),
    /// A value already rendered the way Go's `%#v` would (maps, structs).
    Raw(String),
}

impl From<&str> for BadValue {
    fn from(v: &str) -> Self {
        BadValue::Str(v.to_owned())
    }
}

impl From<String> for BadValue {
    fn from(v: String) -> Self {
        BadValue::Str(v)
    }
}

impl From<&String> for BadValue {
    fn from(v: &String) -> Self {
        BadValue::Str(v.clone())
    }
}

impl From<i64> for BadValue {
    fn from(v: i64) -> Self {
        BadValue::Int(v)
    }
}

impl From<i32> for BadValue {
    fn from(v: i32) -> Self {
        BadValue::Int(i64::from(v))
    }
}

impl From<usize> for BadValue {
    fn from(v: usize) -> Self {
        BadValue::Int(i64::try_from(v).unwrap_or(i64::MAX))
    }
}

impl From<bool> for BadValue {
    fn from(v: bool) -> Self {
        BadValue::Bool(v)
    }
}

impl fmt::Display for BadValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BadValue::Omitted => Ok(()),
            BadValue::Null => f.write_str("\"null\""),
            BadValue::Str(s) => f.write_str(&go_quote(s)),
            BadValue::Int(i) => write!(f, "{i}"),
            BadValue::Bool(b) => write!(f, "{b}"),
            BadValue::Raw(s) => f.write_str(s),
        }
    }
}

/// One validation error: a field path, a kind, the offending value and a
/// detail message. `Display` is exactly Kubernetes' `field.Error.Error()`,
/// e.g. `spec.containers[0].name: Required value`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldError {
    /// The field path, e.g. `spec.initContainers[1].livenessProbe`.
    pub path: String,
    /// What is wrong.
    pub kind: ErrorKind,
    /// The offending value (not printed for `Required`, `Forbidden`, `Too long`).
    pub value: BadValue,
    /// Human-readable detail; may be empty.
    pub detail: String,
}

impl FieldError {
    fn new(path: &Path, kind: ErrorKind, value: BadValue, detail: impl Into<String>) -> Self {
        FieldError {
            path: path.to_string(),
            kind,
            value,
            detail: detail.into(),
        }
    }

    /// `Required value`, with an optional detail.
    #[must_use]
    pub fn required(path: &Path, detail: impl Into<String>) -> Self {
        Self::new(path, ErrorKind::Required, BadValue::Omitted, detail)
    }

    /// `Invalid value: <v>: <detail>`.
    #[must_use]
    pub fn invalid(path: &Path, value: impl Into<BadValue>, detail: impl Into<String>) -> Self {
        Self::new(path, ErrorKind::Invalid, value.into(), detail)
    }

    /// `Unsupported value: <v>: supported values: "a", "b"`.
    #[must_use]
    pub fn not_supported<S: AsRef<str>>(
        path: &Path,
        value: impl Into<BadValue>,
        supported: &[S],
    ) -> Self {
        let detail = if supported.is_empty() {
            String::new()
        } else {
            let quoted: Vec<String> = supported.iter().map(|s| go_quote(s.as_ref())).collect();
            format!("supported values: {}", quoted.join(", "))
        };
        Self::new(path, ErrorKind::NotSupported, value.into(), detail)
    }

    /// `Duplicate value: <v>`.
    #[must_use]
    pub fn duplicate(path: &Path, value: impl Into<BadValue>) -> Self {
        Self::new(path, ErrorKind::Duplicate, value.into(), "")
    }

    /// `Not found: <v>`.
    #[must_use]
    pub fn not_found(path: &Path, value: impl Into<BadValue>) -> Self {
        Self::new(path, ErrorKind::NotFound, value.into(), "")
    }

    /// `Forbidden: <detail>`.
    #[must_use]
    pub fn forbidden(path: &Path, detail: impl Into<String>) -> Self {
        Self::new(path, ErrorKind::Forbidden, BadValue::Omitted, detail)
    }

    /// `Too long: may not be more than <n> bytes`.
    #[must_use]
    pub fn too_long(path: &Path, max_bytes: usize) -> Self {
        let unit = if max_bytes == 1 { "byte" } else { "bytes" };
        Self::new(
            path,
            ErrorKind::TooLong,
            BadValue::Omitted,
            format!("may not be more than {max_bytes} {unit}"),
        )
    }

    /// `Too many: <actual>: must have at most <max> items`.
    #[must_use]
    pub fn too_many(path: &Path, actual: usize, max: usize) -> Self {
        Self::new(
            path,
            ErrorKind::TooMany,
            actual.into(),
            format!("must have at most {max} items"),
        )
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.kind)?;
        if self.kind.shows_value() && self.value != BadValue::Omitted {
            write!(f, ": {}", self.value)?;
        }
        if !self.detail.is_empty() {
            write!(f, ": {}", self.detail)?;
        }
        Ok(())
    }
}

impl std::error::Error for FieldError {}

/// Every error found in one object, shaped like the API server's
/// `StatusReasonInvalid` message as kubectl prints it:
/// `The Pod "web" is invalid: <e>` or `The Pod "web" is invalid: [<e1>, <e2>]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ValidationErrors {
    /// The object kind, e.g. `Pod`.
    pub kind: String,
    /// The object name (may be empty).
    pub name: String,
    /// All errors, in the order the API server reports them, duplicates removed.
    pub errors: Vec<FieldError>,
}

impl ValidationErrors {
    /// Builds the error set, dropping errors whose text repeats an earlier one
    /// (as Kubernetes' `ErrorList.ToAggregate` does).
    #[must_use]
    pub fn new(kind: impl Into<String>, name: impl Into<String>, errors: Vec<FieldError>) -> Self {
        let mut seen = std::collections::HashSet::new();
        let errors = errors
            .into_iter()
            .filter(|e| seen.insert(e.to_string()))
            .collect();
        ValidationErrors {
            kind: kind.into(),
            name: name.into(),
            errors,
        }
    }

    /// The error list joined like Kubernetes' aggregate error: one error
    /// bare, several in brackets separated by `", "`.
    #[must_use]
    pub fn aggregate(&self) -> String {
        let parts: Vec<String> = self.errors.iter().map(ToString::to_string).collect();
        match parts.len() {
            1 => parts[0].clone(),
            _ => format!("[{}]", parts.join(", ")),
        }
    }
}

impl fmt::Display for ValidationErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "The {} {} is invalid: {}",
            self.kind,
            go_quote(&self.name),
            self.aggregate()
        )
    }
}

impl std::error::Error for ValidationErrors {}

/// A field path under construction, rendered like Kubernetes' `field.Path`:
/// `spec.containers[0].resources.limits[cpu]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Path(String);

impl Path {
    /// A root path with one element, e.g. `spec`.
    #[must_use]
    pub fn new(root: &str) -> Self {
        Path(root.to_owned())
    }

    /// `self.name`.
    #[must_use]
    pub fn child(&self, name: &str) -> Self {
        if self.0.is_empty() {
            Path(name.to_owned())
        } else {
            Path(format!("{}.{name}", self.0))
        }
    }

    /// `self[i]`.
    #[must_use]
    pub fn index(&self, i: usize) -> Self {
        Path(format!("{}[{i}]", self.0))
    }

    /// `self[key]` (map keys are not quoted, as in Kubernetes).
    #[must_use]
    pub fn key(&self, key: &str) -> Self {
        Path(format!("{}[{key}]", self.0))
    }
}

impl fmt::Display for Path {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Go's `%q` (one home: [`crate::gotext::quote`]).
pub use crate::gotext::quote as go_quote;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_matches_kubernetes() {
        let p = Path::new("spec").child("containers").index(0);
        assert_eq!(
            FieldError::required(&p.child("name"), "").to_string(),
            "spec.containers[0].name: Required value"
        );
        assert_eq!(
            FieldError::invalid(
                &p.child("livenessProbe").child("successThreshold"),
                2,
                "must be 1"
            )
            .to_string(),
            "spec.containers[0].livenessProbe.successThreshold: Invalid value: 2: must be 1"
        );
        assert_eq!(
            FieldError::not_supported(
                &Path::new("spec").child("restartPolicy"),
                "Sometimes",
                &["Always", "OnFailure", "Never"]
            )
            .to_string(),
            "spec.restartPolicy: Unsupported value: \"Sometimes\": supported values: \"Always\", \"OnFailure\", \"Never\""
        );
        assert_eq!(
            FieldError::too_many(&p.child("items"), 21, 20).to_string(),
            "spec.containers[0].items: Too many: 21: must have at most 20 items"
        );
        assert_eq!(
            Path::new("metadata").child("labels").key("a/b").to_string(),
            "metadata.labels[a/b]"
        );
    }

    #[test]
    fn aggregate_shapes() {
        let a = FieldError::required(&Path::new("a"), "");
        let b = FieldError::required(&Path::new("b"), "");
        let one = ValidationErrors::new("Pod", "web", vec![a.clone()]);
        assert_eq!(
            one.to_string(),
            "The Pod \"web\" is invalid: a: Required value"
        );
        let two = ValidationErrors::new("Pod", "web", vec![a.clone(), b, a]);
        assert_eq!(two.errors.len(), 2);
        assert_eq!(
            two.to_string(),
            "The Pod \"web\" is invalid: [a: Required value, b: Required value]"
        );
    }
}
