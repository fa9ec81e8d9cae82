//! The kubelet's eviction manager (`pkg/kubelet/eviction`) for the one signal a podvisor node
//! can run out of and recover from by evicting: `nodefs.available`, the free space of the
//! filesystem holding the node's state directory (the kubelet's root directory; the store,
//! the pods' directories and their container logs live there).
//!
//! This module is the pure part, tested without a filesystem: the hard threshold
//! (`nodefs.available<10%` by default, `--eviction-hard`'s syntax), whether an observation
//! meets it, the `DiskPressure` condition with its transition period, the ranking of pods for
//! `nodefs` (`rankDiskPressureFunc`) and the eviction message. The node loop measures, asks
//! [`EvictionManager::synchronize`] and evicts the pod it names (`node/eviction.rs`).
//!
//! Kept from the kubelet: one eviction per monitoring interval (10 s), a hard threshold's
//! grace-period override of 1 s (`immediateEvictionGracePeriodSeconds`), critical pods
//! (`IsCriticalPod`: static pods and a priority of at least `system-cluster-critical`'s) never
//! evicted, `DiskPressure` True from the first observation until the threshold has not been
//! met for the pressure transition period (5 min). Not kept: soft thresholds, minimum
//! reclaim, inode signals, memory and pid signals, node-level reclaim (image and container
//! garbage collection run on their own schedule) and the admission of new pods under pressure.

use podvisor_api::quantity::Quantity;
use podvisor_api::resources::aggregate_container_requests;
use podvisor_runtime::PodDiskUsage;
use std::cmp::Ordering;
use std::time::{Duration, Instant};

/// A pod's `status.reason` when the eviction manager evicted or rejected it.
pub const EVICTED: &str = "Evicted";
/// The signal: free space of the node's filesystem.
pub const NODEFS_AVAILABLE: &str = "nodefs.available";
/// The resource a `nodefs` eviction reclaims.
pub const EPHEMERAL_STORAGE: &str = "ephemeral-storage";
/// The kubelet's default hard threshold for [`NODEFS_AVAILABLE`].
pub const DEFAULT_EVICTION_HARD: &str = "nodefs.available<10%";
/// The kubelet's eviction monitoring period (its housekeeping interval).
pub const MONITORING_INTERVAL: Duration = Duration::from_secs(10);
/// `--eviction-pressure-transition-period`'s default.
pub const PRESSURE_TRANSITION_PERIOD: Duration = Duration::from_secs(300);
/// The grace period a pod evicted for a hard threshold gets
/// (`immediateEvictionGracePeriodSeconds`).
pub const IMMEDIATE_EVICTION_GRACE_SECONDS: i64 = 1;
/// `scheduling.SystemCriticalPriority`: pods at or above it are critical.
pub const SYSTEM_CRITICAL_PRIORITY: i32 = 2_000_000_000;

/// An error in an eviction threshold.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EvictionError {
    /// Not `<signal><<quantity or percentage>`.
    #[error(
        "eviction threshold {0:?}: expected <signal><<quantity> or <signal><<percent>%, e.g. {DEFAULT_EVICTION_HARD}"
    )]
    Syntax(String),
    /// A signal this node does not evict for.
    #[error("eviction threshold {0:?}: podvisor evicts only for {NODEFS_AVAILABLE}")]
    Signal(String),
    /// A bad value.
    #[error("eviction threshold {statement:?}: {why}")]
    Value {
        /// The statement.
        statement: String,
        /// What is wrong with its value.
        why: &'static str,
    },
}

/// A hard threshold on [`NODEFS_AVAILABLE`] (operator `<`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Threshold {
    /// Fewer bytes available than this.
    Bytes(u64),
    /// Less available than this fraction of the capacity (the kubelet keeps it as `float32`).
    Percentage(f32),
}

impl Threshold {
    /// Parses one `--eviction-hard` statement (`nodefs.available<10%`, `nodefs.available<1Gi`),
    /// as the kubelet's `parseThresholdStatement`.
    ///
    /// # Errors
    ///
    /// When it is not `<signal><<value>`, names another signal, or its value is negative, not
    /// a quantity, or a percentage outside `(0%, 100%]`.
    pub fn parse(statement: &str) -> Result<Threshold, EvictionError> {
        let (signal, value) = statement
            .split_once('<')
            .ok_or_else(|| EvictionError::Syntax(statement.to_owned()))?;
        if signal != NODEFS_AVAILABLE {
            return Err(EvictionError::Signal(statement.to_owned()));
        }
        let bad = |why| EvictionError::Value {
            statement: statement.to_owned(),
            why,
        };
        if let Some(percent) = value.strip_suffix('%') {
            let p: f32 = percent.parse().map_err(|_| bad("not a percentage"))?;
            if !(p > 0.0 && p <= 100.0) {
                return Err(bad("a percentage must be in (0%, 100%]"));
            }
            return Ok(Threshold::Percentage(p / 100.0));
        }
        let q = Quantity::parse(value).ok_or(bad("not a quantity"))?;
        if q.is_negative() {
            return Err(bad("must be positive"));
        }
        Ok(Threshold::Bytes(u64::try_from(q.value()).unwrap_or(0)))
    }

    /// The threshold in bytes for a filesystem of `capacity` bytes (`GetThresholdQuantity`).
    #[must_use]
    pub fn quantity(self, capacity: u64) -> u64 {
        match self {
            Threshold::Bytes(b) => b,
            // As the kubelet: the capacity as a float64 times the float32 fraction, truncated.
            #[allow(
                clippy::cast_possible_truncation,
                clippy::cast_sign_loss,
                clippy::cast_precision_loss,
                reason = "the kubelet's own arithmetic; capacities are far below 2^53"
            )]
            Threshold::Percentage(p) => (capacity as f64 * f64::from(p)) as u64,
        }
    }

    /// Whether `observation` meets the threshold: less available than its quantity.
    #[must_use]
    pub fn met(self, observation: Observation) -> bool {
        self.quantity(observation.capacity) > observation.available
    }
}

/// Parses `--eviction-hard` as the kubelet's flag takes it (comma-separated statements):
/// this node takes exactly one, on [`NODEFS_AVAILABLE`].
///
/// # Errors
///
/// As [`Threshold::parse`] for each statement; a repeated signal is an error too.
pub fn parse_eviction_hard(flag: &str) -> Result<Threshold, EvictionError> {
    let mut found = None;
    for statement in flag.split(',').map(str::trim) {
        let threshold = Threshold::parse(statement)?;
        if found.replace(threshold).is_some() {
            return Err(EvictionError::Syntax(format!(
                "{flag} (names {NODEFS_AVAILABLE} twice)"
            )));
        }
    }
    found.ok_or_else(|| EvictionError::Syntax(flag.to_owned()))
}

/// The node filesystem as measured (`statfs` of the state directory).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Observation {
    /// Total bytes.
    pub capacity: u64,
    /// Bytes available to unprivileged users.
    pub available: u64,
}

/// A pod the eviction manager may pick: the active pods (not terminal, not being deleted or
/// evicted).
#[derive(Debug, Clone)]
pub struct Candidate<'a> {
    /// The pod's UID.
    pub uid: &'a str,
    /// The pod.
    pub pod: &'a k8s_openapi::api::core::v1::Pod,
    /// A static pod (critical).
    pub is_static: bool,
    /// Its use of the node filesystem; `None` when it could not be measured.
    pub usage: Option<&'a PodDiskUsage>,
}

impl Candidate<'_> {
    fn priority(&self) -> i32 {
        self.pod.spec.as_ref().and_then(|s| s.priority).unwrap_or(0)
    }

    /// `IsCriticalPod`: static and mirror pods, and pods of system-critical priority.
    #[must_use]
    pub fn is_critical(&self) -> bool {
        self.is_static || self.priority() >= SYSTEM_CRITICAL_PRIORITY
    }

    /// The pod's ephemeral-storage request (`PodRequests`).
    fn request(&self) -> u64 {
        self.pod
            .spec
            .as_ref()
            .and_then(|s| aggregate_container_requests(s).remove(EPHEMERAL_STORAGE))
            .map_or(0, |q| u64::try_from(q.value()).unwrap_or(0))
    }

    /// What the pod uses for `nodefs` with no separate image filesystem: its containers'
    /// logs and writable layers and its local volumes.
    fn used(&self) -> Option<u64> {
        self.usage
            .map(|u| u.containers.values().sum::<u64>() + u.volumes)
    }
}

/// `rankDiskPressureFunc` for `nodefs`: pods whose usage exceeds their request first (pods
/// without stats before those), then lower priority first, then the larger usage above the
/// request first. Stable: equal pods keep their order.
pub fn rank_for_nodefs(pods: &mut [Candidate<'_>]) {
    pods.sort_by(|a, b| {
        exceeds_requests(a, b)
            .then_with(|| a.priority().cmp(&b.priority()))
            .then_with(|| excess(b).cmp(&excess(a)))
    });
}

/// `exceedDiskRequests`: `Less` puts `a` first.
fn exceeds_requests(a: &Candidate<'_>, b: &Candidate<'_>) -> Ordering {
    match (a.used(), b.used()) {
        (Some(ua), Some(ub)) => (ub > b.request()).cmp(&(ua > a.request())),
        // Pods without stats first.
        (ua, ub) => ub.is_none().cmp(&ua.is_none()),
    }
}

/// Usage above the request (negative below it), for the `disk` comparison.
fn excess(c: &Candidate<'_>) -> i128 {
    i128::from(c.used().unwrap_or(0)) - i128::from(c.request())
}

/// The eviction message (`evictionMessage` for ephemeral-storage): the starved resource, the
/// threshold and what was available, then each container using more than it requested.
#[must_use]
pub fn eviction_message(
    candidate: &Candidate<'_>,
    threshold: Threshold,
    observation: Observation,
) -> String {
    use crate::node_status::binary_quantity;
    let mut message = format!(
        "The node was low on resource: {EPHEMERAL_STORAGE}. Threshold quantity: {}, available: {}. ",
        binary_quantity(threshold.quantity(observation.capacity)),
        binary_quantity(observation.available),
    );
    let (Some(usage), Some(spec)) = (candidate.usage, candidate.pod.spec.as_ref()) else {
        return message;
    };
    for (name, used) in &usage.containers {
        let Some(container) = spec.containers.iter().find(|c| &c.name == name) else {
            continue;
        };
        let request = container
            .resources
            .as_ref()
            .and_then(|r| r.requests.as_ref())
            .and_then(|r| r.get(EPHEMERAL_STORAGE))
            .and_then(|q| Quantity::parse(&q.0))
            .unwrap_or_default();
        if i128::from(*used) > i128::from(request.value()) {
            message.push_str(&format!(
                "Container {name} was using {}, request is {}, has larger consumption of {EPHEMERAL_STORAGE}. ",
                binary_quantity(*used),
                request.canonical(),
            ));
        }
    }
    message
}

/// The taint the node lifecycle controller puts on a Node with `DiskPressure` True
/// (`TaintNodesByCondition`).
pub const DISK_PRESSURE_TAINT: &str = "node.kubernetes.io/disk-pressure";

/// Adds the `NoSchedule` [`DISK_PRESSURE_TAINT`] to a Node's `spec` under pressure and removes
/// it otherwise; other taints are kept. Returns whether the spec changed.
pub fn set_disk_pressure_taint(spec: &mut serde_json::Value, pressure: bool) -> bool {
    let is_ours =
        |t: &serde_json::Value| t["key"] == DISK_PRESSURE_TAINT && t["effect"] == "NoSchedule";
    let has = spec["taints"]
        .as_array()
        .is_some_and(|ts| ts.iter().any(is_ours));
    if has == pressure {
        return false;
    }
    if pressure {
        if !spec["taints"].is_array() {
            spec["taints"] = serde_json::json!([]);
        }
        if let Some(ts) = spec["taints"].as_array_mut() {
            ts.push(serde_json::json!({"key": DISK_PRESSURE_TAINT, "effect": "NoSchedule"}));
        }
    } else if let Some(ts) = spec["taints"].as_array_mut() {
        ts.retain(|t| !is_ours(t));
        if ts.is_empty()
            && let Some(obj) = spec.as_object_mut()
        {
            obj.remove("taints");
        }
    }
    true
}

/// The eviction manager's `Admit`: under `DiskPressure` a pod that is not critical is
/// rejected with reason `Evicted` and this message (`nodeConditionMessageFmt`); the kubelet
/// fails it with `Pod was rejected: ` before it.
#[must_use]
pub fn admit(disk_pressure: bool, critical: bool) -> Option<String> {
    (disk_pressure && !critical).then(|| "The node had condition: [DiskPressure]. ".to_owned())
}

/// What one synchronization decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    /// The Node's `DiskPressure` condition.
    pub disk_pressure: bool,
    /// The threshold is met now: reclaim (the `EvictionThresholdMet` node event).
    pub threshold_met: bool,
    /// The pod to evict (its UID) and the message, at most one per synchronization.
    pub evict: Option<(String, String)>,
}

/// The eviction manager's state between synchronizations.
#[derive(Debug, Clone)]
pub struct EvictionManager {
    threshold: Threshold,
    transition_period: Duration,
    /// When the threshold was last met (`nodeConditionsLastObservedAt`).
    last_met: Option<Instant>,
}

impl EvictionManager {
    /// A manager for `threshold` with the pressure transition period `transition_period`.
    #[must_use]
    pub fn new(threshold: Threshold, transition_period: Duration) -> EvictionManager {
        EvictionManager {
            threshold,
            transition_period,
            last_met: None,
        }
    }

    /// The threshold.
    #[must_use]
    pub fn threshold(&self) -> Threshold {
        self.threshold
    }

    /// One `synchronize`: the condition from `observation` at `now` and, when the threshold
    /// is met, the first pod of `pods` in rank order that is not critical.
    pub fn synchronize(
        &mut self,
        observation: Observation,
        mut pods: Vec<Candidate<'_>>,
        now: Instant,
    ) -> Decision {
        let met = self.threshold.met(observation);
        if met {
            self.last_met = Some(now);
        }
        let disk_pressure = self
            .last_met
            .is_some_and(|at| now.saturating_duration_since(at) < self.transition_period);
        let mut decision = Decision {
            disk_pressure: disk_pressure || met,
            threshold_met: met,
            evict: None,
        };
        if !met {
            return decision;
        }
        rank_for_nodefs(&mut pods);
        decision.evict = pods.iter().find(|c| !c.is_critical()).map(|c| {
            (
                c.uid.to_owned(),
                eviction_message(c, self.threshold, observation),
            )
        });
        decision
    }
}

#[cfg(test)]
mod tests;
