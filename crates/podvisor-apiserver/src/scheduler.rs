//! Binding pods to this node: the `pods/binding` subresource (`BindingREST`) and the default
//! scheduler's part for a one-node cluster.
//!
//! The API server never binds at admission: a pod is created unbound (unless the client set
//! `spec.nodeName`), then bound by a binding, as kube-scheduler binds it — one more write that
//! sets `spec.nodeName` and `PodScheduled=True`, then the `Scheduled` event from
//! `default-scheduler`. A pod with `spec.schedulingGates` is not bound while a gate remains
//! (the API server gave it `PodScheduled=False`, reason `SchedulingGated`, at create); the
//! update that removes its last gate binds it. The node agent only runs pods bound to its node,
//! whoever bound them. A binding the server did not get to (stopped between the two writes)
//! is made when `serve` starts again ([`bind_pending`]).
//!
//! Before it binds, the scheduler runs kube-scheduler's filters (`podvisor_api::scheduling`)
//! against the Node and its pods, in the same transaction ([`attempt`]); a pod that fits no
//! node stays `Pending` with `PodScheduled=False` `Unschedulable` and a `FailedScheduling`
//! event, and is tried again by the loop of [`run`] when the Node or its pods change, with
//! kube-scheduler's back-off ([`queue`]).

mod attempt;
pub(crate) mod events;
mod queue;
mod run;

pub use run::run;

use axum::http::StatusCode;
use axum::response::Response;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Pod, PodCondition, PodSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use podvisor_api::pod::is_scheduling_gated;
use podvisor_store::{Store, StoreError, Txn};
use serde_json::{Value, json};

use crate::db::{self, PODS};
use crate::meta::type_meta;
use crate::pods::pod_of;
use crate::req::Req;
use crate::request::{now, parse_body};
use crate::status::{ApiError, ApiResult, json_response};

/// The scheduler this node's binding stands for (`spec.schedulerName`'s default).
pub(crate) const DEFAULT_SCHEDULER: &str = "default-scheduler";

/// Whether the default scheduler takes this pod now: not bound, not being deleted, no
/// scheduling gate left (the `SchedulingGates` pre-enqueue plugin), and its `schedulerName`
/// is `default-scheduler` (pods of other schedulers wait for them).
pub(crate) fn wants_binding(pod: &Pod) -> bool {
    let Some(spec) = &pod.spec else {
        return false;
    };
    spec.node_name.as_deref().unwrap_or("").is_empty()
        && pod.metadata.deletion_timestamp.is_none()
        && !is_scheduling_gated(spec)
        && spec.scheduler_name.as_deref().unwrap_or(DEFAULT_SCHEDULER) == DEFAULT_SCHEDULER
}

/// `pod/util.go` `UpdatePodCondition`: replaces the condition of the same type (keeping its
/// `lastTransitionTime` when the status is unchanged) or appends it.
pub(crate) fn update_pod_condition(
    conditions: &mut Vec<PodCondition>,
    mut condition: PodCondition,
) {
    match conditions.iter_mut().find(|c| c.type_ == condition.type_) {
        Some(old) => {
            if old.status == condition.status {
                condition.last_transition_time = old.last_transition_time.clone();
            }
            *old = condition;
        }
        None => conditions.push(condition),
    }
}

/// Why a binding was refused (`setPodNodeAndMetadata`'s errors).
fn refusal(pod: &Pod) -> Option<String> {
    let name = pod.metadata.name.as_deref().unwrap_or("");
    let spec = pod.spec.as_ref()?;
    if pod.metadata.deletion_timestamp.is_some() {
        return Some(format!(
            "pod {name} is being deleted, cannot be assigned to a host"
        ));
    }
    if let Some(node) = spec.node_name.as_deref().filter(|n| !n.is_empty()) {
        return Some(format!(
            "pod {name} is already assigned to node {}",
            podvisor_api::gotext::quote(node)
        ));
    }
    if is_scheduling_gated(spec) {
        return Some(format!("pod {name} has non-empty .spec.schedulingGates"));
    }
    None
}

/// `BindingREST.setPodNodeAndMetadata`: in transaction `t`, pod `ns/name` (of `uid`, when
/// given) gets `spec.nodeName = node`, the binding's annotations, and `PodScheduled=True` (no
/// reason, `lastTransitionTime` now); then the `Scheduled` event is recorded in the same
/// transaction (an event that cannot be written is logged, as the scheduler's recorder drops
/// it). Refused with 409, writing nothing, when the pod is being deleted, is bound already or
/// still has scheduling gates. Returns the bound pod.
pub(crate) fn bind(
    t: &mut Txn,
    ns: &str,
    name: &str,
    uid: Option<&str>,
    node: &str,
    annotations: &serde_json::Map<String, Value>,
    now: Timestamp,
) -> ApiResult<Value> {
    let key = db::key(PODS, ns, name);
    let mut refused = None;
    let result = t.update_with(&key, |current| {
        let mut pod: Pod = serde_json::from_value(current.clone())
            .map_err(|e| StoreError::Invalid(format!("stored pod does not decode: {e}")))?;
        if let Some(uid) = uid
            && pod.metadata.uid.as_deref() != Some(uid)
        {
            return Err(StoreError::Conflict {
                key: key.clone(),
                message: format!(
                    "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                    pod.metadata.uid.as_deref().unwrap_or("")
                ),
            });
        }
        if let Some(why) = refusal(&pod) {
            refused = Some(why);
            return Err(StoreError::Invalid(String::new()));
        }
        let spec = pod.spec.get_or_insert_with(PodSpec::default);
        spec.node_name = Some(node.to_owned());
        if !annotations.is_empty() {
            let a = pod
                .metadata
                .annotations
                .get_or_insert_with(Default::default);
            for (k, v) in annotations {
                a.insert(k.clone(), v.as_str().unwrap_or_default().to_owned());
            }
        }
        let status = pod.status.get_or_insert_with(Default::default);
        status.nominated_node_name = None;
        update_pod_condition(
            status.conditions.get_or_insert_with(Vec::new),
            PodCondition {
                type_: "PodScheduled".to_owned(),
                status: "True".to_owned(),
                last_transition_time: Some(Time(now)),
                ..PodCondition::default()
            },
        );
        serde_json::to_value(&pod).map_err(|e| StoreError::Invalid(e.to_string()))
    });
    let bound = match (result, refused) {
        (_, Some(why)) => return Err(ApiError::conflict("pods/binding", name, &why)),
        (Ok(bound), None) => bound,
        (Err(e), None) => return Err(db::api_error(PODS, name, e)),
    };
    if let Ok(pod) = serde_json::from_value::<Pod>(bound.clone())
        && let Err(e) = crate::events::record_scheduled(t, node, &pod, now)
    {
        tracing::warn!("recording the Scheduled event of {ns}/{name}: {e}");
    }
    Ok(bound)
}

/// The default scheduler, for one node: binds `pod` (as just written in transaction `t`) to
/// `node` if it [`wants_binding`] and passes the filters, with its `Scheduled` event (or
/// leaves it unschedulable with its `FailedScheduling` event), in the same transaction: the
/// write that made the pod schedulable, its binding and the event are committed together (one
/// fsync), while watchers still see the pod created (or updated) unbound, then bound, as with
/// kube-scheduler. A refused binding (the pod changed meanwhile: deleted, bound by someone
/// else) is not an error of the request that triggered it.
pub(crate) fn schedule(t: &mut Txn, node: &str, pod: &Value) {
    let Ok(pod) = serde_json::from_value::<Pod>(pod.clone()) else {
        return;
    };
    // A pod whose attempt failed is the queue's: retried with back-off, not by every write.
    if !wants_binding(&pod) || attempt::awaits_retry(&pod) {
        return;
    }
    if let Err(e) = attempt::attempt(t, node, &pod, now()) {
        let name = pod.metadata.name.as_deref().unwrap_or("");
        tracing::warn!("scheduling {name} onto {node}: {e}");
    }
}

/// Schedules every pod of the store that `wants_binding` and was never tried (at start-up:
/// a create or an update whose binding a stopped server did not get to); returns how many
/// were bound.
///
/// # Errors
///
/// The pods could not be listed.
pub fn bind_pending(store: &Store, node: &str) -> Result<usize, StoreError> {
    let (objects, _) = store.list("pods", None)?;
    let mut bound = 0;
    for obj in objects {
        let Ok(pod) = serde_json::from_value::<Pod>(obj) else {
            continue;
        };
        // Pods that failed before are the loop's ([`run`]).
        if wants_binding(&pod) && !attempt::awaits_retry(&pod) {
            let outcome = store.transaction(|t| attempt::attempt(t, node, &pod, now()))?;
            bound += usize::from(outcome == attempt::Outcome::Bound);
        }
    }
    Ok(bound)
}

/// `POST /api/v1/namespaces/{ns}/pods/{name}/binding`: a `Binding` to a `Node` target
/// (`ValidatePodBinding`), applied by [`bind`]; answers a `Success` `Status` (201).
pub(crate) fn create_binding(req: &Req, ns: &str, name: &str, body: &[u8]) -> ApiResult<Response> {
    let dry_run = req.params.dry_run()?;
    let mut value = parse_body(body)?;
    type_meta(&mut value, "Binding")?;
    let body_name = value
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    if body_name != name {
        return Err(ApiError::bad_request(
            "name in URL does not match name in Binding object",
        ));
    }
    let kind = value
        .pointer("/target/kind")
        .and_then(Value::as_str)
        .unwrap_or("");
    let node = value
        .pointer("/target/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    binding_errors(name, kind, node)?;
    let uid = value
        .pointer("/metadata/uid")
        .and_then(Value::as_str)
        .filter(|u| !u.is_empty());
    let annotations = value
        .pointer("/metadata/annotations")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let store = req.state.store();
    if dry_run {
        let current = pod_of(&db::get(store, PODS, ns, name)?)?;
        if let Some(why) = refusal(&current) {
            return Err(ApiError::conflict("pods/binding", name, &why));
        }
    } else {
        let mut bound = None;
        store
            .transaction(|t| {
                bound = Some(bind(t, ns, name, uid, node, &annotations, now()));
                Ok(())
            })
            .map_err(|e| db::api_error(PODS, name, e))?;
        bound.unwrap_or_else(|| Err(ApiError::internal("the binding was not made")))?;
    }
    Ok(json_response(
        StatusCode::CREATED,
        &json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}),
    ))
}

/// `ValidatePodBinding`: the target is a `Node` (or has no kind) and has a name.
fn binding_errors(name: &str, kind: &str, node: &str) -> ApiResult<()> {
    use podvisor_api::validation::{FieldError, Path};
    let mut errs = Vec::new();
    if !kind.is_empty() && kind != "Node" {
        errs.push(FieldError::not_supported(
            &Path::new("target").child("kind"),
            kind,
            &["Node", "<empty>"],
        ));
    }
    if node.is_empty() {
        errs.push(FieldError::required(&Path::new("target").child("name"), ""));
    }
    if errs.is_empty() {
        return Ok(());
    }
    Err(ApiError::invalid(&podvisor_api::ValidationErrors::new(
        "Binding", name, errs,
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::PodSchedulingGate;
    use podvisor_api::pod::apply_scheduling_gated_condition;

    fn pod() -> Pod {
        let mut pod = Pod::default();
        pod.metadata.name = Some("web".to_owned());
        pod.spec = Some(PodSpec {
            scheduler_name: Some(DEFAULT_SCHEDULER.to_owned()),
            ..PodSpec::default()
        });
        pod
    }

    fn with_gate(mut pod: Pod) -> Pod {
        pod.spec.as_mut().unwrap().scheduling_gates = Some(vec![PodSchedulingGate {
            name: "example.com/wait".to_owned(),
        }]);
        pod
    }

    /// M11 (`schedulingGates`): a gated pod is not taken by the scheduler; the same pod
    /// ungated is; bound, deleting or another scheduler's pods are not.
    #[test]
    fn m11_scheduling_gates_hold_the_binding() {
        assert!(wants_binding(&pod()));
        assert!(!wants_binding(&with_gate(pod())));
        let mut bound = pod();
        bound.spec.as_mut().unwrap().node_name = Some("node-1".to_owned());
        assert!(!wants_binding(&bound));
        let mut deleting = pod();
        deleting.metadata.deletion_timestamp = Some(Time(Timestamp::UNIX_EPOCH));
        assert!(!wants_binding(&deleting));
        let mut other = pod();
        other.spec.as_mut().unwrap().scheduler_name = Some("my-scheduler".to_owned());
        assert!(!wants_binding(&other));
    }

    /// K1/M11: a pod created with gates gets `PodScheduled=False` `SchedulingGated` with
    /// upstream's message; one without gates gets nothing; an existing condition is kept.
    #[test]
    fn m11_created_gated_pods_get_the_scheduling_gated_condition() {
        let mut gated_pod = with_gate(pod());
        apply_scheduling_gated_condition(&mut gated_pod, Timestamp::UNIX_EPOCH);
        let c = &gated_pod.status.unwrap().conditions.unwrap()[0];
        assert_eq!(
            (
                c.type_.as_str(),
                c.status.as_str(),
                c.reason.as_deref(),
                c.message.as_deref()
            ),
            (
                "PodScheduled",
                "False",
                Some("SchedulingGated"),
                Some("Scheduling is blocked due to non-empty scheduling gates")
            )
        );
        let mut plain = pod();
        apply_scheduling_gated_condition(&mut plain, Timestamp::UNIX_EPOCH);
        assert!(plain.status.is_none());
    }

    #[test]
    fn binding_is_refused_as_the_api_server_refuses_it() {
        assert_eq!(
            refusal(&with_gate(pod())).as_deref(),
            Some("pod web has non-empty .spec.schedulingGates")
        );
        let mut bound = pod();
        bound.spec.as_mut().unwrap().node_name = Some("n1".to_owned());
        assert_eq!(
            refusal(&bound).as_deref(),
            Some("pod web is already assigned to node \"n1\"")
        );
        assert_eq!(refusal(&pod()), None);
    }

    /// `UpdatePodCondition`: the binding's `PodScheduled=True` replaces the gated condition
    /// (a new status: a new transition time) and drops its reason and message.
    #[test]
    fn the_binding_replaces_the_gated_condition() {
        let mut conditions = vec![PodCondition {
            type_: "PodScheduled".to_owned(),
            status: "False".to_owned(),
            reason: Some("SchedulingGated".to_owned()),
            last_transition_time: Some(Time(Timestamp::UNIX_EPOCH)),
            ..PodCondition::default()
        }];
        let later = Timestamp::from_second(60).unwrap();
        update_pod_condition(
            &mut conditions,
            PodCondition {
                type_: "PodScheduled".to_owned(),
                status: "True".to_owned(),
                last_transition_time: Some(Time(later)),
                ..PodCondition::default()
            },
        );
        assert_eq!(conditions.len(), 1);
        assert_eq!(conditions[0].reason, None);
        assert_eq!(conditions[0].last_transition_time, Some(Time(later)));
    }

    /// A pod a stopped server left unbound is bound at the next start; gated ones wait.
    #[test]
    fn m11_bind_pending_binds_what_a_stopped_server_left_unbound() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("store.redb")).unwrap();
        store
            .create(
                &db::key(crate::db::NODES, "", "node-1"),
                json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-1"},
                       "status": {"allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"}}}),
            )
            .unwrap();
        for p in [pod(), with_gate(pod())] {
            let mut p = p;
            let gated = p.spec.as_ref().is_some_and(is_scheduling_gated);
            let name = if gated { "held" } else { "web" };
            p.metadata.name = Some(name.to_owned());
            p.metadata.namespace = Some("default".to_owned());
            p.metadata.uid = Some(format!("uid-{name}"));
            store
                .create(
                    &db::key(PODS, "default", name),
                    serde_json::to_value(&p).unwrap(),
                )
                .unwrap();
        }
        assert_eq!(bind_pending(&store, "node-1").unwrap(), 1);
        let node = |name: &str| {
            store.get(&db::key(PODS, "default", name)).unwrap().unwrap()["spec"]["nodeName"].clone()
        };
        assert_eq!(node("web"), "node-1");
        assert_eq!(node("held"), Value::Null);
        let (events, _) = store.list("events", None).unwrap();
        assert_eq!(events.len(), 1);
        assert_eq!(
            events[0]["message"],
            "Successfully assigned default/web to node-1"
        );
        assert_eq!(bind_pending(&store, "node-1").unwrap(), 0);
    }
}
