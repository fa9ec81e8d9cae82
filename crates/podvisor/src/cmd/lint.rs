//! `podvisor lint FILE... [--start-time 45s] [--pods N] [--output text|json]`: lifecycle
//! mistakes the API server accepts, in pods and workloads' pod templates
//! (`podvisor_api::lint` holds the rules; this is reading files and printing).
//!
//! Exit codes: 0 no finding or only warnings and infos, 1 any error-level finding (invalid
//! manifests included), 2 an input that cannot be read as objects at all or bad options.

use std::io::Read;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use podvisor_api::lint::{self, Entry, Finding, Level, Options, Skipped, Target};
use podvisor_lifecycle::sim::script::parse_duration;
use serde_json::json;

use crate::OutputFormat;

/// `podvisor lint`'s arguments.
#[derive(clap::Args)]
pub struct Args {
    /// Manifests (YAML or JSON, multi-document; `-` for stdin): Pods, Deployments, ReplicaSets,
    /// StatefulSets, DaemonSets, ReplicationControllers, Jobs and CronJobs.
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
    /// How long the containers take to start (e.g. 45s, 2m): a liveness probe without a startup
    /// probe must allow at least this long.
    #[arg(long)]
    pub start_time: Option<String>,
    /// Count every pod and workload template as N pods on the node, for the exec-probe rate
    /// (default: 1 per Pod, `replicas` or `parallelism` per workload).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    pub pods: Option<u32>,
    /// Output format: compiler-like text, or one JSON document for CI.
    #[arg(long, short = 'o', value_enum, default_value_t = OutputFormat::Text)]
    pub output: OutputFormat,
    /// Feature gates the manifests are validated with, as kube's `--feature-gates`:
    /// `A=true,B=false`. Known: RestartAllContainersOnContainerExits (alpha, default false).
    #[arg(long, value_parser = super::parse_feature_gates, default_value = "")]
    pub feature_gates: podvisor_api::FeatureGates,
}

/// What one run found, for printing.
struct Report {
    targets: Vec<Target>,
    skipped: Vec<Skipped>,
    /// Inputs that could not be read as objects: (file, message).
    unreadable: Vec<(String, String)>,
    files: usize,
}

/// Runs `lint`; returns the exit code.
///
/// # Errors
///
/// Bad options (`--start-time`); problems with one file are reported and the others linted.
pub fn run(args: &Args) -> anyhow::Result<i32> {
    let start_time = match &args.start_time {
        Some(s) => {
            let d = parse_duration(s).map_err(|e| anyhow::anyhow!("--start-time: {e}"))?;
            if d.is_zero() {
                bail!("--start-time: must be more than 0 (e.g. 45s)");
            }
            Some(d)
        }
        None => None,
    };
    let options = Options {
        start_time,
        pods: args.pods,
    };
    let mut report = Report {
        targets: Vec::new(),
        skipped: Vec::new(),
        unreadable: Vec::new(),
        files: args.files.len(),
    };
    for file in &args.files {
        let source = file.display().to_string();
        let entries = read_input(file)
            .with_context(|| format!("reading {source}"))
            .and_then(|text| {
                Ok(lint::decode_targets_with_gates(
                    &text,
                    &source,
                    args.feature_gates,
                )?)
            });
        match entries {
            Ok(entries) => {
                for e in entries {
                    match e {
                        Entry::Target(t) => report.targets.push(*t),
                        Entry::Skipped(s) => report.skipped.push(s),
                    }
                }
            }
            Err(e) => report.unreadable.push((source, format!("{e:#}"))),
        }
    }
    let findings = lint::lint(&report.targets, &options);
    match args.output {
        OutputFormat::Text => print_text(&report, &findings),
        OutputFormat::Json => println!(
            "{}",
            serde_json::to_string_pretty(&to_json(&report, &findings))?
        ),
    }
    Ok(if !report.unreadable.is_empty() {
        2
    } else {
        i32::from(findings.iter().any(|f| f.level == Level::Error))
    })
}

fn read_input(file: &Path) -> std::io::Result<String> {
    if file.as_os_str() == "-" {
        let mut text = String::new();
        std::io::stdin().read_to_string(&mut text)?;
        Ok(text)
    } else {
        std::fs::read_to_string(file)
    }
}

/// `file:doc2` or `file:doc2.item0`.
fn location(file: &str, document: usize, item: Option<usize>) -> String {
    match item {
        Some(i) => format!("{file}:doc{document}.item{i}"),
        None => format!("{file}:doc{document}"),
    }
}

fn count(findings: &[Finding], level: Level) -> usize {
    findings.iter().filter(|f| f.level == level).count()
}

fn plural(n: usize, word: &str) -> String {
    format!("{n} {word}{}", if n == 1 { "" } else { "s" })
}

fn print_text(report: &Report, findings: &[Finding]) {
    for (file, message) in &report.unreadable {
        eprintln!("{file}: error: {message}");
    }
    for f in findings {
        println!(
            "{}: {}[{} {}]: {}/{} {}",
            location(&f.file, f.document, f.item),
            f.level.as_str(),
            f.id,
            f.rule,
            f.kind,
            f.name,
            f.path
        );
        println!("  {}", f.message);
        println!("  why: {}", f.why);
        println!("  fix: {}", f.fix);
        if let Some(sim) = &f.simulate {
            println!("  see: {}", sim.command);
            println!("       (shows {})", sim.shows);
        }
        println!();
    }
    for s in &report.skipped {
        println!(
            "{}: note: {}{}: {}",
            location(&s.source, s.at.document, s.at.item),
            if s.kind.is_empty() { "object" } else { &s.kind },
            if s.name.is_empty() {
                String::new()
            } else {
                format!("/{}", s.name)
            },
            s.note
        );
    }
    println!(
        "lint: {}, {}, {}; {} linted in {}{}",
        plural(count(findings, Level::Error), "error"),
        plural(count(findings, Level::Warning), "warning"),
        plural(count(findings, Level::Info), "info"),
        plural(report.targets.len(), "object"),
        plural(report.files, "file"),
        if report.skipped.is_empty() {
            String::new()
        } else {
            format!(", {} skipped", report.skipped.len())
        }
    );
}

/// The `--output json` document (schema in the README, `version` 1).
fn to_json(report: &Report, findings: &[Finding]) -> serde_json::Value {
    json!({
        "version": 1,
        "findings": findings,
        "skipped": report.skipped.iter().map(|s| json!({
            "file": s.source,
            "document": s.at.document,
            "item": s.at.item,
            "apiVersion": s.api_version,
            "kind": s.kind,
            "name": s.name,
            "note": s.note,
        })).collect::<Vec<_>>(),
        "unreadable": report.unreadable.iter().map(|(file, message)| json!({
            "file": file,
            "message": message,
        })).collect::<Vec<_>>(),
        "summary": {
            "errors": count(findings, Level::Error),
            "warnings": count(findings, Level::Warning),
            "infos": count(findings, Level::Info),
            "objects": report.targets.len(),
            "skipped": report.skipped.len(),
            "files": report.files,
        },
    })
}
