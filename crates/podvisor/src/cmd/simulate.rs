//! `podvisor simulate POD.yaml [--pod NAME] [--script S] [--for D] [--output text|json]`.

use crate::{BackoffCurve, OutputFormat};
use anyhow::{Context, bail};
use podvisor_api::{defaults, validation};
use podvisor_lifecycle::BackoffConfig;
use podvisor_lifecycle::sim::{self, Script, SimOptions, script::parse_duration};
use std::path::PathBuf;

/// Parsed arguments.
pub struct Args {
    pub pod: PathBuf,
    /// `--pod NAME`: simulate only the pods (or workloads) of this name.
    pub only: Option<String>,
    pub script: Option<PathBuf>,
    pub duration: String,
    pub output: OutputFormat,
    pub backoff: BackoffCurve,
    pub max_restart_period: Option<String>,
    pub feature_gates: podvisor_api::FeatureGates,
}

/// The pods to simulate: Pods and workloads' pod templates; other objects are skipped with a
/// note on stderr (so `podvisor lint`'s commands work on the files it lints).
fn pods_of(
    text: &str,
    source: &str,
) -> anyhow::Result<Vec<podvisor_api::k8s_openapi::api::core::v1::Pod>> {
    let (pods, skipped) = podvisor_api::lint::pods_and_templates(text, source)?;
    for note in &skipped {
        eprintln!("note: {note}");
    }
    if pods.is_empty() {
        bail!("{source}: no pods or workloads with a pod template");
    }
    Ok(pods)
}

/// Runs the simulation and prints the timeline. Exit code 2 on bad input.
pub fn run(args: &Args) -> anyhow::Result<i32> {
    let source = args.pod.display().to_string();
    let text = std::fs::read_to_string(&args.pod).with_context(|| format!("reading {source}"))?;
    let mut pods = pods_of(&text, &source)?;
    if let Some(name) = &args.only {
        pods.retain(|p| p.metadata.name.as_deref() == Some(name.as_str()));
        if pods.is_empty() {
            bail!("--pod: {source} has no pod or workload named {name:?}");
        }
    }
    let script = match &args.script {
        Some(p) => {
            let t =
                std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?;
            Script::parse(&t).map_err(|e| anyhow::anyhow!("{}: {e}", p.display()))?
        }
        None => Script::default(),
    };
    let duration = parse_duration(&args.duration).map_err(|e| anyhow::anyhow!("--for: {e}"))?;
    let mut opts = SimOptions {
        duration,
        ..SimOptions::default()
    };
    opts.config.backoff = match args.backoff {
        BackoffCurve::Default => BackoffConfig::default(),
        BackoffCurve::Reduced => BackoffConfig::reduced(),
    };
    if let Some(max) = &args.max_restart_period {
        let max = parse_duration(max).map_err(|e| anyhow::anyhow!("--max-restart-period: {e}"))?;
        if max < std::time::Duration::from_secs(1) || max > std::time::Duration::from_secs(300) {
            bail!("--max-restart-period: must be between 1s and 300s");
        }
        opts.config.backoff = opts.config.backoff.with_max_period(max);
    }
    opts.config.gates = args.feature_gates;
    let mut invalid = false;
    for mut pod in pods {
        defaults::apply_defaults(&mut pod);
        podvisor_api::drop_disabled_fields(&mut pod, None);
        if let Err(errors) = validation::validate_pod_with_gates(&pod, args.feature_gates) {
            eprintln!("{errors}");
            invalid = true;
            continue;
        }
        let name = pod.metadata.name.clone().unwrap_or_default();
        let records = sim::simulate(pod, &script, &opts)?;
        match args.output {
            OutputFormat::Json => print!("{}", sim::json_lines(&records)),
            OutputFormat::Text => print!("{}", sim::text_report(&name, &records)),
        }
    }
    Ok(if invalid { 2 } else { 0 })
}
