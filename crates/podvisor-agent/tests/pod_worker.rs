//! The pod worker's wiring, on a fake runtime and tokio's paused clock: actions reach the
//! runtime, and what the runtime reports reaches the machine.

use crate::common;

use common::{
    ContainerScript, RuntimeCall, Seen, agent, container_status, phase, pod, pump, status_text,
};
use jiff::SignedDuration;
use podvisor_runtime::{ImageReport, StartError};
use std::time::Duration;

const SLEEPER: &str = "
apiVersion: v1
kind: Pod
metadata: {name: web}
spec:
  containers:
  - {name: app, image: busybox, command: [sleep, infinity]}
";

fn running_and_ready(seen: &Seen) -> bool {
    seen.statuses.last().is_some_and(|p| {
        phase(p) == "Running" && container_status(p).ready && status_text(p) == "Running"
    })
}

#[tokio::test(start_paused = true)]
async fn start_publishes_a_running_status() {
    let (rt, agent, _) = agent();
    let mut h = agent.spawn_pod(pod(SLEEPER));
    assert_eq!(h.name(), "web");
    assert_eq!(h.namespace(), "default");
    assert_eq!(h.uid().len(), 36);
    let mut seen = Seen::default();
    assert!(pump(&mut h, &mut seen, Duration::from_secs(5), running_and_ready).await);
    assert_eq!(
        rt.calls(),
        [
            RuntimeCall::CreateSandbox { pod: "web".into() },
            RuntimeCall::Start {
                instance: 1,
                container: "app".into(),
                restart_count: 0
            },
        ]
    );
    assert_eq!(seen.reasons(), ["Created", "Started"]);
    let p = seen.statuses.last().unwrap();
    assert!(p.metadata.creation_timestamp.is_some());
    let cs = container_status(p);
    assert_eq!(cs.container_id.as_deref(), Some("fake://00000001"));
    assert!(cs.state.unwrap().running.is_some());
}

#[tokio::test(start_paused = true)]
async fn crash_loop_restarts_with_back_off() {
    let (rt, agent, _) = agent();
    rt.script(
        "app",
        ContainerScript {
            exit_after: Some(Duration::from_millis(100)),
            exit_code: 1,
            ..ContainerScript::default()
        },
    );
    let mut h = agent.spawn_pod(pod(SLEEPER));
    let mut seen = Seen::default();
    pump(&mut h, &mut seen, Duration::from_secs(30), |_| false).await;

    let starts: Vec<(jiff::Timestamp, i32)> = rt
        .timed_calls()
        .into_iter()
        .filter_map(|(t, c)| match c {
            RuntimeCall::Start { restart_count, .. } => Some((t, restart_count)),
            _ => None,
        })
        .collect();
    assert!(starts.len() >= 4, "{starts:?}");
    for (i, (_, rc)) in starts.iter().enumerate() {
        assert_eq!(*rc, i32::try_from(i).unwrap());
    }
    // The waits between a death and the next start grow (1 s doubling, reduced curve).
    let gaps: Vec<SignedDuration> = starts
        .windows(2)
        .map(|w| w[1].0.duration_since(w[0].0))
        .collect();
    for w in gaps.windows(2) {
        assert!(w[1] >= w[0], "{gaps:?}");
    }
    assert!(
        *gaps.last().unwrap() >= SignedDuration::from_secs(4),
        "{gaps:?}"
    );
    assert!(seen.reasons().contains(&"BackOff"), "{:?}", seen.reasons());
    assert!(
        seen.statuses
            .iter()
            .any(|p| status_text(p) == "CrashLoopBackOff"),
        "never CrashLoopBackOff"
    );
    let last = seen.statuses.last().unwrap();
    assert_eq!(
        container_status(last).restart_count,
        i32::try_from(starts.len() - 1).unwrap()
    );
}

#[tokio::test(start_paused = true)]
async fn delete_sends_the_stop_signal_and_terminates() {
    let (rt, agent, _) = agent();
    let mut h = agent.spawn_pod(pod(SLEEPER));
    let mut seen = Seen::default();
    assert!(pump(&mut h, &mut seen, Duration::from_secs(5), running_and_ready).await);
    h.delete(None);
    assert!(
        pump(&mut h, &mut seen, Duration::from_secs(60), |s| s
            .terminated
            .is_some())
        .await
    );
    assert!(
        seen.statuses
            .iter()
            .any(|p| status_text(p) == "Terminating"),
        "kubectl shows Terminating after the delete"
    );
    let calls = rt.calls();
    assert_eq!(
        &calls[2..],
        [
            RuntimeCall::Signal {
                instance: 1,
                signal: 15
            },
            RuntimeCall::RemoveSandbox { pod: "web".into() },
        ]
    );
    assert!(seen.reasons().contains(&"Killing"));
    let last = seen.terminated.clone().unwrap();
    let term = container_status(&last).state.unwrap().terminated.unwrap();
    assert_eq!(term.exit_code, 143);
    assert!(
        h.next_update().await.is_none(),
        "Terminated is the last update"
    );
    let joined = h.join().await.unwrap();
    assert_eq!(joined.status, last.status);
}

#[tokio::test(start_paused = true)]
async fn sigterm_ignored_gets_sigkill_when_the_grace_period_ends() {
    let (rt, agent, clock) = agent();
    rt.script(
        "app",
        ContainerScript {
            ignore_sigterm: true,
            ..ContainerScript::default()
        },
    );
    let yaml = format!("{SLEEPER}  terminationGracePeriodSeconds: 5\n");
    let mut h = agent.spawn_pod(pod(&yaml));
    let mut seen = Seen::default();
    assert!(pump(&mut h, &mut seen, Duration::from_secs(5), running_and_ready).await);
    let deleted_at = podvisor_agent::Clock::now(&clock);
    h.delete(None);
    assert!(
        pump(&mut h, &mut seen, Duration::from_secs(60), |s| s
            .terminated
            .is_some())
        .await
    );
    let signals: Vec<(SignedDuration, i32)> = rt
        .timed_calls()
        .into_iter()
        .filter_map(|(t, c)| match c {
            RuntimeCall::Signal { signal, .. } => Some((t.duration_since(deleted_at), signal)),
            _ => None,
        })
        .collect();
    assert_eq!(signals.len(), 2, "{signals:?}");
    assert_eq!(signals[0].1, 15);
    assert!(
        signals[0].0 < SignedDuration::from_millis(10),
        "{signals:?}"
    );
    assert_eq!(signals[1].1, 9);
    let kill_after = signals[1].0;
    assert!(
        kill_after >= SignedDuration::from_secs(5) && kill_after < SignedDuration::from_secs(6),
        "SIGKILL {kill_after} after the delete"
    );
    let last = seen.terminated.unwrap();
    assert_eq!(
        container_status(&last)
            .state
            .unwrap()
            .terminated
            .unwrap()
            .exit_code,
        137
    );
}

#[tokio::test(start_paused = true)]
async fn a_completed_pod_terminates_by_itself() {
    let (rt, agent, _) = agent();
    rt.script(
        "app",
        ContainerScript {
            exit_after: Some(Duration::from_secs(2)),
            exit_code: 0,
            ..ContainerScript::default()
        },
    );
    let yaml = format!("{SLEEPER}  restartPolicy: Never\n");
    let mut h = agent.spawn_pod(pod(&yaml));
    let mut seen = Seen::default();
    assert!(
        pump(&mut h, &mut seen, Duration::from_secs(60), |s| s
            .terminated
            .is_some())
        .await
    );
    let last = seen.terminated.clone().unwrap();
    assert_eq!(phase(&last), "Succeeded");
    assert_eq!(status_text(&last), "Completed");
    assert!(
        !rt.calls()
            .iter()
            .any(|c| matches!(c, RuntimeCall::Signal { .. })),
        "nothing to kill"
    );
    assert_eq!(
        rt.calls().last(),
        Some(&RuntimeCall::RemoveSandbox { pod: "web".into() })
    );
    h.join().await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn an_exit_before_the_start_answer_is_reported_after_the_start() {
    let (rt, agent, _) = agent();
    rt.script(
        "app",
        ContainerScript {
            exit_before_start: true,
            exit_code: 3,
            ..ContainerScript::default()
        },
    );
    let yaml = format!("{SLEEPER}  restartPolicy: Never\n");
    let mut h = agent.spawn_pod(pod(&yaml));
    let mut seen = Seen::default();
    assert!(
        pump(&mut h, &mut seen, Duration::from_secs(60), |s| s
            .terminated
            .is_some())
        .await
    );
    assert_eq!(seen.reasons(), ["Created", "Started"]);
    let last = seen.terminated.unwrap();
    assert_eq!(phase(&last), "Failed");
    let cs = container_status(&last);
    assert_eq!(cs.container_id.as_deref(), Some("fake://00000001"));
    let term = cs.state.unwrap().terminated.unwrap();
    assert_eq!((term.exit_code, term.reason.as_deref()), (3, Some("Error")));
}

#[tokio::test(start_paused = true)]
async fn a_failed_start_shows_its_waiting_reason() {
    let (rt, agent, _) = agent();
    rt.script(
        "app",
        ContainerScript {
            start_error: Some(StartError {
                reason: "CreateContainerConfigError".into(),
                message: "no command".into(),
                created: false,
                pulling: false,
            }),
            ..ContainerScript::default()
        },
    );
    let mut h = agent.spawn_pod(pod(SLEEPER));
    let mut seen = Seen::default();
    let waiting = |s: &Seen| {
        s.statuses
            .last()
            .is_some_and(|p| status_text(p) == "CreateContainerConfigError")
    };
    assert!(pump(&mut h, &mut seen, Duration::from_secs(5), waiting).await);
    let failed = seen
        .events
        .iter()
        .find(|e| e.event.reason == "Failed")
        .unwrap();
    assert_eq!(failed.event.message, "Error: no command");
    // Retried at the next sync, 10 s later.
    pump(&mut h, &mut seen, Duration::from_secs(11), |_| false).await;
    let starts = rt
        .calls()
        .iter()
        .filter(|c| matches!(c, RuntimeCall::Start { .. }))
        .count();
    assert_eq!(starts, 2);
}

/// A19 through the pod worker: a start that pulled is `Pulling`, `Pulled`, then `Created` and
/// `Started`.
#[tokio::test(start_paused = true)]
async fn a_start_that_pulled_reports_pulling_and_pulled() {
    let (rt, agent, _) = agent();
    rt.script(
        "app",
        ContainerScript {
            image: Some(ImageReport::Pulled {
                pull: Duration::from_millis(1500),
                total: Duration::from_millis(1500),
                size: 1024,
            }),
            ..ContainerScript::default()
        },
    );
    let mut h = agent.spawn_pod(pod(SLEEPER));
    let mut seen = Seen::default();
    assert!(pump(&mut h, &mut seen, Duration::from_secs(5), running_and_ready).await);
    assert_eq!(seen.reasons(), ["Pulling", "Pulled", "Created", "Started"]);
    assert!(
        seen.events[1]
            .event
            .message
            .contains(" in 1.5s (1.5s including waiting)")
    );
}

/// B9 through the pod worker: a failed pull is `ErrImagePull` (with its `Pulling`), and the
/// retry inside the image back-off is `ImagePullBackOff`.
#[tokio::test(start_paused = true)]
async fn a_failed_pull_is_err_image_pull_then_image_pull_back_off() {
    let (rt, agent, _) = agent();
    rt.script(
        "app",
        ContainerScript {
            start_error: Some(StartError {
                reason: "ErrImagePull".into(),
                message: "not found".into(),
                created: false,
                pulling: true,
            }),
            ..ContainerScript::default()
        },
    );
    let mut h = agent.spawn_pod(pod(SLEEPER));
    let mut seen = Seen::default();
    let backing_off = |s: &Seen| {
        s.statuses
            .last()
            .is_some_and(|p| status_text(p) == "ImagePullBackOff")
    };
    assert!(pump(&mut h, &mut seen, Duration::from_secs(60), backing_off).await);
    assert_eq!(
        seen.reasons()[..3],
        ["Pulling", "Failed", "Failed"],
        "{:?}",
        seen.reasons()
    );
    assert!(seen.reasons().contains(&"BackOff"));
}

#[tokio::test(start_paused = true)]
async fn a_failed_sandbox_is_retried_after_ten_seconds() {
    let (rt, agent, clock) = agent();
    rt.fail_sandboxes(1);
    let mut h = agent.spawn_pod(pod(SLEEPER));
    let mut seen = Seen::default();
    assert!(
        pump(
            &mut h,
            &mut seen,
            Duration::from_secs(30),
            running_and_ready
        )
        .await
    );
    assert_eq!(seen.reasons()[0], "FailedCreatePodSandBox");
    let creates: Vec<SignedDuration> = rt
        .timed_calls()
        .into_iter()
        .filter(|(_, c)| matches!(c, RuntimeCall::CreateSandbox { .. }))
        .map(|(t, _)| t.duration_since(podvisor_agent::Clock::now(&clock)))
        .collect();
    assert_eq!(creates.len(), 2);
    let between = creates[1] - creates[0];
    assert!(
        between >= SignedDuration::from_secs(10) && between < SignedDuration::from_secs(11),
        "{between}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_delete_during_sandbox_creation_still_removes_the_sandbox() {
    let (rt, agent, _) = agent();
    rt.delay_sandboxes(Duration::from_secs(3));
    let mut h = agent.spawn_pod(pod(SLEEPER));
    h.delete(Some(0));
    let mut seen = Seen::default();
    assert!(
        pump(&mut h, &mut seen, Duration::from_secs(30), |s| s
            .terminated
            .is_some())
        .await
    );
    assert_eq!(
        rt.calls(),
        [
            RuntimeCall::CreateSandbox { pod: "web".into() },
            RuntimeCall::RemoveSandbox { pod: "web".into() },
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn a_second_delete_shortens_the_grace_period() {
    let (rt, agent, clock) = agent();
    rt.script(
        "app",
        ContainerScript {
            ignore_sigterm: true,
            ..ContainerScript::default()
        },
    );
    let mut h = agent.spawn_pod(pod(SLEEPER));
    let mut seen = Seen::default();
    assert!(pump(&mut h, &mut seen, Duration::from_secs(5), running_and_ready).await);
    let t0 = podvisor_agent::Clock::now(&clock);
    h.delete(None); // 30 s
    pump(&mut h, &mut seen, Duration::from_secs(1), |_| false).await;
    h.delete(Some(0));
    assert!(
        pump(&mut h, &mut seen, Duration::from_secs(60), |s| s
            .terminated
            .is_some())
        .await
    );
    let kill = rt
        .timed_calls()
        .into_iter()
        .find(|(_, c)| matches!(c, RuntimeCall::Signal { signal: 9, .. }))
        .map(|(t, _)| t.duration_since(t0))
        .expect("SIGKILL");
    // The forced delete leaves the container the 2 s minimum, not the 30 s.
    assert!(kill < SignedDuration::from_secs(5), "SIGKILL after {kill}");
}

/// The agent's shutdown stops a worker without touching its containers (the kubelet stopping):
/// the aborted worker's updates end, so its status writer can write the last of them and go,
/// also when the pod's volume re-sync (every pod with a downwardAPI, projected, configMap or
/// secret volume, i.e. every pod with a service account token) runs beside the worker.
#[tokio::test(start_paused = true)]
async fn an_aborted_worker_ends_its_updates_with_a_volume_resync_running() {
    let (_rt, agent, _) = agent();
    let mut h = agent.spawn_pod(pod("
apiVersion: v1
kind: Pod
metadata: {name: web, labels: {app: web}}
spec:
  containers:
  - name: app
    image: busybox
    command: [sleep, infinity]
    volumeMounts: [{name: info, mountPath: /etc/info}]
  volumes:
  - name: info
    downwardAPI:
      items: [{path: labels, fieldRef: {fieldPath: metadata.labels}}]
"));
    let mut seen = Seen::default();
    assert!(pump(&mut h, &mut seen, Duration::from_secs(5), running_and_ready).await);
    h.abort();
    // On the paused clock an update channel kept open by a re-sync still sleeping through its
    // periods would run into this (virtual) hour instead of ending.
    let ended = tokio::time::timeout(Duration::from_secs(3600), async {
        while h.next_update().await.is_some() {}
    })
    .await;
    assert!(ended.is_ok(), "the aborted worker's updates never ended");
}
