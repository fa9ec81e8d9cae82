//! What clients ask about themselves: `authentication.k8s.io/v1` SelfSubjectReview
//! (`kubectl auth whoami`) and `authorization.k8s.io/v1` SelfSubjectAccessReview and
//! SelfSubjectRulesReview (`kubectl auth can-i [--list]`).
//!
//! podvisor has one authorizer: every authenticated request may do everything (the API
//! server's `AlwaysAllow` mode, which is what the kubeconfig's token is meant for on a
//! one-node machine). The reviews say so truthfully: `allowed: true` for any attribute, and
//! one rule of `*` for the rules review.

use axum::extract::Extension;
use axum::http::StatusCode;
use axum::response::Response;
use serde_json::{Value, json};

use crate::auth::UserInfo;
use crate::req::Body;
use crate::request::parse_body;
use crate::status::{ApiError, ApiResult, json_response};
use podvisor_api::ValidationErrors;
use podvisor_api::validation::{FieldError, Path};

/// `authentication.k8s.io/v1`.
pub(crate) const AUTHN: &str = "authentication.k8s.io/v1";
/// `authorization.k8s.io/v1`.
pub(crate) const AUTHZ: &str = "authorization.k8s.io/v1";

/// The reason an allowed review gives.
const ALLOWED_REASON: &str = "podvisor allows every authenticated user";

fn group(name: &str, gv: &str) -> Value {
    json!({
        "kind": "APIGroup",
        "apiVersion": "v1",
        "name": name,
        "versions": [{"groupVersion": gv, "version": "v1"}],
        "preferredVersion": {"groupVersion": gv, "version": "v1"},
    })
}

/// The `APIGroup`s for `/apis`.
pub(crate) fn groups() -> [Value; 2] {
    [
        group("authentication.k8s.io", AUTHN),
        group("authorization.k8s.io", AUTHZ),
    ]
}

fn create_only(name: &str, kind: &str) -> Value {
    json!({"name": name, "singularName": "", "namespaced": false, "kind": kind, "verbs": ["create"]})
}

/// `GET /apis/authentication.k8s.io[/v1]`.
pub(crate) async fn authn_discovery(uri: axum::http::Uri) -> Response {
    if uri.path().trim_end_matches('/').ends_with("/v1") {
        json_response(
            StatusCode::OK,
            &json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": AUTHN,
                    "resources": [create_only("selfsubjectreviews", "SelfSubjectReview")]}),
        )
    } else {
        json_response(StatusCode::OK, &groups()[0])
    }
}

/// `GET /apis/authorization.k8s.io[/v1]`.
pub(crate) async fn authz_discovery(uri: axum::http::Uri) -> Response {
    if uri.path().trim_end_matches('/').ends_with("/v1") {
        json_response(
            StatusCode::OK,
            &json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": AUTHZ,
            "resources": [
                create_only("selfsubjectaccessreviews", "SelfSubjectAccessReview"),
                create_only("selfsubjectrulesreviews", "SelfSubjectRulesReview"),
            ]}),
        )
    } else {
        json_response(StatusCode::OK, &groups()[1])
    }
}

/// Checks the body's `kind`/`apiVersion` (either may be left out) and returns it.
fn review_body(body: &[u8], gv: &str, kind: &str) -> ApiResult<Value> {
    let mut value = parse_body(body)?;
    for (field, want) in [("apiVersion", gv), ("kind", kind)] {
        match value.get(field).and_then(Value::as_str) {
            None | Some("") => value[field] = json!(want),
            Some(got) if got == want => {}
            Some(got) => {
                return Err(ApiError::bad_request(format!(
                    "the {field} of the provided object ({got}) does not match {want}"
                )));
            }
        }
    }
    if value.get("metadata").is_none_or(Value::is_null) {
        value["metadata"] = json!({});
    }
    Ok(value)
}

fn created(value: &Value) -> Response {
    json_response(StatusCode::CREATED, value)
}

/// `POST /apis/authentication.k8s.io/v1/selfsubjectreviews`.
pub(crate) async fn self_subject_review(
    Extension(user): Extension<UserInfo>,
    Body(body): Body,
) -> Response {
    let result = review_body(&body, AUTHN, "SelfSubjectReview").map(|mut review| {
        review["status"] = json!({
            "userInfo": {"username": user.username, "groups": user.groups}
        });
        created(&review)
    });
    result.unwrap_or_else(axum::response::IntoResponse::into_response)
}

/// `POST /apis/authorization.k8s.io/v1/selfsubjectaccessreviews`.
pub(crate) async fn self_subject_access_review(Body(body): Body) -> Response {
    let result = review_body(&body, AUTHZ, "SelfSubjectAccessReview").and_then(|mut review| {
        let spec = &review["spec"];
        let resource = spec.get("resourceAttributes").filter(|v| !v.is_null());
        let non_resource = spec.get("nonResourceAttributes").filter(|v| !v.is_null());
        // The API server's validation of the spec.
        let spec_path = Path::new("spec");
        let problem = match (resource, non_resource) {
            (Some(_), Some(v)) => Some(FieldError::invalid(
                &spec_path.child("nonResourceAttributes"),
                v.to_string(),
                "cannot be specified in combination with resourceAttributes",
            )),
            (None, None) => Some(FieldError::invalid(
                &spec_path.child("resourceAttributes"),
                "null",
                "exactly one of nonResourceAttributes or resourceAttributes must be specified",
            )),
            _ => None,
        };
        if let Some(e) = problem {
            return Err(ApiError::invalid(&ValidationErrors::new(
                "SelfSubjectAccessReview",
                "",
                vec![e],
            )));
        }
        review["status"] = json!({"allowed": true, "reason": ALLOWED_REASON});
        Ok(created(&review))
    });
    result.unwrap_or_else(axum::response::IntoResponse::into_response)
}

/// `POST /apis/authorization.k8s.io/v1/selfsubjectrulesreviews`.
pub(crate) async fn self_subject_rules_review(Body(body): Body) -> Response {
    let result = review_body(&body, AUTHZ, "SelfSubjectRulesReview").map(|mut review| {
        review["status"] = json!({
            "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}],
            "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}],
            "incomplete": false,
        });
        created(&review)
    });
    result.unwrap_or_else(axum::response::IntoResponse::into_response)
}
