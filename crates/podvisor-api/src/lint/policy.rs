//! Restart-policy and ordering rules: liveness under `Never` (R9), sidecars without a startup
//! probe (A8), Job-like pods under `Always` (A16).

use std::time::Duration;

use k8s_openapi::api::core::v1::Container;

use super::hint::{Simulation, probe_script};
use super::{Draft, Level, PodView, Rule};
use crate::pod::container_should_restart;

/// `PL006`: a liveness probe on a container that is not restarted.
pub const LIVENESS_ON_NEVER_POD: Rule = Rule {
    id: "PL006",
    name: "liveness-on-never-pod",
    level: Level::Warning,
};

/// `PL010`: a sidecar that serves something, without a startup probe.
pub const SIDECAR_WITHOUT_STARTUP_PROBE: Rule = Rule {
    id: "PL010",
    name: "sidecar-without-startup-probe",
    level: Level::Warning,
};

/// `PL011`: a bare Pod that looks like a Job's, under `restartPolicy: Always`.
pub const JOB_POD_RESTART_ALWAYS: Rule = Rule {
    id: "PL011",
    name: "job-pod-restart-always",
    level: Level::Warning,
};

/// The exit code of a container killed by its liveness probe (SIGKILL after the grace period,
/// or the signal's own code: either way not 0).
const KILLED: i32 = 137;

/// PL006 (R9, A16): a liveness failure kills the container; when it is not restarted
/// (`restartPolicy: Never`, and no container-level policy says otherwise), the pod fails.
pub(crate) fn liveness_on_never_pod(v: &PodView<'_>) -> Vec<Draft> {
    v.probed_containers()
        .into_iter()
        .filter(|c| !c.sidecar)
        .filter(|c| c.container.liveness_probe.is_some())
        .filter(|c| !container_should_restart(c.container, v.spec, KILLED))
        .map(|c| {
            let name = &c.container.name;
            let from = Duration::from_secs(30);
            Draft {
                rule: LIVENESS_ON_NEVER_POD,
                path: format!("{}.livenessProbe", c.path),
                message: format!(
                    "container {name:?} has a liveness probe, but restartPolicy is {} and the \
                     container is never restarted",
                    v.spec.restart_policy.as_deref().unwrap_or("Always")
                ),
                why: "a liveness probe's only action is to kill the container so that it is \
                      restarted; here the kill is final: one slow moment fails the whole pod \
                      (phase Failed, its work lost)"
                    .to_owned(),
                fix: "remove the liveness probe (use activeDeadlineSeconds to bound a run that \
                      may hang), or use restartPolicy: OnFailure if a restart is what you want"
                    .to_owned(),
                simulation: Some(Simulation {
                    script: Some(probe_script(&[(
                        name,
                        "liveness",
                        &[(Duration::ZERO, true), (from, false)],
                    )])),
                    duration: Duration::from_secs(180),
                    shows: "`Unhealthy` liveness events from 30s, then `Killing` and the pod \
                            Failed, with no restart"
                        .to_owned(),
                }),
            }
        })
        .collect()
}

/// PL010 (A8): a sidecar without a startup probe lets the next container start as soon as its
/// process runs. Heuristic for "the app needs it": the sidecar declares `ports` or has a
/// readiness probe — it serves something.
pub(crate) fn sidecar_without_startup_probe(v: &PodView<'_>) -> Vec<Draft> {
    v.probed_containers()
        .into_iter()
        .filter(|c| c.sidecar && c.container.startup_probe.is_none())
        .filter(|c| {
            c.container.ports.as_ref().is_some_and(|p| !p.is_empty())
                || c.container.readiness_probe.is_some()
        })
        .map(|c| {
            let name = &c.container.name;
            let serves = match (&c.container.ports, &c.container.readiness_probe) {
                (Some(p), _) if !p.is_empty() => "declares ports",
                _ => "has a readiness probe",
            };
            Draft {
                rule: SIDECAR_WITHOUT_STARTUP_PROBE,
                path: c.path.clone(),
                message: format!(
                    "sidecar {name:?} {serves} but has no startupProbe: the containers after it \
                     start as soon as its process runs"
                ),
                why: "the kubelet starts the next init container (and then the app) once a \
                      sidecar is running and, only if it has one, its startup probe has passed; \
                      its readiness probe does not hold anything back. An app that talks to the \
                      sidecar at start can find it not listening yet, fail, and restart"
                    .to_owned(),
                fix: format!(
                    "give {name:?} a startupProbe that passes once it serves (e.g. its readiness \
                     check, or tcpSocket on its port, with periodSeconds: 1)"
                ),
                simulation: None,
            }
        })
        .collect()
}

/// Commands that end by themselves (and `sleep` for less than a minute).
const ONE_SHOT: [&str; 31] = [
    "echo",
    "true",
    "false",
    "exit",
    "date",
    "printf",
    "env",
    "hostname",
    "uname",
    "whoami",
    "id",
    "pwd",
    "ls",
    "cp",
    "mv",
    "rm",
    "mkdir",
    "touch",
    "chmod",
    "chown",
    "ln",
    "tar",
    "gzip",
    "gunzip",
    "wget",
    "curl",
    "sha256sum",
    "md5sum",
    "pg_dump",
    "mysqldump",
    "rsync",
];

fn one_shot(words: &[&str]) -> bool {
    let Some((program, args)) = words.split_first() else {
        return true; // an empty command between separators
    };
    let program = program.rsplit('/').next().unwrap_or(program);
    if program == "sleep" {
        return args.len() == 1 && args[0].parse::<f64>().is_ok_and(|n| n < 60.0);
    }
    ONE_SHOT.contains(&program)
}

/// Whether `c`'s command (with its args) visibly ends by itself: a one-shot command, or a
/// shell `-c` script made only of them, without loops. An empty command (the image's) is not
/// known to end.
pub(crate) fn runs_to_completion(c: &Container) -> bool {
    let words: Vec<&str> = c
        .command
        .iter()
        .flatten()
        .chain(c.args.iter().flatten())
        .map(String::as_str)
        .collect();
    let Some((program, rest)) = words.split_first() else {
        return false;
    };
    let shell = program.rsplit('/').next().unwrap_or(program);
    if matches!(shell, "sh" | "bash" | "ash" | "dash") && rest.first() == Some(&"-c") {
        let Some(script) = rest.get(1) else {
            return false;
        };
        let has_loop = script
            .split_whitespace()
            .any(|w| matches!(w, "while" | "until" | "for" | "exec" | "wait") || w == "infinity")
            || script.contains("tail -f");
        return !has_loop
            && script
                .split(['\n', ';', '|', '&'])
                .all(|cmd| one_shot(&cmd.split_whitespace().collect::<Vec<_>>()));
    }
    one_shot(&words)
}

/// Why a bare Pod looks like a Job's, if it does: its owner, its labels, or commands that end.
fn job_evidence(v: &PodView<'_>) -> Option<String> {
    let meta = &v.pod.metadata;
    if let Some(owner) = meta.owner_references.iter().flatten().find(|o| {
        o.api_version.starts_with("batch/") && matches!(o.kind.as_str(), "Job" | "CronJob")
    }) {
        return Some(format!("it is owned by {} {:?}", owner.kind, owner.name));
    }
    for label in [
        "batch.kubernetes.io/job-name",
        "job-name",
        "batch.kubernetes.io/controller-uid",
        "controller-uid",
    ] {
        if meta.labels.as_ref().is_some_and(|l| l.contains_key(label)) {
            return Some(format!("it has the Job controller's label {label:?}"));
        }
    }
    let containers = &v.spec.containers;
    (!containers.is_empty() && containers.iter().all(runs_to_completion)).then(|| {
        if containers.len() == 1 {
            "its container's command ends by itself".to_owned()
        } else {
            "every container's command ends by itself".to_owned()
        }
    })
}

/// PL011 (A16): a bare Pod that looks like a Job's (see [`job_evidence`]) but whose containers
/// are restarted after they succeed. Job and CronJob templates with `Always` are the API
/// server's error (`PL000`), not this rule's.
pub(crate) fn job_pod_restart_always(v: &PodView<'_>) -> Vec<Draft> {
    if v.kind != "Pod"
        || !v
            .spec
            .containers
            .iter()
            .all(|c| container_should_restart(c, v.spec, 0))
    {
        return Vec::new();
    }
    let Some(evidence) = job_evidence(v) else {
        return Vec::new();
    };
    let runs: Vec<String> = v
        .spec
        .containers
        .iter()
        .map(|c| format!("{}: {{runs: [{{exitAfter: 5s, exitCode: 0}}]}}", c.name))
        .collect();
    vec![Draft {
        rule: JOB_POD_RESTART_ALWAYS,
        path: "spec.restartPolicy".to_owned(),
        message: format!(
            "the pod looks like a run-to-completion job ({evidence}), but restartPolicy is {}",
            v.spec.restart_policy.as_deref().unwrap_or("Always")
        ),
        why: "under Always the kubelet restarts a container that exited 0 as it restarts a \
              crashed one: the job runs again and again, with CrashLoopBackOff between runs, and \
              the pod never Succeeds"
            .to_owned(),
        fix: "set restartPolicy: OnFailure (retry failures) or Never, or run it as a Job"
            .to_owned(),
        simulation: Some(Simulation {
            script: Some(format!("{{containers: {{{}}}}}", runs.join(", "))),
            duration: Duration::from_secs(180),
            shows: "each successful exit (Completed) followed by a restart, then \
                    CrashLoopBackOff; the pod never reaches Succeeded"
                .to_owned(),
        }),
    }]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lint::Options;
    use crate::lint::test_support::run;

    const NEVER: &str = "apiVersion: v1\nkind: Pod\nmetadata: {name: batch}\nspec:\n  restartPolicy: Never\n  containers:\n  - name: work\n    image: busybox\n    command: [sh, -c, 'sleep 600']\n    livenessProbe:\n      exec: {command: [cat, /tmp/alive]}\n";

    #[test]
    fn pl006_fires_on_liveness_under_never() {
        let d = run(liveness_on_never_pod, NEVER, &Options::default());
        assert_eq!(d.len(), 1, "{d:?}");
        assert_eq!(d[0].path, "spec.containers[0].livenessProbe");
    }

    #[test]
    fn pl006_is_quiet_under_on_failure_and_for_container_policies() {
        let on_failure = NEVER.replace("Never", "OnFailure");
        assert!(run(liveness_on_never_pod, &on_failure, &Options::default()).is_empty());
        // A16: the container's own policy wins over the pod's.
        let own = NEVER.replace(
            "    image: busybox\n",
            "    image: busybox\n    restartPolicy: Always\n",
        );
        assert!(run(liveness_on_never_pod, &own, &Options::default()).is_empty());
    }

    const SIDECAR: &str = "apiVersion: v1\nkind: Pod\nmetadata: {name: mesh}\nspec:\n  initContainers:\n  - name: proxy\n    image: envoy\n    command: [envoy]\n    restartPolicy: Always\n    ports: [{containerPort: 15001}]\n  containers:\n  - {name: app, image: app, command: [app]}\n";

    #[test]
    fn pl010_fires_on_a_serving_sidecar_without_startup_probe() {
        let d = run(sidecar_without_startup_probe, SIDECAR, &Options::default());
        assert_eq!(d.len(), 1, "{d:?}");
        assert_eq!(d[0].path, "spec.initContainers[0]");
    }

    #[test]
    fn pl010_is_quiet_with_a_startup_probe_or_a_sidecar_serving_nothing() {
        let probed = SIDECAR.replace(
            "    ports: [{containerPort: 15001}]\n",
            "    ports: [{containerPort: 15001}]\n    startupProbe: {tcpSocket: {port: 15001}}\n",
        );
        assert!(run(sidecar_without_startup_probe, &probed, &Options::default()).is_empty());
        let logger = SIDECAR.replace("    ports: [{containerPort: 15001}]\n", "");
        assert!(run(sidecar_without_startup_probe, &logger, &Options::default()).is_empty());
    }

    const JOB_LIKE: &str = "apiVersion: v1\nkind: Pod\nmetadata: {name: migrate}\nspec:\n  containers:\n  - name: migrate\n    image: busybox\n    command: [sh, -c, 'echo migrating; sleep 5; echo done']\n";

    #[test]
    fn pl011_fires_on_a_pod_whose_command_ends_under_always() {
        let d = run(job_pod_restart_always, JOB_LIKE, &Options::default());
        assert_eq!(d.len(), 1, "{d:?}");
        assert_eq!(d[0].path, "spec.restartPolicy");
        assert!(d[0].message.contains("ends by itself"), "{}", d[0].message);
        let labelled = "apiVersion: v1\nkind: Pod\nmetadata: {name: p, labels: {job-name: nightly}}\nspec:\n  containers:\n  - {name: c, image: app, command: [app]}\n";
        let d = run(job_pod_restart_always, labelled, &Options::default());
        assert!(d[0].message.contains("\"job-name\""), "{d:?}");
    }

    #[test]
    fn pl011_is_quiet_for_servers_and_for_never() {
        let server = JOB_LIKE.replace(
            "'echo migrating; sleep 5; echo done'",
            "'while true; do sleep 1; done'",
        );
        assert!(run(job_pod_restart_always, &server, &Options::default()).is_empty());
        let never = JOB_LIKE.replace("spec:\n", "spec:\n  restartPolicy: Never\n");
        assert!(run(job_pod_restart_always, &never, &Options::default()).is_empty());
        let image_default = "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n  - {name: c, image: nginx}\n";
        assert!(run(job_pod_restart_always, image_default, &Options::default()).is_empty());
    }
}
