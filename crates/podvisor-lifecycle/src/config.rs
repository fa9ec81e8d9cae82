//! Per-machine settings that are not part of the pod spec.

use std::time::Duration;

/// CrashLoopBackOff curve (B1, B8).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BackoffConfig {
    /// First enforced wait (10 s by default; 1 s with `ReduceDefaultCrashLoopBackOffDecay`).
    pub initial: Duration,
    /// Cap (300 s by default; 60 s reduced; `maxContainerRestartPeriod` otherwise).
    pub max: Duration,
    /// A back-off entry expires when the instance that just died had run longer than this (B4).
    pub reset_after: Duration,
}

impl Default for BackoffConfig {
    /// The kubelet's default curve: 10 s doubling to 300 s, reset after 600 s (B1, B4).
    fn default() -> Self {
        BackoffConfig {
            initial: Duration::from_secs(10),
            max: Duration::from_secs(300),
            reset_after: Duration::from_secs(600),
        }
    }
}

impl BackoffConfig {
    /// The `ReduceDefaultCrashLoopBackOffDecay` curve: 1 s doubling to 60 s (B8).
    pub fn reduced() -> Self {
        BackoffConfig {
            initial: Duration::from_secs(1),
            max: Duration::from_secs(60),
            ..Self::default()
        }
    }

    /// Applies `crashLoopBackOff.maxContainerRestartPeriod` (B8): it becomes the maximum, and the
    /// initial delay is lowered to it when it is smaller.
    pub fn with_max_period(mut self, max: Duration) -> Self {
        self.max = max;
        if max < self.initial {
            self.initial = max;
        }
        self
    }
}

/// An amount of cpu (millicores) and memory (bytes): the node's allocatable resources, or
/// what pods have allocated of them (in-place resize feasibility).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NodeResources {
    /// CPU in millicores.
    pub cpu_millis: i64,
    /// Memory in bytes.
    pub memory_bytes: i64,
}

/// Settings of one [`crate::PodMachine`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MachineConfig {
    /// Restart back-off curve.
    pub backoff: BackoffConfig,
    /// A file-sourced (static) pod: no terminal phase via the pod-is-terminal path (P15).
    pub is_static: bool,
    /// `spec.nodeName` to set when the pod has none.
    pub node_name: String,
    /// `status.hostIP`.
    pub host_ip: Option<String>,
    /// `status.podIP` (the process runtime shares the host network).
    pub pod_ip: Option<String>,
    /// How long a sidecar without a startup probe must have been running before the next init
    /// container (or the regular containers) start (A8, A21). The kubelet only sees a started
    /// sidecar at its next sync, after a PLEG relist (1 s); starting the next container at once
    /// would race the sidecar's own start-up, which upstream's ordering checks rely on.
    pub sidecar_settle: Duration,
    /// The node's allocatable cpu and memory, against which a resize is checked
    /// (`Infeasible` beyond it); `None`: unknown, every resize fits.
    pub allocatable: Option<NodeResources>,
    /// The feature gates the kubelet runs with (`--feature-gates`); all off by default.
    pub gates: podvisor_api::FeatureGates,
}

impl Default for MachineConfig {
    fn default() -> Self {
        MachineConfig {
            backoff: BackoffConfig::default(),
            is_static: false,
            node_name: "localhost".to_string(),
            host_ip: None,
            pod_ip: None,
            sidecar_settle: Duration::from_secs(1),
            allocatable: None,
            gates: podvisor_api::FeatureGates::default(),
        }
    }
}
