//! The probe and hook executors of `podvisor-runtime`, as the pod worker's tasks call them:
//! their results translated into the core's terms.

use k8s_openapi::api::core::v1::{Container, LifecycleHandler, Probe};
use podvisor_lifecycle::ProbeOutcome;
use podvisor_runtime::hooks::{self, HookOutcome};
use podvisor_runtime::probe::{self, MAX_PROBE_RETRIES, ProbeResult, probe_timeout};
use podvisor_runtime::{InstanceId, Runtime};
use std::time::Duration;

/// Extra time a probe run gets beyond its own timeouts before the worker gives up on it (the
/// executor enforces `timeoutSeconds` itself; this only guards against a hung executor, whose
/// attempt is then discarded like an errored probe).
const PROBE_SLACK: Duration = Duration::from_secs(10);

/// Runs one probe against `instance` (with the executor's retries on errors).
pub(crate) async fn run_probe<R: Runtime>(
    rt: &R,
    sandbox: &R::Sandbox,
    instance: InstanceId,
    container: &Container,
    probe: &Probe,
) -> ProbeOutcome {
    let limit = probe_limit(probe);
    let run = probe::run_probe(rt, sandbox, instance, container, probe);
    match tokio::time::timeout(limit, run).await {
        Ok(result) => outcome(result),
        Err(_) => ProbeOutcome::Error(format!(
            "probe executor gave no answer within {}s",
            limit.as_secs()
        )),
    }
}

/// The longest a probe run may take: every retry timing out, plus [`PROBE_SLACK`].
fn probe_limit(probe: &Probe) -> Duration {
    let retries = u32::try_from(MAX_PROBE_RETRIES).unwrap_or(u32::MAX);
    probe_timeout(probe).saturating_mul(retries) + PROBE_SLACK
}

/// The executor's result in the core's terms (the same four cases).
pub(crate) fn outcome(result: ProbeResult) -> ProbeOutcome {
    match result {
        ProbeResult::Success => ProbeOutcome::Success,
        ProbeResult::Warning(w) => ProbeOutcome::Warning(w),
        ProbeResult::Failure(f) => ProbeOutcome::Failure(f),
        ProbeResult::Error(e) => ProbeOutcome::Error(e),
    }
}

/// Runs one hook handler against `instance`. A `sleep` handler ends early when `terminated`
/// completes (the instance exited).
pub(crate) async fn run_hook<R: Runtime>(
    rt: &R,
    sandbox: &R::Sandbox,
    instance: InstanceId,
    container: &Container,
    handler: &LifecycleHandler,
    pod_full_name: &str,
    terminated: impl Future<Output = ()>,
) -> HookOutcome {
    hooks::run_hook_detailed(
        rt,
        sandbox,
        instance,
        container,
        handler,
        pod_full_name,
        terminated,
    )
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probe_results_map_one_to_one() {
        assert_eq!(outcome(ProbeResult::Success), ProbeOutcome::Success);
        assert_eq!(
            outcome(ProbeResult::Warning("w".into())),
            ProbeOutcome::Warning("w".into())
        );
        assert_eq!(
            outcome(ProbeResult::Failure("f".into())),
            ProbeOutcome::Failure("f".into())
        );
        assert_eq!(
            outcome(ProbeResult::Error("e".into())),
            ProbeOutcome::Error("e".into())
        );
    }

    #[test]
    fn a_probe_may_use_all_its_retries() {
        let probe = Probe {
            timeout_seconds: Some(5),
            ..Probe::default()
        };
        assert_eq!(probe_limit(&probe), Duration::from_secs(25));
        assert_eq!(probe_limit(&Probe::default()), Duration::from_secs(13));
    }
}
