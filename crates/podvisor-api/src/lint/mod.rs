//! `podvisor lint`'s rules: lifecycle mistakes in pod manifests that the API server accepts.
//!
//! What it does: [`decode_targets`] turns a manifest's text into the pods to check — bare Pods
//! and the pod templates of Deployments, ReplicaSets, StatefulSets, DaemonSets,
//! ReplicationControllers, Jobs and CronJobs — each decoded strictly, defaulted with
//! [`crate::apply_defaults`] (so the rules see `periodSeconds` 10, `failureThreshold` 3, a grace
//! period of 30 s … as the kubelet would) and validated with [`crate::validate_pod`] (plus the
//! workload's own `restartPolicy` check). [`lint`] runs every rule over them and returns
//! [`Finding`]s with a stable rule id, a level, the field path, why it hurts, a fix and, where
//! `podvisor simulate` can show the failure, the exact command that shows it.
//!
//! A manifest that does not validate is reported with its validation errors (rule `PL000`)
//! and is not linted blind; only the rules that explain a validation error more precisely
//! (`PL008`) also run on it, and replace the bare error at the same path.
//!
//! What it does not do: any IO (the binary reads the files), or guess at objects that hold no
//! pod template (they come back as [`Skipped`]).

mod fleet;
mod hint;
mod hooks;
mod policy;
mod probes;
mod targets;

use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, Pod, PodSpec, Probe};
use serde::Serialize;

pub use hint::{SimulateHint, Simulation, shell_quote};
pub use hooks::sleep_arg;
pub(crate) use targets::workload_pods;
pub use targets::{
    Entry, Problem, Skipped, Target, decode_targets, decode_targets_with_gates, pods_and_templates,
};

/// How bad a finding is. Only `error` makes `podvisor lint` exit 1.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    /// The pod will not work as written (or the API server refuses it).
    Error,
    /// The pod works until something ordinary happens (a slow start, an overload, a delete).
    Warning,
    /// Worth knowing; nothing breaks.
    Info,
}

impl Level {
    /// `error`, `warning` or `info`.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Level::Error => "error",
            Level::Warning => "warning",
            Level::Info => "info",
        }
    }
}

/// A rule: its stable id, its name and its level.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rule {
    /// Stable id, e.g. `PL001`.
    pub id: &'static str,
    /// Stable name, e.g. `liveness-shorter-than-start`.
    pub name: &'static str,
    /// The level of every finding of this rule.
    pub level: Level,
}

/// `PL000`: the manifest does not decode or validate (what the API server would refuse).
pub const INVALID: Rule = Rule {
    id: "PL000",
    name: "invalid",
    level: Level::Error,
};

/// Every rule, in id order.
pub const RULES: [Rule; 13] = [
    INVALID,
    probes::LIVENESS_SHORTER_THAN_START,
    probes::LIVENESS_SHORTER_THAN_READINESS,
    probes::LIVENESS_SAME_AS_READINESS,
    probes::TIMEOUT_NOT_BELOW_PERIOD,
    hooks::PRESTOP_LONGER_THAN_GRACE,
    policy::LIVENESS_ON_NEVER_POD,
    probes::PROBE_PORT_NAME_UNDECLARED,
    probes::SUCCESS_THRESHOLD_NOT_ONE,
    fleet::EXEC_PROBE_RATE,
    policy::SIDECAR_WITHOUT_STARTUP_PROBE,
    policy::JOB_POD_RESTART_ALWAYS,
    probes::INITIAL_DELAY_WITH_STARTUP_PROBE,
];

/// What the user tells `lint` about the pods.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Options {
    /// How long the containers take to start (`--start-time`): a liveness probe without a
    /// startup probe must give them at least this long.
    pub start_time: Option<Duration>,
    /// Count every pod and every workload template as this many pods on the node
    /// (`--pods`), for the exec-probe rate; default: 1 per Pod, `replicas` (or a Job's
    /// `parallelism`) per workload.
    pub pods: Option<u32>,
}

/// One finding, located and explained.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Finding {
    /// The input's name (file name, `-` for stdin).
    pub file: String,
    /// 1-based document number among the non-empty documents.
    pub document: usize,
    /// 0-based item index inside a `List` document.
    pub item: Option<usize>,
    /// The object's kind, e.g. `Deployment`.
    pub kind: String,
    /// The object's name (`generateName` when it has no name).
    pub name: String,
    /// Field path in the object, e.g. `spec.template.spec.containers[0].livenessProbe`.
    pub path: String,
    /// The rule's level.
    pub level: Level,
    /// The rule's id, e.g. `PL001`.
    pub id: &'static str,
    /// The rule's name, e.g. `liveness-shorter-than-start`.
    pub rule: &'static str,
    /// What was found, with the numbers.
    pub message: String,
    /// Why it hurts.
    pub why: String,
    /// How to fix it.
    pub fix: String,
    /// The `podvisor simulate` command that shows the failure, when it can.
    pub simulate: Option<SimulateHint>,
}

/// What a rule reports before the driver adds where it is.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Draft {
    pub(crate) rule: Rule,
    /// Path below the pod (`spec.containers[0]…`); the driver puts the template's prefix first.
    pub(crate) path: String,
    pub(crate) message: String,
    pub(crate) why: String,
    pub(crate) fix: String,
    pub(crate) simulation: Option<Simulation>,
}

/// One pod as the rules see it: defaulted and valid.
pub(crate) struct PodView<'a> {
    pub(crate) pod: &'a Pod,
    pub(crate) spec: &'a PodSpec,
    /// `Pod`, `Deployment`, …
    pub(crate) kind: &'a str,
    pub(crate) options: &'a Options,
}

/// A container with the rules' path to it (`spec.containers[0]`, `spec.initContainers[1]`).
pub(crate) struct ContainerAt<'a> {
    pub(crate) container: &'a Container,
    pub(crate) path: String,
    /// A restartable init container (sidecar).
    pub(crate) sidecar: bool,
}

impl<'a> PodView<'a> {
    /// The containers that may have probes: sidecars (in order) then regular containers.
    pub(crate) fn probed_containers(&self) -> Vec<ContainerAt<'a>> {
        let mut out: Vec<ContainerAt<'a>> = self
            .spec
            .init_containers
            .iter()
            .flatten()
            .enumerate()
            .filter(|(_, c)| crate::pod::is_sidecar(c))
            .map(|(i, c)| ContainerAt {
                container: c,
                path: format!("spec.initContainers[{i}]"),
                sidecar: true,
            })
            .collect();
        out.extend(
            self.spec
                .containers
                .iter()
                .enumerate()
                .map(|(i, c)| ContainerAt {
                    container: c,
                    path: format!("spec.containers[{i}]"),
                    sidecar: false,
                }),
        );
        out
    }
}

/// The probes of a container with their field names.
pub(crate) fn probes_of(c: &Container) -> Vec<(&'static str, &Probe)> {
    [
        ("livenessProbe", c.liveness_probe.as_ref()),
        ("readinessProbe", c.readiness_probe.as_ref()),
        ("startupProbe", c.startup_probe.as_ref()),
    ]
    .into_iter()
    .filter_map(|(n, p)| p.map(|p| (n, p)))
    .collect()
}

/// The per-pod rules, one function each.
const POD_RULES: [fn(&PodView<'_>) -> Vec<Draft>; 11] = [
    probes::liveness_shorter_than_start,
    probes::liveness_shorter_than_readiness,
    probes::liveness_same_as_readiness,
    probes::timeout_not_below_period,
    hooks::prestop_longer_than_grace,
    policy::liveness_on_never_pod,
    probes::probe_port_name_undeclared,
    probes::success_threshold_not_one,
    policy::sidecar_without_startup_probe,
    policy::job_pod_restart_always,
    probes::initial_delay_with_startup_probe,
];

/// Rules that also run on pods that fail validation, because they explain a validation
/// error: their findings replace the `PL000` finding at the same path.
const EXPLAINING_RULES: [fn(&PodView<'_>) -> Vec<Draft>; 1] = [probes::success_threshold_not_one];

/// Runs every rule over `targets` (from [`decode_targets`] of one or more files) and returns the
/// findings, in input order (per target: `PL000` first, then by path and rule id).
#[must_use]
pub fn lint(targets: &[Target], options: &Options) -> Vec<Finding> {
    let mut findings = Vec::new();
    let fleet = fleet::exec_probe_rate(targets, options);
    for (index, target) in targets.iter().enumerate() {
        let spec = target.pod.spec.clone().unwrap_or_default();
        let view = PodView {
            pod: &target.pod,
            spec: &spec,
            kind: &target.kind,
            options,
        };
        let mut drafts = Vec::new();
        if target.problems.is_empty() {
            for rule in POD_RULES {
                drafts.extend(rule(&view));
            }
            drafts.extend(
                fleet
                    .iter()
                    .filter(|(i, _)| *i == index)
                    .map(|(_, d)| d.clone()),
            );
        } else {
            let mut explained = Vec::new();
            for rule in EXPLAINING_RULES {
                explained.extend(rule(&view));
            }
            for problem in &target.problems {
                let replaced = explained
                    .iter()
                    .any(|d| target.full_path(&d.path) == problem.path);
                if !replaced {
                    findings.push(target.finding_for_problem(problem));
                }
            }
            drafts.extend(explained);
        }
        drafts.sort_by(|a, b| a.path.cmp(&b.path).then(a.rule.id.cmp(b.rule.id)));
        // `simulate` runs every pod of a file: name this one when there are others.
        let shared = targets.iter().filter(|t| t.source == target.source).count() > 1;
        findings.extend(drafts.into_iter().map(|d| target.finding(d, shared)));
    }
    findings
}

impl Target {
    /// The path in the object of a path below the pod (`spec.containers[0]` →
    /// `spec.template.spec.containers[0]` in a Deployment).
    #[must_use]
    pub fn full_path(&self, pod_path: &str) -> String {
        format!("{}{pod_path}", self.prefix)
    }

    fn finding(&self, d: Draft, shared_file: bool) -> Finding {
        Finding {
            file: self.source.clone(),
            document: self.at.document,
            item: self.at.item,
            kind: self.kind.clone(),
            name: self.name.clone(),
            path: self.full_path(&d.path),
            level: d.rule.level,
            id: d.rule.id,
            rule: d.rule.name,
            message: d.message,
            why: d.why,
            fix: d.fix,
            simulate: d
                .simulation
                .and_then(|s| s.command(&self.source, shared_file.then_some(self.name.as_str()))),
        }
    }

    fn finding_for_problem(&self, p: &Problem) -> Finding {
        Finding {
            file: self.source.clone(),
            document: self.at.document,
            item: self.at.item,
            kind: self.kind.clone(),
            name: self.name.clone(),
            path: p.path.clone(),
            level: INVALID.level,
            id: INVALID.id,
            rule: INVALID.name,
            message: p.message.clone(),
            why: "the API server refuses the object as written: nothing of it runs".to_owned(),
            fix: "correct the field as the message says (`podvisor validate` lists every error)"
                .to_owned(),
            simulate: None,
        }
    }
}

/// Seconds as the rules print them: `45s`, `1.5s`.
pub(crate) fn secs(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s.fract() == 0.0 {
        format!("{}s", d.as_secs())
    } else {
        format!("{s}s")
    }
}

#[cfg(test)]
pub(crate) mod test_support {
    //! Pods for the rules' unit tests: written as YAML, decoded, defaulted and validated as
    //! `podvisor lint` does.

    use super::{Draft, Options, PodView, Target, decode_targets};

    /// The single target of `yaml` (which must be valid).
    pub(crate) fn target(yaml: &str) -> Target {
        let mut entries = decode_targets(yaml, "test.yaml").expect("decodes");
        assert_eq!(entries.len(), 1, "one object");
        match entries.remove(0) {
            super::Entry::Target(t) => {
                assert!(t.problems.is_empty(), "valid: {:?}", t.problems);
                *t
            }
            super::Entry::Skipped(s) => panic!("skipped: {s:?}"),
        }
    }

    /// Runs one rule on the single pod of `yaml`.
    pub(crate) fn run(
        rule: fn(&PodView<'_>) -> Vec<Draft>,
        yaml: &str,
        options: &Options,
    ) -> Vec<Draft> {
        let t = target(yaml);
        let spec = t.pod.spec.clone().unwrap_or_default();
        rule(&PodView {
            pod: &t.pod,
            spec: &spec,
            kind: &t.kind,
            options,
        })
    }
}
