//! A request on a registry kind, by verb: the collection (list or watch, create,
//! deletecollection), one object (get, update, patch, delete) and its `status` subresource.
//! `routes.rs` finds the kind; this module picks the handler.

use axum::http::Method;
use axum::response::Response;

use super::Strategy;
use super::write::Part;
use crate::objects;
use crate::req::Req;
use crate::status::{ApiError, ApiResult};

/// The refusal of a write to a read-only kind.
fn refuse(s: &Strategy, name: &str, method: &Method) -> Option<ApiError> {
    let why = s.read_only?;
    let verb = match *method {
        Method::POST => "created",
        Method::PUT => "updated",
        Method::PATCH => "patched",
        Method::DELETE => "deleted",
        _ => return None,
    };
    Some(ApiError::read_only(&s.qualified_plural(), name, verb, why))
}

/// A collection: `ns` is the URL's namespace (`None`: every namespace's objects, or a
/// cluster-scoped kind's).
pub(crate) fn collection(
    req: &Req,
    s: &Strategy,
    ns: Option<&str>,
    method: &Method,
    body: &[u8],
) -> ApiResult<Response> {
    if *method == Method::GET {
        return objects::list(req, s.res, ns, None);
    }
    if s.res.namespaced == ns.is_none() || !matches!(*method, Method::POST | Method::DELETE) {
        return Err(ApiError::method_not_supported(
            &s.qualified_plural(),
            method.as_str(),
        ));
    }
    if s.read_only.is_some() {
        // The name the refusal gives, when the body says it (it is not decoded further).
        let name = crate::protobuf::object_name(body)
            .or_else(|| {
                let v = crate::request::parse_body(body).ok()?;
                v.pointer("/metadata/name")?.as_str().map(str::to_owned)
            })
            .unwrap_or_default();
        if let Some(e) = refuse(s, &name, method) {
            return Err(e);
        }
    }
    let ns = ns.unwrap_or("");
    if *method == Method::POST {
        super::write::create(req, s, ns, body)
    } else {
        super::delete::delete_collection(req, s, ns, body)
    }
}

/// One object (`sub` `None`) or its subresource (`status`, for kinds that have one).
pub(crate) fn object(
    req: &Req,
    s: &Strategy,
    (ns, name): (&str, &str),
    sub: Option<&str>,
    method: &Method,
    body: &[u8],
) -> ApiResult<Response> {
    let part = match sub {
        None => Part::Main,
        Some("status") if s.status => Part::Status,
        Some(_) => return Err(ApiError::path_not_found()),
    };
    if *method == Method::GET {
        return objects::get(req, s.res, ns, name);
    }
    if let Some(e) = refuse(s, name, method) {
        return Err(e);
    }
    match (part, method) {
        (_, &Method::PUT) => super::write::update(req, s, (ns, name), part, body),
        (_, &Method::PATCH) => super::write::patch(req, s, (ns, name), part, body),
        (Part::Main, &Method::DELETE) => super::delete::delete(req, s, (ns, name), body),
        (Part::Main, m) => Err(ApiError::method_not_supported(
            &s.qualified_plural(),
            m.as_str(),
        )),
        (Part::Status, m) => Err(ApiError::method_not_supported(
            &format!("{}/status", s.qualified_plural()),
            m.as_str(),
        )),
    }
}

/// A watch of a collection, or of one object when `name` is given.
pub(crate) fn watch(
    req: &Req,
    s: &Strategy,
    ns: Option<&str>,
    name: Option<&str>,
) -> ApiResult<Response> {
    objects::watch(req, s.res, ns, name)
}
