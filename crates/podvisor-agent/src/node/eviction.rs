//! The eviction manager's loop in the node (`managerImpl.Start`): every monitoring interval
//! it measures the state directory's filesystem and what each active pod uses of it (on a
//! blocking thread), lets the pure [`EvictionManager`] decide, publishes `DiskPressure` for
//! the Node's status, records `EvictionThresholdMet` on the Node, reclaims what the kubelet's
//! node-level reclaim would (the logs of finished pods' containers) and, if the threshold is
//! still met, evicts at most one pod.

use super::NodeLoop;
use crate::eviction::{
    Candidate, EPHEMERAL_STORAGE, EvictionManager, IMMEDIATE_EVICTION_GRACE_SECONDS,
    MONITORING_INTERVAL, Observation, PRESSURE_TRANSITION_PERIOD, Threshold,
};
use crate::log::{debug, warning};
use k8s_openapi::api::core::v1::Pod;
use podvisor_runtime::Runtime;
use podvisor_store::Key;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// Settings of the node's eviction manager.
#[derive(Debug, Clone)]
pub struct EvictionConfig {
    /// The directory whose filesystem is `nodefs` (the node's state directory).
    pub state_dir: PathBuf,
    /// The hard threshold (`--eviction-hard`, `nodefs.available<10%` by default).
    pub threshold: Threshold,
    /// How often the manager synchronizes (the kubelet's 10 s).
    pub monitoring_interval: Duration,
    /// `--eviction-pressure-transition-period` (5 min).
    pub pressure_transition_period: Duration,
    /// Where `DiskPressure` is published (the Node's status reads it).
    pub disk_pressure: watch::Sender<bool>,
}

impl EvictionConfig {
    /// The kubelet's defaults for `state_dir`, publishing to `disk_pressure`.
    #[must_use]
    pub fn new(state_dir: PathBuf, disk_pressure: watch::Sender<bool>) -> EvictionConfig {
        EvictionConfig {
            state_dir,
            threshold: Threshold::Percentage(0.1),
            monitoring_interval: MONITORING_INTERVAL,
            pressure_transition_period: PRESSURE_TRANSITION_PERIOD,
            disk_pressure,
        }
    }
}

/// The manager and where it reports.
pub(super) struct Eviction {
    manager: EvictionManager,
    config: EvictionConfig,
    /// `DiskPressure` as last decided (admission reads it).
    pressure: bool,
}

impl Eviction {
    pub(super) fn new(config: EvictionConfig) -> Eviction {
        Eviction {
            manager: EvictionManager::new(config.threshold, config.pressure_transition_period),
            config,
            pressure: false,
        }
    }
}

/// What one measurement found: the filesystem, and each active pod with its usage.
struct Measured {
    observation: Option<Observation>,
    pods: Vec<(String, Pod, bool, Option<podvisor_runtime::PodDiskUsage>)>,
    /// The finished pods whose logs were removed to reclaim space.
    reclaimed: Vec<String>,
    /// Reclaiming brought the filesystem back above the threshold: no eviction.
    resolved: bool,
}

/// A pod whose phase is terminal and whose every container has terminated (what the
/// kubelet's container GC may remove once the pod is finished).
fn has_stopped(pod: &Pod) -> bool {
    let Some(status) = pod.status.as_ref() else {
        return false;
    };
    let terminal = matches!(status.phase.as_deref(), Some("Succeeded" | "Failed"));
    terminal
        && status
            .init_container_statuses
            .iter()
            .chain(status.container_statuses.iter())
            .chain(status.ephemeral_container_statuses.iter())
            .flatten()
            .all(|c| c.state.as_ref().is_some_and(|s| s.terminated.is_some()))
}

impl<R: Runtime> NodeLoop<R> {
    /// One synchronization (see the module docs).
    pub(super) async fn synchronize_eviction(&mut self) {
        let Some(eviction) = self.eviction.as_ref() else {
            return;
        };
        // The active pods: not terminal, not being deleted or evicted (`GetActivePods`).
        let active: Vec<(String, Pod, bool)> = self
            .workers
            .iter()
            .filter(|(_, w)| w.deleted.is_none() && !w.evicted)
            .filter_map(|(uid, w)| {
                let pod = w.latest.borrow().as_deref().cloned()?;
                let terminal = pod
                    .status
                    .as_ref()
                    .and_then(|s| s.phase.as_deref())
                    .is_some_and(|p| p == "Succeeded" || p == "Failed");
                (!terminal).then(|| (uid.clone(), pod, w.is_static))
            })
            .collect();
        // Pods that ran and are finished: their containers' logs are what the kubelet's
        // node-level reclaim for nodefs (`DeleteAllUnusedContainers`, dead containers of
        // terminated pods removed with their logs) frees before any pod is evicted.
        let finished: Vec<String> = self
            .done
            .iter()
            .cloned()
            .chain(
                self.workers
                    .iter()
                    .filter(|(_, w)| w.latest.borrow().as_deref().is_some_and(has_stopped))
                    .map(|(uid, _)| uid.clone()),
            )
            .collect();
        let runtime = Arc::clone(self.agent.runtime());
        let dir = eviction.config.state_dir.clone();
        let threshold = eviction.manager.threshold();
        let measured = tokio::task::spawn_blocking(move || {
            let observe = || {
                rustix::fs::statvfs(&dir).ok().map(|s| Observation {
                    capacity: s.f_blocks * s.f_frsize,
                    available: s.f_bavail * s.f_frsize,
                })
            };
            let observation = observe();
            let mut reclaimed = Vec::new();
            let mut resolved = false;
            if observation.is_some_and(|o| threshold.met(o)) {
                let with_logs = runtime.pods_with_logs();
                for uid in finished.iter().filter(|u| with_logs.contains(u)) {
                    runtime.remove_pod_logs(uid);
                    reclaimed.push(uid.clone());
                }
                resolved = !reclaimed.is_empty() && observe().is_some_and(|o| !threshold.met(o));
            }
            let pods = active
                .into_iter()
                .map(|(uid, pod, is_static)| {
                    let usage = runtime.pod_disk_usage(&uid);
                    (uid, pod, is_static, usage)
                })
                .collect();
            Measured {
                observation,
                pods,
                reclaimed,
                resolved,
            }
        })
        .await;
        let Ok(Measured {
            observation: Some(observation),
            pods,
            reclaimed,
            resolved,
        }) = measured
        else {
            warning!("eviction manager: the state directory's filesystem could not be measured");
            return;
        };
        let Some(eviction) = self.eviction.as_mut() else {
            return;
        };
        let candidates = pods
            .iter()
            .map(|(uid, pod, is_static, usage)| Candidate {
                uid,
                pod,
                is_static: *is_static,
                usage: usage.as_ref(),
            })
            .collect();
        let decision = eviction
            .manager
            .synchronize(observation, candidates, Instant::now());
        eviction.pressure = decision.disk_pressure;
        eviction.config.disk_pressure.send_if_modified(|p| {
            let changed = *p != decision.disk_pressure;
            *p = decision.disk_pressure;
            changed
        });
        if !decision.threshold_met {
            return;
        }
        debug!(
            "eviction manager: {} bytes available of {} ({:?})",
            observation.available,
            observation.capacity,
            eviction.manager.threshold()
        );
        self.node_event(
            "EvictionThresholdMet",
            format!("Attempting to reclaim {EPHEMERAL_STORAGE}"),
        );
        if !reclaimed.is_empty() {
            warning!(
                "eviction manager: removed the container logs of {} finished pod(s) to reclaim {EPHEMERAL_STORAGE}",
                reclaimed.len()
            );
        }
        if resolved {
            debug!("eviction manager: able to reduce resource pressure without evicting pods");
            return;
        }
        let Some((uid, message)) = decision.evict else {
            warning!(
                "eviction manager: eviction thresholds have been met, but no pods are active to evict"
            );
            return;
        };
        if let Some(worker) = self.workers.get_mut(&uid) {
            warning!("eviction manager: evicting {}: {message}", worker.key);
            worker.evicted = true;
            worker
                .control
                .evict(message, IMMEDIATE_EVICTION_GRACE_SECONDS);
        }
    }

    /// The eviction manager's admission of a new pod (`Admit`): under `DiskPressure` a pod that
    /// is not critical is rejected as the kubelet rejects it (`rejectPod`): phase Failed,
    /// reason `Evicted`, `Pod was rejected: The node had condition: [DiskPressure]. `, and a
    /// Warning `Evicted` event. Returns whether it was rejected.
    pub(super) fn reject_under_pressure(&mut self, pod: &Pod, is_static: bool) -> bool {
        let pressure = self.eviction.as_ref().is_some_and(|e| e.pressure);
        let candidate = Candidate {
            uid: "",
            pod,
            is_static,
            usage: None,
        };
        let Some(message) = crate::eviction::admit(pressure, candidate.is_critical()) else {
            return false;
        };
        let store = self.store.clone();
        let host = self.config.node_name.clone();
        let key = super::pod_key(pod);
        let uid = super::uid(pod);
        let pod = pod.clone();
        warning!("eviction manager: rejecting {key}: {message}");
        self.background.spawn_blocking(move || {
            let status = k8s_openapi::api::core::v1::PodStatus {
                phase: Some("Failed".to_owned()),
                reason: Some(crate::eviction::EVICTED.to_owned()),
                message: Some(format!("Pod was rejected: {message}")),
                qos_class: pod
                    .spec
                    .as_ref()
                    .map(|s| podvisor_api::pod::qos_class(s).as_str().to_owned()),
                ..Default::default()
            };
            if let Err(e) = super::write_pod_status(&store, &key, &uid, &status) {
                warning!(
                    "pod {}/{}: writing the rejection: {e}",
                    key.namespace,
                    key.name
                );
            }
            let event = podvisor_lifecycle::Event {
                type_: podvisor_lifecycle::EventType::Warning,
                reason: crate::eviction::EVICTED,
                message,
                container: None,
            };
            let mut recorder = super::Recorder::new(&host);
            if let Err(e) = recorder.record(&store, &pod, &event, jiff::Timestamp::now()) {
                warning!(
                    "pod {}/{}: recording its rejection: {e}",
                    key.namespace,
                    key.name
                );
            }
        });
        true
    }

    /// Records a Warning event on the Node, in the background (one that cannot be written is
    /// dropped, as the kubelet's recorder does).
    fn node_event(&mut self, reason: &'static str, message: String) {
        let store = self.store.clone();
        let node = self.config.node_name.clone();
        self.background.spawn_blocking(move || {
            let now = jiff::Timestamp::now();
            let mut event = crate::node_status::node_event(&node, reason, &message, now);
            event["type"] = serde_json::json!("Warning");
            let name = event["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            if let Err(e) = store.create(&Key::new("events", "default", &name), event) {
                debug!("eviction manager: recording {reason}: {e}");
            }
        });
    }
}
