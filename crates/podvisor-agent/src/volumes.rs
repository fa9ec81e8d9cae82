//! The kubelet's volume manager for `configMap`, `secret`, `downwardAPI` and `projected`
//! volumes: set up before a pod's containers start (retried with back-off, a `FailedMount`
//! event per failure, the start pending meanwhile), then re-synced every sync period so that
//! changes of the objects reach running containers (those mounting with `subPath` keep what
//! they bound), and at once when the pod's labels or annotations change (the kubelet remounts
//! the volumes that need it on each pod update). Service account tokens come from the node's
//! [`TokenManager`], which renews them after 80% of their lifetime.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use podvisor_lifecycle::{Event, EventType};
use podvisor_runtime::Runtime;
use podvisor_runtime::config::objects::TokenKey;
use tokio::sync::mpsc;

use crate::clock::Clock;
use crate::objects::{ObjectSource, fetch};
use crate::tokens::TokenManager;
use crate::{PodUpdate, TimedEvent};

/// The kubelet's `--sync-frequency` default.
pub const SYNC_PERIOD: Duration = Duration::from_secs(60);

/// The first and the longest wait between two set-up attempts.
const RETRY_FIRST: Duration = Duration::from_millis(500);
const RETRY_MAX: Duration = Duration::from_secs(16);

/// Sets up one pod's `configMap`, `secret`, `downwardAPI` and `projected` volumes on its
/// sandbox.
pub(crate) struct VolumeSyncer<R: Runtime> {
    pub(crate) rt: Arc<R>,
    pub(crate) sandbox: Arc<R::Sandbox>,
    /// The pod as its worker knows it now (labels and annotations follow updates).
    pub(crate) pod: tokio::sync::watch::Receiver<Pod>,
    pub(crate) objects: Arc<dyn ObjectSource>,
    pub(crate) tokens: Arc<TokenManager>,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) updates: mpsc::UnboundedSender<PodUpdate>,
}

impl<R: Runtime> VolumeSyncer<R> {
    /// Whether the pod has volumes of these kinds.
    pub(crate) fn has_volumes(&self) -> bool {
        has_synced_volumes(&self.pod.borrow())
    }

    /// One set-up: fetch the objects and tokens, write the volumes. A failure is published as
    /// the kubelet's `FailedMount` event (its message names no secret value).
    async fn set_up(&self) -> bool {
        let pod = self.pod.borrow().clone();
        if !has_synced_volumes(&pod) {
            return true;
        }
        let names = podvisor_api::references::pod_volume_references(&pod);
        let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
        let result = match fetch(self.objects.as_ref(), ns, &names) {
            Ok(mut objects) => {
                let now = self.clock.now();
                for key in TokenKey::of_pod(&pod) {
                    let token = self.tokens.token(self.objects.as_ref(), &pod, &key, now);
                    objects.tokens.insert(key, token);
                }
                self.rt
                    .set_up_volumes(&self.sandbox, &pod, &objects)
                    .await
                    .map_err(|e| e.to_string())
            }
            Err(message) => Err(message),
        };
        match result {
            Ok(()) => true,
            Err(message) => {
                let _ = self.updates.send(PodUpdate::Event(TimedEvent {
                    time: self.clock.now(),
                    event: Event {
                        type_: EventType::Warning,
                        reason: "FailedMount",
                        message,
                        container: None,
                    },
                }));
                false
            }
        }
    }

    /// Retries the set-up until it succeeds (the pod's deletion aborts the wait).
    pub(crate) async fn wait_until_set_up(&self) {
        let mut delay = RETRY_FIRST;
        while !self.set_up().await {
            tokio::time::sleep(delay).await;
            delay = (delay * 2).min(RETRY_MAX);
        }
    }

    /// Re-syncs every `period` and whenever the pod's metadata changes, for as long as the
    /// pod runs.
    pub(crate) async fn run(mut self, period: Duration) {
        let mut watching = true;
        loop {
            tokio::select! {
                () = tokio::time::sleep(period) => {}
                changed = self.pod.changed(), if watching => {
                    if changed.is_err() {
                        watching = false;
                        continue;
                    }
                }
            }
            self.set_up().await;
        }
    }
}

/// Whether `pod` has a volume the syncer writes.
fn has_synced_volumes(pod: &Pod) -> bool {
    pod.spec
        .iter()
        .flat_map(|s| s.volumes.iter().flatten())
        .any(|v| {
            v.config_map.is_some()
                || v.secret.is_some()
                || v.downward_api.is_some()
                || v.projected.is_some()
        })
}
