//! Hook rules: a preStop that outlasts the grace period (T3).

use std::time::Duration;

use k8s_openapi::api::core::v1::LifecycleHandler;

use super::hint::Simulation;
use super::{Draft, Level, PodView, Rule, secs};

/// `PL005`: a preStop hook (sleep, or an exec of a known sleep) as long as the grace period or
/// longer.
pub const PRESTOP_LONGER_THAN_GRACE: Rule = Rule {
    id: "PL005",
    name: "prestop-longer-than-grace",
    level: Level::Error,
};

/// How long a `sleep` argument is (`30`, `30s`, `1.5m`, `1h`; GNU sleep's suffixes). The
/// simulator's inference (`podvisor_lifecycle::sim::infer`) reads sleeps with it too.
pub fn sleep_arg(arg: &str) -> Option<Duration> {
    let (number, factor) = match arg.chars().last()? {
        's' => (&arg[..arg.len() - 1], 1.0),
        'm' => (&arg[..arg.len() - 1], 60.0),
        'h' => (&arg[..arg.len() - 1], 3600.0),
        'd' => (&arg[..arg.len() - 1], 86400.0),
        _ => (arg, 1.0),
    };
    let n: f64 = number.parse().ok()?;
    Duration::try_from_secs_f64(n * factor).ok()
}

/// The time a command of words spends sleeping, if it is `sleep N…` (GNU sleep adds its
/// arguments up).
fn sleep_words(words: &[&str]) -> Option<Duration> {
    let (program, args) = words.split_first()?;
    if program.rsplit('/').next() != Some("sleep") || args.is_empty() {
        return None;
    }
    args.iter().map(|a| sleep_arg(a)).sum()
}

/// How long a known exec preStop takes: `sleep N`, or a shell (`sh`/`bash`/`ash`/`dash -c`)
/// script whose `;`/`&&`-separated commands include sleeps (their sum; other commands count as
/// instantaneous).
pub(crate) fn exec_sleep(command: &[String]) -> Option<Duration> {
    let words: Vec<&str> = command.iter().map(String::as_str).collect();
    if let Some(d) = sleep_words(&words) {
        return Some(d);
    }
    let (program, rest) = words.split_first()?;
    let shell = program.rsplit('/').next()?;
    if !matches!(shell, "sh" | "bash" | "ash" | "dash") || rest.first() != Some(&"-c") {
        return None;
    }
    let script = rest.get(1)?;
    let total: Duration = script
        .split(['\n', ';'])
        .flat_map(|s| s.split("&&"))
        .filter_map(|cmd| {
            let words: Vec<&str> = cmd.split_whitespace().collect();
            sleep_words(&words)
        })
        .sum();
    (!total.is_zero()).then_some(total)
}

/// How long a preStop hook takes, when it is known: a `sleep` action, or a known exec.
fn hook_duration(h: &LifecycleHandler) -> Option<(Duration, bool)> {
    if let Some(s) = &h.sleep {
        return Some((Duration::from_secs(u64::try_from(s.seconds).ok()?), true));
    }
    let exec = h.exec.as_ref()?;
    exec_sleep(exec.command.as_deref()?).map(|d| (d, false))
}

/// PL005 (T3): the grace period covers the preStop hook *and* the container's own stop; a hook
/// that uses all of it leaves the container the 2 s minimum before SIGKILL.
pub(crate) fn prestop_longer_than_grace(v: &PodView<'_>) -> Vec<Draft> {
    let grace = v.spec.termination_grace_period_seconds.unwrap_or(30);
    let grace_d = Duration::from_secs(u64::try_from(grace).unwrap_or(0));
    let mut out = Vec::new();
    for c in v.probed_containers() {
        let Some(hook) = c
            .container
            .lifecycle
            .as_ref()
            .and_then(|l| l.pre_stop.as_ref())
        else {
            continue;
        };
        let Some((took, sleep_action)) = hook_duration(hook) else {
            continue;
        };
        if took < grace_d {
            continue;
        }
        let name = &c.container.name;
        let what = if sleep_action {
            "sleep action"
        } else {
            "exec hook"
        };
        out.push(Draft {
            rule: PRESTOP_LONGER_THAN_GRACE,
            path: format!(
                "{}.lifecycle.preStop.{}",
                c.path,
                if sleep_action { "sleep" } else { "exec" }
            ),
            message: format!(
                "container {name:?}: the preStop {what} takes {} but \
                 terminationGracePeriodSeconds is {grace}",
                secs(took)
            ),
            why: format!(
                "the grace period counts from the delete and covers the preStop hook and the \
                 container's own shutdown: the kubelet stops waiting for the hook after {grace}s, \
                 sends the stop signal with the 2s minimum left, then SIGKILL — the container \
                 never gets to shut down gracefully"
            ),
            fix: format!(
                "raise terminationGracePeriodSeconds to the hook's {} plus the time the \
                 container needs to stop (e.g. {}), or shorten the hook",
                secs(took),
                took.as_secs() + 15
            ),
            simulation: Some(Simulation {
                // An exec hook's time is scripted; the simulator takes a sleep action's own.
                // The container stops 5 s after its signal, which it does not get in time.
                script: Some(if sleep_action {
                    format!(
                        "{{delete: {{at: 10s}}, containers: {{{name}: {{stopAfterSignal: 5s}}}}}}"
                    )
                } else {
                    format!(
                        "{{delete: {{at: 10s}}, containers: {{{name}: {{stopAfterSignal: 5s, \
                         hooks: {{preStop: {{duration: {}}}}}}}}}}}",
                        secs(took)
                    )
                }),
                duration: Duration::from_secs(u64::try_from(grace).unwrap_or(0) + 60),
                shows: format!(
                    "the delete at 10s and the hook started; SIGTERM only at {}s, with 2s left \
                     (SIGKILL in 2s), then SIGKILL: the container, which needs 5s, never stops \
                     by itself",
                    10 + grace
                ),
            }),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lint::Options;
    use crate::lint::test_support::run;

    fn pod(grace: &str, pre_stop: &str) -> String {
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: web}}\nspec:\n{grace}  containers:\n  - name: app\n    image: nginx\n    command: [nginx]\n    lifecycle:\n      preStop: {pre_stop}\n"
        )
    }

    #[test]
    fn exec_sleeps_are_read_from_sleep_and_shell_scripts() {
        let cmd = |v: &[&str]| v.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        assert_eq!(
            exec_sleep(&cmd(&["sleep", "40"])),
            Some(Duration::from_secs(40))
        );
        assert_eq!(
            exec_sleep(&cmd(&["/bin/sleep", "1m"])),
            Some(Duration::from_secs(60))
        );
        assert_eq!(
            exec_sleep(&cmd(&["sh", "-c", "sleep 20; nginx -s quit && sleep 15"])),
            Some(Duration::from_secs(35))
        );
        assert_eq!(exec_sleep(&cmd(&["nginx", "-s", "quit"])), None);
        assert_eq!(exec_sleep(&cmd(&["sh", "-c", "nginx -s quit"])), None);
    }

    #[test]
    fn pl005_fires_on_an_exec_sleep_beyond_the_grace_period() {
        let d = run(
            prestop_longer_than_grace,
            &pod("", "{exec: {command: [sh, -c, 'sleep 45; nginx -s quit']}}"),
            &Options::default(),
        );
        assert_eq!(d.len(), 1, "{d:?}");
        assert_eq!(d[0].path, "spec.containers[0].lifecycle.preStop.exec");
        assert!(d[0].message.contains("45s") && d[0].message.contains("is 30"));
        assert!(
            d[0].simulation
                .as_ref()
                .unwrap()
                .script
                .as_ref()
                .unwrap()
                .contains("duration: 45s")
        );
    }

    #[test]
    fn pl005_fires_on_a_sleep_action_equal_to_the_grace_period() {
        // The API server accepts `seconds` up to the grace period itself.
        let d = run(
            prestop_longer_than_grace,
            &pod(
                "  terminationGracePeriodSeconds: 20\n",
                "{sleep: {seconds: 20}}",
            ),
            &Options::default(),
        );
        assert_eq!(d.len(), 1, "{d:?}");
        assert_eq!(d[0].path, "spec.containers[0].lifecycle.preStop.sleep");
    }

    #[test]
    fn pl005_is_quiet_when_the_grace_period_has_room() {
        for (grace, hook) in [
            ("", "{exec: {command: [sleep, '10']}}"),
            (
                "  terminationGracePeriodSeconds: 60\n",
                "{sleep: {seconds: 45}}",
            ),
            ("", "{exec: {command: [nginx, -s, quit]}}"),
        ] {
            assert!(
                run(
                    prestop_longer_than_grace,
                    &pod(grace, hook),
                    &Options::default()
                )
                .is_empty(),
                "{hook}"
            );
        }
    }
}
