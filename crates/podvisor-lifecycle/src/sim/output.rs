//! Rendering a simulation timeline as JSON lines or readable text.

use super::{Record, StatusSnapshot};
use serde_json::json;
use std::fmt::Write;

fn round_t(t: f64) -> f64 {
    (t * 1000.0).round() / 1000.0
}

/// One JSON object per line (the `--output json` format).
pub fn json_lines(records: &[Record]) -> String {
    let mut out = String::new();
    for r in records {
        let v = match r {
            Record::Event { t, event } => json!({
                "t": round_t(*t),
                "kind": "event",
                "type": event.type_.as_str(),
                "reason": event.reason,
                "message": event.message,
                "container": event.container.as_ref().map(|(_, n)| n.clone()),
            }),
            Record::Status { t, status } => status_json(*t, status),
            Record::Runtime { .. } => continue,
        };
        out.push_str(&v.to_string());
        out.push('\n');
    }
    out
}

fn status_json(t: f64, s: &StatusSnapshot) -> serde_json::Value {
    let containers: Vec<_> = s
        .containers
        .iter()
        .map(|c| {
            let mut v = json!({
                "name": c.name,
                "init": c.init,
                "state": c.state,
                "reason": c.reason,
                "exit_code": c.exit_code,
                "message": c.message,
                "last_exit_code": c.last_exit_code,
                "restart_count": c.restart_count,
                "ready": c.ready,
                "started": c.started,
            });
            if c.ephemeral {
                v["ephemeral"] = serde_json::Value::Bool(true);
            }
            v
        })
        .collect();
    json!({
        "t": round_t(t),
        "kind": "status",
        "phase": s.phase,
        "status_text": s.status_text,
        "ready": s.ready,
        "restarts": s.restarts,
        "reason": s.reason,
        "conditions": s.conditions.iter().map(|(k, v)| (k.clone(), serde_json::Value::from(v.clone()))).collect::<serde_json::Map<_, _>>(),
        "containers": containers,
    })
}

fn fmt_t(t: f64) -> String {
    format!("{t:>9.3}s")
}

/// A readable timeline: a `kubectl get pods -w`-like table for status changes, and events in
/// `kubectl describe` style, interleaved in time order.
pub fn text_report(pod_name: &str, records: &[Record]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:>10}  {:<24} {:<7} {:<26} {:<9} {:<10} CONTAINERS",
        "TIME", "NAME", "READY", "STATUS", "RESTARTS", "PHASE"
    );
    let mut last_line = String::new();
    for r in records {
        match r {
            Record::Status { t, status } => {
                let containers: Vec<String> = status
                    .containers
                    .iter()
                    .map(|c| {
                        let mut s = format!("{}={}", c.name, c.state);
                        if c.ephemeral {
                            s.insert_str(0, "(ephem)");
                        }
                        if let Some(reason) = &c.reason {
                            let _ = write!(s, "({reason}");
                            if let Some(code) = c.exit_code {
                                let _ = write!(s, ",{code}");
                            }
                            s.push(')');
                        }
                        if c.ready {
                            s.push_str(",ready");
                        }
                        s
                    })
                    .collect();
                let line = format!(
                    "{:<24} {:<7} {:<26} {:<9} {:<10} {}",
                    pod_name,
                    status.ready,
                    status.status_text,
                    status.restarts,
                    status.phase,
                    containers.join(" ")
                );
                // Changes the table does not show (conditions, messages) make no new row.
                if line != last_line {
                    let _ = writeln!(out, "{}  {line}", fmt_t(*t));
                    last_line = line;
                }
            }
            Record::Runtime { t, container, what } => {
                let _ = writeln!(out, "{}    runtime [{container}] {what}", fmt_t(*t));
            }
            Record::Event { t, event } => {
                let from = event
                    .container
                    .as_ref()
                    .map(|(_, n)| format!(" [{n}]"))
                    .unwrap_or_default();
                let _ = writeln!(
                    out,
                    "{}    event {:<7} {:<20}{} {}",
                    fmt_t(*t),
                    event.type_.as_str(),
                    event.reason,
                    from,
                    event.message
                );
            }
        }
    }
    out
}
