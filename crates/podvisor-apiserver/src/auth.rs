//! Bearer-token authentication: every request but the health checks must carry
//! `Authorization: Bearer <token>`; anything else gets a 401 `Status`.

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

/// Who made a request, as the API server's authenticators say it (`user.Info`); put in the
/// request's extensions by [`require_token`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct UserInfo {
    /// `username`.
    pub username: String,
    /// `groups`.
    pub groups: Vec<String>,
}

impl UserInfo {
    /// The holder of the kubeconfig's token (and everyone, when no token is configured):
    /// the node's administrator, as a cluster's admin certificate makes one.
    pub(crate) fn admin() -> UserInfo {
        UserInfo {
            username: ADMIN_USER.to_owned(),
            groups: vec![
                "system:masters".to_owned(),
                "system:authenticated".to_owned(),
            ],
        }
    }
}

/// The user name of the kubeconfig's token.
pub(crate) const ADMIN_USER: &str = "podvisor-admin";

/// The middleware: passes the request on when the token matches (or none is configured),
/// with the [`UserInfo`] of who sent it.
pub(crate) async fn require_token(
    State(state): State<ApiState>,
    mut request: Request,
    next: Next,
) -> Response {
    let Some(token) = state.inner.token.as_deref() else {
        request.extensions_mut().insert(UserInfo::admin());
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
        Some(p) if same(p.as_bytes(), token.as_bytes()) => {
            request.extensions_mut().insert(UserInfo::admin());
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
