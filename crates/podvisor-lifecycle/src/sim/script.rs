//! The `podvisor simulate --script` format: what the fake runtime does, over time.

use serde::{Deserialize, Deserializer};
use std::collections::BTreeMap;
use std::time::Duration;

/// A parsed script. Every key is optional: with none, containers run forever, probes pass and
/// hooks take no time (sleep hooks take their `seconds`).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Script {
    /// Per container (or init container) name.
    #[serde(default)]
    pub containers: BTreeMap<String, ContainerScript>,
    /// A graceful delete during the run.
    pub delete: Option<DeleteScript>,
    /// When the pod's sandbox dies on its own (its shim is killed): every running container
    /// ends with 137 and the kubelet's A2 handling follows.
    #[serde(default, deserialize_with = "durations")]
    pub sandbox_lost: Vec<Duration>,
    /// For a pod with `spec.schedulingGates`: when its last gate is removed (the scheduler
    /// binds it then and the kubelet starts it). Without it a gated pod stays gated.
    #[serde(default, deserialize_with = "opt_duration")]
    pub ungate: Option<Duration>,
    /// In-place resizes (`kubectl patch --subresource resize`), in time order.
    #[serde(default)]
    pub resize: Vec<ResizeScript>,
    /// Ephemeral containers added during the run, as `kubectl debug` adds them through the
    /// `pods/ephemeralcontainers` subresource; what each then does is its `containers` entry.
    #[serde(default)]
    pub ephemeral_containers: Vec<EphemeralScript>,
}

/// One resize: the new requests and limits of some containers (a spec update through the
/// `resize` subresource; the generation goes up by one).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ResizeScript {
    /// When.
    #[serde(deserialize_with = "duration")]
    pub at: Duration,
    /// The new `resources` per container name (regular containers and sidecars).
    pub containers: BTreeMap<String, k8s_openapi::api::core::v1::ResourceRequirements>,
}

/// One ephemeral container added at `at`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct EphemeralScript {
    /// When it is added.
    #[serde(deserialize_with = "duration")]
    pub at: Duration,
    /// The ephemeral container (as in `spec.ephemeralContainers`).
    pub container: k8s_openapi::api::core::v1::EphemeralContainer,
}

/// What one container does.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ContainerScript {
    /// One entry per run; the last one repeats. Empty: every run runs forever.
    #[serde(default)]
    pub runs: Vec<Run>,
    /// Each run is OOM-killed at this time after its start (exit 137, `OOMKilled`).
    #[serde(default, deserialize_with = "opt_duration")]
    pub oom_after: Option<Duration>,
    /// Time to exit after the stop signal; `never` ignores it (SIGKILL at the deadline). Default 0.
    #[serde(default, deserialize_with = "opt_duration_or_never")]
    pub stop_after_signal: Option<Option<Duration>>,
    /// Exit code when the stop signal ends the process (default 128 + signal number).
    pub signal_exit_code: Option<i32>,
    /// Probe results over time, relative to each run's start.
    #[serde(default)]
    pub probes: ProbeScripts,
    /// Hook behaviour.
    #[serde(default)]
    pub hooks: HookScripts,
    /// Memory the container uses (a quantity, e.g. `64Mi`): an in-place resize to a lower
    /// memory limit is refused as the kubelet refuses it.
    pub memory_usage: Option<String>,
}

/// One run of a container.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Run {
    /// The run exits by itself after this long; omitted: it never does.
    #[serde(default, deserialize_with = "opt_duration")]
    pub exit_after: Option<Duration>,
    /// Its exit code (default 0).
    #[serde(default)]
    pub exit_code: i32,
}

/// Probe result schedules per probe type.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ProbeScripts {
    /// Startup probe results.
    #[serde(default)]
    pub startup: Vec<ResultFrom>,
    /// Liveness probe results.
    #[serde(default)]
    pub liveness: Vec<ResultFrom>,
    /// Readiness probe results.
    #[serde(default)]
    pub readiness: Vec<ResultFrom>,
}

/// From `from` (relative to the run's start) on, probes give `result`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ResultFrom {
    /// Start of this stretch.
    #[serde(deserialize_with = "duration")]
    pub from: Duration,
    /// The result during it.
    pub result: Outcome,
}

/// A scripted result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    /// Passes.
    Success,
    /// Fails.
    Failure,
}

/// Hook behaviour per hook kind.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct HookScripts {
    /// postStart.
    pub post_start: Option<HookScript>,
    /// preStop.
    pub pre_stop: Option<HookScript>,
}

/// How long a hook takes and whether it succeeds.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct HookScript {
    /// How long it runs.
    #[serde(default, deserialize_with = "duration")]
    pub duration: Duration,
    /// Its result (default success).
    #[serde(default = "success")]
    pub result: Outcome,
}

fn success() -> Outcome {
    Outcome::Success
}

/// A graceful delete.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct DeleteScript {
    /// When.
    #[serde(deserialize_with = "duration")]
    pub at: Duration,
    /// The delete's grace period (default: the pod's).
    pub grace_period_seconds: Option<i64>,
}

/// Parses `500ms`, `10s`, `2m`, `1h`, `1m30s`, `1.5s` or a bare number of seconds.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let s = text.trim();
    if s.is_empty() {
        return Err("empty duration".to_string());
    }
    if let Ok(n) = s.parse::<f64>() {
        return secs_f64(n, text);
    }
    let mut total = 0f64;
    let mut rest = s;
    while !rest.is_empty() {
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(|| format!("invalid duration {text:?}: missing unit (ms, s, m, h)"))?;
        if num_len == 0 {
            return Err(format!("invalid duration {text:?}: expected a number"));
        }
        let n: f64 = rest[..num_len]
            .parse()
            .map_err(|_| format!("invalid duration {text:?}"))?;
        rest = &rest[num_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let factor = match &rest[..unit_len] {
            "ms" => 0.001,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            u => {
                return Err(format!(
                    "invalid duration {text:?}: unknown unit {u:?} (use ms, s, m, h)"
                ));
            }
        };
        total += n * factor;
        rest = &rest[unit_len..];
    }
    secs_f64(total, text)
}

fn secs_f64(n: f64, text: &str) -> Result<Duration, String> {
    Duration::try_from_secs_f64(n).map_err(|_| format!("invalid duration {text:?}: must be >= 0"))
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Raw {
    Num(f64),
    Text(String),
}

fn raw_to_duration(raw: Raw) -> Result<Duration, String> {
    match raw {
        Raw::Num(n) => secs_f64(n, &n.to_string()),
        Raw::Text(t) => parse_duration(&t),
    }
}

fn duration<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    raw_to_duration(Raw::deserialize(d)?).map_err(serde::de::Error::custom)
}

fn durations<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<Duration>, D::Error> {
    Vec::<Raw>::deserialize(d)?
        .into_iter()
        .map(|raw| raw_to_duration(raw).map_err(serde::de::Error::custom))
        .collect()
}

fn opt_duration<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
    duration(d).map(Some)
}

fn opt_duration_or_never<'de, D: Deserializer<'de>>(
    d: D,
) -> Result<Option<Option<Duration>>, D::Error> {
    match Raw::deserialize(d)? {
        Raw::Text(t) if t == "never" => Ok(Some(None)),
        raw => raw_to_duration(raw)
            .map(|d| Some(Some(d)))
            .map_err(serde::de::Error::custom),
    }
}

impl Script {
    /// Parses a script (YAML or JSON).
    pub fn parse(text: &str) -> Result<Script, String> {
        if text.trim().is_empty() {
            return Ok(Script::default());
        }
        serde_saphyr::from_str(text).map_err(|e| e.to_string())
    }
}
