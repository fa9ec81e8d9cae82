//! kubectl presentation (spec section 3.1, K1-K11): the `kubectl get pods` row exactly as
//! `printPod` in `pkg/printers/internalversion/printers.go` computes it.
//!
//! Pure functions of a `Pod` (and `now` for the AGE / "ago" columns); podvisor's own CLI uses
//! them so its output matches what the real kubectl prints for the same object. The table
//! layout ([`table_lines`]) and `kubectl describe pod` ([`describe_pod`], K12-K14) are here too.

use std::collections::HashMap;

use k8s_openapi::api::core::v1::{Container, ContainerStatus, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

use crate::duration::human_signed_duration;
use crate::status::phase::is_sidecar;

pub mod describe;
mod table;
mod tabwriter;

pub use describe::{describe_pod, describe_pod_in, event_rows};
pub use table::{
    HEADERS, WIDE_HEADERS, header_cells, line_with_widths, remember_widths, row_cells, table_lines,
    table_text,
};

/// One `kubectl get pods -o wide` row, every cell already formatted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodRow {
    /// NAME: `metadata.name`.
    pub name: String,
    /// READY: `<ready>/<total>` (K2, K7).
    pub ready: String,
    /// STATUS (K1, K3-K6).
    pub status: String,
    /// RESTARTS: `3` or `3 (45s ago)` (K3, K4, K8).
    pub restarts: String,
    /// AGE: human duration since `metadata.creationTimestamp`, `<unknown>` without one (K9).
    pub age: String,
    /// IP (wide): first of `status.podIPs`, or `<none>` (K10).
    pub ip: String,
    /// NODE (wide): `spec.nodeName`, or `<none>` (K10).
    pub node: String,
    /// NOMINATED NODE (wide): `status.nominatedNodeName`, or `<none>` (K10).
    pub nominated_node: String,
    /// READINESS GATES (wide): `<true>/<gates>`, or `<none>` without gates (K10).
    pub readiness_gates: String,
}

/// Formats a pod as `kubectl get pods -o wide` would (K1-K11).
pub fn pod_row(pod: &Pod, now: Timestamp) -> PodRow {
    let summary = Summary::of(pod);
    let status = pod.status.as_ref();
    let spec = pod.spec.as_ref();

    let restarts = match summary.last_restart {
        Some(at) if summary.restarts != 0 => format!(
            "{} ({} ago)",
            summary.restarts,
            translate_timestamp_since(Some(&Time(at)), now)
        ),
        _ => summary.restarts.to_string(),
    };

    let ip = status
        .and_then(|s| s.pod_ips.as_deref())
        .and_then(|ips| ips.first())
        .map(|ip| ip.ip.clone())
        .unwrap_or_default();
    let node = spec.and_then(|s| s.node_name.clone()).unwrap_or_default();
    let nominated_node = status
        .and_then(|s| s.nominated_node_name.clone())
        .unwrap_or_default();

    PodRow {
        name: pod.metadata.name.clone().unwrap_or_default(),
        ready: format!("{}/{}", summary.ready, summary.total),
        status: summary.reason,
        restarts,
        age: translate_timestamp_since(pod.metadata.creation_timestamp.as_ref(), now),
        ip: or_none(ip),
        node: or_none(node),
        nominated_node: or_none(nominated_node),
        readiness_gates: readiness_gates_text(pod),
    }
}

/// The STATUS column alone (K1, K3-K6).
pub fn pod_status_text(pod: &Pod) -> String {
    Summary::of(pod).reason
}

/// The READY column alone: `<ready>/<total>` (K2, K7).
pub fn ready_text(pod: &Pod) -> String {
    let summary = Summary::of(pod);
    format!("{}/{}", summary.ready, summary.total)
}

/// kubectl's `translateTimestampSince`: `<unknown>` without a timestamp, else the
/// [`human_signed_duration`] of `now - timestamp` (K8, K9); a timestamp 2 s or more in the
/// future prints `<invalid>`.
pub fn translate_timestamp_since(timestamp: Option<&Time>, now: Timestamp) -> String {
    match timestamp {
        None => "<unknown>".to_owned(),
        Some(Time(at)) => human_signed_duration(now.duration_since(*at)),
    }
}

/// The counters and reason `printPod` derives before formatting.
struct Summary {
    ready: usize,
    total: usize,
    reason: String,
    restarts: i64,
    last_restart: Option<Timestamp>,
}

impl Summary {
    fn of(pod: &Pod) -> Summary {
        let empty_statuses: &[ContainerStatus] = &[];
        let status = pod.status.as_ref();
        let init_specs: &[Container] = pod
            .spec
            .as_ref()
            .and_then(|s| s.init_containers.as_deref())
            .unwrap_or_default();
        let regular_count = pod.spec.as_ref().map_or(0, |s| s.containers.len());
        let init_statuses = status
            .and_then(|s| s.init_container_statuses.as_deref())
            .unwrap_or(empty_statuses);
        let statuses = status
            .and_then(|s| s.container_statuses.as_deref())
            .unwrap_or(empty_statuses);
        let phase = status.and_then(|s| s.phase.as_deref()).unwrap_or_default();
        let conditions = status
            .and_then(|s| s.conditions.as_deref())
            .unwrap_or_default();

        // K1
        let mut reason = match status.and_then(|s| s.reason.as_deref()) {
            Some(r) if !r.is_empty() => r.to_owned(),
            _ => phase.to_owned(),
        };
        if conditions
            .iter()
            .any(|c| c.type_ == "PodScheduled" && c.reason.as_deref() == Some("SchedulingGated"))
        {
            reason = "SchedulingGated".to_owned();
        }

        // K2: sidecars count in the denominator.
        let sidecar_by_name: HashMap<&str, bool> = init_specs
            .iter()
            .map(|c| (c.name.as_str(), is_sidecar(c)))
            .collect();
        let total = regular_count + init_specs.iter().filter(|c| is_sidecar(c)).count();
        let mut ready = 0usize;

        // K3: init containers, stopping at the first one that is not done.
        let mut restarts = 0i64;
        let mut last_restart: Option<Timestamp> = None;
        let mut sidecar_restarts = 0i64;
        let mut sidecar_last_restart: Option<Timestamp> = None;
        let mut initializing = false;
        for (i, cs) in init_statuses.iter().enumerate() {
            restarts += i64::from(cs.restart_count);
            let finished = last_finished_at(cs);
            last_restart = later(last_restart, finished);
            let sidecar = sidecar_by_name
                .get(cs.name.as_str())
                .copied()
                .unwrap_or(false);
            if sidecar {
                sidecar_restarts += i64::from(cs.restart_count);
                sidecar_last_restart = later(sidecar_last_restart, finished);
            }

            let state = cs.state.as_ref();
            let terminated = state.and_then(|s| s.terminated.as_ref());
            let waiting_reason = state
                .and_then(|s| s.waiting.as_ref())
                .and_then(|w| w.reason.as_deref())
                .unwrap_or_default();
            if terminated.is_some_and(|t| t.exit_code == 0) {
                continue;
            }
            if sidecar && cs.started == Some(true) {
                if cs.ready {
                    ready += 1;
                }
                continue;
            }
            reason = if let Some(t) = terminated {
                match t.reason.as_deref() {
                    Some(r) if !r.is_empty() => format!("Init:{r}"),
                    _ => match t.signal {
                        Some(signal) if signal != 0 => format!("Init:Signal:{signal}"),
                        _ => format!("Init:ExitCode:{}", t.exit_code),
                    },
                }
            } else if !waiting_reason.is_empty() && waiting_reason != "PodInitializing" {
                format!("Init:{waiting_reason}")
            } else {
                format!("Init:{i}/{}", init_specs.len())
            };
            initializing = true;
            break;
        }

        // K4: regular containers, walked in reverse so the lowest index wins.
        let initialized_true = conditions
            .iter()
            .any(|c| c.type_ == "Initialized" && c.status == "True");
        if !initializing || initialized_true {
            restarts = sidecar_restarts;
            last_restart = sidecar_last_restart;
            let mut has_running = false;
            for cs in statuses.iter().rev() {
                restarts += i64::from(cs.restart_count);
                last_restart = later(last_restart, last_finished_at(cs));
                let state = cs.state.as_ref();
                let waiting_reason = state
                    .and_then(|s| s.waiting.as_ref())
                    .and_then(|w| w.reason.as_deref())
                    .filter(|r| !r.is_empty());
                let terminated = state.and_then(|s| s.terminated.as_ref());
                if let Some(r) = waiting_reason {
                    reason = r.to_owned();
                } else if let Some(t) = terminated {
                    reason = match t.reason.as_deref() {
                        Some(r) if !r.is_empty() => r.to_owned(),
                        _ => match t.signal {
                            Some(signal) if signal != 0 => format!("Signal:{signal}"),
                            _ => format!("ExitCode:{}", t.exit_code),
                        },
                    };
                } else if cs.ready && state.is_some_and(|s| s.running.is_some()) {
                    has_running = true;
                    ready += 1;
                }
            }

            // K5: `hasRunning` needs a container that is both running and ready.
            if reason == "Completed" && has_running {
                let pod_ready = conditions
                    .iter()
                    .any(|c| c.type_ == "Ready" && c.status == "True");
                reason = if pod_ready { "Running" } else { "NotReady" }.to_owned();
            }
        }

        // K6
        if pod.metadata.deletion_timestamp.is_some() {
            if status.and_then(|s| s.reason.as_deref()) == Some("NodeLost") {
                reason = "Unknown".to_owned();
            } else if phase != "Succeeded" && phase != "Failed" {
                reason = "Terminating".to_owned();
            }
        }

        Summary {
            ready,
            total,
            reason,
            restarts,
            last_restart,
        }
    }
}

/// K10: `<true>/<gates>` where a gate counts when the first condition of its type is True.
fn readiness_gates_text(pod: &Pod) -> String {
    let gates = pod
        .spec
        .as_ref()
        .and_then(|s| s.readiness_gates.as_deref())
        .unwrap_or_default();
    if gates.is_empty() {
        return "<none>".to_owned();
    }
    let conditions = pod
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_deref())
        .unwrap_or_default();
    let true_count = gates
        .iter()
        .filter(|gate| {
            conditions
                .iter()
                .find(|c| c.type_ == gate.condition_type)
                .is_some_and(|c| c.status == "True")
        })
        .count();
    format!("{true_count}/{}", gates.len())
}

fn last_finished_at(cs: &ContainerStatus) -> Option<Timestamp> {
    cs.last_state
        .as_ref()
        .and_then(|s| s.terminated.as_ref())
        .and_then(|t| t.finished_at.as_ref())
        .map(|t| t.0)
}

fn later(a: Option<Timestamp>, b: Option<Timestamp>) -> Option<Timestamp> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    }
}

fn or_none(s: String) -> String {
    if s.is_empty() { "<none>".to_owned() } else { s }
}
