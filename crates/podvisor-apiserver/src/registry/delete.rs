//! The registry's deletes: one object (under the `DeleteOptions` preconditions; an object
//! with finalizers is only marked) and a collection (the objects a selector picks).

use axum::http::StatusCode;
use axum::response::Response;
use serde::Deserialize;
use serde_json::{Value, json};

use super::Strategy;
use crate::db::{self, Resource};
use crate::meta::Preconditions;
use crate::objects::respond;
use crate::req::Req;
use crate::selectors::Selection;
use crate::status::{ApiError, ApiResult, json_response};

#[derive(Debug, Default, Deserialize)]
struct DeleteOptions {
    preconditions: Option<Preconditions>,
}

fn delete_options(body: &[u8]) -> ApiResult<DeleteOptions> {
    match crate::request::delete_options_body(body)? {
        None => Ok(DeleteOptions::default()),
        Some(v) => serde_json::from_value(v)
            .map_err(|e| ApiError::bad_request(format!("error decoding DeleteOptions: {e}"))),
    }
}

fn delete_one(
    req: &Req,
    s: &Strategy,
    (ns, name): (&str, &str),
    opts: &DeleteOptions,
) -> ApiResult<Value> {
    let store = req.state.store();
    let current = db::get(store, s.res, ns, name)?;
    if let Some(pre) = &opts.preconditions {
        pre.check(s.res.kind, name, &current)?;
    }
    let rv = db::object_rv(&current);
    if req.params.dry_run()? {
        return Ok(current);
    }
    db::delete(store, s.res, ns, name, None, rv)
}

/// The `Status` a delete returns for kinds that do not return the object.
fn deleted_status(s: &Strategy, obj: &Value) -> Value {
    let meta = &obj["metadata"];
    let mut details = json!({"name": meta["name"], "kind": s.res.plural, "uid": meta["uid"]});
    if !s.group().is_empty() {
        details["group"] = json!(s.group());
    }
    json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "details": details,
    })
}

/// `DELETE` of one object.
pub(crate) fn delete(
    req: &Req,
    s: &Strategy,
    (ns, name): (&str, &str),
    body: &[u8],
) -> ApiResult<Response> {
    let opts = delete_options(body)?;
    let obj = delete_one(req, s, (ns, name), &opts)?;
    // An object with finalizers is only marked, and returned as it now is.
    let marked = obj
        .pointer("/metadata/deletionTimestamp")
        .is_some_and(|t| !t.is_null())
        && db::try_get(req.state.store(), s.res, ns, name)?.is_some();
    if marked || s.delete_returns_object {
        return Ok(respond(req, s.res, StatusCode::OK, &obj, &[]));
    }
    Ok(json_response(StatusCode::OK, &deleted_status(s, &obj)))
}

/// `DELETE` of a collection (deletecollection): the list of what was deleted.
pub(crate) fn delete_collection(
    req: &Req,
    s: &Strategy,
    ns: &str,
    body: &[u8],
) -> ApiResult<Response> {
    let opts = delete_options(body)?;
    delete_selected(req, s.res, ns, |name| delete_one(req, s, (ns, name), &opts))
}

/// Deletecollection of any kind: `delete` (one object's delete, by name) of each object of
/// `res` in `ns` (a cluster-scoped kind: all) the request's selectors pick; those already
/// gone are skipped. Answers with the list of what was deleted (or marked).
pub(crate) fn delete_selected(
    req: &Req,
    res: Resource,
    ns: &str,
    mut delete: impl FnMut(&str) -> ApiResult<Value>,
) -> ApiResult<Response> {
    let selection = Selection::parse(
        res,
        req.params.label_selector.as_deref(),
        req.params.field_selector.as_deref(),
    )?;
    let scope = res.namespaced.then_some(ns);
    let (items, rv) = db::list(req.state.store(), res, scope)?;
    let mut out = Vec::new();
    for obj in items.iter().filter(|o| selection.matches(o)) {
        let name = obj
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("");
        match delete(name) {
            Ok(v) => out.push(v),
            Err(e) if e.code == 404 => {}
            Err(e) => return Err(e),
        }
    }
    Ok(json_response(
        StatusCode::OK,
        &json!({
            "kind": format!("{}List", res.kind),
            "apiVersion": db::api_version(res),
            "metadata": {"resourceVersion": rv.to_string()},
            "items": out,
        }),
    ))
}
