//! HTTP GET probes (R19) and the request builder they share with HTTP hooks
//! (`NewRequestForHTTPGetAction` in `pkg/probe/http/request.go`).

use super::client::{self, GetRequest, GoHeader};
use super::url::ProbeUrl;
use super::{KUBE_VERSION, ProbeResult, net, resolve_container_port};
use k8s_openapi::api::core::v1::{Container, HTTPGetAction};
use std::time::Duration;

/// At most this much of a response body is read (`maxRespBodyLength`).
pub(crate) const MAX_BODY: usize = 10 * 1024;

/// Builds the request for an `httpGet` action. `purpose` is `probe` or `lifecycle` (the
/// `User-Agent` is `kube-<purpose>/<version>`). `Err` is the error text (unresolvable port).
pub(crate) fn request_for_action(
    action: &HTTPGetAction,
    container: &Container,
    pod_ip: &str,
    purpose: &str,
) -> Result<GetRequest, String> {
    let scheme = match action
        .scheme
        .as_deref()
        .unwrap_or_default()
        .to_ascii_lowercase()
    {
        s if s.is_empty() => "http".to_string(),
        s => s,
    };
    let host = match action.host.as_deref() {
        Some(h) if !h.is_empty() => h,
        _ => pod_ip,
    };
    let port = resolve_container_port(&action.port, container)?;
    let url = ProbeUrl::build(
        &scheme,
        &net::join_host_port(host, port),
        action.path.as_deref().unwrap_or_default(),
    );

    let mut header = GoHeader::default();
    for h in action.http_headers.iter().flatten() {
        header.add(&h.name, &h.value);
    }
    if !header.has("User-Agent") {
        header.set("User-Agent", &format!("kube-{purpose}/{KUBE_VERSION}"));
    }
    if !header.has("Accept") {
        header.set("Accept", "*/*");
    } else if header.get("Accept").is_empty() {
        header.del("Accept");
    }
    let host = header.get("Host").to_string();
    Ok(GetRequest {
        url,
        header,
        host,
        keep_alive: true,
        compression: true,
    })
}

/// Runs one HTTP probe attempt.
pub(super) async fn probe(
    action: &HTTPGetAction,
    container: &Container,
    pod_ip: &str,
    timeout: Duration,
) -> ProbeResult {
    let mut request = match request_for_action(action, container, pod_ip, "probe") {
        Ok(r) => r,
        Err(e) => return ProbeResult::Error(e),
    };
    // The probe transport: no keep-alive, no compression, no proxy.
    request.keep_alive = false;
    request.compression = false;
    let response = match client::get(request, Some(timeout), MAX_BODY).await {
        Ok(r) => r,
        // Transport errors are failures ("to catch timeouts").
        Err(text) => return ProbeResult::Failure(text),
    };
    let body = match response.body {
        Ok(body) => String::from_utf8_lossy(&body).into_owned(),
        // A body that cannot be read is an error, not a failure (DoHTTPProbe).
        Err(text) => return ProbeResult::Error(text),
    };
    match response.status {
        300..=399 => {
            ProbeResult::Warning(format!("Probe terminated redirects, Response body: {body}"))
        }
        200..=299 => ProbeResult::Success,
        code => ProbeResult::Failure(format!("HTTP probe failed with statuscode: {code}")),
    }
}
