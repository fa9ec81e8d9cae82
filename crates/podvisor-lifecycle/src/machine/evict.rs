//! Eviction by the node (the kubelet's eviction manager, `evictPod`): the pod worker is told
//! to terminate the pod abnormally with a grace-period override, its final status is phase
//! `Failed`, reason `Evicted` and the manager's message, with a `DisruptionTarget` condition
//! (reason `TerminationByKubelet`), and a Warning `Evicted` event is recorded on the pod. The
//! decision (which pod, which message) is the node's; this is what the pod worker does with it.

use super::PodMachine;
use crate::action::EventType;
use crate::status::conditions::DISRUPTION_TARGET;
use crate::time::trunc_secs;
use k8s_openapi::api::core::v1::PodCondition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

/// The pod's `status.reason` after an eviction (`eviction.Reason`).
pub const EVICTED: &str = "Evicted";
/// The `DisruptionTarget` condition's reason for a pod the kubelet terminates
/// (`v1.PodReasonTerminationByKubelet`).
pub const TERMINATION_BY_KUBELET: &str = "TerminationByKubelet";

impl PodMachine {
    /// Evicts the pod (`TerminatePodAbnormallyAndWait` with `Evict`): `message` is the
    /// eviction manager's, `grace_seconds` its override (1 s for a hard threshold,
    /// `immediateEvictionGracePeriodSeconds`), which only ever shortens the grace period
    /// already chosen. A pod that already finished, or one already evicted, is left alone.
    pub fn handle_evict(&mut self, message: String, grace_seconds: i64, now: Timestamp) {
        if self.phase().is_terminal() || self.evicted.is_some() {
            return;
        }
        let status = self.pod.status.get_or_insert_with(Default::default);
        let conditions = status.conditions.get_or_insert_with(Vec::new);
        conditions.retain(|c| c.type_ != DISRUPTION_TARGET);
        conditions.push(PodCondition {
            type_: DISRUPTION_TARGET.to_owned(),
            status: "True".to_owned(),
            reason: Some(TERMINATION_BY_KUBELET.to_owned()),
            message: Some(message.clone()),
            last_transition_time: Some(Time(trunc_secs(now))),
            ..PodCondition::default()
        });
        self.evicted = Some((EVICTED.to_owned(), message.clone()));
        self.emit(EventType::Warning, EVICTED, message, None);
        self.begin_termination_within(Some(grace_seconds), now);
        self.step(now);
    }
}
