//! One scheduling attempt of one pod, in a store transaction: the node as the filters see it
//! (the Node and the pods bound to it, read in the same transaction as the binding, so two
//! attempts never both take the last of a resource), then the binding, or the pod left
//! `Pending` with `PodScheduled=False` and a `FailedScheduling` event as kube-scheduler's
//! `handleSchedulingFailure` leaves it.

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Node, Pod, PodCondition};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use podvisor_api::scheduling::filters::ERR_NO_NODES;
use podvisor_api::scheduling::{NodeInfo, fit, fit_error_message, run_filters};
use podvisor_store::{StoreError, Txn};
use serde_json::Value;

use super::{DEFAULT_SCHEDULER, bind, update_pod_condition};
use crate::db::{self, NODES, PODS};

/// `PodReasonUnschedulable`: no node fits the pod.
pub(crate) const REASON_UNSCHEDULABLE: &str = "Unschedulable";
/// `PodReasonSchedulerError`: the attempt itself failed (no node at all).
pub(crate) const REASON_SCHEDULER_ERROR: &str = "SchedulerError";

/// What an attempt did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// The pod was bound.
    Bound,
    /// It fits no node: left pending with this message.
    Unschedulable(String),
    /// Nothing: the pod is gone, bound already or no longer the default scheduler's.
    Skipped,
}

/// Why the pod fits no node (reason and message), or `None` when it fits `node`.
fn verdict(t: &Txn, node: &str, pod: &Pod) -> Result<Option<(&'static str, String)>, StoreError> {
    let Some(node_value) = t.get(&db::key(NODES, "", node))? else {
        return Ok(Some((REASON_SCHEDULER_ERROR, ERR_NO_NODES.to_owned())));
    };
    let node_obj: Node = serde_json::from_value(node_value)
        .map_err(|e| StoreError::Invalid(format!("stored node {node} does not decode: {e}")))?;
    let uid = pod.metadata.uid.as_deref();
    let bound: Vec<Value> = t
        .list(PODS.plural, None)?
        .into_iter()
        .filter(|p| {
            p.pointer("/spec/nodeName").and_then(Value::as_str) == Some(node)
                && p.pointer("/metadata/uid").and_then(Value::as_str) != uid
                && !matches!(
                    p.pointer("/status/phase").and_then(Value::as_str),
                    Some("Succeeded" | "Failed")
                )
        })
        .collect();
    // Decoding every pod of a full node for each attempt is the costly part: only a pod with
    // host ports or requests needs them, any other only their number.
    let pods: Vec<Pod> = if NodeInfo::needs_pods(pod) {
        bound
            .iter()
            .filter_map(|p| serde_json::from_value::<Pod>(p.clone()).ok())
            .filter(fit::holds_resources)
            .collect()
    } else {
        Vec::new()
    };
    let refs: Vec<&Pod> = pods.iter().collect();
    let info = NodeInfo {
        node: &node_obj,
        pods: &refs,
        pod_count: bound.len(),
    };
    Ok(run_filters(pod, info)
        .map(|rejection| (REASON_UNSCHEDULABLE, fit_error_message(&[rejection]))))
}

/// Schedules `pod` (as stored) onto `node` in transaction `t`: binds it when the filters pass,
/// else [`mark_unschedulable`].
///
/// # Errors
///
/// The store failed.
pub(crate) fn attempt(
    t: &mut Txn,
    node: &str,
    pod: &Pod,
    now: Timestamp,
) -> Result<Outcome, StoreError> {
    if !super::wants_binding(pod) {
        return Ok(Outcome::Skipped);
    }
    let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
    let name = pod.metadata.name.as_deref().unwrap_or("");
    match verdict(t, node, pod)? {
        None => {
            let bound = bind(
                t,
                ns,
                name,
                pod.metadata.uid.as_deref(),
                node,
                &serde_json::Map::new(),
                now,
            );
            match bound {
                Ok(_) => Ok(Outcome::Bound),
                Err(e) => {
                    tracing::warn!("binding {ns}/{name} to {node}: {}", e.message);
                    Ok(Outcome::Skipped)
                }
            }
        }
        Some((reason, message)) => {
            mark_unschedulable(t, pod, reason, &message, now)?;
            Ok(Outcome::Unschedulable(message))
        }
    }
}

/// Whether the pod waits for the scheduling queue: its last attempt failed
/// (`PodScheduled=False`, reason `Unschedulable` or `SchedulerError`). Such a pod is retried
/// with back-off by [`super::queue`], not by the write that touches it next.
pub(crate) fn awaits_retry(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .any(|c| {
            c.type_ == podvisor_api::pod::POD_SCHEDULED
                && c.status == "False"
                && matches!(
                    c.reason.as_deref(),
                    Some(REASON_UNSCHEDULABLE | REASON_SCHEDULER_ERROR)
                )
        })
}

/// `handleSchedulingFailure`: `PodScheduled=False` with `reason` and `message` (written only
/// when they change: the transition time stays while the status does), `nominatedNodeName`
/// cleared, and a Warning `FailedScheduling` event from `default-scheduler` (a repeat of the
/// same message counts on the pod's last one).
///
/// # Errors
///
/// The store failed.
pub(crate) fn mark_unschedulable(
    t: &mut Txn,
    pod: &Pod,
    reason: &str,
    message: &str,
    now: Timestamp,
) -> Result<(), StoreError> {
    let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
    let name = pod.metadata.name.as_deref().unwrap_or("");
    let uid = pod.metadata.uid.clone();
    let written = t.update_with(&db::key(PODS, ns, name), |current| {
        let mut stored: Pod = serde_json::from_value(current.clone())
            .map_err(|e| StoreError::Invalid(format!("stored pod does not decode: {e}")))?;
        if stored.metadata.uid != uid {
            return Ok(current);
        }
        // The generation the scheduler looked at (`PodObservedGenerationTracking`, on in
        // 1.35).
        let generation = stored.metadata.generation;
        let status = stored.status.get_or_insert_with(Default::default);
        let conditions = status.conditions.get_or_insert_with(Vec::new);
        let fresh = PodCondition {
            type_: podvisor_api::pod::POD_SCHEDULED.to_owned(),
            status: "False".to_owned(),
            reason: Some(reason.to_owned()),
            message: Some(message.to_owned()),
            last_transition_time: Some(Time(now)),
            observed_generation: generation,
            ..PodCondition::default()
        };
        let same = conditions.iter().any(|c| {
            c.type_ == fresh.type_
                && c.status == fresh.status
                && c.reason == fresh.reason
                && c.message == fresh.message
                && c.observed_generation == fresh.observed_generation
        });
        if same && status.nominated_node_name.is_none() {
            return Ok(current);
        }
        status.nominated_node_name = None;
        update_pod_condition(conditions, fresh);
        serde_json::to_value(&stored).map_err(|e| StoreError::Invalid(e.to_string()))
    });
    match written {
        Ok(_) => {}
        Err(StoreError::NotFound(_)) => return Ok(()),
        Err(e) => return Err(e),
    }
    super::events::record(
        t,
        DEFAULT_SCHEDULER,
        pod,
        podvisor_lifecycle::EventType::Warning,
        "FailedScheduling",
        message,
        now,
    )
}
