//! What a restarted agent finds of a pod's sandbox: the process runtime's
//! [`Runtime::sandbox_state`](crate::Runtime::sandbox_state) (CRI's `ListContainers` for one
//! pod).
//!
//! The shim's own view comes first, always: a live shim is asked its instances only after it
//! handled everything an earlier agent sent it (see `shim::server`'s tickets), and a dead one
//! is treated as a shim that dies while an agent watches it (`exits`): what it left in the
//! pod's cgroups is killed, every instance it started gets its journaled exit or 137, and
//! nothing of it is replayed to the pod's next shim.

use super::exits::settle_lost;
use super::{ProcessRuntime, SHIM_START_TIMEOUT, container_exit, container_id, remove_pod_cgroups};
use crate::shim::client::ShimClient;
use crate::shim::protocol::{InstanceState, layout};
use crate::{InstanceRecord, PodPaths, RuntimeError, SandboxState};
use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use std::collections::BTreeMap;
use std::io;
use std::time::{Duration, Instant};

/// How often a shim that holds its lock but does not answer yet is asked again.
const SHIM_RETRY: Duration = Duration::from_millis(10);

/// A pod's sandbox as recovery finds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SandboxView {
    /// No shim was ever started for the pod on this node.
    Absent,
    /// The pod's shim serves: every instance it knows, running or exited.
    Live(Vec<InstanceState>),
    /// The pod's shim died while no agent watched it. What it left has been killed and every
    /// instance it started has its exit (journaled, else 137 now); `acked` says whether an
    /// agent had been told before. The agent must take this as a lost sandbox
    /// ([`crate::RuntimeEvent::SandboxLost`]): those instances ended, the pod needs a new one.
    Lost(Vec<InstanceState>),
}

impl ProcessRuntime {
    /// Reads the sandbox of `pod` after an agent restart, before anything is started for it.
    ///
    /// # Errors
    ///
    /// A shim holds the pod's lock but does not answer within the shim start timeout.
    pub async fn sandbox_view(&self, pod: &Pod) -> Result<SandboxView, RuntimeError> {
        let Some(paths) = self.pod_paths(pod) else {
            return Ok(SandboxView::Absent);
        };
        if !layout::shim_dir(&paths.pod_dir).is_dir() {
            return Ok(SandboxView::Absent);
        }
        let socket = layout::socket(&paths.pod_dir);
        let deadline = Instant::now() + SHIM_START_TIMEOUT;
        loop {
            if let Ok(client) = ShimClient::connect(&socket).await
                && let Ok((_, instances)) = client.state().await
            {
                return Ok(SandboxView::Live(instances));
            }
            // No answer. A shim that lives holds its lock (one just started may not listen
            // yet); with the lock taken here, no shim of the pod runs or can start meanwhile.
            let lock_path = layout::lock(&paths.pod_dir);
            if let Some(lock) = try_lock(&lock_path)? {
                let paths = paths.clone();
                let instances =
                    tokio::task::spawn_blocking(move || settle_lost(&paths, BTreeMap::new()))
                        .await
                        .map_err(|e| {
                            RuntimeError::Other(format!("settling a lost sandbox: {e}"))
                        })?;
                drop(lock);
                return Ok(SandboxView::Lost(instances));
            }
            if Instant::now() > deadline {
                return Err(RuntimeError::Shim(format!(
                    "a shim holds {} but does not answer on {}",
                    lock_path.display(),
                    socket.display()
                )));
            }
            tokio::time::sleep(SHIM_RETRY).await;
        }
    }

    /// Removes what is left of a sandbox whose shim is gone ([`SandboxView::Absent`] or
    /// [`SandboxView::Lost`]: nothing of it runs): the pod's directory, its cgroups and what
    /// its containers made on the host.
    ///
    /// # Errors
    ///
    /// The pod directory cannot be removed.
    pub async fn remove_sandbox_remains(&self, pod: &Pod) -> Result<(), RuntimeError> {
        let Some(paths) = self.pod_paths(pod) else {
            return Ok(());
        };
        if let Some(oci) = &self.inner.oci {
            oci.remove_dead_containers(&paths, &self.inner.shim_exe)
                .await;
            oci.remove_network_of(&paths.pod_dir).await;
        }
        let dir = paths.clone();
        tokio::task::spawn_blocking(move || {
            super::unmount_volumes(&dir.pod_dir);
            match std::fs::remove_dir_all(&dir.pod_dir) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => {
                    return Err(RuntimeError::Io {
                        what: format!("removing {}", dir.pod_dir.display()),
                        source: e,
                    });
                }
                _ => {}
            }
            remove_pod_cgroups(&dir);
            Ok(())
        })
        .await
        .map_err(|e| RuntimeError::Other(format!("removing a dead sandbox: {e}")))??;
        self.release_host_paths(&paths).await
    }
}

/// The runtime-neutral [`SandboxState`] of a shim's view.
pub(super) fn sandbox_state(paths: &PodPaths, view: SandboxView) -> SandboxState {
    let records = |instances: Vec<InstanceState>| -> Vec<InstanceRecord> {
        instances
            .into_iter()
            .map(|i| InstanceRecord {
                instance: i.instance,
                container_id: container_id(paths, i.instance),
                started_at: i.started_at.parse().unwrap_or(Timestamp::UNIX_EPOCH),
                exit: i.exit.as_ref().map(container_exit),
                acked: i.acked,
                name: i.name,
            })
            .collect()
    };
    match view {
        SandboxView::Absent => SandboxState::Absent,
        SandboxView::Live(instances) => SandboxState::Live(records(instances)),
        SandboxView::Lost(instances) => SandboxState::Lost(records(instances)),
    }
}

/// Takes the shim lock at `path` (close-on-exec, as every file std opens) if no shim holds it.
fn try_lock(path: &std::path::Path) -> Result<Option<std::fs::File>, RuntimeError> {
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .map_err(|source| RuntimeError::Io {
            what: format!("opening {}", path.display()),
            source,
        })?;
    match rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockExclusive) {
        Ok(()) => Ok(Some(file)),
        Err(rustix::io::Errno::WOULDBLOCK) => Ok(None),
        Err(e) => Err(RuntimeError::Io {
            what: format!("locking {}", path.display()),
            source: e.into(),
        }),
    }
}
