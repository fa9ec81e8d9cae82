//! The checks every write makes of a request object's type and metadata against its URL, as
//! the API server's REST handlers make them before a strategy sees the object: the
//! `apiVersion`/`kind` of the endpoint, the namespace and name of the URL, a pinned
//! `resourceVersion`. The registry and the pods' handlers share them.

use serde::Deserialize;
use serde_json::{Value, json};

use crate::db::{self, Resource};
use crate::status::{ApiError, ApiResult};

/// Fills a missing `apiVersion`/`kind` with `api_version`/`kind` (the endpoint's type, as
/// the API server's decoder defaults them); 400 for another type.
pub(crate) fn type_meta_of(value: &mut Value, api_version: &str, kind: &str) -> ApiResult<()> {
    let Some(obj) = value.as_object_mut() else {
        return Err(ApiError::bad_request(format!(
            "the object provided is unrecognized (must be of type {kind})"
        )));
    };
    let given_version = obj
        .entry("apiVersion")
        .or_insert_with(|| json!(api_version))
        .clone();
    let given_kind = obj.entry("kind").or_insert_with(|| json!(kind)).clone();
    if given_version != json!(api_version) || given_kind != json!(kind) {
        return Err(ApiError::bad_request(format!(
            "the API version in the data ({}) does not match the expected API version ({api_version}) or the kind ({}) is not {kind}",
            given_version.as_str().unwrap_or(""),
            given_kind.as_str().unwrap_or("")
        )));
    }
    Ok(())
}

/// [`type_meta_of`] for a core `v1` kind.
pub(crate) fn type_meta(value: &mut Value, kind: &str) -> ApiResult<()> {
    type_meta_of(value, "v1", kind)
}

/// [`type_meta_of`] for a resource's kind and group version.
pub(crate) fn resource_type_meta(value: &mut Value, res: Resource) -> ApiResult<()> {
    type_meta_of(value, db::api_version(res), res.kind)
}

/// The body's `metadata.namespace` must be empty or the URL's.
pub(crate) fn check_namespace(value: &Value, ns: &str) -> ApiResult<()> {
    match value.pointer("/metadata/namespace").and_then(Value::as_str) {
        Some(n) if !n.is_empty() && n != ns => Err(ApiError::bad_request(
            "the namespace of the provided object does not match the namespace sent on the request",
        )),
        _ => Ok(()),
    }
}

/// The body's `metadata.name` must be the URL's.
pub(crate) fn check_name(value: &Value, name: &str) -> ApiResult<()> {
    let body_name = value
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    if body_name != name {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({body_name}) does not match the name on the URL ({name})"
        )));
    }
    Ok(())
}

/// The resourceVersion a request object pins, if any.
pub(crate) fn pinned_rv(value: &Value) -> ApiResult<Option<u64>> {
    match value
        .pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
    {
        None | Some("") => Ok(None),
        Some(rv) => db::parse_rv(rv).map(Some),
    }
}

/// Compares two objects ignoring `managedFields` and the resourceVersion: a write that
/// changes nothing else writes nothing.
pub(crate) fn same_object(a: &Value, b: &Value) -> bool {
    let strip = |v: &Value| {
        let mut v = v.clone();
        if let Some(m) = v.get_mut("metadata").and_then(Value::as_object_mut) {
            m.remove("managedFields");
            m.remove("resourceVersion");
        }
        v
    };
    strip(a) == strip(b)
}

/// A delete's `DeleteOptions.preconditions`.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Preconditions {
    pub uid: Option<String>,
    pub resource_version: Option<String>,
}

impl Preconditions {
    /// `rest.BeforeDelete`'s check of the stored `obj` (a `kind` named `name`): a 409 in the
    /// API server's words when the uid or resourceVersion differs.
    pub(crate) fn check(&self, kind: &str, name: &str, obj: &Value) -> ApiResult<()> {
        let field = |p: &str| obj.pointer(p).and_then(Value::as_str).unwrap_or("");
        let (uid, rv) = (field("/metadata/uid"), field("/metadata/resourceVersion"));
        if let Some(want) = self.uid.as_deref().filter(|u| *u != uid) {
            return Err(ApiError::conflict(
                kind,
                name,
                &format!(
                    "the UID in the precondition ({want}) does not match the UID in record ({uid}). The object might have been deleted and then recreated"
                ),
            ));
        }
        if let Some(want) = self.resource_version.as_deref().filter(|r| *r != rv) {
            return Err(ApiError::conflict(
                kind,
                name,
                &format!(
                    "the ResourceVersion in the precondition ({want}) does not match the ResourceVersion in record ({rv}). The object might have been modified"
                ),
            ));
        }
        Ok(())
    }
}
