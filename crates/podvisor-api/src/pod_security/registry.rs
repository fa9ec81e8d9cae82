//! The checks of each level and version, and their results (`policy/checks.go`,
//! `policy/registry.go`): a level's checks at a version run in the order of their IDs,
//! baseline's first, then restricted's; a restricted check may override baseline checks
//! (`restrictedVolumes` replaces `hostPathVolumes`, and so on).

use k8s_openapi::api::core::v1::PodSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::api::{Level, LevelVersion, Version};
use super::{baseline, restricted};

/// One check's verdict on a pod.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct CheckResult {
    /// Whether the check allowed the pod.
    pub allowed: bool,
    /// Set when refused: a short reason, e.g. `host namespaces`.
    pub forbidden_reason: String,
    /// Optional when refused: what was refused, e.g. `hostNetwork=true`.
    pub forbidden_detail: String,
}

impl CheckResult {
    /// An allowing result.
    #[must_use]
    pub fn allowed() -> Self {
        CheckResult {
            allowed: true,
            ..CheckResult::default()
        }
    }

    /// A refusal with its reason and detail.
    #[must_use]
    pub fn forbidden(reason: impl Into<String>, detail: impl Into<String>) -> Self {
        CheckResult {
            allowed: false,
            forbidden_reason: reason.into(),
            forbidden_detail: detail.into(),
        }
    }
}

/// The refusals of several checks (`AggregateCheckResult`).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct AggregateCheckResult {
    /// No check refused.
    pub allowed: bool,
    /// Each refusal's reason.
    pub forbidden_reasons: Vec<String>,
    /// Each refusal's detail (may be empty), index for index with the reasons.
    pub forbidden_details: Vec<String>,
}

/// The reason of a check that refused without one.
const UNKNOWN_FORBIDDEN_REASON: &str = "unknown forbidden reason";

impl AggregateCheckResult {
    /// `AggregateCheckResults`.
    #[must_use]
    pub fn of(results: &[CheckResult]) -> Self {
        let mut agg = AggregateCheckResult::default();
        for r in results.iter().filter(|r| !r.allowed) {
            agg.forbidden_reasons
                .push(if r.forbidden_reason.is_empty() {
                    UNKNOWN_FORBIDDEN_REASON.to_owned()
                } else {
                    r.forbidden_reason.clone()
                });
            agg.forbidden_details.push(r.forbidden_detail.clone());
        }
        agg.allowed = agg.forbidden_reasons.is_empty();
        agg
    }

    /// The reasons, comma-separated: `host ports, privileged`.
    #[must_use]
    pub fn forbidden_reason(&self) -> String {
        self.forbidden_reasons.join(", ")
    }

    /// Each reason with its detail in parentheses, comma-separated:
    /// `hostPort (container "c" uses hostPort 80), privileged (...)`.
    #[must_use]
    pub fn forbidden_detail(&self) -> String {
        self.forbidden_reasons
            .iter()
            .zip(&self.forbidden_details)
            .map(|(r, d)| {
                if d.is_empty() {
                    r.clone()
                } else {
                    format!("{r} ({d})")
                }
            })
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// A check function over the pod's metadata and spec.
pub(crate) type CheckFn = fn(&ObjectMeta, &PodSpec) -> CheckResult;

/// One revision of a check, applying from `minimum` (a `v1.x` minor) until the next.
pub(crate) struct VersionedCheck {
    pub(crate) minimum: u32,
    pub(crate) check: CheckFn,
    /// The baseline checks this restricted revision replaces.
    pub(crate) overrides: &'static [&'static str],
}

/// A check with its revisions, strictly increasing; its level is its table's
/// (`baseline::CHECKS` or `restricted::CHECKS`).
pub(crate) struct Check {
    pub(crate) id: &'static str,
    pub(crate) versions: &'static [VersionedCheck],
}

impl Check {
    /// The revision that applies at `minor`, if the check exists there.
    fn at(&self, minor: u32) -> Option<&VersionedCheck> {
        self.versions.iter().rev().find(|v| v.minimum <= minor)
    }
}

/// Every check, baseline's then restricted's, each group sorted by ID (Go's byte order,
/// which is Rust's `str` order; pinned by a test).
fn all_checks() -> impl Iterator<Item = &'static Check> {
    baseline::CHECKS.iter().chain(restricted::CHECKS.iter())
}

/// The newest revision of any check: `latest` and newer versions evaluate as this one.
#[must_use]
pub fn max_version() -> u32 {
    all_checks()
        .filter_map(|c| c.versions.last().map(|v| v.minimum))
        .max()
        .unwrap_or(0)
}

/// `EvaluatePod`: every check of `lv`'s level at its version, in order, with its result.
/// `privileged` has none.
#[must_use]
pub fn evaluate_pod(lv: LevelVersion, meta: &ObjectMeta, spec: &PodSpec) -> Vec<CheckResult> {
    checks_for(lv)
        .into_iter()
        .map(|(_, f)| f(meta, spec))
        .collect()
}

/// One check by its upstream ID (`privileged`, `runAsNonRoot`, ...) at `version`, as the
/// level that has it runs it; `None` when the check does not exist at that version.
#[must_use]
pub fn run_check(
    id: &str,
    version: Version,
    meta: &ObjectMeta,
    spec: &PodSpec,
) -> Option<CheckResult> {
    let minor = minor_of(version);
    all_checks()
        .find(|c| c.id == id)
        .and_then(|c| c.at(minor))
        .map(|v| (v.check)(meta, spec))
}

/// The revision minor a version evaluates at: `latest` and versions past the newest
/// revision are the newest.
fn minor_of(version: Version) -> u32 {
    let max = max_version();
    match version {
        Version::V1(m) => u32::try_from(m).map_or(max, |m| m.min(max)),
        Version::Latest => max,
    }
}

/// The IDs and functions `lv` runs, in order.
pub(crate) fn checks_for(lv: LevelVersion) -> Vec<(&'static str, CheckFn)> {
    let minor = minor_of(lv.version);
    match lv.level {
        Level::Privileged => Vec::new(),
        Level::Baseline => baseline::CHECKS
            .iter()
            .filter_map(|c| c.at(minor).map(|v| (c.id, v.check)))
            .collect(),
        Level::Restricted => {
            let restricted_now: Vec<(&Check, &VersionedCheck)> = restricted::CHECKS
                .iter()
                .filter_map(|c| c.at(minor).map(|v| (c, v)))
                .collect();
            let overridden = |id: &str| {
                restricted_now
                    .iter()
                    .any(|(_, v)| v.overrides.contains(&id))
            };
            baseline::CHECKS
                .iter()
                .filter(|c| !overridden(c.id))
                .filter_map(|c| c.at(minor).map(|v| (c.id, v.check)))
                .chain(restricted_now.iter().map(|(c, v)| (c.id, v.check)))
                .collect()
        }
    }
}

/// Whether the tables are well formed: unique IDs sorted within each level, revisions
/// strictly increasing, overrides only in restricted checks and naming baseline checks
/// (`validateChecks`).
#[cfg(test)]
fn tables_valid() -> bool {
    let sorted = |checks: &[Check]| checks.windows(2).all(|w| w[0].id < w[1].id);
    let increasing = all_checks().all(|c| {
        !c.versions.is_empty() && c.versions.windows(2).all(|w| w[0].minimum < w[1].minimum)
    });
    let baseline_plain = baseline::CHECKS
        .iter()
        .all(|c| c.versions.iter().all(|v| v.overrides.is_empty()));
    let overrides_ok = restricted::CHECKS.iter().all(|c| {
        c.versions.iter().all(|v| {
            v.overrides
                .iter()
                .all(|o| baseline::CHECKS.iter().any(|b| b.id == *o))
        })
    });
    sorted(baseline::CHECKS)
        && sorted(restricted::CHECKS)
        && increasing
        && baseline_plain
        && overrides_ok
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_are_well_formed() {
        assert!(tables_valid());
        assert_eq!(max_version(), 35);
    }

    #[test]
    fn aggregate_joins_reasons_and_parenthesised_details() {
        let agg = AggregateCheckResult::of(&[
            CheckResult::forbidden("host ports", "8080, 9090"),
            CheckResult::allowed(),
            CheckResult::forbidden("privileged containers", ""),
            CheckResult::forbidden("", "x"),
        ]);
        assert!(!agg.allowed);
        assert_eq!(
            agg.forbidden_reason(),
            "host ports, privileged containers, unknown forbidden reason"
        );
        assert_eq!(
            agg.forbidden_detail(),
            "host ports (8080, 9090), privileged containers, unknown forbidden reason (x)"
        );
        assert!(AggregateCheckResult::of(&[CheckResult::allowed()]).allowed);
    }

    fn ids(level: Level, version: Version) -> Vec<&'static str> {
        checks_for(LevelVersion { level, version })
            .into_iter()
            .map(|(id, _)| id)
            .collect()
    }

    #[test]
    fn restricted_latest_replaces_the_overridden_baseline_checks() {
        assert_eq!(
            ids(Level::Restricted, Version::Latest),
            [
                "appArmorProfile",
                "hostNamespaces",
                "hostPorts",
                "hostProbesAndHostLifecycle",
                "privileged",
                "seLinuxOptions",
                "sysctls",
                "windowsHostProcess",
                "allowPrivilegeEscalation",
                "capabilities_restricted",
                "procMount_restricted",
                "restrictedVolumes",
                "runAsNonRoot",
                "runAsUser",
                "seccompProfile_restricted",
            ]
        );
    }

    #[test]
    fn older_versions_run_the_checks_they_had() {
        // v1.0: no runAsUser (1.23), capabilities_restricted (1.22), seccompProfile_restricted
        // (1.19), procMount_restricted (1.35) or hostProbesAndHostLifecycle (1.34).
        assert_eq!(
            ids(Level::Restricted, Version::V1(0)),
            [
                "appArmorProfile",
                "capabilities_baseline",
                "hostNamespaces",
                "hostPorts",
                "privileged",
                "procMount",
                "seLinuxOptions",
                "seccompProfile_baseline",
                "sysctls",
                "windowsHostProcess",
                "restrictedVolumes",
                "runAsNonRoot",
            ]
        );
        assert!(!ids(Level::Baseline, Version::V1(33)).contains(&"hostProbesAndHostLifecycle"));
        assert!(ids(Level::Baseline, Version::V1(34)).contains(&"hostProbesAndHostLifecycle"));
        // A version newer than the newest revision evaluates as latest.
        assert_eq!(
            ids(Level::Restricted, Version::V1(99)),
            ids(Level::Restricted, Version::Latest)
        );
        assert!(ids(Level::Privileged, Version::Latest).is_empty());
    }
}
