//! What the container log manager ([`crate::logs::manager`]) asks of the process runtime:
//! the running instances' log files, from each pod's shim (CRI `ListContainers` and
//! `ContainerStatus.logPath`), and `ReopenContainerLog`, which the shim does.

use std::time::Duration;

use super::ProcessRuntime;
use crate::shim::client::ShimClient;
use crate::shim::protocol::{Request, layout};
use crate::{ContainerLog, Runtime, RuntimeError};

/// How long a shim may take to say what runs: a busy one is skipped this round.
const STATE_TIMEOUT: Duration = Duration::from_secs(5);

impl ProcessRuntime {
    /// The log file of every running instance of every pod whose shim answers.
    pub(super) async fn running_logs(&self) -> Vec<ContainerLog> {
        let mut logs = Vec::new();
        for uid in self.list_sandboxes().await {
            let socket = layout::socket(&self.inner.state_dir.join("pods").join(&uid));
            if !socket.exists() {
                continue;
            }
            let client = ShimClient::answering(socket);
            let Ok(Ok((_, instances))) = tokio::time::timeout(STATE_TIMEOUT, client.state()).await
            else {
                continue;
            };
            logs.extend(instances.into_iter().filter_map(|i| {
                Some(ContainerLog {
                    pod_uid: uid.clone(),
                    instance: i.instance,
                    path: i.log_path.filter(|_| i.exit.is_none())?,
                })
            }));
        }
        logs
    }

    /// Has the pod's shim reopen the instance's log file.
    pub(super) async fn reopen_log(&self, log: &ContainerLog) -> Result<(), RuntimeError> {
        let pod_dir = self.inner.state_dir.join("pods").join(&log.pod_uid);
        ShimClient::answering(layout::socket(&pod_dir))
            .expect_ok(&Request::ReopenContainerLog {
                instance: log.instance,
            })
            .await
    }
}
