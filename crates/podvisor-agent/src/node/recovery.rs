//! Re-adoption after an agent restart (issue 4, recovery): the pods of the store get their
//! sandboxes back, with the instances the runtime still runs, so that nothing is restarted;
//! the sandboxes of pods that are no longer in the store are torn down. A sandbox that died
//! while no agent ran is a lost sandbox (issue 7): the runtime has killed what it left and
//! settled its instances' exits, and the pod worker takes it as a sandbox that dies under it.
//!
//! Runtime-generic: what a runtime has is read through [`Runtime::sandbox_state`] and
//! [`Runtime::list_sandboxes`] (CRI's `ListContainers` and `ListPodSandbox`).

use crate::Adopted;
use crate::log::{debug, warning};
use k8s_openapi::api::core::v1::{ContainerStatus, Pod};
use podvisor_lifecycle::{InstanceId, PastInstance, RecoveredInstance};
use podvisor_runtime::{
    ContainerExit, InstanceRecord, Runtime, RuntimeEvent, SandboxError, SandboxState,
};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

/// The kubelet's minimum grace period for a pod it no longer knows (`minimumGracePeriodInSeconds`).
const ORPHAN_GRACE: Duration = Duration::from_secs(2);

/// What the runtime has of `pod`'s sandbox, read before anything is started for it (a
/// sandbox that cannot be read counts as none, with a warning).
pub(crate) async fn sandbox_state<R: Runtime>(rt: &R, pod: &Pod) -> SandboxState {
    rt.sandbox_state(pod).await.unwrap_or_else(|e| {
        warning!(
            "recovery: reading the sandbox of {}: {e}",
            pod.metadata.name.as_deref().unwrap_or("")
        );
        SandboxState::Absent
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

/// Re-adopts the sandbox of `pod`: its live sandbox (`Live`: what the runtime said before this
/// agent subscribed), or a new one when it is gone. A sandbox that died while no agent ran
/// (`Lost`) leaves its instances to be reported as ended with a lost sandbox; with no trace of
/// a sandbox (`Absent`) the pod's containers are simply not there.
pub(crate) async fn adopt<R: Runtime>(
    rt: &R,
    pod: &Pod,
    state: SandboxState,
) -> Result<Adopted<R::Sandbox>, SandboxError> {
    let (events_tx, events_rx) = mpsc::unbounded_channel();
    let sandbox = rt.create_sandbox(pod, events_tx.clone()).await?;
    let (instances, lost) = match state {
        SandboxState::Live(instances) => (instances, false),
        SandboxState::Lost(instances) => (instances, true),
        SandboxState::Absent => (Vec::new(), false),
    };
    let (running, exits) = recovered_instances(pod, &instances);
    let lost = lost.then(|| {
        running
            .iter()
            .filter_map(|r| {
                let exit = instances.iter().find(|i| i.instance == r.instance.0)?;
                Some((r.instance.0, exit.exit.clone()?))
            })
            .collect::<Vec<_>>()
    });
    if lost.is_none() {
        // Exits the previous agent acknowledged but never persisted: the runtime will not
        // report them again, so they are fed here.
        for (instance, exit) in exits {
            let _ = events_tx.send(RuntimeEvent::Exited { instance, exit });
        }
    }
    let history: Vec<PastInstance> = past_instances(&instances)
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

/// The instances that exited, with the times the runtime recorded (the status keeps whole
/// seconds only).
pub(crate) fn past_instances(instances: &[InstanceRecord]) -> Vec<PastInstance> {
    instances
        .iter()
        .filter_map(|inst| {
            let exit = inst.exit.as_ref()?;
            Some(PastInstance {
                name: inst.name.clone(),
                instance: InstanceId(inst.instance),
                container_id: inst.container_id.clone(),
                started_at: inst.started_at,
                finished_at: exit.finished_at,
            })
        })
        .collect()
}

/// The instances the recovered machine must know as running, and the exits to feed it that
/// the runtime will not report again.
///
/// An instance counts when it still runs, or when it is the newest of its container, exited,
/// and its exit is not in the persisted status yet: then the runtime reports the exit again if
/// it was never acknowledged, and this returns it if it was (the previous agent died between
/// the acknowledgement and the status write).
pub(crate) fn recovered_instances(
    pod: &Pod,
    instances: &[InstanceRecord],
) -> (Vec<RecoveredInstance>, Vec<(u64, ContainerExit)>) {
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
        let container_id = inst.container_id.as_str();
        let of_name = || statuses.iter().filter(|s| s.name == inst.name);
        let recorded_running = of_name().any(|s| {
            s.container_id.as_deref() == Some(container_id)
                && s.state.as_ref().is_some_and(|st| st.running.is_some())
        });
        let recorded_exited = of_name().any(|s| {
            [s.state.as_ref(), s.last_state.as_ref()]
                .into_iter()
                .flatten()
                .filter_map(|st| st.terminated.as_ref())
                .any(|t| t.container_id.as_deref() == Some(container_id))
        });
        let include = match &inst.exit {
            None => true,
            Some(_) if newest.get(inst.name.as_str()) != Some(&inst.instance) => false,
            Some(_) if recorded_exited => false,
            Some(_) if !inst.acked => true,
            Some(exit) if recorded_running => {
                exits.push((inst.instance, exit.clone()));
                true
            }
            Some(_) => false,
        };
        if include {
            running.push(RecoveredInstance {
                name: inst.name.clone(),
                instance: InstanceId(inst.instance),
                container_id: container_id.to_owned(),
                started_at: inst.started_at,
            });
        }
    }
    (running, exits)
}

/// Tears down the sandbox of a pod that is no longer in the store, as the kubelet kills the
/// pods it finds running but no longer knows: SIGTERM, SIGKILL after 2 s, then the sandbox
/// goes. A sandbox that died is only removed (the runtime killed what it left while reading
/// it).
pub(crate) async fn tear_down<R: Runtime>(rt: Arc<R>, uid: String) {
    let mut pod = Pod::default();
    pod.metadata.uid = Some(uid.clone());
    pod.metadata.name = Some(uid.clone());
    let alive = |state: &SandboxState| -> Vec<u64> {
        match state {
            SandboxState::Live(instances) => instances
                .iter()
                .filter(|i| i.exit.is_none())
                .map(|i| i.instance)
                .collect(),
            _ => Vec::new(),
        }
    };
    let state = sandbox_state(&*rt, &pod).await;
    if !matches!(state, SandboxState::Live(_)) {
        debug!("recovery: removing the remains of the sandbox of pod {uid}");
        if let Err(e) = rt.remove_dead_sandbox(&pod).await {
            warning!("recovery: removing the sandbox of removed pod {uid}: {e}");
        }
        return;
    }
    let (events_tx, _events_rx) = mpsc::unbounded_channel();
    let sandbox = match rt.create_sandbox(&pod, events_tx).await {
        Ok(sandbox) => sandbox,
        Err(e) => {
            warning!("recovery: re-adopting the sandbox of removed pod {uid}: {e}");
            return;
        }
    };
    let running = alive(&state);
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
        match rt.sandbox_state(&pod).await {
            Ok(state) if !alive(&state).is_empty() => {}
            _ => break,
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Kills whatever is left and removes the sandbox.
    if let Err(e) = rt.remove_sandbox(&sandbox).await {
        warning!("recovery: removing the sandbox of removed pod {uid}: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const UID: &str = "0123456789abcdef0123456789abcdef";

    fn id(instance: u64) -> String {
        format!("podvisor://{UID}{instance:032x}")
    }

    fn record(instance: u64, exit: Option<i32>, acked: bool) -> InstanceRecord {
        let started_at = "2026-01-01T00:00:00Z".parse().unwrap();
        InstanceRecord {
            instance,
            name: "app".into(),
            container_id: id(instance),
            started_at,
            exit: exit.map(|code| ContainerExit {
                exit_code: code,
                signal: None,
                oom_killed: false,
                started_at,
                finished_at: "2026-01-01T00:00:05Z".parse().unwrap(),
                termination_message: None,
                log_tail: None,
            }),
            acked,
        }
    }

    fn pod(status: serde_json::Value) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "p", "uid": UID},
            "spec": {"containers": [{"name": "app"}]},
            "status": status,
        }))
        .unwrap()
    }

    #[test]
    fn running_instances_are_recovered_and_old_exits_are_not() {
        let p = pod(json!({"containerStatuses": [{
            "name": "app", "image": "x", "imageID": "", "ready": true, "restartCount": 1,
            "containerID": id(2),
            "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}},
            "lastState": {"terminated": {"exitCode": 1, "containerID": id(1)}},
        }]}));
        let (running, exits) =
            recovered_instances(&p, &[record(1, Some(1), true), record(2, None, false)]);
        assert_eq!(running.len(), 1);
        assert_eq!(running[0].instance, InstanceId(2));
        assert_eq!(running[0].container_id, id(2));
        assert!(exits.is_empty());
        let past = past_instances(&[record(1, Some(1), true), record(2, None, false)]);
        assert_eq!(past.len(), 1);
        assert_eq!(past[0].container_id, id(1));
    }

    #[test]
    fn an_exit_acknowledged_but_not_persisted_is_fed_again() {
        let p = pod(json!({"containerStatuses": [{
            "name": "app", "image": "x", "imageID": "", "ready": true, "restartCount": 0,
            "containerID": id(1),
            "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}},
        }]}));
        let (running, exits) = recovered_instances(&p, &[record(1, Some(0), true)]);
        assert_eq!(running.len(), 1);
        assert_eq!(exits.len(), 1);
        assert_eq!(exits[0].1.exit_code, 0);

        // Not acknowledged: the runtime reports it again.
        let (running, exits) = recovered_instances(&p, &[record(1, Some(0), false)]);
        assert_eq!(running.len(), 1);
        assert!(exits.is_empty());
    }

    #[test]
    fn an_exit_already_in_the_status_is_history_only() {
        let p = pod(json!({"containerStatuses": [{
            "name": "app", "image": "x", "imageID": "", "ready": false, "restartCount": 0,
            "containerID": id(1),
            "state": {"terminated": {"exitCode": 0, "containerID": id(1)}},
        }]}));
        let (running, exits) = recovered_instances(&p, &[record(1, Some(0), true)]);
        assert!(running.is_empty());
        assert!(exits.is_empty());
    }
}
