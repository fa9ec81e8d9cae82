//! Reads shared by every resource: get, list (with selectors) and the response shapes
//! (object, list, `Table`, warnings).

use axum::http::{HeaderValue, StatusCode};
use axum::response::Response;
use podvisor_api::validation::go_quote;
use serde_json::{Value, json};

use crate::db::{self, Resource};
use crate::request::{Representation, flag, now, representation};
use crate::routes::Req;
use crate::selectors::Selection;
use crate::status::{ApiResult, json_response};
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
    let selection = Selection::parse(
        res,
        req.params.label_selector.as_deref(),
        req.params.field_selector.as_deref(),
    )?;
    let (items, rv) = db::list(req.state.store(), res, ns)?;
    let mut items: Vec<Value> = items.into_iter().filter(|o| selection.matches(o)).collect();
    items.sort_by_key(sort_key);
    let rv = rv.to_string();
    let body = match representation(&req.headers) {
        Representation::Table { beta } => table(
            res,
            &items,
            Some(&rv),
            table_options(req, beta, true),
            now(),
        ),
        Representation::Object => json!({
            "kind": format!("{}List", res.kind),
            "apiVersion": "v1",
            "metadata": {"resourceVersion": rv},
            "items": items,
        }),
    };
    Ok(json_response(StatusCode::OK, &body))
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
