//! The kubelet's container log manager (`pkg/kubelet/logs/container_log_manager.go`): every
//! monitor interval, the log of each running container is looked at, and one that reached
//! the policy's size is rotated ([`super::rotation`]) and reopened by the runtime (CRI
//! `ReopenContainerLog`), by at most `max_workers` rotations at a time.
//!
//! As in the kubelet: only running containers' logs are rotated (an exited one writes nothing
//! more); a running container whose log file is missing is asked to reopen it; a rotation the
//! runtime could not follow with a reopen is renamed back and tried again next round.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use super::rotation::{self, LogRotatePolicy, RotationError};
use crate::{ContainerLog, Runtime, RuntimeError};

/// The kubelet's `--container-log-monitor-interval` default.
pub const DEFAULT_MONITOR_INTERVAL: Duration = Duration::from_secs(10);
/// The shortest monitor interval the kubelet's configuration validation accepts.
pub const MIN_MONITOR_INTERVAL: Duration = Duration::from_secs(3);
/// The kubelet's `--container-log-max-workers` default.
pub const DEFAULT_MAX_WORKERS: usize = 1;

/// How the container log manager works.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogManagerConfig {
    /// When logs rotate and how many files they keep.
    pub policy: LogRotatePolicy,
    /// How often the logs are looked at.
    pub monitor_interval: Duration,
    /// How many rotations run at once (at least 1).
    pub max_workers: usize,
}

impl Default for LogManagerConfig {
    fn default() -> Self {
        LogManagerConfig {
            policy: LogRotatePolicy::default(),
            monitor_interval: DEFAULT_MONITOR_INTERVAL,
            max_workers: DEFAULT_MAX_WORKERS,
        }
    }
}

/// One container's log could not be rotated.
#[derive(Debug, thiserror::Error)]
pub enum LogManagerError {
    /// Looking at, tidying, compressing or renaming its files failed.
    #[error("rotating {}: {source}", path.display())]
    Rotation {
        /// The container's log.
        path: PathBuf,
        /// What failed.
        #[source]
        source: RotationError,
    },
    /// The runtime did not reopen the log (the rotation was renamed back).
    #[error("failed to reopen container log {}: {source}", path.display())]
    Reopen {
        /// The container's log.
        path: PathBuf,
        /// The runtime's error.
        #[source]
        source: RuntimeError,
    },
}

/// Rotates the logs of `runtime`'s running containers.
#[derive(Debug)]
pub struct ContainerLogManager<R> {
    runtime: Arc<R>,
    config: LogManagerConfig,
}

impl<R: Runtime> ContainerLogManager<R> {
    /// A manager of `runtime`'s container logs.
    pub fn new(runtime: Arc<R>, config: LogManagerConfig) -> Self {
        ContainerLogManager { runtime, config }
    }

    /// Rotates every monitor interval, until the task is dropped or aborted.
    pub async fn run(self) {
        let mut ticks =
            tokio::time::interval(self.config.monitor_interval.max(Duration::from_millis(1)));
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticks.tick().await;
            for e in self.rotate_logs().await.errors {
                tracing::warn!("container log rotation: {e}");
            }
        }
    }

    /// One round (the kubelet's `rotateLogs` and its workers): the logs rotated now, and
    /// the failures.
    pub async fn rotate_logs(&self) -> RoundOutcome {
        let workers = self.config.max_workers.max(1);
        let mut outcome = RoundOutcome::default();
        let mut running = tokio::task::JoinSet::new();
        for log in self.runtime.running_container_logs().await {
            if running.len() >= workers
                && let Some(done) = running.join_next().await
            {
                outcome.add(done);
            }
            running.spawn(rotate_one(
                Arc::clone(&self.runtime),
                self.config.policy,
                log,
            ));
        }
        while let Some(done) = running.join_next().await {
            outcome.add(done);
        }
        outcome
    }
}

/// What one round did.
#[derive(Debug, Default)]
pub struct RoundOutcome {
    /// The rotated files made, each the former log of a running container.
    pub rotated: Vec<PathBuf>,
    /// The logs that could not be rotated.
    pub errors: Vec<LogManagerError>,
}

impl RoundOutcome {
    fn add(
        &mut self,
        done: Result<Result<Option<PathBuf>, LogManagerError>, tokio::task::JoinError>,
    ) {
        match done {
            Ok(Ok(Some(rotated))) => self.rotated.push(rotated),
            Ok(Ok(None)) => {}
            Ok(Err(e)) => self.errors.push(e),
            Err(e) => tracing::warn!("container log rotation worker: {e}"),
        }
    }
}

/// The kubelet's `processContainer` for one running container.
async fn rotate_one<R: Runtime>(
    runtime: Arc<R>,
    policy: LogRotatePolicy,
    log: ContainerLog,
) -> Result<Option<PathBuf>, LogManagerError> {
    let path = log.path.clone();
    let rotation_err = |source| LogManagerError::Rotation {
        path: path.clone(),
        source,
    };
    let stat_err = |what| {
        let path = path.clone();
        move |source| LogManagerError::Rotation {
            path: path.clone(),
            source: RotationError::Io { what, path, source },
        }
    };
    let size = match tokio::fs::metadata(&path).await {
        Ok(meta) => meta.len(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            // Lost to an interrupted rotation: the container writes to a file no one reads.
            runtime
                .reopen_container_log(&log)
                .await
                .map_err(|source| LogManagerError::Reopen {
                    path: path.clone(),
                    source,
                })?;
            tokio::fs::metadata(&path)
                .await
                .map_err(stat_err("reading the reopened log"))?
                .len()
        }
        Err(e) => return Err(stat_err("reading the log")(e)),
    };
    if !policy.needs_rotation(size) {
        return Ok(None);
    }
    let timestamp = jiff::Zoned::now()
        .strftime(rotation::TIMESTAMP_FORMAT)
        .to_string();
    // Compressing a large file takes a while: on a thread of its own, which a stopping node
    // does not wait for (what it leaves half done, the next rotation removes). The rename and
    // the reopen follow here, so a manager stopped meanwhile renames nothing.
    let (done_tx, done_rx) = tokio::sync::oneshot::channel();
    let log_path = path.clone();
    let spawned = std::thread::Builder::new()
        .name("log-rotation".into())
        .spawn(move || {
            let _ = done_tx.send(rotation::tidy(&log_path, &policy, &timestamp));
        });
    let thread_err = |e: String| {
        rotation_err(RotationError::Io {
            what: "rotating",
            path: path.clone(),
            source: std::io::Error::other(e),
        })
    };
    spawned.map_err(|e| thread_err(format!("starting a thread: {e}")))?;
    let prepared = done_rx
        .await
        .map_err(|_| thread_err("the rotation thread ended early".into()))?
        .map_err(rotation_err)?;
    let Some(rotated) = prepared else {
        return Ok(None);
    };
    rotation::rename(&path, &rotated).map_err(rotation_err)?;
    if let Err(source) = runtime.reopen_container_log(&log).await {
        // The container still writes to the rotated file: give it its name back.
        if let Err(e) = rotation::undo(&path, &rotated) {
            tracing::error!("container log rotation: {e}");
        }
        return Err(LogManagerError::Reopen { path, source });
    }
    Ok(Some(rotated))
}
