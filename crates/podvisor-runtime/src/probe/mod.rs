//! Probe executors: run one liveness, readiness or startup probe against a container
//! instance and report the result with the kubelet's exact messages (spec 6.3, R16-R22;
//! `pkg/kubelet/prober/prober.go` and `pkg/probe/{exec,http,tcp,grpc}`).
//!
//! This module runs probes; it does not schedule them, count consecutive results or decide
//! what a result means for the pod (that is `podvisor-lifecycle`'s job, R1-R15).

pub(crate) mod client;
mod exec;
pub(crate) mod gofmt;
mod grpc;
pub(crate) mod http;
mod net;
mod tcp;
mod url;

pub use exec::expand_command;

use crate::{InstanceId, Runtime};
use k8s_openapi::api::core::v1::{Container, Probe};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use std::time::Duration;

/// The Kubernetes version podvisor mimics, as it appears in `User-Agent` headers
/// (`kube-probe/1.34`, `kube-lifecycle/1.34`).
pub const KUBE_VERSION: &str = "1.34";

/// Attempts per probe while it errors (`maxProbeRetries`, R16).
pub const MAX_PROBE_RETRIES: usize = 3;

/// What one probe run concluded (the kubelet's `probe.Result` plus its output).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProbeResult {
    /// The probe passed.
    Success,
    /// The probe passed with a warning (an HTTP redirect to another host was not followed);
    /// the kubelet counts it as success and emits `ProbeWarning` with this text (R17).
    Warning(String),
    /// The probe failed; the text follows `<Type> probe failed: ` in the `Unhealthy` event.
    Failure(String),
    /// The probe could not be run; the result is discarded (R11) and the text follows
    /// `<Type> probe errored and resulted in unknown state: ` (R16).
    Error(String),
}

/// Runs `probe` for one container instance, retrying up to [`MAX_PROBE_RETRIES`] times while
/// it errors (a failure is not retried, R16). Targets without a `host` use `rt.pod_ip`.
pub async fn run_probe<R: Runtime>(
    rt: &R,
    sandbox: &R::Sandbox,
    instance: InstanceId,
    container: &Container,
    probe: &Probe,
) -> ProbeResult {
    let mut result = ProbeResult::Error(String::new());
    for _ in 0..MAX_PROBE_RETRIES {
        result = run_once(rt, sandbox, instance, container, probe).await;
        if !matches!(result, ProbeResult::Error(_)) {
            break;
        }
    }
    result
}

/// The probe's `timeoutSeconds`, defaulted to 1 s when unset or not positive (R1).
pub fn probe_timeout(probe: &Probe) -> Duration {
    match probe.timeout_seconds {
        Some(s) if s > 0 => Duration::from_secs(s.unsigned_abs().into()),
        _ => Duration::from_secs(1),
    }
}

async fn run_once<R: Runtime>(
    rt: &R,
    sandbox: &R::Sandbox,
    instance: InstanceId,
    container: &Container,
    probe: &Probe,
) -> ProbeResult {
    let timeout = probe_timeout(probe);
    if let Some(action) = &probe.exec {
        let command = action.command.as_deref().unwrap_or_default();
        return exec::probe(rt, sandbox, instance, container, command, timeout).await;
    }
    if let Some(action) = &probe.http_get {
        return http::probe(action, container, &rt.pod_ip(sandbox), timeout).await;
    }
    if let Some(action) = &probe.tcp_socket {
        let port = match resolve_container_port(&action.port, container) {
            Ok(p) => p,
            Err(e) => return ProbeResult::Error(e),
        };
        let host = match action.host.as_deref() {
            Some(h) if !h.is_empty() => h.to_string(),
            _ => rt.pod_ip(sandbox),
        };
        return tcp::probe(&host, port, timeout).await;
    }
    if let Some(action) = &probe.grpc {
        let service = action.service.as_deref().unwrap_or_default();
        return grpc::probe(&rt.pod_ip(sandbox), action.port, service, timeout).await;
    }
    ProbeResult::Error(format!("missing probe handler for {}", container.name))
}

/// Resolves a probe or hook port (`ResolveContainerPort`): a number, the name of one of the
/// container's `ports`, or a number written as a string. `Err` is the kubelet's error text,
/// e.g. `strconv.Atoi: parsing "http-alt": invalid syntax`.
pub fn resolve_container_port(port: &IntOrString, container: &Container) -> Result<u16, String> {
    let number = match port {
        IntOrString::Int(n) => i64::from(*n),
        IntOrString::String(name) => {
            let named = container
                .ports
                .iter()
                .flatten()
                .find(|p| p.name.as_deref() == Some(name.as_str()));
            match named {
                Some(p) => i64::from(p.container_port),
                None => gofmt::atoi(name)?,
            }
        }
    };
    match u16::try_from(number) {
        Ok(p) if p > 0 => Ok(p),
        _ => Err(format!("invalid port number: {number}")),
    }
}
