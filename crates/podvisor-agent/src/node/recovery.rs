//! Re-adoption after an agent restart (issue 4, recovery): the pods of the store get their
//! shims back, with the instances the shims still run, so that nothing is restarted; the
//! shims of pods that are no longer in the store are torn down. A shim that died while no
//! agent ran is a lost sandbox (issue 7): the runtime has killed what it left and settled its
//! instances' exits, and the pod worker takes it as a sandbox that dies under it.
//!
//! Specific to the process runtime for now: reading a sandbox's instances is not part of the
//! `Runtime` trait yet (`ProcessRuntime::sandbox_view` is shaped to become it).

use crate::Adopted;
use crate::log::{debug, warning};
use k8s_openapi::api::core::v1::{ContainerStatus, Pod};
use podvisor_lifecycle::{InstanceId, PastInstance, RecoveredInstance};
use podvisor_runtime::process::{ProcessRuntime, ProcessSandbox, SandboxView};
use podvisor_runtime::shim::protocol::{ExitRecord, InstanceState};
use podvisor_runtime::{ContainerExit, Runtime, RuntimeEvent, SandboxError};
use std::collections::HashMap;
use std::path::Path;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

/// The kubelet's minimum grace period for a pod it no longer knows (`minimumGracePeriodInSeconds`).
const ORPHAN_GRACE: Duration = Duration::from_secs(2);
/// `termination_message`: the last bytes of the file (M3).
const TERMINATION_MESSAGE_LIMIT: usize = 4096;

/// What the runtime has of `pod`'s sandbox, read before anything is started for it (a shim
/// that does not answer counts as none, with a warning).
pub(crate) async fn sandbox_view(rt: &ProcessRuntime, pod: &Pod) -> SandboxView {
    rt.sandbox_view(pod).await.unwrap_or_else(|e| {
        warning!(
            "recovery: reading the sandbox of {}: {e}",
            pod.metadata.name.as_deref().unwrap_or("")
        );
        SandboxView::Absent
    })
}

/// Whether `pod` ran on this node before (it has a start time or container statuses).
pub(crate) fn ran_before(pod: &Pod) -> bool {
    pod.status.as_ref().is_some_and(|s| {
        s.start_time.is_some()
            || s.container_statuses.as_ref().is_some_and(|c| !c.is_empty())
            || s.init_container_statuses
                .as_ref()
                .is_some_and(|c| !c.is_empty())
    })
}

/// Re-adopts the sandbox of `pod`: its live shim (`Live`: what the shim said before this agent
/// subscribed), or a new one when the shim is gone. A shim that died while no agent ran
/// (`Lost`) leaves its instances to be reported as ended with a lost sandbox; with no trace of
/// a shim (`Absent`) the pod's containers are simply not there.
pub(crate) async fn adopt(
    rt: &ProcessRuntime,
    pod: &Pod,
    view: SandboxView,
) -> Result<Adopted<ProcessSandbox>, SandboxError> {
    let (events_tx, events_rx) = mpsc::unbounded_channel();
    let sandbox = rt.create_sandbox(pod, events_tx.clone()).await?;
    let (instances, lost) = match view {
        SandboxView::Live(instances) => (instances, false),
        SandboxView::Lost(instances) => (instances, true),
        SandboxView::Absent => (Vec::new(), false),
    };
    let (running, exits) = recovered_instances(pod, &instances);
    let lost = lost.then(|| {
        running
            .iter()
            .filter_map(|r| {
                let exit = instances.iter().find(|i| i.instance == r.instance.0)?;
                Some((r.instance.0, container_exit(exit.exit.as_ref()?)))
            })
            .collect::<Vec<_>>()
    });
    if lost.is_none() {
        // Exits the previous agent acknowledged but never persisted: the shim will not replay
        // them, so they are fed here.
        for (instance, exit) in exits {
            let _ = events_tx.send(RuntimeEvent::Exited { instance, exit });
        }
    }
    let history: Vec<PastInstance> = past_instances(pod, &instances)
        .into_iter()
        .filter(|p| !running.iter().any(|r| r.instance == p.instance))
        .collect();
    let highest_instance = instances.iter().map(|i| i.instance).max().unwrap_or(0);
    debug!(
        "recovery: {} re-adopted with {} instance(s) still to follow{}",
        pod.metadata.name.as_deref().unwrap_or(""),
        running.len(),
        if lost.is_some() {
            " (sandbox lost)"
        } else {
            ""
        }
    );
    Ok(Adopted {
        sandbox,
        events_tx,
        events_rx,
        running,
        history,
        highest_instance,
        lost,
    })
}

/// The instances that exited, with the times the shim journaled (the status keeps whole
/// seconds only).
pub(crate) fn past_instances(pod: &Pod, instances: &[InstanceState]) -> Vec<PastInstance> {
    let uid = pod.metadata.uid.as_deref().unwrap_or("");
    let ids: Vec<String> = pod
        .status
        .iter()
        .flat_map(|s| {
            s.init_container_statuses
                .iter()
                .flatten()
                .chain(s.container_statuses.iter().flatten())
        })
        .flat_map(status_container_ids)
        .collect();
    instances
        .iter()
        .filter_map(|inst| {
            let exit = inst.exit.as_ref()?;
            let container_id = ids
                .iter()
                .find(|id| instance_of(id) == Some(inst.instance))
                .cloned()
                .unwrap_or_else(|| container_id(uid, inst.instance));
            Some(PastInstance {
                name: inst.name.clone(),
                instance: InstanceId(inst.instance),
                container_id,
                started_at: inst.started_at.parse().ok()?,
                finished_at: exit.finished_at.parse().ok()?,
            })
        })
        .collect()
}

/// The instances the recovered machine must know as running, and the exits to feed it that
/// the shim will not replay.
///
/// An instance counts when it still runs, or when it is the newest of its container, exited,
/// and its exit is not in the persisted status yet: then the shim replays the exit if it was
/// never acknowledged, and this returns it if it was (the previous agent died between the
/// acknowledgement and the status write).
pub(crate) fn recovered_instances(
    pod: &Pod,
    instances: &[InstanceState],
) -> (Vec<RecoveredInstance>, Vec<(u64, ContainerExit)>) {
    let uid = pod.metadata.uid.as_deref().unwrap_or("");
    let statuses: Vec<&ContainerStatus> = pod
        .status
        .iter()
        .flat_map(|s| {
            s.init_container_statuses
                .iter()
                .flatten()
                .chain(s.container_statuses.iter().flatten())
        })
        .collect();
    let mut newest: HashMap<&str, u64> = HashMap::new();
    for i in instances {
        let n = newest.entry(i.name.as_str()).or_insert(0);
        *n = (*n).max(i.instance);
    }
    let mut running = Vec::new();
    let mut exits = Vec::new();
    for inst in instances {
        let container_id = statuses
            .iter()
            .flat_map(|s| status_container_ids(s))
            .find(|id| instance_of(id) == Some(inst.instance))
            .unwrap_or_else(|| container_id(uid, inst.instance));
        let of_name = || statuses.iter().filter(|s| s.name == inst.name);
        let recorded_running = of_name().any(|s| {
            s.container_id.as_deref() == Some(container_id.as_str())
                && s.state.as_ref().is_some_and(|st| st.running.is_some())
        });
        let recorded_exited = of_name().any(|s| {
            [s.state.as_ref(), s.last_state.as_ref()]
                .into_iter()
                .flatten()
                .filter_map(|st| st.terminated.as_ref())
                .any(|t| t.container_id.as_deref() == Some(container_id.as_str()))
        });
        let include = match &inst.exit {
            None => true,
            Some(_) if newest.get(inst.name.as_str()) != Some(&inst.instance) => false,
            Some(_) if recorded_exited => false,
            Some(_) if !inst.acked => true,
            Some(exit) if recorded_running => {
                exits.push((inst.instance, container_exit(exit)));
                true
            }
            Some(_) => false,
        };
        if include {
            running.push(RecoveredInstance {
                name: inst.name.clone(),
                instance: InstanceId(inst.instance),
                container_id,
                started_at: inst
                    .started_at
                    .parse()
                    .unwrap_or(jiff::Timestamp::UNIX_EPOCH),
            });
        }
    }
    (running, exits)
}

/// The container IDs a status mentions: its own and its states'.
fn status_container_ids(s: &ContainerStatus) -> Vec<String> {
    let mut ids: Vec<String> = s.container_id.iter().cloned().collect();
    for st in [s.state.as_ref(), s.last_state.as_ref()]
        .into_iter()
        .flatten()
    {
        if let Some(t) = &st.terminated {
            ids.extend(t.container_id.iter().cloned());
        }
    }
    ids
}

/// The instance id in a process-runtime container ID: its last 32 hex digits.
pub(crate) fn instance_of(container_id: &str) -> Option<u64> {
    let hex = container_id.rsplit("://").next()?;
    let tail = hex.get(hex.len().checked_sub(32)?..)?;
    u64::try_from(u128::from_str_radix(tail, 16).ok()?).ok()
}

/// The process runtime's container ID: `podvisor://` + the pod UID's 32 hex digits + the
/// instance id in 32 hex digits.
fn container_id(uid: &str, instance: u64) -> String {
    let uid: String = uid.chars().filter(char::is_ascii_hexdigit).collect();
    format!("podvisor://{uid:0>32.32}{instance:032x}")
}

/// The runtime's view of a journaled exit (as the process runtime reports it).
fn container_exit(record: &ExitRecord) -> ContainerExit {
    let log_tail = podvisor_runtime::logs::tail(&record.log_path, 80, 2048);
    ContainerExit {
        exit_code: record.exit_code,
        signal: record.signal,
        oom_killed: record.oom_killed,
        started_at: record
            .started_at
            .parse()
            .unwrap_or(jiff::Timestamp::UNIX_EPOCH),
        finished_at: record
            .finished_at
            .parse()
            .unwrap_or_else(|_| jiff::Timestamp::now()),
        termination_message: read_tail(&record.termination_message_host_path),
        log_tail: (!log_tail.is_empty()).then_some(log_tail),
    }
}

fn read_tail(path: &Path) -> Option<String> {
    let bytes = std::fs::read(path).ok()?;
    if bytes.is_empty() {
        return None;
    }
    let start = bytes.len().saturating_sub(TERMINATION_MESSAGE_LIMIT);
    Some(String::from_utf8_lossy(&bytes[start..]).into_owned())
}

/// The UIDs of the pods that have a directory (and so maybe a shim) under `<state>/pods`.
pub(crate) fn sandbox_uids(state_dir: &Path) -> Vec<String> {
    std::fs::read_dir(state_dir.join("pods"))
        .map(|entries| {
            entries
                .flatten()
                .filter(|e| e.path().is_dir())
                .filter_map(|e| e.file_name().into_string().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// Tears down the sandbox of a pod that is no longer in the store, as the kubelet kills the
/// pods it finds running but no longer knows: SIGTERM, SIGKILL after 2 s, then the shim and
/// the pod's directory go. A sandbox whose shim died is only removed (the runtime killed what
/// the shim left while reading it).
pub(crate) async fn tear_down(rt: ProcessRuntime, uid: String) {
    let mut pod = Pod::default();
    pod.metadata.uid = Some(uid.clone());
    pod.metadata.name = Some(uid.clone());
    if !matches!(sandbox_view(&rt, &pod).await, SandboxView::Live(_)) {
        debug!("recovery: removing the leftover directory of pod {uid}");
        if let Err(e) = rt.remove_dead_sandbox(&pod).await {
            warning!("recovery: removing the sandbox of removed pod {uid}: {e}");
        }
        return;
    }
    let (events_tx, _events_rx) = mpsc::unbounded_channel();
    let sandbox = match rt.create_sandbox(&pod, events_tx).await {
        Ok(sandbox) => sandbox,
        Err(e) => {
            warning!("recovery: re-adopting the shim of removed pod {uid}: {e}");
            return;
        }
    };
    let alive = |instances: &[InstanceState]| -> Vec<u64> {
        instances
            .iter()
            .filter(|i| i.exit.is_none())
            .map(|i| i.instance)
            .collect()
    };
    let running = sandbox.state().await.map(|s| alive(&s)).unwrap_or_default();
    if !running.is_empty() {
        debug!(
            "recovery: stopping {} container(s) of removed pod {uid}",
            running.len()
        );
    }
    for instance in running {
        let _ = rt.signal(&sandbox, instance, 15).await;
    }
    let start = Instant::now();
    while start.elapsed() < ORPHAN_GRACE {
        match sandbox.state().await {
            Ok(s) if !alive(&s).is_empty() => {}
            _ => break,
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Kills whatever is left, stops the shim, removes the pod's directory and cgroups.
    if let Err(e) = rt.remove_sandbox(&sandbox).await {
        warning!("recovery: removing the sandbox of removed pod {uid}: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn state(instance: u64, exit: Option<i32>, acked: bool) -> InstanceState {
        InstanceState {
            instance,
            name: "app".into(),
            pid: 100,
            started_at: "2026-01-01T00:00:00Z".into(),
            exit: exit.map(|code| ExitRecord {
                instance,
                name: "app".into(),
                pid: 100,
                exit_code: code,
                signal: None,
                oom_killed: false,
                started_at: "2026-01-01T00:00:00Z".into(),
                finished_at: "2026-01-01T00:00:05Z".into(),
                termination_message_host_path: "/nonexistent".into(),
                log_path: "/nonexistent".into(),
            }),
            acked,
        }
    }

    const UID: &str = "0123456789abcdef0123456789abcdef";

    fn pod(status: serde_json::Value) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "p", "uid": UID},
            "spec": {"containers": [{"name": "app"}]},
            "status": status,
        }))
        .unwrap()
    }

    #[test]
    fn container_ids_round_trip() {
        let id = container_id(UID, 7);
        assert_eq!(id, format!("podvisor://{UID}{:032x}", 7));
        assert_eq!(instance_of(&id), Some(7));
        let dashed = container_id("01234567-89ab-cdef-0123-456789abcdef", 3);
        assert_eq!(dashed, format!("podvisor://{UID}{:032x}", 3));
    }

    #[test]
    fn running_instances_are_recovered_and_old_exits_are_not() {
        let running_id = container_id(UID, 2);
        let p = pod(json!({"containerStatuses": [{
            "name": "app", "image": "x", "imageID": "", "ready": true, "restartCount": 1,
            "containerID": running_id,
            "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}},
            "lastState": {"terminated": {"exitCode": 1, "containerID": container_id(UID, 1)}},
        }]}));
        let (running, exits) =
            recovered_instances(&p, &[state(1, Some(1), true), state(2, None, false)]);
        assert_eq!(running.len(), 1);
        assert_eq!(running[0].instance, InstanceId(2));
        assert_eq!(running[0].container_id, running_id);
        assert!(exits.is_empty());
    }

    #[test]
    fn an_exit_acknowledged_but_not_persisted_is_fed_again() {
        let p = pod(json!({"containerStatuses": [{
            "name": "app", "image": "x", "imageID": "", "ready": true, "restartCount": 0,
            "containerID": container_id(UID, 1),
            "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}},
        }]}));
        let (running, exits) = recovered_instances(&p, &[state(1, Some(0), true)]);
        assert_eq!(running.len(), 1);
        assert_eq!(exits.len(), 1);
        assert_eq!(exits[0].1.exit_code, 0);

        // Not acknowledged: the shim replays it.
        let (running, exits) = recovered_instances(&p, &[state(1, Some(0), false)]);
        assert_eq!(running.len(), 1);
        assert!(exits.is_empty());
    }
}
