//! `/healthz` and `/readyz`: `ok` while the store can write; else a 500 listing the checks as
//! the API server does (`[+]ping ok`, `[-]<check> failed: ...`, `<endpoint> check failed`),
//! with the store's failure (a full disk) as the reason. The store's check is its own
//! `check_writable`, which also reopens the store once the cause is gone. `/livez` has no
//! store check (as the API server's has no etcd check): restarting would not free the disk.

use crate::ApiState;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

/// `GET /readyz`.
pub(crate) async fn readyz(State(state): State<ApiState>) -> Response {
    check(&state, "readyz").await
}

/// `GET /healthz`.
pub(crate) async fn healthz(State(state): State<ApiState>) -> Response {
    check(&state, "healthz").await
}

async fn check(state: &ApiState, endpoint: &str) -> Response {
    let store = state.store().clone();
    let writable = tokio::task::spawn_blocking(move || store.check_writable())
        .await
        .map_err(|e| e.to_string())
        .and_then(|r| r.map_err(|e| e.to_string()));
    match writable {
        Ok(()) => "ok".into_response(),
        Err(reason) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("[+]ping ok\n[-]store failed: {reason}\n{endpoint} check failed\n"),
        )
            .into_response(),
    }
}
