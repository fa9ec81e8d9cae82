//! gRPC probes (R21): `grpc.health.v1.Health/Check` over plaintext HTTP/2 to the pod IP, the
//! connection and the call together bounded by the probe's timeout. Like grpc-go with
//! `WithBlock`, a refused connection is retried with back-off until the deadline.

use super::{KUBE_VERSION, ProbeResult, gofmt, net};
use std::time::Duration;
use tokio::time::Instant;
use tonic::Code;
use tonic::transport::{Channel, Endpoint};
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;

/// grpc-go's connection back-off: 1 s, growing by 1.6 (jitter left out).
const BACKOFF_BASE: Duration = Duration::from_secs(1);
const BACKOFF_MULTIPLIER: f64 = 1.6;

/// Runs one gRPC probe attempt.
pub(super) async fn probe(host: &str, port: i32, service: &str, timeout: Duration) -> ProbeResult {
    let deadline = Instant::now() + timeout;
    let addr = match u16::try_from(port) {
        Ok(p) => net::join_host_port(host, p),
        Err(_) => format!(
            "{}:{port}",
            if host.contains(':') {
                format!("[{host}]")
            } else {
                host.to_string()
            }
        ),
    };
    let within = gofmt::duration(timeout);
    let connect_timeout = || {
        ProbeResult::Failure(format!(
            "timeout: failed to connect service {} within {within}: context deadline exceeded",
            gofmt::quote(&addr)
        ))
    };
    let endpoint = match Endpoint::from_shared(format!("http://{addr}"))
        .and_then(|e| e.user_agent(format!("kube-probe/{KUBE_VERSION}")))
    {
        Ok(e) => e,
        Err(e) => {
            return ProbeResult::Failure(format!(
                "error: failed to connect service at {}: {e}",
                gofmt::quote(&addr)
            ));
        }
    };
    let channel = match connect(&endpoint, deadline).await {
        Some(channel) => channel,
        None => return connect_timeout(),
    };

    let mut request = tonic::Request::new(HealthCheckRequest {
        service: service.to_string(),
    });
    request.set_timeout(deadline.saturating_duration_since(Instant::now()));
    let mut client = HealthClient::new(channel);
    let rpc_timeout = || {
        ProbeResult::Failure(format!(
            "timeout: health rpc did not complete within {within}"
        ))
    };
    let response = match tokio::time::timeout_at(deadline, client.check(request)).await {
        Err(_) => return rpc_timeout(),
        Ok(Ok(response)) => response.into_inner(),
        Ok(Err(status)) => {
            return match status.code() {
                Code::Unimplemented => ProbeResult::Failure(format!(
                    "error: this server does not implement the grpc health protocol \
                     (grpc.health.v1.Health): {}",
                    status.message()
                )),
                Code::DeadlineExceeded => rpc_timeout(),
                // tonic enforces the grpc-timeout it sends itself and reports it this way.
                Code::Cancelled if Instant::now() >= deadline => rpc_timeout(),
                code => ProbeResult::Failure(format!(
                    "error: health rpc probe failed: rpc error: code = {} desc = {}",
                    code_name(code),
                    status.message()
                )),
            };
        }
    };
    match ServingStatus::try_from(response.status) {
        Ok(ServingStatus::Serving) => ProbeResult::Success,
        Ok(other) => ProbeResult::Failure(format!(
            "service unhealthy (responded with {})",
            gofmt::quote(other.as_str_name())
        )),
        Err(_) => ProbeResult::Failure(format!(
            "service unhealthy (responded with {})",
            gofmt::quote(&response.status.to_string())
        )),
    }
}

/// Connects, retrying failures with back-off until `deadline`; `None` when it passes.
async fn connect(endpoint: &Endpoint, deadline: Instant) -> Option<Channel> {
    let mut backoff = BACKOFF_BASE;
    loop {
        let remaining = deadline.saturating_duration_since(Instant::now());
        if remaining.is_zero() {
            return None;
        }
        let attempt = endpoint.clone().connect_timeout(remaining);
        match tokio::time::timeout_at(deadline, attempt.connect()).await {
            Err(_) => return None,
            Ok(Ok(channel)) => return Some(channel),
            Ok(Err(_)) => {
                tokio::time::sleep_until(deadline.min(Instant::now() + backoff)).await;
                backoff = backoff.mul_f64(BACKOFF_MULTIPLIER);
            }
        }
    }
}

/// grpc-go's `codes.Code.String()`.
fn code_name(code: Code) -> &'static str {
    match code {
        Code::Ok => "OK",
        Code::Cancelled => "Canceled",
        Code::Unknown => "Unknown",
        Code::InvalidArgument => "InvalidArgument",
        Code::DeadlineExceeded => "DeadlineExceeded",
        Code::NotFound => "NotFound",
        Code::AlreadyExists => "AlreadyExists",
        Code::PermissionDenied => "PermissionDenied",
        Code::ResourceExhausted => "ResourceExhausted",
        Code::FailedPrecondition => "FailedPrecondition",
        Code::Aborted => "Aborted",
        Code::OutOfRange => "OutOfRange",
        Code::Unimplemented => "Unimplemented",
        Code::Internal => "Internal",
        Code::Unavailable => "Unavailable",
        Code::DataLoss => "DataLoss",
        Code::Unauthenticated => "Unauthenticated",
    }
}
