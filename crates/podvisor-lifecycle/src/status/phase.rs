//! Pod phase computation: the kubelet's `getPhase` (spec section 1.1-1.2, P1-P10, P15).
//!
//! This is the pure "count, then decide" step. Merging with a previous phase (P11-P13) and the
//! terminal transition of `TerminatePod` (P14) belong to the caller, which owns the previous
//! status.
//!
//! Version notes: this follows the 1.32+ split of pending init containers (P5) and the 1.35
//! default `ContainerRestartRules` gate (A16). For pods without container-level `restartPolicy`
//! the gate changes nothing: "not restartable" then means exactly "pod policy `Never`" for failed
//! init containers (P4) and the P8b-P8e ladder for stopped regular containers.

use k8s_openapi::api::core::v1::{ContainerStatus, PodSpec};
use podvisor_api::pod::container_should_restart;
pub use podvisor_api::pod::is_sidecar;

use crate::Phase;

/// Everything [`get_phase`] looks at.
#[derive(Debug, Clone, Copy)]
pub struct PhaseInput<'a> {
    /// The pod spec: init containers (regular and sidecars), containers, `restartPolicy`.
    pub spec: &'a PodSpec,
    /// Freshly converted `status.initContainerStatuses` (section 2); matched to the spec by name.
    pub init_statuses: &'a [ContainerStatus],
    /// Freshly converted `status.containerStatuses` (section 2); matched to the spec by name.
    pub statuses: &'a [ContainerStatus],
    /// The kubelet is writing the final status of a finished pod (deletion completed, eviction,
    /// deadline): containers will not be restarted whatever the policy (P8a).
    pub pod_is_terminal: bool,
    /// At least one regular container has a record in the current sandbox
    /// (`HasAnyActiveRegularContainerStarted`, 1.32+); keeps a restarting sidecar from putting
    /// an initialized pod back to Pending (P5).
    pub pod_has_initialized: bool,
    /// The pod came from a static manifest: P8a's terminal path is not applied (P15).
    pub is_static: bool,
}

/// Computes the pod phase from the spec and the container statuses, exactly as the kubelet's
/// `getPhase` (P1-P10, P15). Never returns `Unknown` (P10).
///
/// - P1/P2/P3 count regular init containers, sidecars and regular containers;
/// - P4: a failed regular init container that will not be restarted fails the pod;
/// - P5/P6: pending init work or a never-started container keeps the pod Pending;
/// - P7: something runs and nothing is unknown: Running;
/// - P8: everything stopped: terminal path (P8a, not for static pods P15), else by restart policy;
/// - P9: anything else is Pending.
pub fn get_phase(input: &PhaseInput) -> Phase {
    let spec = input.spec;
    let init_containers = spec.init_containers.as_deref().unwrap_or_default();

    // P1: regular init containers.
    let mut pending_regular_init = 0u32;
    let mut failed_init_not_restartable = 0u32;
    for container in init_containers.iter().filter(|c| !is_sidecar(c)) {
        let Some(status) = find_status(input.init_statuses, &container.name) else {
            pending_regular_init += 1;
            continue;
        };
        let state = status.state.as_ref();
        if state.and_then(|s| s.running.as_ref()).is_some() {
            pending_regular_init += 1;
        } else if let Some(terminated) = state.and_then(|s| s.terminated.as_ref()) {
            if terminated.exit_code != 0
                && !container_should_restart(container, spec, terminated.exit_code)
            {
                failed_init_not_restartable += 1;
            }
        } else if state.and_then(|s| s.waiting.as_ref()).is_some() {
            match last_terminated_exit_code(status) {
                Some(code) if code != 0 => {
                    if !container_should_restart(container, spec, code) {
                        failed_init_not_restartable += 1;
                    }
                }
                Some(_) => {}
                None => pending_regular_init += 1,
            }
        } else {
            pending_regular_init += 1;
        }
    }

    let mut unknown = 0u32;
    let mut running = 0u32;
    let mut waiting = 0u32;
    let mut stopped = 0u32;
    let mut stopped_not_restartable = 0u32;
    let mut succeeded = 0u32;

    // P2: sidecars. A terminated sidecar never affects the phase.
    let mut pending_sidecars = 0u32;
    for container in init_containers.iter().filter(|c| is_sidecar(c)) {
        let Some(status) = find_status(input.init_statuses, &container.name) else {
            unknown += 1;
            continue;
        };
        let state = status.state.as_ref();
        if state.and_then(|s| s.running.as_ref()).is_some() {
            if status.started != Some(true) {
                pending_sidecars += 1;
            }
            running += 1;
        } else if state.and_then(|s| s.terminated.as_ref()).is_some() {
            // ignored
        } else if state.and_then(|s| s.waiting.as_ref()).is_some() {
            if last_terminated_exit_code(status).is_none() {
                pending_sidecars += 1;
                waiting += 1;
            }
        } else {
            pending_sidecars += 1;
            unknown += 1;
        }
    }

    // P3: regular containers.
    for container in &spec.containers {
        let Some(status) = find_status(input.statuses, &container.name) else {
            unknown += 1;
            continue;
        };
        let state = status.state.as_ref();
        if state.and_then(|s| s.running.as_ref()).is_some() {
            running += 1;
        } else if let Some(terminated) = state.and_then(|s| s.terminated.as_ref()) {
            stopped += 1;
            if !container_should_restart(container, spec, terminated.exit_code) {
                stopped_not_restartable += 1;
            }
            if terminated.exit_code == 0 {
                succeeded += 1;
            }
        } else if state.and_then(|s| s.waiting.as_ref()).is_some() {
            match last_terminated_exit_code(status) {
                // Between restarts: stopped, but never counted as succeeded (even on exit 0).
                Some(code) => {
                    stopped += 1;
                    if !container_should_restart(container, spec, code) {
                        stopped_not_restartable += 1;
                    }
                }
                None => waiting += 1,
            }
        } else {
            unknown += 1;
        }
    }

    // P4
    if failed_init_not_restartable > 0 {
        return Phase::Failed;
    }
    // P5 (1.32+) and P6
    if pending_regular_init > 0 || (pending_sidecars > 0 && !input.pod_has_initialized) {
        return Phase::Pending;
    }
    if waiting > 0 {
        return Phase::Pending;
    }
    // P7
    if running > 0 && unknown == 0 {
        return Phase::Running;
    }
    // P8
    if running == 0 && stopped > 0 && unknown == 0 {
        // P8a, not for static pods (P15, upstream TODO #116484).
        if input.pod_is_terminal && !input.is_static {
            return if stopped == succeeded {
                Phase::Succeeded
            } else {
                Phase::Failed
            };
        }
        // P8b/P8e: at least one container is going to be restarted.
        if stopped != stopped_not_restartable {
            return Phase::Running;
        }
        // P8c/P8d
        return if stopped == succeeded {
            Phase::Succeeded
        } else {
            Phase::Failed
        };
    }
    // P9 (and P10: never Unknown)
    Phase::Pending
}

/// `HasAnyRegularContainerStarted`: some status that belongs to a regular container of `spec`
/// is `running` or `terminated`. Statuses of other containers (e.g. init containers) are
/// ignored, so passing init and regular statuses together is fine.
///
/// Used for the `Initialized` condition (D3). Unlike P5's `pod_has_initialized` it looks at API
/// statuses, which survive a sandbox change.
pub fn has_any_regular_container_started(spec: &PodSpec, statuses: &[ContainerStatus]) -> bool {
    statuses.iter().any(|status| {
        spec.containers.iter().any(|c| c.name == status.name)
            && status
                .state
                .as_ref()
                .is_some_and(|s| s.running.is_some() || s.terminated.is_some())
    })
}

fn find_status<'a>(statuses: &'a [ContainerStatus], name: &str) -> Option<&'a ContainerStatus> {
    statuses.iter().find(|s| s.name == name)
}

fn last_terminated_exit_code(status: &ContainerStatus) -> Option<i32> {
    status
        .last_state
        .as_ref()
        .and_then(|s| s.terminated.as_ref())
        .map(|t| t.exit_code)
}
