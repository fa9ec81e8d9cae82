//! Bearer-token authentication: every request but the health checks must carry
//! `Authorization: Bearer <token>` with the node's token or a service account token
//! ([`crate::TokenIssuer`]); anything else gets a 401 `Status`.

use axum::extract::{Request, State};
use axum::http::header::AUTHORIZATION;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::ApiState;
use crate::status::ApiError;

/// Compares in time independent of where the first difference is.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Request tracing for debugging clients (`PODVISOR_API_TRACE=1`): one line per request
/// on stderr with the method, URI, Accept, Content-Type and the answer's status.
pub(crate) async fn trace(request: Request, next: Next) -> Response {
    let line = {
        let header = |name: &str| {
            request
                .headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("")
                .to_owned()
        };
        format!(
            "{} {} accept={:?} content-type={:?}",
            request.method(),
            request.uri(),
            header("accept"),
            header("content-type")
        )
    };
    let response = next.run(request).await;
    tracing::info!("{line} -> {}", response.status().as_u16());
    response
}

/// The middleware: passes the request on when the token matches (or none is configured).
pub(crate) async fn require_token(
    State(state): State<ApiState>,
    request: Request,
    next: Next,
) -> Response {
    let Some(token) = state.inner.token.as_deref() else {
        return next.run(request).await;
    };
    if matches!(request.uri().path(), "/healthz" | "/livez" | "/readyz") {
        return next.run(request).await;
    }
    let presented = request
        .headers()
        .get(AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            let (scheme, rest) = v.split_once(' ')?;
            scheme.eq_ignore_ascii_case("bearer").then(|| rest.trim())
        });
    match presented {
        Some(p) if same(p.as_bytes(), token.as_bytes()) => next.run(request).await,
        Some(p)
            if state
                .token_issuer()
                .and_then(|i| i.authenticate(state.store(), p))
                .is_some() =>
        {
            next.run(request).await
        }
        _ => ApiError::unauthorized().into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::same;

    #[test]
    fn comparison() {
        assert!(same(b"abc", b"abc"));
        assert!(!same(b"abc", b"abd"));
        assert!(!same(b"abc", b"ab"));
    }
}
