//! Pods, instants and a hand-driven [`Harness`] for the rule tests.
//!
//! [`Harness`] is the crate's one PodMachine driver (`podvisor_lifecycle::sim::Driver`) with a
//! runtime that answers nothing: every input is followed by draining the machine's actions
//! into its log (with the time each was produced), and a test answers what it wants to, in the
//! order it wants to, with the driver's helpers named after the answers (`start_all`, `exit`,
//! `probe`, `hook`, ...). Timers are fired by `advance_to`. What is here adds the
//! constructors for JSON pods and conditions.
//!
//! Instants come from [`t`] (whole seconds after a fixed epoch) or [`t_ms`]. The pod defaults to
//! `web` in namespace `default` with uid [`UID`], so kubelet messages read
//! `pod=web_default(<UID>)` ([`POD_FULL_NAME`]).
//!
//! Stable API: other test files use this module; only add to it.

#![allow(dead_code)]

use k8s_openapi::api::core::v1::{Pod, PodCondition};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use podvisor_lifecycle::sim::{Answers, Driver};
use podvisor_lifecycle::{MachineConfig, PastInstance, PodMachine, RecoveredInstance};
use serde_json::{Value, json};
use std::ops::{Deref, DerefMut};

/// The virtual clock's origin: 2026-01-01T00:00:00Z.
pub const EPOCH_SECS: i64 = 1_767_225_600;

/// The uid given to pods that have none.
pub const UID: &str = "0b4c1d9e-6f1a-4c2b-8a3d-5e6f7a8b9c0d";

/// `<name>_<namespace>(<uid>)` of the default pod, as kubelet messages print it.
pub const POD_FULL_NAME: &str = "web_default(0b4c1d9e-6f1a-4c2b-8a3d-5e6f7a8b9c0d)";

/// The instant `secs` seconds after the epoch.
pub fn t(secs: i64) -> Timestamp {
    Timestamp::from_second(EPOCH_SECS + secs).expect("valid timestamp")
}

/// The instant `ms` milliseconds after the epoch.
pub fn t_ms(ms: i64) -> Timestamp {
    t(0) + SignedDuration::from_millis(ms)
}

/// Whole seconds from the epoch to `ts` (floored).
pub fn secs_of(ts: Timestamp) -> i64 {
    ts.as_second() - EPOCH_SECS
}

/// `ts` plus `secs` seconds.
pub fn plus(ts: Timestamp, secs: i64) -> Timestamp {
    ts + SignedDuration::from_secs(secs)
}

/// Builds a `Pod` from JSON as the API server would store it: `metadata.name` (`web`),
/// `namespace` (`default`), `uid` ([`UID`]) and `creationTimestamp` (`t(0)`) when absent, then
/// [`podvisor_api::apply_defaults`] (restart policy, grace period, termination message policy,
/// image pull policy, probe timings, ...). Use [`pod_undefaulted`] to skip the defaulting.
pub fn pod(v: Value) -> Pod {
    let mut pod = pod_undefaulted(v);
    podvisor_api::apply_defaults(&mut pod);
    pod
}

/// [`pod`] without the API defaulting (only the metadata is filled).
pub fn pod_undefaulted(mut v: Value) -> Pod {
    let obj = v.as_object_mut().expect("a pod is a JSON object");
    obj.entry("apiVersion").or_insert(json!("v1"));
    obj.entry("kind").or_insert(json!("Pod"));
    let meta = obj
        .entry("metadata")
        .or_insert(json!({}))
        .as_object_mut()
        .expect("metadata is an object");
    meta.entry("name").or_insert(json!("web"));
    meta.entry("namespace").or_insert(json!("default"));
    meta.entry("uid").or_insert(json!(UID));
    meta.entry("creationTimestamp")
        .or_insert(json!(t(0).to_string()));
    serde_json::from_value(v).expect("a valid Pod")
}

/// A container JSON with a `busybox` image (`{"name": name, "image": "busybox"}`).
pub fn container(name: &str) -> Value {
    json!({"name": name, "image": "busybox"})
}

/// A sidecar JSON: an init container with `restartPolicy: Always`.
pub fn sidecar(name: &str) -> Value {
    json!({"name": name, "image": "busybox", "restartPolicy": "Always"})
}

/// An exec probe JSON with the given period and failure threshold (other fields defaulted).
pub fn exec_probe(period: i32, failure_threshold: i32) -> Value {
    json!({
        "exec": {"command": ["true"]},
        "periodSeconds": period,
        "failureThreshold": failure_threshold,
    })
}

/// The default config, except that a sidecar unblocks the next container as soon as it runs
/// (no A8 settle time): most rule tests are about what happens, not the relist delay, which
/// has tests of its own.
pub fn config() -> MachineConfig {
    MachineConfig {
        sidecar_settle: std::time::Duration::ZERO,
        ..MachineConfig::default()
    }
}

/// The one driver with a runtime that answers nothing; dereferences to it. See the module docs.
#[derive(Debug)]
pub struct Harness(Driver);

impl Deref for Harness {
    type Target = Driver;

    fn deref(&self) -> &Driver {
        &self.0
    }
}

impl DerefMut for Harness {
    fn deref_mut(&mut self) -> &mut Driver {
        &mut self.0
    }
}

impl Harness {
    /// A machine for `pod_json` (see [`pod`]) with the default config, admitted at `t(0)`.
    pub fn new(pod_json: Value) -> Harness {
        Harness::with_config(pod_json, config())
    }

    /// A machine for a pod whose `spec` is `spec_json`, admitted at `t(0)`.
    pub fn from_spec(spec_json: Value) -> Harness {
        Harness::new(json!({ "spec": spec_json }))
    }

    /// A machine for `pod_json` with `config`, admitted at `t(0)`.
    pub fn with_config(pod_json: Value, config: MachineConfig) -> Harness {
        Harness::admitted_at(pod(pod_json), config, t(0))
    }

    /// A machine for an already built pod, admitted at `now`.
    pub fn admitted_at(pod: Pod, config: MachineConfig, now: Timestamp) -> Harness {
        let m = PodMachine::new(pod, config, now);
        Harness(Driver::new(m, now, Answers::none()))
    }

    /// A machine rebuilt after an agent restart at `now` from `pod` (with its last persisted
    /// status) and the instances the runtime still runs.
    pub fn recovered(
        pod: Pod,
        running: &[RecoveredInstance],
        config: MachineConfig,
        now: Timestamp,
    ) -> Harness {
        let known = running.iter().map(|r| r.instance.0).max().unwrap_or(0);
        let m = PodMachine::recover(pod, running, known, config, now);
        Harness(Driver::new(m, now, Answers::none()))
    }

    /// [`Harness::recovered`] with the runtime's record of the instances that exited.
    pub fn recovered_with_history(
        pod: Pod,
        running: &[RecoveredInstance],
        history: &[PastInstance],
        config: MachineConfig,
        now: Timestamp,
    ) -> Harness {
        let known = running
            .iter()
            .map(|r| r.instance.0)
            .chain(history.iter().map(|p| p.instance.0))
            .max()
            .unwrap_or(0);
        let m = PodMachine::recover_with_history(pod, running, history, known, config, now);
        Harness(Driver::new(m, now, Answers::none()))
    }

    /// Conditions written by another client (readiness gates): a JSON list of conditions.
    pub fn set_conditions(&mut self, conditions: Value, now: Timestamp) {
        let conditions: Vec<PodCondition> =
            serde_json::from_value(conditions).expect("valid conditions");
        self.0.set_conditions(conditions, now);
    }
}
