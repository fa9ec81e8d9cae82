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

/// An event repeated with nothing printed in between, folded as `kubectl describe` folds it.
struct Repeats {
    first: f64,
    last: f64,
    count: u32,
    /// The event's line without its time.
    text: String,
}

impl Repeats {
    /// The fold's line, at the last repeat: `... (x30 over 4m50s)`; nothing for one.
    fn flush(&self, out: &mut String) {
        if self.count > 1 {
            let over = std::time::Duration::from_secs_f64((self.last - self.first).max(0.0));
            let _ = writeln!(
                out,
                "{}{} (x{} over {})",
                fmt_t(self.last),
                self.text,
                self.count,
                crate::duration::human_duration(over)
            );
        }
    }
}

/// A readable timeline: a `kubectl get pods -w`-like table for status changes, and events in
/// `kubectl describe` style, interleaved in time order. An event repeated with no other line
/// in between (a `BackOff` every ten seconds) shows once, then once more folded at its last
/// repeat as `kubectl describe` counts it: `(x30 over 4m50s)`.
pub fn text_report(pod_name: &str, records: &[Record]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:>10}  {:<24} {:<7} {:<26} {:<9} {:<10} CONTAINERS",
        "TIME", "NAME", "READY", "STATUS", "RESTARTS", "PHASE"
    );
    let mut last_line = String::new();
    let mut repeats: Option<Repeats> = None;
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
                    if let Some(r) = repeats.take() {
                        r.flush(&mut out);
                    }
                    let _ = writeln!(out, "{}  {line}", fmt_t(*t));
                    last_line = line;
                }
            }
            Record::Runtime { t, container, what } => {
                if let Some(r) = repeats.take() {
                    r.flush(&mut out);
                }
                let _ = writeln!(out, "{}    runtime [{container}] {what}", fmt_t(*t));
            }
            Record::Event { t, event } => {
                let from = event
                    .container
                    .as_ref()
                    .map(|(_, n)| format!(" [{n}]"))
                    .unwrap_or_default();
                let text = format!(
                    "    event {:<7} {:<20}{} {}",
                    event.type_.as_str(),
                    event.reason,
                    from,
                    event.message
                );
                match &mut repeats {
                    Some(r) if r.text == text => {
                        r.count += 1;
                        r.last = *t;
                    }
                    _ => {
                        if let Some(r) = repeats.take() {
                            r.flush(&mut out);
                        }
                        let _ = writeln!(out, "{}{text}", fmt_t(*t));
                        repeats = Some(Repeats {
                            first: *t,
                            last: *t,
                            count: 1,
                            text,
                        });
                    }
                }
            }
        }
    }
    if let Some(r) = repeats {
        r.flush(&mut out);
    }
    out
}

/// What the simulation takes the containers to do, one line each, before the timeline:
/// `inferred: app runs 3s then exits 1 (from "sleep 3; exit 1")`.
pub fn notes_text(notes: &[super::Note]) -> String {
    let mut out = String::new();
    for n in notes {
        let _ = writeln!(out, "{n}");
    }
    out
}

/// The notes as JSON lines before the timeline's: `{"t": 0, "kind": "note", "note":
/// "inferred", "container": "app", "message": "app runs 3s then exits 1 (from …)"}`.
pub fn notes_json(notes: &[super::Note]) -> String {
    let mut out = String::new();
    for n in notes {
        let v = json!({
            "t": 0.0,
            "kind": "note",
            "note": n.kind.as_str(),
            "container": n.container,
            "message": n.text,
        });
        out.push_str(&v.to_string());
        out.push('\n');
    }
    out
}

/// The line that closes a timeline at the end of `--for`, so a quiet pod's timeline still
/// shows how long it was watched.
pub fn end_text(t: f64, last_change: f64) -> String {
    format!(
        "{}  end of the simulation (nothing happened after {}s)\n",
        fmt_t(t),
        round_t(last_change)
    )
}

/// The JSON line that closes a timeline: `{"t": 300, "kind": "end"}`.
pub fn end_json(t: f64) -> String {
    format!("{}\n", json!({"t": round_t(t), "kind": "end"}))
}
