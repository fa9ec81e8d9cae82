//! Bearer-token authentication: every request but the health and version checks must carry
//! `Authorization: Bearer <token>` with the node's token (user `podvisor-admin` in
//! `system:masters`) or a service account token ([`crate::TokenIssuer`]); anything else
//! gets a 401 `Status`. What the user may do is `crate::authz`'s decision.

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
    /// Who sends no credentials (`system:anonymous` in `system:unauthenticated`), accepted
    /// only on [`PUBLIC_PATHS`], which `system:public-info-viewer` lets it read.
    pub(crate) fn anonymous() -> UserInfo {
        UserInfo {
            username: crate::authz::impersonation::ANONYMOUS.to_owned(),
            groups: vec![crate::authz::impersonation::UNAUTHENTICATED.to_owned()],
        }
    }

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

/// The paths a request without credentials may reach, as anonymous (the API server's
/// anonymous authenticator limited to its health and version endpoints, as a structured
/// authentication configuration's `anonymous.conditions` does); authorization then decides
/// (`system:public-info-viewer`, bound to `system:unauthenticated`). A wrong token is not
/// refused on these either: probes and load balancers send what they have.
pub(crate) const PUBLIC_PATHS: [&str; 5] =
    ["/healthz", "/livez", "/readyz", "/version", "/version/"];

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
    let public = PUBLIC_PATHS.contains(&request.uri().path());
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
        Some(p) => match state
            .token_issuer()
            .and_then(|i| i.authenticate(state.store(), p))
        {
            Some(user) => {
                request.extensions_mut().insert(user);
                next.run(request).await
            }
            None if public => anonymous(request, next).await,
            None => ApiError::unauthorized().into_response(),
        },
        None if public => anonymous(request, next).await,
        None => ApiError::unauthorized().into_response(),
    }
}

async fn anonymous(mut request: Request, next: Next) -> Response {
    request.extensions_mut().insert(UserInfo::anonymous());
    next.run(request).await
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
