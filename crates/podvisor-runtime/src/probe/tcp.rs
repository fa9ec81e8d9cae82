//! TCP probes (R20): connect within the timeout, then close. The dial happens in the node's
//! network namespace (names are resolved by the node).

use super::{ProbeResult, net};
use std::time::Duration;
use tokio::time::Instant;

/// Runs one TCP probe attempt against `host:port`.
pub(super) async fn probe(host: &str, port: u16, timeout: Duration) -> ProbeResult {
    match net::dial(host, port, Instant::now() + timeout).await {
        Ok(stream) => {
            // An orderly close: nothing was written, so the FIN goes out at once.
            drop(stream);
            ProbeResult::Success
        }
        Err(e) => ProbeResult::Failure(e.dialer_text(host)),
    }
}
