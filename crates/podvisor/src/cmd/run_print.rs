//! `podvisor run`'s printer: the pods' progress as a `kubectl get pods -w` table (redrawn in
//! place on a terminal, appended otherwise) with event lines, the containers' output, the
//! delete countdown and the closing summary; or the JSON line format of `simulate`.

use super::run::Tracked;
use super::run_text::Fold;
use crate::OutputFormat;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use podvisor_agent::TimedEvent;
use podvisor_lifecycle::duration::human_signed_duration;
use podvisor_lifecycle::kubectl::pod_row;
use podvisor_lifecycle::sim::{self, Record, StatusSnapshot};
use std::io::{IsTerminal, Write};

/// Prints the pods' progress in the chosen format.
pub(super) struct Printer {
    format: OutputFormat,
    /// Text on a terminal: the table is redrawn in place below the event lines.
    live: bool,
    start: Timestamp,
    names: Vec<String>,
    pods: Vec<Option<Pod>>,
    /// Text, appended: the last row printed per pod (READY, STATUS, RESTARTS count).
    printed: Vec<Option<(String, String, String)>>,
    /// Appended text: column widths so far (they only grow, keeping rows aligned).
    widths: [usize; 4],
    header_printed: bool,
    /// JSON: the last snapshot printed per pod.
    snapshots: Vec<Option<StatusSnapshot>>,
    /// The pod IP said per pod (once its sandbox is up).
    ips: Vec<Option<String>>,
    /// Live: how many table lines are on screen below the cursor's line start.
    drawn: usize,
    /// Repeated BackOff events, counted.
    fold: super::run_text::EventFold,
    /// Graceful deletes under way.
    countdown: super::run_text::Countdown,
    last_t: f64,
}

const HEADER: [&str; 5] = ["NAME", "READY", "STATUS", "RESTARTS", "AGE"];

impl Printer {
    pub(super) fn new(format: OutputFormat, start: Timestamp, names: Vec<String>) -> Printer {
        let n = names.len();
        Printer {
            format,
            live: format == OutputFormat::Text && std::io::stdout().is_terminal(),
            start,
            names,
            pods: vec![None; n],
            printed: vec![None; n],
            widths: [0; 4],
            header_printed: false,
            snapshots: vec![None; n],
            ips: vec![None; n],
            drawn: 0,
            fold: super::run_text::EventFold::default(),
            countdown: super::run_text::Countdown::default(),
            last_t: 0.0,
        }
    }

    pub(super) fn status(&mut self, i: usize, pod: &Pod) {
        let now = Timestamp::now();
        self.pods[i] = Some(pod.clone());
        let ip = pod.status.as_ref().and_then(|s| s.pod_ip.clone());
        let new_ip = ip.is_some() && ip != self.ips[i];
        if new_ip {
            self.ips[i].clone_from(&ip);
        }
        match self.format {
            OutputFormat::Json => {
                let snap = sim::snapshot(pod, now);
                if self.snapshots[i].as_ref() == Some(&snap) && !new_ip {
                    return;
                }
                self.snapshots[i] = Some(snap.clone());
                let t = self.t(now);
                self.json(i, &Record::Status { t, status: snap });
            }
            OutputFormat::Text if new_ip => {
                // Said once, when the sandbox is up (as `kubectl get -o wide`'s IP column).
                let line = format!(
                    "pod/{} IP {}",
                    self.names[i],
                    ip.as_deref().unwrap_or_default()
                );
                if self.live {
                    self.redraw(&[line]);
                } else {
                    write_out(&format!("{line}\n"));
                    self.status(i, pod);
                }
            }
            OutputFormat::Text if self.live => self.redraw(&[]),
            OutputFormat::Text => {
                let row = pod_row(pod, now);
                let count = row
                    .restarts
                    .split_whitespace()
                    .next()
                    .unwrap_or("0")
                    .to_string();
                let key = (row.ready.clone(), row.status.clone(), count);
                if self.printed[i].as_ref() == Some(&key) {
                    return;
                }
                self.printed[i] = Some(key);
                let cells = [row.name, row.ready, row.status, row.restarts, row.age];
                let mut out = String::new();
                for (w, c) in self.widths.iter_mut().zip(HEADER.iter().zip(&cells)) {
                    *w = (*w).max(c.0.len()).max(c.1.len());
                }
                if !self.header_printed {
                    self.header_printed = true;
                    out.push_str(&table_line(&HEADER.map(String::from), &self.widths));
                }
                out.push_str(&table_line(&cells, &self.widths));
                write_out(&out);
            }
        }
    }

    pub(super) fn event(&mut self, i: usize, e: &TimedEvent) {
        match self.format {
            OutputFormat::Json => {
                let t = self.t(e.time);
                let record = Record::Event {
                    t,
                    event: e.event.clone(),
                };
                self.json(i, &record);
            }
            OutputFormat::Text => {
                // Measured like the AGE column, so an event and its row agree.
                let created = self.pods[i]
                    .as_ref()
                    .and_then(|p| p.metadata.creation_timestamp.as_ref())
                    .map_or(self.start, |t| t.0);
                let age = human_signed_duration(e.time.duration_since(created));
                let container = e
                    .event
                    .container
                    .as_ref()
                    .map(|(_, name)| format!("[{name}] "))
                    .unwrap_or_default();
                let mut line = format!(
                    "{age} {} {} pod/{} {container}{}",
                    e.event.type_.as_str(),
                    e.event.reason,
                    self.names[i],
                    e.event.message
                );
                let key = format!("{container}{}", e.event.message);
                match self.fold.event(i, e.event.reason, &key, self.live) {
                    Fold::Print(None) => {}
                    Fold::Print(Some(n)) => line.push_str(&format!(" (x{n})")),
                    Fold::Live(n) => {
                        // The count next to the reason: it survives cutting to the width.
                        let line = format!(
                            "{age} {} {} (x{n}) pod/{} {container}{}",
                            e.event.type_.as_str(),
                            e.event.reason,
                            self.names[i],
                            e.event.message
                        );
                        self.fold.set_live(i, &key, line);
                        self.redraw(&[]);
                        return;
                    }
                    Fold::Skip => return,
                }
                if self.live {
                    self.redraw(&[line]);
                } else {
                    write_out(&format!("{line}\n"));
                }
            }
        }
    }

    /// Lines the containers wrote (text output only), above the live table.
    pub(super) fn output_lines(&mut self, lines: &[String]) {
        if lines.is_empty() || self.format != OutputFormat::Text {
            return;
        }
        if self.live {
            self.redraw(lines);
        } else {
            let mut text = lines.join("\n");
            text.push('\n');
            write_out(&text);
        }
    }

    /// A message from `run` itself.
    pub(super) fn note(&mut self, message: &str) {
        match self.format {
            OutputFormat::Json => eprintln!("{message}"),
            OutputFormat::Text if self.live => self.redraw(&[message.to_string()]),
            OutputFormat::Text => write_out(&format!("{message}\n")),
        }
    }

    /// Once a second: the live table's AGE and `(Xs ago)` columns move on.
    pub(super) fn tick(&mut self) {
        if self.live && self.drawn > 0 {
            self.redraw(&[]);
        }
    }

    pub(super) fn finish(&mut self) {
        if self.live {
            self.redraw(&[]);
        }
    }

    /// Pod `i` is being deleted with `grace` seconds: one line when appended; a countdown
    /// under the live table, updated each second.
    pub(super) fn deleting(&mut self, i: usize, grace: i64) {
        let line = self.countdown.start(i, &self.names[i], grace);
        match self.format {
            OutputFormat::Text if self.live => self.redraw(&[]),
            OutputFormat::Text => self.note(&line),
            OutputFormat::Json => {}
        }
    }

    /// Pod `i` has terminated: the end of its countdown, if it was being deleted.
    pub(super) fn deleted(&mut self, i: usize) {
        if let Some(line) = self.countdown.end(i, &self.names[i])
            && self.format == OutputFormat::Text
        {
            self.note(&line);
        }
    }

    /// Text: each pod's closing summary (phase, duration, every container's end).
    pub(super) fn summary(&mut self, tracked: &[Tracked]) {
        if self.format != OutputFormat::Text {
            return;
        }
        let now = Timestamp::now();
        let mut out = String::new();
        for (i, pod) in tracked.iter().enumerate() {
            let Some(pod) = &pod.pod else { continue };
            let created = pod
                .metadata
                .creation_timestamp
                .as_ref()
                .map_or(self.start, |t| t.0);
            let ran = now.duration_since(created).unsigned_abs();
            for line in super::run_text::summary(&self.names[i], pod, ran) {
                out.push_str(&line);
                out.push('\n');
            }
        }
        write_out(&out);
    }

    /// Seconds since the start, never going backwards between lines.
    fn t(&mut self, at: Timestamp) -> f64 {
        let t = at.duration_since(self.start).as_secs_f64().max(self.last_t);
        self.last_t = t;
        t
    }

    fn json(&self, i: usize, record: &Record) {
        let line = sim::json_lines(std::slice::from_ref(record));
        let ip = self.ips[i]
            .as_ref()
            .filter(|_| matches!(record, Record::Status { .. }));
        if self.names.len() == 1 && ip.is_none() {
            write_out(&line);
            return;
        }
        // Several pods: say which one each line is about; a status says the pod's IP.
        match serde_json::from_str::<serde_json::Value>(line.trim_end()) {
            Ok(serde_json::Value::Object(mut map)) => {
                if self.names.len() > 1 {
                    map.insert("pod".to_string(), self.names[i].clone().into());
                }
                if let Some(ip) = ip {
                    map.insert("podIP".to_string(), ip.clone().into());
                }
                write_out(&format!("{}\n", serde_json::Value::Object(map)));
            }
            _ => write_out(&line),
        }
    }

    /// Live mode: erase the table, print `lines` where it was, and draw it again below them.
    fn redraw(&mut self, lines: &[String]) {
        let now = Timestamp::now();
        let mut out = String::new();
        if self.drawn > 0 {
            // Up to the table's first line, then clear to the end of the screen.
            out.push_str(&format!("\x1b[{}A\r\x1b[J", self.drawn));
        }
        for line in lines {
            out.push_str(line);
            out.push('\n');
        }
        let rows: Vec<[String; 5]> = self
            .pods
            .iter()
            .flatten()
            .map(|p| {
                let r = pod_row(p, now);
                [r.name, r.ready, r.status, r.restarts, r.age]
            })
            .collect();
        if rows.is_empty() {
            self.drawn = 0;
        } else {
            let mut widths = [0; 4];
            for cells in std::iter::once(&HEADER.map(String::from)).chain(&rows) {
                for (w, c) in widths.iter_mut().zip(cells) {
                    *w = (*w).max(c.len());
                }
            }
            out.push_str(&table_line(&HEADER.map(String::from), &widths));
            for cells in &rows {
                out.push_str(&table_line(cells, &widths));
            }
            self.drawn = rows.len() + 1;
        }
        // Under the table: repeated events with their counts, then the deletes' countdowns.
        let footer: Vec<String> = self
            .fold
            .live_lines()
            .map(str::to_owned)
            .chain(self.countdown.lines(&self.names))
            .collect();
        // One screen line each (the cursor goes back up by lines): cut to the terminal's width.
        let width =
            rustix::termios::tcgetwinsize(std::io::stdout()).map_or(0, |w| usize::from(w.ws_col));
        for line in footer {
            out.push_str(&super::run_text::fit(&line, width));
            out.push('\n');
            self.drawn += 1;
        }
        write_out(&out);
    }
}

/// One table line as kubectl's tabwriter lays it out (minimum width 6, padding 3; the last
/// column is not padded).
fn table_line(cells: &[String; 5], widths: &[usize; 4]) -> String {
    let mut line = String::new();
    for (cell, w) in cells.iter().zip(widths) {
        let width = (w + 3).max(6);
        line.push_str(&format!("{cell:<width$}"));
    }
    line.push_str(&cells[4]);
    line.push('\n');
    line
}

/// Writes to stdout; a closed stdout (e.g. piped into `head`) is not an error worth dying for
/// while pods still need stopping.
fn write_out(s: &str) {
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(s.as_bytes());
    let _ = out.flush();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_lines_follow_kubectl_tabwriter() {
        let header = HEADER.map(String::from);
        let row = ["web", "1/1", "Running", "0", "5s"].map(String::from);
        let mut widths = [0; 4];
        for cells in [&header, &row] {
            for (w, c) in widths.iter_mut().zip(cells) {
                *w = (*w).max(c.len());
            }
        }
        assert_eq!(
            table_line(&header, &widths),
            "NAME   READY   STATUS    RESTARTS   AGE\n"
        );
        assert_eq!(
            table_line(&row, &widths),
            "web    1/1     Running   0          5s\n"
        );
    }
}
