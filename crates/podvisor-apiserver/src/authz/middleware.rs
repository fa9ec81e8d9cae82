//! The authorization filter (`WithAuthorization`): after authentication and impersonation,
//! before any handler. A request no authorizer allows is the API server's 403 `Status`.

use axum::extract::{Request, State};
use axum::http::header::UPGRADE;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::request_info::{RequestInfo, resolve};
use super::{Attributes, UserInfo, forbidden, is_master};
use crate::ApiState;
use crate::status::ApiError;

/// The [`RequestInfo`] of a request (`RequestInfoFactory.NewRequestInfo`).
pub(crate) fn request_info(request: &Request) -> RequestInfo {
    let websocket = request
        .headers()
        .get(UPGRADE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.eq_ignore_ascii_case("websocket"));
    resolve(
        request.method().as_str(),
        request.uri().path(),
        request.uri().query().unwrap_or(""),
        websocket,
    )
}

/// The middleware: passes the request on when the user may make it.
pub(crate) async fn authorize_request(
    State(state): State<ApiState>,
    request: Request,
    next: Next,
) -> Response {
    let Some(user) = request.extensions().get::<UserInfo>().cloned() else {
        return ApiError::unauthorized().into_response();
    };
    // The privileged group needs no attributes: the admin's requests cost nothing more.
    if is_master(&user) {
        return next.run(request).await;
    }
    let attrs = Attributes::of_request(user, request_info(&request));
    let decision = state.authorizer().authorize(&attrs);
    if decision.allowed {
        next.run(request).await
    } else {
        tracing::debug!(
            user = %attrs.user.username,
            verb = %attrs.verb,
            resource = %attrs.resource,
            path = %attrs.path,
            "forbidden: {}",
            decision.reason
        );
        forbidden(&attrs, &decision.reason).into_response()
    }
}
