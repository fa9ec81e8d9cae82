//! `podvisor simulate POD.yaml [--pod NAME] [--script S] [--for D]
//! [--output text|json|html|svg]`.
//!
//! `html` and `svg` draw the timeline with `podvisor_lifecycle::timeline` (the dashboard's
//! renderer): one self-contained file, no network reference.

use crate::BackoffCurve;
use anyhow::{Context, bail};
use podvisor_api::{defaults, validation};
use podvisor_lifecycle::BackoffConfig;
use podvisor_lifecycle::sim::{self, Script, SimOptions, script::parse_duration};
use podvisor_lifecycle::timeline::{Timeline, html, svg};
use std::path::PathBuf;

/// Output formats of `simulate`.
#[derive(Clone, Copy, Debug, clap::ValueEnum, PartialEq, Eq)]
pub enum Output {
    /// A readable timeline.
    Text,
    /// One JSON object per line.
    Json,
    /// The timeline drawn: one self-contained HTML page (SVG inline, legend; no network).
    Html,
    /// The timeline drawn as one SVG image.
    Svg,
}

/// Parsed arguments.
pub struct Args {
    pub pod: PathBuf,
    /// `--pod NAME`: simulate only the pods (or workloads) of this name.
    pub only: Option<String>,
    pub script: Option<PathBuf>,
    pub duration: String,
    pub output: Output,
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
    if matches!(args.output, Output::Html | Output::Svg) && pods.len() > 1 {
        bail!(
            "--output {}: draws one pod, and {source} holds {}: choose one with --pod NAME",
            if args.output == Output::Html {
                "html"
            } else {
                "svg"
            },
            pods.len()
        );
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
        let kept = pod.clone();
        // What the manifest says the containers do, under what the script names.
        let inferred = sim::infer(&pod, &script);
        let script = &inferred.script;
        let records = sim::simulate(pod, script, &opts)?;
        let end = duration.as_secs_f64();
        match args.output {
            Output::Json => {
                print!("{}", sim::notes_json(&inferred.notes));
                print!("{}", sim::json_lines(&records));
                print!("{}", sim::end_json(end));
            }
            Output::Text => {
                print!("{}", sim::notes_text(&inferred.notes));
                print!("{}", sim::text_report(&name, &records));
                print!("{}", sim::end_text(end, last_change(&records)));
            }
            output @ (Output::Html | Output::Svg) => {
                let timeline = Timeline::from_sim(
                    &kept,
                    &records,
                    &opts.start.to_string(),
                    script
                        .delete
                        .as_ref()
                        .map(|d| (d.at.as_secs_f64(), d.grace_period_seconds)),
                    duration.as_secs_f64(),
                );
                if output == Output::Svg {
                    println!("{}", svg::render(&timeline));
                } else {
                    let heading = format!(
                        "<h1>{} <small>(simulated)</small></h1>",
                        svg::esc(&timeline.pod)
                    );
                    print!("{}", html::page(&timeline, &heading, None));
                }
            }
        }
    }
    Ok(if invalid { 2 } else { 0 })
}

/// When the timeline's last line happened.
fn last_change(records: &[sim::Record]) -> f64 {
    records
        .iter()
        .map(|r| match r {
            sim::Record::Event { t, .. }
            | sim::Record::Runtime { t, .. }
            | sim::Record::Status { t, .. } => *t,
        })
        .fold(0.0, f64::max)
}
