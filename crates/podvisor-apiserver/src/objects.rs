//! Reads shared by every resource: get, list (with selectors) and the response shapes
//! (object, list, `Table`, warnings).

use std::collections::BTreeMap;

use axum::http::{HeaderValue, StatusCode};
use axum::response::Response;
use podvisor_api::validation::go_quote;
use serde_json::{Value, json};

use crate::db::{self, Resource};
use crate::list_options::{self, ListOptions};
use crate::req::Req;
use crate::request::{Representation, flag, int_param, now, representation};
use crate::selectors::Selection;
use crate::status::{ApiError, ApiResult, json_response};
use crate::table::{IncludeObject, TableOptions, table};
use crate::watch;

/// Sort key: namespace, then name (the API server's list order).
fn sort_key(obj: &Value) -> (String, String) {
    let s = |p: &str| {
        obj.pointer(p)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned()
    };
    (s("/metadata/namespace"), s("/metadata/name"))
}

/// Table options from the request.
pub(crate) fn table_options(req: &Req, beta: bool, with_columns: bool) -> TableOptions {
    TableOptions {
        include: IncludeObject::parse(req.params.include_object.as_deref()),
        beta,
        with_columns,
    }
}

/// `GET` on a collection: a `<Kind>List`, a `Table`, or a watch when `watch=true`.
pub(crate) fn list(
    req: &Req,
    res: Resource,
    ns: Option<&str>,
    name: Option<&str>,
) -> ApiResult<Response> {
    if flag(req.params.watch.as_ref()) {
        return watch(req, res, ns, name);
    }
    let opts = ListOptions::from_params(&req.params, false)?;
    let selection = Selection::parse(
        res,
        req.params.label_selector.as_deref(),
        req.params.field_selector.as_deref(),
    )?;
    // A list is of the latest state, which is as new as any version the client can have
    // seen; a version the store has not reached is the watch cache's "too large" answer.
    if let Some(requested) = db::query_rv(req.params.resource_version.as_deref())? {
        let current = req.state.store().resource_version();
        if requested > current {
            return Err(ApiError::too_large_resource_version(requested, current));
        }
        // `Exact` asks for the objects as they were at that version, which only the latest
        // state can give here: an older one is answered as etcd answers a compacted revision
        // (the client lists again without it).
        if opts.version_match == list_options::EXACT && requested < current {
            return Err(ApiError::expired(
                "The resourceVersion for the provided list is too old.",
            ));
        }
    }
    let limit = int_param("limit", req.params.limit.as_ref())?.filter(|&l| l > 0);
    let resume = req
        .params
        .continue_token
        .as_deref()
        .filter(|t| !t.is_empty())
        .map(Continue::decode)
        .transpose()?;
    // Selected as the objects are read, and with a limit only the first `limit` (in
    // namespace, name order) kept: a list of many objects (events) holds what it returns,
    // not everything stored.
    let after = resume.as_ref().map(|c| c.after.clone());
    let limit = limit.and_then(|l| usize::try_from(l).ok());
    let mut matched = 0usize;
    let mut page: BTreeMap<(String, String), Value> = BTreeMap::new();
    let (_, rv) = db::list_filtered(req.state.store(), res, ns, |o| {
        if !selection.matches(o) {
            return false;
        }
        let key = sort_key(o);
        if after.as_ref().is_some_and(|a| key <= *a) {
            return false;
        }
        matched += 1;
        page.insert(key, o.clone());
        if limit.is_some_and(|l| page.len() > l) {
            page.pop_last();
        }
        false
    })?;
    let items: Vec<Value> = page.into_values().collect();
    // Later pages keep the first page's resourceVersion (here they read the current objects).
    let rv = resume.as_ref().map_or(rv, |c| c.rv);
    let mut meta = json!({"resourceVersion": rv.to_string()});
    if matched > items.len() {
        let last = items.last().map(sort_key).unwrap_or_default();
        meta["continue"] = json!(Continue { rv, after: last }.encode());
        meta["remainingItemCount"] = json!(matched - items.len());
    }
    let body = match representation(&req.headers) {
        Representation::Table { beta } => {
            let rv = rv.to_string();
            let mut t = table(
                res,
                &items,
                Some(&rv),
                table_options(req, beta, true),
                now(),
            );
            t["metadata"] = meta;
            t
        }
        Representation::Object => json!({
            "kind": format!("{}List", res.kind),
            "apiVersion": db::api_version(res),
            "metadata": meta,
            "items": items,
        }),
    };
    Ok(json_response(StatusCode::OK, &body))
}

/// Where a chunked list (`limit`) resumes: the list's resourceVersion and the last
/// (namespace, name) it returned. Opaque to clients: base64 of a small JSON document.
#[derive(Debug, PartialEq, Eq)]
struct Continue {
    rv: u64,
    after: (String, String),
}

impl Continue {
    fn encode(&self) -> String {
        use base64::Engine as _;
        let doc =
            json!({"v": "meta.k8s.io/v1", "rv": self.rv, "start": [self.after.0, self.after.1]});
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(doc.to_string())
    }

    fn decode(token: &str) -> ApiResult<Continue> {
        use base64::Engine as _;
        let invalid = || ApiError::bad_request(format!("continue key is not valid: {token}"));
        let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(token)
            .map_err(|_| invalid())?;
        let doc: Value = serde_json::from_slice(&bytes).map_err(|_| invalid())?;
        let start = |i: usize| doc["start"][i].as_str().map(str::to_owned);
        match (doc["rv"].as_u64(), start(0), start(1)) {
            (Some(rv), Some(ns), Some(name)) => Ok(Continue {
                rv,
                after: (ns, name),
            }),
            _ => Err(invalid()),
        }
    }
}

/// A watch on a collection (or one object when `name` is given).
pub(crate) fn watch(
    req: &Req,
    res: Resource,
    ns: Option<&str>,
    name: Option<&str>,
) -> ApiResult<Response> {
    watch::start(req, res, ns, name)
}

/// `GET` of one object.
pub(crate) fn get(req: &Req, res: Resource, ns: &str, name: &str) -> ApiResult<Response> {
    let obj = db::get(req.state.store(), res, ns, name)?;
    Ok(respond(req, res, StatusCode::OK, &obj, &[]))
}

/// One object in the representation the client asked for, with `Warning` headers.
pub(crate) fn respond(
    req: &Req,
    res: Resource,
    code: StatusCode,
    obj: &Value,
    warnings: &[String],
) -> Response {
    let body = match representation(&req.headers) {
        Representation::Table { beta } => {
            let rv = obj
                .pointer("/metadata/resourceVersion")
                .and_then(Value::as_str);
            table(
                res,
                std::slice::from_ref(obj),
                rv,
                table_options(req, beta, true),
                now(),
            )
        }
        Representation::Object => obj.clone(),
    };
    let mut resp = json_response(code, &body);
    for w in warnings {
        if let Ok(v) = HeaderValue::from_str(&format!("299 - {}", go_quote(w))) {
            resp.headers_mut().append("warning", v);
        }
    }
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn continue_tokens_round_trip_and_bad_ones_are_refused() {
        let c = Continue {
            rv: 42,
            after: ("default".into(), "web-1".into()),
        };
        assert_eq!(Continue::decode(&c.encode()).unwrap(), c);
        assert_eq!(Continue::decode("not a token").unwrap_err().code, 400);
        assert_eq!(Continue::decode("e30").unwrap_err().code, 400);
    }
}
