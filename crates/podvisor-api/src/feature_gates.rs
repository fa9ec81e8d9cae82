//! Feature gates a user may turn on (`--feature-gates`), parsed from Kubernetes' own syntax
//! (`A=true,B=false`, `component-base/featuregate`'s `Set`), and the one place that says which
//! gates podvisor knows.
//!
//! Every gate is off unless set, as it is in Kubernetes 1.35 (the gates of alpha features are
//! off by default). Gates whose fields are merely dropped when off live in [`crate::gates`]; the
//! ones here change validation and the kubelet's behaviour when on:
//!
//! - `RestartAllContainersOnContainerExits` (KEP-5532, alpha in 1.35): a
//!   `restartPolicyRules` rule may have the action `RestartAllContainers`, sidecars may carry
//!   rules, and a matching exit restarts the whole pod in place.

use k8s_openapi::api::core::v1::{Container, PodSpec};

/// One known gate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Feature {
    /// KEP-5532: the `RestartAllContainers` action of container restart rules.
    RestartAllContainersOnContainerExits,
}

impl Feature {
    /// Every gate podvisor knows, in the order `--help` and errors list them.
    pub const ALL: [Feature; 1] = [Feature::RestartAllContainersOnContainerExits];

    /// The gate's name, as Kubernetes spells it.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Feature::RestartAllContainersOnContainerExits => "RestartAllContainersOnContainerExits",
        }
    }

    /// Its maturity in Kubernetes 1.35 (`ALPHA`, `BETA`), as kube's `--help` shows it.
    #[must_use]
    pub fn stage(self) -> &'static str {
        match self {
            Feature::RestartAllContainersOnContainerExits => "ALPHA",
        }
    }
}

/// Which gates are on. `Default` is Kubernetes 1.35's defaults: all of these off.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FeatureGates {
    restart_all_containers: bool,
}

/// A `--feature-gates` value that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FeatureGateError {
    /// A name podvisor does not know.
    #[error("unrecognized feature gate: {name} (known gates: {known})")]
    Unknown {
        /// The name given.
        name: String,
        /// The known gates, comma-separated.
        known: String,
    },
    /// `name` without `=value`, or an empty name.
    #[error("missing bool value for {0} (write {0}=true or {0}=false)")]
    MissingValue(String),
    /// A value Go's `strconv.ParseBool` refuses.
    #[error(
        "invalid value of {name}={value}, err: strconv.ParseBool: parsing {value:?}: invalid syntax (use true or false)"
    )]
    BadValue {
        /// The gate.
        name: String,
        /// What was given.
        value: String,
    },
}

impl FeatureGates {
    /// Parses kube's `--feature-gates` text: comma-separated `Name=bool` pairs, spaces around
    /// either ignored, empty pairs skipped; a later pair overrides an earlier one; booleans as
    /// Go's `strconv.ParseBool` reads them (`1`, `t`, `T`, `TRUE`, `true`, `True`, and the
    /// `false` spellings).
    ///
    /// # Errors
    ///
    /// The first pair that names an unknown gate or carries no or a bad value.
    pub fn parse(text: &str) -> Result<FeatureGates, FeatureGateError> {
        let mut gates = FeatureGates::default();
        for pair in text.split(',') {
            let pair = pair.trim();
            if pair.is_empty() {
                continue;
            }
            let Some((name, value)) = pair.split_once('=') else {
                return Err(FeatureGateError::MissingValue(pair.to_string()));
            };
            let (name, value) = (name.trim(), value.trim());
            let feature = Feature::ALL
                .into_iter()
                .find(|f| f.name() == name)
                .ok_or_else(|| FeatureGateError::Unknown {
                    name: name.to_string(),
                    known: Feature::ALL.map(Feature::name).join(", "),
                })?;
            let on = parse_go_bool(value).ok_or_else(|| FeatureGateError::BadValue {
                name: name.to_string(),
                value: value.to_string(),
            })?;
            gates.set(feature, on);
        }
        Ok(gates)
    }

    /// Turns `feature` on or off.
    pub fn set(&mut self, feature: Feature, on: bool) {
        match feature {
            Feature::RestartAllContainersOnContainerExits => self.restart_all_containers = on,
        }
    }

    /// `feature` on or off in `self`, the rest unchanged.
    #[must_use]
    pub fn with(mut self, feature: Feature, on: bool) -> FeatureGates {
        self.set(feature, on);
        self
    }

    /// Whether `feature` is on.
    #[must_use]
    pub fn enabled(self, feature: Feature) -> bool {
        match feature {
            Feature::RestartAllContainersOnContainerExits => self.restart_all_containers,
        }
    }

    /// Shorthand for `RestartAllContainersOnContainerExits`.
    #[must_use]
    pub fn restart_all_containers(self) -> bool {
        self.enabled(Feature::RestartAllContainersOnContainerExits)
    }

    /// The gates an update is validated with (`GetValidationOptionsFromPodSpecAndMeta`): a
    /// field the stored pod already uses stays allowed with its gate off
    /// (`restartAllContainersActionInUse`), so an update never fails on what a create let
    /// through.
    #[must_use]
    pub fn for_update(self, old: Option<&PodSpec>) -> FeatureGates {
        let in_use = old.is_some_and(restart_all_containers_in_use);
        self.with(
            Feature::RestartAllContainersOnContainerExits,
            self.restart_all_containers() || in_use,
        )
    }

    /// The gates that are on, as `Name=true` pairs joined by commas (empty when none).
    #[must_use]
    pub fn to_flag(self) -> String {
        Feature::ALL
            .into_iter()
            .filter(|f| self.enabled(*f))
            .map(|f| format!("{}=true", f.name()))
            .collect::<Vec<_>>()
            .join(",")
    }
}

/// The help text of a `--feature-gates` flag: the syntax and every known gate.
#[must_use]
pub fn flag_help() -> String {
    let known: Vec<String> = Feature::ALL
        .into_iter()
        .map(|f| format!("{}=true|false ({} - default=false)", f.name(), f.stage()))
        .collect();
    format!(
        "A set of key=value pairs that describe feature gates for alpha/experimental features. Options are: {}",
        known.join(", ")
    )
}

/// What to pass when `spec` needs a gate that is off: the exact flag and the commands that
/// take it (`None` when every gate it needs is on). Printed under a validation error.
#[must_use]
pub fn missing_gate_hint(spec: &PodSpec, gates: FeatureGates) -> Option<String> {
    (restart_all_containers_in_use(spec) && !gates.restart_all_containers()).then(|| {
        let gate = Feature::RestartAllContainersOnContainerExits.name();
        format!(
            "hint: the restart rule action {RESTART_ALL_CONTAINERS} needs the alpha feature gate \
             {gate}: pass --feature-gates={gate}=true to podvisor run, serve, simulate, validate, \
             lint or apply (as the same flag of kube-apiserver and the kubelet)"
        )
    })
}

/// Go's `strconv.ParseBool`.
fn parse_go_bool(s: &str) -> Option<bool> {
    match s {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}

/// The rules of `c` whose action is `RestartAllContainers`.
fn has_restart_all_rule(c: &Container) -> bool {
    c.restart_policy_rules
        .iter()
        .flatten()
        .any(|r| r.action == RESTART_ALL_CONTAINERS)
}

/// The action of KEP-5532.
pub const RESTART_ALL_CONTAINERS: &str = "RestartAllContainers";

/// `restartAllContainersActionInUse`: a container or init container has a
/// `RestartAllContainers` rule, or a sidecar carries any rule (which only this gate allows).
#[must_use]
pub fn restart_all_containers_in_use(spec: &PodSpec) -> bool {
    spec.containers.iter().any(has_restart_all_rule)
        || spec.init_containers.iter().flatten().any(|c| {
            has_restart_all_rule(c)
                || (crate::pod::is_sidecar(c)
                    && c.restart_policy_rules
                        .as_ref()
                        .is_some_and(|r| !r.is_empty()))
        })
}
