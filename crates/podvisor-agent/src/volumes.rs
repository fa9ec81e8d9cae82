//! The kubelet's volume manager for `configMap` and `secret` volumes: set up before a pod's
//! containers start (retried with back-off, a `FailedMount` event per failure, the start
//! pending meanwhile), then re-synced every sync period so that changes of the objects reach
//! running containers (those mounting with `subPath` keep what they bound).

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use podvisor_lifecycle::{Event, EventType};
use podvisor_runtime::Runtime;
use tokio::sync::mpsc;

use crate::clock::Clock;
use crate::objects::{ObjectSource, fetch};
use crate::{PodUpdate, TimedEvent};

/// The kubelet's `--sync-frequency` default.
pub const SYNC_PERIOD: Duration = Duration::from_secs(60);

/// The first and the longest wait between two set-up attempts.
const RETRY_FIRST: Duration = Duration::from_millis(500);
const RETRY_MAX: Duration = Duration::from_secs(16);

/// Sets up one pod's `configMap` and `secret` volumes on its sandbox.
pub(crate) struct VolumeSyncer<R: Runtime> {
    pub(crate) rt: Arc<R>,
    pub(crate) sandbox: Arc<R::Sandbox>,
    pub(crate) pod: Pod,
    pub(crate) objects: Arc<dyn ObjectSource>,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) updates: mpsc::UnboundedSender<PodUpdate>,
}

impl<R: Runtime> VolumeSyncer<R> {
    /// Whether the pod has volumes of these kinds.
    pub(crate) fn has_volumes(&self) -> bool {
        !podvisor_api::references::pod_volume_references(&self.pod).is_empty()
    }

    /// One set-up: fetch the objects, write the volumes. A failure is published as the
    /// kubelet's `FailedMount` event (its message names no secret value).
    async fn set_up(&self) -> bool {
        let names = podvisor_api::references::pod_volume_references(&self.pod);
        if names.is_empty() {
            return true;
        }
        let ns = self.pod.metadata.namespace.as_deref().unwrap_or("default");
        let result = match fetch(self.objects.as_ref(), ns, &names) {
            Ok(objects) => self
                .rt
                .set_up_volumes(&self.sandbox, &self.pod, &objects)
                .await
                .map_err(|e| e.to_string()),
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

    /// Re-syncs every `period`, for as long as the pod runs.
    pub(crate) async fn run(self, period: Duration) {
        loop {
            tokio::time::sleep(period).await;
            self.set_up().await;
        }
    }
}
