//! Levels, versions and the namespace policy read from its labels, as
//! `k8s.io/pod-security-admission/api` (`helpers.go`, `constants.go`) has them.

use std::collections::BTreeMap;
use std::fmt;

use crate::validation::{FieldError, Path};

/// The prefix of the namespace labels and of the audit annotations.
pub const LABEL_PREFIX: &str = "pod-security.kubernetes.io/";
/// `pod-security.kubernetes.io/enforce`: violations are refused.
pub const ENFORCE_LEVEL_LABEL: &str = "pod-security.kubernetes.io/enforce";
/// `pod-security.kubernetes.io/enforce-version`.
pub const ENFORCE_VERSION_LABEL: &str = "pod-security.kubernetes.io/enforce-version";
/// `pod-security.kubernetes.io/audit`: violations are annotated on the audit event.
pub const AUDIT_LEVEL_LABEL: &str = "pod-security.kubernetes.io/audit";
/// `pod-security.kubernetes.io/audit-version`.
pub const AUDIT_VERSION_LABEL: &str = "pod-security.kubernetes.io/audit-version";
/// `pod-security.kubernetes.io/warn`: violations are returned as warnings.
pub const WARN_LEVEL_LABEL: &str = "pod-security.kubernetes.io/warn";
/// `pod-security.kubernetes.io/warn-version`.
pub const WARN_VERSION_LABEL: &str = "pod-security.kubernetes.io/warn-version";

/// A Pod Security Standards level. Ordered from least to most restrictive
/// (`CompareLevels`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Level {
    /// No restriction.
    Privileged,
    /// Known privilege escalations prevented.
    Baseline,
    /// Hardening best practices.
    Restricted,
}

impl Level {
    /// The label value.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Level::Privileged => "privileged",
            Level::Baseline => "baseline",
            Level::Restricted => "restricted",
        }
    }

    /// `ParseLevel`: the error text is upstream's.
    ///
    /// # Errors
    /// A value other than `privileged`, `baseline` or `restricted`.
    pub fn parse(s: &str) -> Result<Level, &'static str> {
        match s {
            "privileged" => Ok(Level::Privileged),
            "baseline" => Ok(Level::Baseline),
            "restricted" => Ok(Level::Restricted),
            _ => Err("must be one of privileged, baseline, restricted"),
        }
    }
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A policy version: `v1.<minor>` or `latest`, which is newer than every `v1.x`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Version {
    /// `v1.<minor>` (Go's `int`: any minor up to 2^63-1 parses).
    V1(u64),
    /// `latest`.
    Latest,
}

impl Version {
    /// `ParseVersion`: `latest` or `v1.x` (no leading zero); the error text is upstream's.
    ///
    /// # Errors
    /// Anything else.
    pub fn parse(s: &str) -> Result<Version, &'static str> {
        const ERR: &str = r#"must be "latest" or "v1.x""#;
        if s == "latest" {
            return Ok(Version::Latest);
        }
        let minor = s.strip_prefix("v1.").ok_or(ERR)?;
        let well_formed = !minor.is_empty()
            && minor.bytes().all(|b| b.is_ascii_digit())
            && (minor == "0" || !minor.starts_with('0'));
        if !well_formed {
            return Err(ERR);
        }
        minor
            .parse::<i64>()
            .map(|m| Version::V1(m.unsigned_abs()))
            .map_err(|_| ERR)
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Version::V1(minor) => write!(f, "v1.{minor}"),
            Version::Latest => f.write_str("latest"),
        }
    }
}

/// A level at a version, written `restricted:latest`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LevelVersion {
    /// The level.
    pub level: Level,
    /// The version of the level's checks.
    pub version: Version,
}

impl LevelVersion {
    /// `privileged:latest`, every mode's default when the namespace has no label.
    pub const PRIVILEGED_LATEST: LevelVersion = LevelVersion {
        level: Level::Privileged,
        version: Version::Latest,
    };
}

impl fmt::Display for LevelVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.level, self.version)
    }
}

/// A namespace's policy: one level and version per mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Policy {
    /// Refuse violating pods.
    pub enforce: LevelVersion,
    /// Annotate the audit event of violating pods.
    pub audit: LevelVersion,
    /// Warn the client about violating pods.
    pub warn: LevelVersion,
}

impl Default for Policy {
    /// The API server's default configuration: every mode `privileged:latest`.
    fn default() -> Self {
        Policy {
            enforce: LevelVersion::PRIVILEGED_LATEST,
            audit: LevelVersion::PRIVILEGED_LATEST,
            warn: LevelVersion::PRIVILEGED_LATEST,
        }
    }
}

impl Policy {
    /// Every mode is privileged: nothing to evaluate.
    #[must_use]
    pub fn fully_privileged(&self) -> bool {
        [self.enforce, self.audit, self.warn]
            .iter()
            .all(|lv| lv.level == Level::Privileged)
    }
}

/// `PolicyToEvaluate` over the default policy: the namespace's labels read into a policy,
/// with an `Invalid value` error per bad label (`metadata.labels[<label>]`). A bad enforce
/// level counts as `restricted` (fail closed), bad audit and warn levels as `privileged`
/// (fail open), a bad version as `latest`. Without a warn label, warn follows a stricter
/// enforce level (and its version, without a warn version label).
#[must_use]
pub fn policy_to_evaluate(labels: Option<&BTreeMap<String, String>>) -> (Policy, Vec<FieldError>) {
    let mut p = Policy::default();
    let mut errs = Vec::new();
    let Some(labels) = labels.filter(|l| !l.is_empty()) else {
        return (p, errs);
    };
    let labels_path = Path::new("metadata").child("labels");
    let mut err = |label: &str, value: &str, detail: &str| {
        errs.push(FieldError::invalid(&labels_path.key(label), value, detail));
    };
    let mut has_enforce_level = false;
    if let Some(v) = labels.get(ENFORCE_LEVEL_LABEL) {
        match Level::parse(v) {
            Ok(l) => {
                p.enforce.level = l;
                has_enforce_level = true;
            }
            Err(e) => {
                p.enforce.level = Level::Restricted;
                err(ENFORCE_LEVEL_LABEL, v, e);
            }
        }
    }
    if let Some(v) = labels.get(ENFORCE_VERSION_LABEL) {
        p.enforce.version = Version::parse(v).unwrap_or_else(|e| {
            err(ENFORCE_VERSION_LABEL, v, e);
            Version::Latest
        });
    }
    if let Some(v) = labels.get(AUDIT_LEVEL_LABEL) {
        p.audit.level = Level::parse(v).unwrap_or_else(|e| {
            err(AUDIT_LEVEL_LABEL, v, e);
            Level::Privileged
        });
    }
    if let Some(v) = labels.get(AUDIT_VERSION_LABEL) {
        p.audit.version = Version::parse(v).unwrap_or_else(|e| {
            err(AUDIT_VERSION_LABEL, v, e);
            Version::Latest
        });
    }
    let has_warn_level = labels.contains_key(WARN_LEVEL_LABEL);
    if let Some(v) = labels.get(WARN_LEVEL_LABEL) {
        p.warn.level = Level::parse(v).unwrap_or_else(|e| {
            err(WARN_LEVEL_LABEL, v, e);
            Level::Privileged
        });
    }
    let has_warn_version = labels.contains_key(WARN_VERSION_LABEL);
    if let Some(v) = labels.get(WARN_VERSION_LABEL) {
        p.warn.version = Version::parse(v).unwrap_or_else(|e| {
            err(WARN_VERSION_LABEL, v, e);
            Version::Latest
        });
    }
    if !has_warn_level && has_enforce_level && p.enforce.level > p.warn.level {
        p.warn.level = p.enforce.level;
        if !has_warn_version {
            p.warn.version = p.enforce.version;
        }
    }
    (p, errs)
}
