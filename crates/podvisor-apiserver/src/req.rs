//! The request context every handler takes ([`Req`]: the state, the query parameters, the
//! headers) and the request body ([`Body`], bounded by [`MAX_BODY`]). Its own module so the
//! routing, the registry and the per-kind handlers depend on it, not on each other.

use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Query, Request};
use axum::http::request::Parts;
use axum::http::{HeaderMap, StatusCode};

use crate::ApiState;
use crate::request::Params;
use crate::status::ApiError;

/// The most bytes a request body may have (the API server's `MaxRequestBodyBytes`).
pub(crate) const MAX_BODY: usize = 3 * 1024 * 1024;

/// A request body; one over [`MAX_BODY`] is the API server's 413 `Status` (axum's own
/// rejection is plain text).
pub(crate) struct Body(pub Bytes);

impl<S: Send + Sync> FromRequest<S> for Body {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        match Bytes::from_request(req, state).await {
            Ok(bytes) => Ok(Body(bytes)),
            Err(e) if e.status() == StatusCode::PAYLOAD_TOO_LARGE => {
                Err(ApiError::request_entity_too_large(MAX_BODY))
            }
            Err(e) => Err(ApiError::bad_request(e.body_text())),
        }
    }
}

/// Everything the handlers get from a request.
pub(crate) struct Req {
    pub state: ApiState,
    pub params: Params,
    pub headers: HeaderMap,
    /// Who sent it (after impersonation), as authentication put it in the request.
    pub user: Option<crate::auth::UserInfo>,
}

/// `Req` is extracted from every API request: the state, the headers, and the query parameters
/// (a malformed query is a 400 `Status`; axum's own rejection is plain text).
impl FromRequestParts<ApiState> for Req {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &ApiState) -> Result<Self, ApiError> {
        let Query(params) = Query::<Params>::from_request_parts(parts, state)
            .await
            .map_err(|e| ApiError::bad_request(e.body_text()))?;
        Ok(Req {
            state: state.clone(),
            params,
            headers: parts.headers.clone(),
            user: parts.extensions.get::<crate::auth::UserInfo>().cloned(),
        })
    }
}
