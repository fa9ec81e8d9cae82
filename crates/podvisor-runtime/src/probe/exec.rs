//! Exec probes (R18): the command runs in the container through [`Runtime::exec`] with the
//! probe's timeout; only `$(VAR)` references to the container's static `env` are expanded.

use super::{ProbeResult, gofmt};
use crate::{InstanceId, Runtime};
use k8s_openapi::api::core::v1::{Container, EnvVar};
use std::collections::HashMap;
use std::time::Duration;

/// Expands `$(VAR)` in each element of `command` against the container's `env` list the way
/// the kubelet does for exec probes (`ExpandContainerCommandOnlyStatic`): every entry counts,
/// and one with `valueFrom` expands to the empty string; unknown references stay as written;
/// `$$` is an escaped `$`.
pub fn expand_command(command: &[String], env: &[EnvVar]) -> Vec<String> {
    let values: HashMap<&str, &str> = env
        .iter()
        .map(|e| (e.name.as_str(), e.value.as_deref().unwrap_or("")))
        .collect();
    command
        .iter()
        .map(|arg| crate::config::expand(arg, |name| values.get(name).map(|v| (*v).to_string())))
        .collect()
}

/// Runs one exec probe attempt.
pub(super) async fn probe<R: Runtime>(
    rt: &R,
    sandbox: &R::Sandbox,
    instance: InstanceId,
    container: &Container,
    command: &[String],
    timeout: Duration,
) -> ProbeResult {
    let argv = expand_command(command, container.env.as_deref().unwrap_or_default());
    let joined = argv.join(" ");
    match rt.exec(sandbox, instance, argv, Some(timeout)).await {
        Err(e) => ProbeResult::Error(e.to_string()),
        // CRI ExecSync reports DeadlineExceeded; the kubelet turns it into this text.
        Ok(r) if r.timed_out => {
            ProbeResult::Failure(format!("command {} timed out", gofmt::quote(&joined)))
        }
        Ok(r) if r.exit_code == 0 => ProbeResult::Success,
        Ok(r) => ProbeResult::Failure(String::from_utf8_lossy(&r.output).into_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(name: &str, value: Option<&str>) -> EnvVar {
        EnvVar {
            name: name.into(),
            value: value.map(Into::into),
            ..Default::default()
        }
    }

    #[test]
    fn expands_like_kubernetes() {
        let env = [env("A", Some("1")), env("B", None), env("A", Some("2"))];
        let got = expand_command(
            &[
                "$(A)-$(B)-$(C)".into(),
                "$$(A)".into(),
                "$(A".into(),
                "x$y$".into(),
                "é$(A)é".into(),
            ],
            &env,
        );
        assert_eq!(got, ["2--$(C)", "$(A)", "$(A", "x$y$", "é2é"]);
    }
}
