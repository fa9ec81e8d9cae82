//! Object keys and their encoding as redb keys.

use crate::error::{Result, StoreError};
use std::fmt;

/// Identifies one stored object.
///
/// `kind` is the resource plural (`"pods"`, `"events"`, `"namespaces"`); `namespace` is `""`
/// for cluster-scoped objects. In the database a key is the string `kind/namespace/name`, so
/// none of the three parts may contain `/` (Kubernetes names and namespaces never do).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Key {
    /// The resource plural, e.g. `"pods"`.
    pub kind: String,
    /// The namespace, `""` for cluster-scoped objects.
    pub namespace: String,
    /// The object's name.
    pub name: String,
}

impl Key {
    /// A key for a namespaced object.
    pub fn new(
        kind: impl Into<String>,
        namespace: impl Into<String>,
        name: impl Into<String>,
    ) -> Key {
        Key {
            kind: kind.into(),
            namespace: namespace.into(),
            name: name.into(),
        }
    }

    /// A key for a cluster-scoped object (namespace `""`).
    pub fn cluster(kind: impl Into<String>, name: impl Into<String>) -> Key {
        Key::new(kind, "", name)
    }

    /// The database form, `kind/namespace/name`.
    pub fn encode(&self) -> String {
        format!("{}/{}/{}", self.kind, self.namespace, self.name)
    }

    /// Parses the database form; `None` unless it has exactly three `/`-separated parts.
    pub fn decode(s: &str) -> Option<Key> {
        let mut parts = s.split('/');
        let (kind, namespace, name) = (parts.next()?, parts.next()?, parts.next()?);
        if parts.next().is_some() {
            return None;
        }
        Some(Key::new(kind, namespace, name))
    }

    /// Rejects keys that cannot be encoded unambiguously.
    pub(crate) fn validate(&self) -> Result<()> {
        check_kind(&self.kind)?;
        check_part("namespace", &self.namespace)?;
        check_part("name", &self.name)?;
        if self.name.is_empty() {
            return Err(StoreError::Invalid(format!(
                "key {self}: name must not be empty"
            )));
        }
        Ok(())
    }
}

impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}/{}", self.kind, self.namespace, self.name)
    }
}

pub(crate) fn check_kind(kind: &str) -> Result<()> {
    if kind.is_empty() {
        return Err(StoreError::Invalid("kind must not be empty".to_string()));
    }
    check_part("kind", kind)
}

pub(crate) fn check_part(what: &str, value: &str) -> Result<()> {
    if value.contains('/') {
        return Err(StoreError::Invalid(format!(
            "{what} {value:?} must not contain '/'"
        )));
    }
    Ok(())
}

/// The half-open range of encoded keys of one kind, optionally within one namespace.
///
/// `'0'` is the byte after `'/'`, so `["pods/", "pods0")` holds exactly the keys starting with
/// `pods/`.
pub(crate) fn prefix_range(kind: &str, namespace: Option<&str>) -> (String, String) {
    let prefix = match namespace {
        None => format!("{kind}/"),
        Some(ns) => format!("{kind}/{ns}/"),
    };
    let mut end = prefix.clone();
    end.pop();
    end.push('0');
    (prefix, end)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_round_trip_and_prefixes_bound_exactly() {
        let key = Key::new("pods", "default", "web-0");
        assert_eq!(key.encode(), "pods/default/web-0");
        assert_eq!(Key::decode(&key.encode()), Some(key));
        assert_eq!(
            Key::decode("namespaces//default"),
            Some(Key::cluster("namespaces", "default"))
        );
        assert_eq!(Key::decode("pods/a"), None);
        assert_eq!(Key::decode("pods/a/b/c"), None);
        let (start, end) = prefix_range("pods", Some("a"));
        assert!(start.as_str() <= "pods/a/x" && "pods/a/x" < end.as_str());
        assert!("pods/a-b/x" < start.as_str() && "pods/ab/x" >= end.as_str());
        let (start, end) = prefix_range("pods", None);
        assert!("podsx/a/b" >= end.as_str() && "pod/a/b" < start.as_str());
    }
}
