//! What clients ask about themselves: `authentication.k8s.io/v1` SelfSubjectReview
//! (`kubectl auth whoami`) and `authorization.k8s.io/v1` SelfSubjectAccessReview and
//! SelfSubjectRulesReview (`kubectl auth can-i [--list]`).
//!
//! `SubjectAccessReview` and `LocalSubjectAccessReview` ask the same about another user.
//! Every answer is the authorizer's (`crate::authz`): `system:masters`, then RBAC; the rules
//! review lists the RBAC rules of the user in the namespace.

use axum::extract::Extension;
use axum::http::StatusCode;
use axum::response::Response;
use serde_json::{Value, json};

use axum::extract::State;

use crate::ApiState;
use crate::auth::UserInfo;
use crate::authz::Attributes;
use crate::req::Body;
use crate::request::parse_body;
use crate::status::{ApiError, ApiResult, json_response};
use podvisor_api::ValidationErrors;
use podvisor_api::validation::{FieldError, Path};

/// `authentication.k8s.io/v1`.
pub(crate) const AUTHN: &str = "authentication.k8s.io/v1";
/// `authorization.k8s.io/v1`.
pub(crate) const AUTHZ: &str = "authorization.k8s.io/v1";

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
                json!({"name": "localsubjectaccessreviews", "singularName": "", "namespaced": true,
                       "kind": "LocalSubjectAccessReview", "verbs": ["create"]}),
                create_only("selfsubjectaccessreviews", "SelfSubjectAccessReview"),
                create_only("selfsubjectrulesreviews", "SelfSubjectRulesReview"),
                create_only("subjectaccessreviews", "SubjectAccessReview"),
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

/// Checks a review's spec (`ValidateSubjectAccessReviewSpec`): exactly one kind of
/// attributes, and for a `SubjectAccessReview` a user or a group.
fn validate_spec(kind: &str, spec: &Value, needs_subject: bool) -> ApiResult<()> {
    let resource = spec.get("resourceAttributes").filter(|v| !v.is_null());
    let non_resource = spec.get("nonResourceAttributes").filter(|v| !v.is_null());
    let spec_path = Path::new("spec");
    let mut problems = Vec::new();
    match (resource, non_resource) {
        (Some(_), Some(v)) => problems.push(FieldError::invalid(
            &spec_path.child("nonResourceAttributes"),
            v.to_string(),
            "cannot be specified in combination with resourceAttributes",
        )),
        (None, None) => problems.push(FieldError::invalid(
            &spec_path.child("resourceAttributes"),
            "null",
            "exactly one of nonResourceAttributes or resourceAttributes must be specified",
        )),
        _ => {}
    }
    let text = |field: &str| spec.get(field).and_then(Value::as_str).unwrap_or_default();
    let no_groups = spec
        .get("groups")
        .and_then(Value::as_array)
        .is_none_or(Vec::is_empty);
    if needs_subject && text("user").is_empty() && no_groups {
        problems.push(FieldError::invalid(
            &spec_path.child("user"),
            "",
            "at least one of user or group must be specified",
        ));
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(ApiError::invalid(&ValidationErrors::new(
            kind, "", problems,
        )))
    }
}

/// The attributes a review's spec asks about, for `user`.
fn spec_attributes(user: UserInfo, spec: &Value) -> Attributes {
    let text = |v: &Value, field: &str| {
        v.get(field)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    match spec.get("resourceAttributes").filter(|v| !v.is_null()) {
        Some(r) => Attributes {
            api_version: text(r, "version"),
            ..Attributes::resource(
                user,
                &text(r, "verb"),
                &text(r, "group"),
                &text(r, "resource"),
                &text(r, "subresource"),
                &text(r, "namespace"),
                &text(r, "name"),
            )
        },
        None => {
            let n = &spec["nonResourceAttributes"];
            Attributes::non_resource(user, &text(n, "verb"), &text(n, "path"))
        }
    }
}

/// `status` of an access review: the authorizer's decision.
fn access_status(state: &ApiState, attrs: &Attributes) -> Value {
    let decision = state.authorizer().authorize(attrs);
    let mut status = json!({"allowed": decision.allowed});
    if !decision.reason.is_empty() {
        status["reason"] = json!(decision.reason);
    }
    status
}

/// The user a `SubjectAccessReview` asks about.
fn spec_user(spec: &Value) -> UserInfo {
    UserInfo {
        username: spec
            .get("user")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned(),
        groups: spec
            .get("groups")
            .and_then(Value::as_array)
            .map(|g| {
                g.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default(),
    }
}

/// `POST /apis/authorization.k8s.io/v1/selfsubjectaccessreviews`: may the requester do it?
pub(crate) async fn self_subject_access_review(
    State(state): State<ApiState>,
    Extension(user): Extension<UserInfo>,
    Body(body): Body,
) -> Response {
    let result = review_body(&body, AUTHZ, "SelfSubjectAccessReview").and_then(|mut review| {
        validate_spec("SelfSubjectAccessReview", &review["spec"], false)?;
        let attrs = spec_attributes(user, &review["spec"]);
        review["status"] = access_status(&state, &attrs);
        Ok(created(&review))
    });
    result.unwrap_or_else(axum::response::IntoResponse::into_response)
}

/// `POST /apis/authorization.k8s.io/v1/subjectaccessreviews`: may the user of the spec do
/// it? (Asking needs `create` on `subjectaccessreviews`, as any request is authorized.)
pub(crate) async fn subject_access_review(
    State(state): State<ApiState>,
    Body(body): Body,
) -> Response {
    let result = review_body(&body, AUTHZ, "SubjectAccessReview").and_then(|mut review| {
        validate_spec("SubjectAccessReview", &review["spec"], true)?;
        let attrs = spec_attributes(spec_user(&review["spec"]), &review["spec"]);
        review["status"] = access_status(&state, &attrs);
        Ok(created(&review))
    });
    result.unwrap_or_else(axum::response::IntoResponse::into_response)
}

/// `POST /apis/authorization.k8s.io/v1/namespaces/{ns}/localsubjectaccessreviews`: a
/// `SubjectAccessReview` about one namespace.
pub(crate) async fn local_subject_access_review(
    State(state): State<ApiState>,
    axum::extract::Path(namespace): axum::extract::Path<String>,
    Body(body): Body,
) -> Response {
    let kind = "LocalSubjectAccessReview";
    let result = review_body(&body, AUTHZ, kind).and_then(|mut review| {
        match review.pointer("/metadata/namespace").and_then(Value::as_str) {
            None | Some("") => review["metadata"]["namespace"] = json!(namespace),
            Some(ns) if ns == namespace => {}
            Some(_) => {
                return Err(ApiError::bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request",
                ));
            }
        }
        validate_spec(kind, &review["spec"], true)?;
        let spec = &review["spec"];
        let problem = if spec.get("nonResourceAttributes").is_some_and(|v| !v.is_null()) {
            Some(FieldError::invalid(
                &Path::new("spec").child("nonResourceAttributes"),
                spec["nonResourceAttributes"].to_string(),
                "disallowed on this kind of request",
            ))
        } else if spec["resourceAttributes"]["namespace"].as_str().unwrap_or_default() != namespace {
            Some(FieldError::invalid(
                &Path::new("spec").child("resourceAttributes").child("namespace"),
                spec["resourceAttributes"]["namespace"].as_str().unwrap_or_default(),
                "must match metadata.namespace",
            ))
        } else {
            None
        };
        if let Some(e) = problem {
            return Err(ApiError::invalid(&ValidationErrors::new(kind, "", vec![e])));
        }
        let attrs = spec_attributes(spec_user(spec), spec);
        review["status"] = access_status(&state, &attrs);
        Ok(created(&review))
    });
    result.unwrap_or_else(axum::response::IntoResponse::into_response)
}

/// `POST /apis/authorization.k8s.io/v1/selfsubjectrulesreviews`: the requester's rules in
/// `spec.namespace` (`kubectl auth can-i --list`), split into resource and non-resource
/// rules as the RBAC authorizer's `RulesFor` does.
pub(crate) async fn self_subject_rules_review(
    State(state): State<ApiState>,
    Extension(user): Extension<UserInfo>,
    Body(body): Body,
) -> Response {
    let result = review_body(&body, AUTHZ, "SelfSubjectRulesReview").map(|mut review| {
        let namespace = review
            .pointer("/spec/namespace")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let (rules, errors) = state.authorizer().rules_for(&user, &namespace);
        let some = |v: &Option<Vec<String>>| v.as_ref().is_some_and(|v| !v.is_empty());
        let mut resource_rules = Vec::new();
        let mut non_resource_rules = Vec::new();
        for rule in &rules {
            if some(&rule.resources) {
                let mut r = json!({"verbs": rule.verbs, "apiGroups": rule.api_groups.clone().unwrap_or_default(), "resources": rule.resources});
                if some(&rule.resource_names) {
                    r["resourceNames"] = json!(rule.resource_names);
                }
                resource_rules.push(r);
            }
            if some(&rule.non_resource_urls) {
                non_resource_rules
                    .push(json!({"verbs": rule.verbs, "nonResourceURLs": rule.non_resource_urls}));
            }
        }
        review["status"] = json!({
            "resourceRules": resource_rules,
            "nonResourceRules": non_resource_rules,
            "incomplete": false,
        });
        if !errors.is_empty() {
            review["status"]["evaluationError"] = json!(crate::authz::aggregate(&errors));
        }
        created(&review)
    });
    result.unwrap_or_else(axum::response::IntoResponse::into_response)
}
