//! `Status` objects: every error the API answers with, shaped like the API server's
//! (`k8s.io/apimachinery/pkg/api/errors`), so kubectl and client libraries print the same text.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use podvisor_api::ValidationErrors;
use podvisor_api::validation::{ErrorKind, go_quote};
use serde_json::{Value, json};

/// A failed request: HTTP code, the `reason`, the message and optional details.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    /// The HTTP status code (also `Status.code`).
    pub code: u16,
    /// `Status.reason`: `NotFound`, `AlreadyExists`, `Conflict`, `Invalid`, ...
    pub reason: &'static str,
    /// `Status.message`.
    pub message: String,
    /// `Status.details`, when the API server sets them.
    pub details: Option<Value>,
}

/// Handlers' result type.
pub type ApiResult<T> = Result<T, ApiError>;

impl ApiError {
    fn new(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            code,
            reason,
            message: message.into(),
            details: None,
        }
    }

    fn with_details(mut self, name: &str, kind: &str) -> Self {
        let mut d = json!({});
        if !name.is_empty() {
            d["name"] = json!(name);
        }
        if !kind.is_empty() {
            d["kind"] = json!(kind);
        }
        self.details = Some(d);
        self
    }

    /// 404: `pods "web" not found`.
    pub fn not_found(resource: &str, name: &str) -> Self {
        Self::new(
            404,
            "NotFound",
            format!("{resource} {} not found", go_quote(name)),
        )
        .with_details(name, resource)
    }

    /// 404 for a path nobody serves.
    pub fn path_not_found() -> Self {
        Self::new(
            404,
            "NotFound",
            "the server could not find the requested resource",
        )
        .with_details("", "")
    }

    /// 404 for a kind of a group `serve` does not serve, in the words of kubectl's REST
    /// mapper (`no matches for kind "Deployment" in version "apps/v1"`).
    pub fn no_kind_match(kind: &str, group_version: &str) -> Self {
        Self::new(
            404,
            "NotFound",
            format!(
                "no matches for kind {} in version {}",
                go_quote(kind),
                go_quote(group_version)
            ),
        )
        .with_details("", "")
    }

    /// 409: `pods "web" already exists`.
    pub fn already_exists(resource: &str, name: &str) -> Self {
        Self::new(
            409,
            "AlreadyExists",
            format!("{resource} {} already exists", go_quote(name)),
        )
        .with_details(name, resource)
    }

    /// 409: the optimistic-concurrency failure.
    pub fn conflict(resource: &str, name: &str, detail: &str) -> Self {
        Self::new(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {resource} {}: {detail}",
                go_quote(name)
            ),
        )
        .with_details(name, resource)
    }

    /// 409 for server-side apply's conflicts (`errors.NewApplyConflict`).
    pub fn apply_conflict(message: String, causes: Vec<Value>) -> Self {
        let mut e = Self::new(409, "Conflict", message);
        e.details = Some(json!({"causes": causes}));
        e
    }

    /// 409 for a stale `resourceVersion`.
    pub fn stale(resource: &str, name: &str) -> Self {
        Self::conflict(
            resource,
            name,
            "the object has been modified; please apply your changes to the latest version and try again",
        )
    }

    /// 400 `BadRequest` with a free-form message.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }

    /// 403: `pods "web" is forbidden: <detail>`.
    pub fn forbidden(resource: &str, name: &str, detail: &str) -> Self {
        Self::new(
            403,
            "Forbidden",
            format!("{resource} {} is forbidden: {detail}", go_quote(name)),
        )
        .with_details(name, resource)
    }

    /// 403 as `errors.NewForbidden` words it for a resource of an API group:
    /// `roles.rbac.authorization.k8s.io "r" is forbidden: <detail>`, without the name when
    /// there is none, and `forbidden: <detail>` without a resource (a non-resource path).
    pub fn forbidden_in_group(group: &str, resource: &str, name: &str, detail: &str) -> Self {
        let qualified = if group.is_empty() {
            resource.to_owned()
        } else {
            format!("{resource}.{group}")
        };
        let message = match (qualified.is_empty(), name.is_empty()) {
            (true, _) => format!("forbidden: {detail}"),
            (false, true) => format!("{qualified} is forbidden: {detail}"),
            (false, false) => format!("{qualified} {} is forbidden: {detail}", go_quote(name)),
        };
        let mut e = Self::new(403, "Forbidden", message).with_details(name, resource);
        if let (Some(d), false) = (e.details.as_mut(), group.is_empty()) {
            d["group"] = json!(group);
        }
        e
    }

    /// 403 with a free-form message (a refused protocol negotiation).
    pub fn forbidden_message(message: impl Into<String>) -> Self {
        Self::new(403, "Forbidden", message)
    }

    /// 401 for a missing or wrong bearer token.
    pub fn unauthorized() -> Self {
        Self::new(401, "Unauthorized", "Unauthorized")
    }

    /// 405 for a verb the resource does not support.
    pub fn method_not_supported(resource: &str, verb: &str) -> Self {
        Self::new(
            405,
            "MethodNotAllowed",
            format!(
                "{verb} is not supported on resources of kind {}",
                go_quote(resource)
            ),
        )
        .with_details("", resource)
    }

    /// 405 for a write to a kind served read-only: `services "x" cannot be created: <why>`.
    pub fn read_only(resource: &str, name: &str, verb: &str, why: &str) -> Self {
        let what = if name.is_empty() {
            resource.to_owned()
        } else {
            format!("{resource} {}", go_quote(name))
        };
        Self::new(
            405,
            "MethodNotAllowed",
            format!("{what} cannot be {verb}: {why}"),
        )
        .with_details(name, resource)
    }

    /// 410 `Expired`: a watch or list from a compacted `resourceVersion`.
    pub fn expired(message: impl Into<String>) -> Self {
        Self::new(410, "Expired", message)
    }

    /// 504 `Timeout` for a list from a resourceVersion the store has not reached
    /// (`storage.NewTooLargeResourceVersionError`, retry after 1 s).
    pub fn too_large_resource_version(requested: u64, current: u64) -> Self {
        let mut e = Self::new(
            504,
            "Timeout",
            format!("Timeout: Too large resource version: {requested}, current: {current}"),
        );
        e.details = Some(json!({
            "causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}],
            "retryAfterSeconds": 1,
        }));
        e
    }

    /// 413 for a request body over the limit (`limitedReadBody`).
    pub fn request_entity_too_large(limit: usize) -> Self {
        Self::new(
            413,
            "RequestEntityTooLarge",
            format!("Request entity too large: limit is {limit}"),
        )
    }

    /// 415 for a PATCH content type the server does not know.
    pub fn unsupported_media_type(content_type: &str) -> Self {
        Self::new(
            415,
            "UnsupportedMediaType",
            format!(
                "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml, application/strategic-merge-patch+json; got {content_type}"
            ),
        )
    }

    /// 415 for a create or update body in a format the server does not decode, with the
    /// media types it takes for those.
    pub fn unsupported_body_media_type(content_type: &str) -> Self {
        Self::new(
            415,
            "UnsupportedMediaType",
            format!(
                "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml; got {content_type}"
            ),
        )
    }

    /// 500 for the server's own failures (the store, the file system).
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(500, "InternalError", message)
    }

    /// 422 `Invalid` from validation errors, with one `cause` per field error, as
    /// `errors.NewInvalid` builds it: message `Pod "web" is invalid: [...]`.
    pub fn invalid(errors: &ValidationErrors) -> Self {
        let causes: Vec<Value> = errors
            .errors
            .iter()
            .map(|e| {
                let text = e.to_string();
                let body = text
                    .strip_prefix(&format!("{}: ", e.path))
                    .unwrap_or(&text)
                    .to_owned();
                json!({"reason": cause_type(e.kind), "message": body, "field": e.path})
            })
            .collect();
        let mut err = Self::new(
            422,
            "Invalid",
            format!(
                "{} {} is invalid: {}",
                errors.kind,
                go_quote(&errors.name),
                errors.aggregate()
            ),
        )
        .with_details(&errors.name, &errors.kind);
        if let Some(d) = err.details.as_mut() {
            d["causes"] = Value::Array(causes);
        }
        err
    }

    /// The `Status` object.
    pub fn to_status(&self) -> Value {
        let mut s = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        if let Some(d) = &self.details {
            s["details"] = d.clone();
        }
        s
    }
}

/// `field.ErrorType` → `metav1.CauseType`.
fn cause_type(kind: ErrorKind) -> &'static str {
    match kind {
        ErrorKind::NotFound => "FieldValueNotFound",
        ErrorKind::Required => "FieldValueRequired",
        ErrorKind::Duplicate => "FieldValueDuplicate",
        ErrorKind::Invalid => "FieldValueInvalid",
        ErrorKind::NotSupported => "FieldValueNotSupported",
        ErrorKind::Forbidden => "FieldValueForbidden",
        ErrorKind::TooLong => "FieldValueTooLong",
        ErrorKind::TooMany => "FieldValueTooMany",
        ErrorKind::Internal => "InternalError",
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({}): {}", self.code, self.reason, self.message)
    }
}

impl std::error::Error for ApiError {}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let code = StatusCode::from_u16(self.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        json_response(code, &self.to_status())
    }
}

/// A JSON response with the API server's content type.
pub fn json_response(code: StatusCode, body: &Value) -> Response {
    let mut resp = (code, body.to_string()).into_response();
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    resp
}

#[cfg(test)]
mod tests {
    use podvisor_api::validation::{FieldError, Path};

    use super::*;

    #[test]
    fn invalid_status_has_causes_like_the_api_server() {
        let errs = ValidationErrors::new(
            "Pod",
            "web",
            vec![
                FieldError::required(&Path::new("spec").child("containers"), ""),
                FieldError::invalid(&Path::new("metadata").child("name"), "Web", "bad"),
            ],
        );
        let s = ApiError::invalid(&errs).to_status();
        assert_eq!(s["code"], 422);
        assert_eq!(
            s["message"],
            "Pod \"web\" is invalid: [spec.containers: Required value, metadata.name: Invalid value: \"Web\": bad]"
        );
        assert_eq!(s["details"]["kind"], "Pod");
        assert_eq!(s["details"]["causes"][1]["reason"], "FieldValueInvalid");
        assert_eq!(
            s["details"]["causes"][1]["message"],
            "Invalid value: \"Web\": bad"
        );
        assert_eq!(s["details"]["causes"][1]["field"], "metadata.name");
    }

    #[test]
    fn not_found_text() {
        let s = ApiError::not_found("pods", "web").to_status();
        assert_eq!(s["message"], "pods \"web\" not found");
        assert_eq!(s["details"], json!({"name": "web", "kind": "pods"}));
    }
}
