//! The one renderer: a [`Timeline`] as an SVG drawing.
//!
//! Deterministic (the same timeline gives the same bytes), no script, no external reference:
//! hovering shows each element's `<title>`. The structure is part of the interface (the
//! dashboard's browser test reads it): `g.lane#lane-NAME[data-kind]` per container in drawing
//! order, `rect.span[data-state][data-reason][data-start][data-end]` per span in time order,
//! `.marker[data-kind][data-reason][data-t]` per marker, `.restart` per restart,
//! `rect#deletion` for the grace period, `g#phase` and `g.condition` along the top.

use super::{Lane, Marker, Timeline};
use crate::sim::{ContainerSnapshot, StatusSnapshot};
use std::fmt::Write;

const LABEL_W: f64 = 190.0;
const PLOT_W: f64 = 900.0;
const RIGHT_PAD: f64 = 20.0;
const ROW_H: f64 = 18.0;
const LANE_H: f64 = 30.0;
const SPAN_H: f64 = 16.0;

/// The drawing's style: colours by state and reason (also used by the legend).
pub const STYLE: &str = "\
svg.timeline{font-family:sans-serif;font-size:11px;background:#fff}\
.title{font-size:14px;font-weight:bold}\
.axis line{stroke:#ccc}.axis text{fill:#666}\
.label{fill:#222}.kind{fill:#888;font-size:10px}\
.lane-bg{fill:#f6f6f6}\
.span{stroke:#fff;stroke-width:0.5}\
.state-waiting{fill:#f2c14e}\
.state-waiting.reason-CrashLoopBackOff,.state-waiting.reason-ImagePullBackOff,.state-waiting.reason-ErrImagePull{fill:#e8833a}\
.state-waiting.reason-ContainerCreating,.state-waiting.reason-PodInitializing{fill:#d9d9d9}\
.state-running{fill:#8ab6e8}\
.state-ready{fill:#3fa34d}\
.state-terminated{fill:#9e9e9e}\
.state-terminated.reason-Completed{fill:#b7d7a8}\
.state-terminated.reason-Error,.state-terminated.reason-ContainerCannotRun,.state-terminated.reason-StartError{fill:#d64541}\
.state-terminated.reason-OOMKilled{fill:#8e1b1b}\
.phase-Pending{fill:#f2c14e}.phase-Running{fill:#3fa34d}.phase-Succeeded{fill:#b7d7a8}\
.phase-Failed{fill:#d64541}.phase-Unknown{fill:#9e9e9e}\
.cond-True{fill:#3fa34d}.cond-False{fill:#e6e6e6}\
.marker{stroke:#222;stroke-width:0.7}\
.marker.event{fill:#fff}.marker.event.warning{fill:#f2c14e}\
.marker.probe-failure{fill:#d64541;stroke:#d64541;stroke-width:2}\
.marker.hook{fill:#8e44ad}.marker.hook.warning{fill:#d64541}\
.marker.signal{fill:#222}\
.restart{stroke:#d64541;stroke-width:2;stroke-dasharray:2,2}\
#deletion{fill:#d64541;fill-opacity:0.12;stroke:#d64541;stroke-dasharray:4,3}\
.deletion-line{stroke:#d64541;stroke-width:1.5}\
.span-text{fill:#111;font-size:10px;pointer-events:none}\
.marker-count{fill:#222;stroke:none;font-size:9px;font-weight:bold}\
.state-stopped{fill:#c8c8c8}\
.legend text{fill:#333}";

/// Escapes text for XML content and attribute values.
pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c if c.is_control() && c != '\n' && c != '\t' => {}
            c => out.push(c),
        }
    }
    out
}

/// A reason as a CSS class and id fragment (letters, digits, `-`, `_`).
fn ident(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// A container's state as a span key: (`waiting`/`running`/`ready`/`terminated`/`stopped`,
/// reason).
fn state_of(c: &ContainerSnapshot, stopped_at_end: bool) -> (&'static str, String) {
    match c.state {
        "running" if c.ready => ("ready", String::new()),
        "running" => ("running", String::new()),
        "terminated" if stopped_at_end && matches!(c.exit_code, Some(0 | 143)) => {
            ("stopped", c.reason.clone().unwrap_or_default())
        }
        s => (s, c.reason.clone().unwrap_or_default()),
    }
}

/// Whether `lane`'s last instance is a sidecar stopped normally by a pod that succeeded: the
/// kubelet's SIGTERM at the pod's end gives exit 143, which it reports as `Error`; drawn red,
/// it would shout about a pod that did what it should. Only the picture changes.
fn sidecar_stopped_at_end(lane: &Lane, snapshots: &[(f64, StatusSnapshot)]) -> Option<i32> {
    if lane.kind != super::LaneKind::Sidecar {
        return None;
    }
    let (_, last) = snapshots.last()?;
    if last.phase != "Succeeded" {
        return None;
    }
    last.containers
        .iter()
        .find(|c| c.name == lane.name)
        .filter(|c| c.state == "terminated" && matches!(c.exit_code, Some(0 | 143)))
        .map(|c| c.restart_count)
}

struct Span {
    start: f64,
    end: f64,
    state: &'static str,
    reason: String,
    detail: String,
    /// The instance's `restartCount`: a restart begins a new span.
    restarts: i32,
}

/// The spans of one lane: consecutive snapshots with the same state and reason merged.
fn spans(
    lane: &Lane,
    snapshots: &[(f64, StatusSnapshot)],
    end: f64,
) -> (Vec<Span>, Vec<(f64, i32)>) {
    let mut spans: Vec<Span> = Vec::new();
    let mut restarts = Vec::new();
    let mut last_count: Option<i32> = None;
    let stopped_instance = sidecar_stopped_at_end(lane, snapshots);
    for (i, (t, snap)) in snapshots.iter().enumerate() {
        let next = snapshots.get(i + 1).map_or(end, |(t, _)| *t).max(*t);
        let Some(c) = snap.containers.iter().find(|c| c.name == lane.name) else {
            continue;
        };
        if let Some(prev) = last_count
            && c.restart_count > prev
        {
            restarts.push((*t, c.restart_count));
        }
        last_count = Some(c.restart_count);
        let (state, reason) = state_of(c, stopped_instance == Some(c.restart_count));
        let mut detail = match (c.exit_code, &c.message) {
            (Some(code), Some(m)) => format!("exit code {code}: {m}"),
            (Some(code), None) => format!("exit code {code}"),
            (None, Some(m)) => m.clone(),
            (None, None) => String::new(),
        };
        if c.restart_count > 0 {
            if !detail.is_empty() {
                detail.push_str("; ");
            }
            let _ = write!(detail, "restarts: {}", c.restart_count);
        }
        match spans.last_mut() {
            Some(s)
                if s.state == state
                    && s.reason == reason
                    && s.restarts == c.restart_count
                    && (s.end - *t).abs() < 1e-9 =>
            {
                s.end = next;
                s.detail = detail;
            }
            _ => spans.push(Span {
                start: *t,
                end: next,
                state,
                reason,
                detail,
                restarts: c.restart_count,
            }),
        }
    }
    (spans, restarts)
}

/// Segments of a value over time (phase, a condition's status).
fn segments<'a>(
    snapshots: &'a [(f64, StatusSnapshot)],
    end: f64,
    value: impl Fn(&'a StatusSnapshot) -> Option<&'a str>,
) -> Vec<(f64, f64, &'a str)> {
    let mut out: Vec<(f64, f64, &str)> = Vec::new();
    for (i, (t, snap)) in snapshots.iter().enumerate() {
        let next = snapshots.get(i + 1).map_or(end, |(t, _)| *t).max(*t);
        let Some(v) = value(snap) else { continue };
        match out.last_mut() {
            Some(last) if last.2 == v && (last.1 - *t).abs() < 1e-9 => last.1 = next,
            _ => out.push((*t, next, v)),
        }
    }
    out
}

fn fmt_secs(t: f64) -> String {
    crate::duration::human_duration(std::time::Duration::from_secs_f64(t.max(0.0)))
}

/// A tidy tick step for `end` seconds (about eight ticks).
fn tick_step(end: f64) -> f64 {
    const STEPS: [f64; 14] = [
        1.0, 2.0, 5.0, 10.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 900.0, 1800.0, 3600.0, 7200.0,
    ];
    STEPS
        .iter()
        .copied()
        .find(|s| end / s <= 10.0)
        .unwrap_or((end / 10.0).ceil())
}

struct Scale {
    end: f64,
}

impl Scale {
    fn x(&self, t: f64) -> f64 {
        LABEL_W + (t.clamp(0.0, self.end) / self.end) * PLOT_W
    }
}

fn marker_shape(out: &mut String, m: &Marker, x: f64, y: f64) {
    let mut class = format!("marker {}", m.kind.as_str());
    if m.warning {
        class.push_str(" warning");
    }
    let _ = write!(
        out,
        "<g class=\"{class}\" data-kind=\"{}\" data-reason=\"{}\" data-t=\"{:.3}\" \
         data-count=\"{}\">",
        m.kind.as_str(),
        esc(&m.reason),
        m.t,
        m.count
    );
    let title = if m.count > 1 {
        // kubectl's `BackOff (x29 over 4m40s)`.
        format!(
            "{} {} (x{} over {}): {}",
            fmt_secs(m.t),
            m.reason,
            m.count,
            fmt_secs(m.last - m.t),
            m.message
        )
    } else {
        format!("{} {}: {}", fmt_secs(m.t), m.reason, m.message)
    };
    let _ = write!(out, "<title>{}</title>", esc(&title));
    match m.kind {
        super::MarkerKind::Event => {
            let _ = write!(out, "<circle cx=\"{x:.1}\" cy=\"{y:.1}\" r=\"3.5\"/>");
        }
        super::MarkerKind::ProbeFailure => {
            let _ = write!(
                out,
                "<line x1=\"{x:.1}\" y1=\"{:.1}\" x2=\"{x:.1}\" y2=\"{:.1}\"/>",
                y - 7.0,
                y + 7.0
            );
        }
        super::MarkerKind::Hook => {
            let _ = write!(
                out,
                "<polygon points=\"{x:.1},{:.1} {:.1},{y:.1} {x:.1},{:.1} {:.1},{y:.1}\"/>",
                y - 5.0,
                x + 5.0,
                y + 5.0,
                x - 5.0
            );
        }
        super::MarkerKind::Signal => {
            let _ = write!(
                out,
                "<polygon points=\"{:.1},{:.1} {:.1},{:.1} {x:.1},{:.1}\"/>",
                x - 4.0,
                y - 6.0,
                x + 4.0,
                y - 6.0,
                y + 1.0
            );
        }
    }
    if m.count > 1 {
        let _ = write!(
            out,
            "<text class=\"marker-count\" x=\"{:.1}\" y=\"{:.1}\">x{}</text>",
            x + 5.0,
            y + 3.5,
            m.count
        );
    }
    out.push_str("</g>");
}

/// Draws `timeline` as one `<svg>` element (with its style and legend).
pub fn render(timeline: &Timeline) -> String {
    let scale = Scale {
        end: timeline.end.max(1.0),
    };
    let snaps = &timeline.snapshots;
    let mut conditions: Vec<&str> = Vec::new();
    for (_, s) in snaps {
        for (c, _) in &s.conditions {
            if !conditions.contains(&c.as_str()) {
                conditions.push(c);
            }
        }
    }
    let pod_markers: Vec<&Marker> = timeline
        .markers
        .iter()
        .filter(|m| {
            m.container
                .as_ref()
                .is_none_or(|c| !timeline.lanes.iter().any(|l| &l.name == c))
        })
        .collect();

    let top = 44.0;
    let phase_y = top;
    let cond_y = phase_y + ROW_H + 4.0;
    let events_y = cond_y + conditions.len() as f64 * ROW_H + 4.0;
    let lanes_y = events_y + ROW_H + 8.0;
    let lanes_end = lanes_y + timeline.lanes.len() as f64 * LANE_H;
    let legend_y = lanes_end + 30.0;
    let height = legend_y + 100.0;
    let width = LABEL_W + PLOT_W + RIGHT_PAD;

    let mut o = String::new();
    let _ = write!(
        o,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"timeline\" id=\"timeline-svg\" \
         width=\"{width:.0}\" height=\"{height:.0}\" viewBox=\"0 0 {width:.0} {height:.0}\" \
         data-pod=\"{}\" data-end=\"{:.3}\"><style>{STYLE}</style>",
        esc(&timeline.pod),
        scale.end
    );
    let _ = write!(
        o,
        "<text class=\"title\" x=\"8\" y=\"18\">{}</text>\
         <text class=\"kind\" x=\"8\" y=\"32\">seconds since {}</text>",
        esc(&timeline.pod),
        esc(&timeline.origin)
    );

    // Axis: ticks and grid lines over every row.
    o.push_str("<g class=\"axis\">");
    let step = tick_step(scale.end);
    let mut t = 0.0;
    while t <= scale.end + 1e-9 {
        let x = scale.x(t);
        let _ = write!(
            o,
            "<line x1=\"{x:.1}\" y1=\"{:.1}\" x2=\"{x:.1}\" y2=\"{lanes_end:.1}\"/>\
             <text x=\"{x:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>",
            top - 4.0,
            top - 6.0,
            esc(&fmt_secs(t))
        );
        t += step;
    }
    o.push_str("</g>");

    // Phase and conditions along the top.
    let _ = write!(
        o,
        "<g id=\"phase\"><text class=\"label\" x=\"8\" y=\"{:.1}\">phase</text>",
        phase_y + 12.0
    );
    for (i, (t, snap)) in snaps.iter().enumerate() {
        let next = snaps.get(i + 1).map_or(scale.end, |(t, _)| *t);
        let (x0, x1) = (scale.x(*t), scale.x(next));
        if x1 - x0 < 0.01 && i + 1 < snaps.len() {
            continue;
        }
        let _ = write!(
            o,
            "<rect class=\"phase phase-{}\" data-phase=\"{}\" data-status=\"{}\" x=\"{x0:.1}\" \
             y=\"{phase_y:.1}\" width=\"{:.1}\" height=\"{:.1}\"><title>{} {} — {} ({})</title></rect>",
            ident(&snap.phase),
            esc(&snap.phase),
            esc(&snap.status_text),
            (x1 - x0).max(0.5),
            ROW_H - 4.0,
            esc(&fmt_secs(*t)),
            esc(&snap.phase),
            esc(&snap.status_text),
            esc(&snap.ready)
        );
    }
    o.push_str("</g>");
    for (n, cond) in conditions.iter().enumerate() {
        let y = cond_y + n as f64 * ROW_H;
        let _ = write!(
            o,
            "<g class=\"condition\" id=\"condition-{}\"><text class=\"label\" x=\"8\" y=\"{:.1}\">{}</text>",
            ident(cond),
            y + 11.0,
            esc(cond)
        );
        for (t0, t1, v) in segments(snaps, scale.end, |s| {
            s.conditions
                .iter()
                .find(|(c, _)| c == cond)
                .map(|(_, v)| v.as_str())
        }) {
            let (x0, x1) = (scale.x(t0), scale.x(t1));
            let _ = write!(
                o,
                "<rect class=\"cond cond-{}\" x=\"{x0:.1}\" y=\"{y:.1}\" width=\"{:.1}\" \
                 height=\"{:.1}\"><title>{} {cond}={}</title></rect>",
                ident(v),
                (x1 - x0).max(0.5),
                ROW_H - 6.0,
                esc(&fmt_secs(t0)),
                esc(v)
            );
        }
        o.push_str("</g>");
    }

    // Pod-level events.
    let _ = write!(
        o,
        "<g id=\"pod-events\"><text class=\"label\" x=\"8\" y=\"{:.1}\">pod events</text>",
        events_y + 12.0
    );
    for m in &pod_markers {
        marker_shape(&mut o, m, scale.x(m.t), events_y + ROW_H / 2.0);
    }
    o.push_str("</g>");

    // One lane per container.
    for (n, lane) in timeline.lanes.iter().enumerate() {
        let y = lanes_y + n as f64 * LANE_H;
        let mid = y + LANE_H / 2.0;
        let _ = write!(
            o,
            "<g class=\"lane\" id=\"lane-{}\" data-name=\"{}\" data-kind=\"{}\">\
             <rect class=\"lane-bg\" x=\"{LABEL_W:.1}\" y=\"{:.1}\" width=\"{PLOT_W:.1}\" height=\"{:.1}\"/>\
             <text class=\"label\" x=\"8\" y=\"{:.1}\">{}</text>\
             <text class=\"kind\" x=\"8\" y=\"{:.1}\">{}</text>",
            ident(&lane.name),
            esc(&lane.name),
            lane.kind.as_str(),
            y + 2.0,
            LANE_H - 4.0,
            mid - 1.0,
            esc(&lane.name),
            mid + 10.0,
            lane.kind.as_str()
        );
        let (lane_spans, restarts) = spans(lane, snaps, scale.end);
        for s in &lane_spans {
            let (x0, x1) = (scale.x(s.start), scale.x(s.end));
            let w = (x1 - x0).max(1.0);
            let mut class = format!("span state-{}", s.state);
            if !s.reason.is_empty() {
                let _ = write!(class, " reason-{}", ident(&s.reason));
            }
            let label = if s.state == "stopped" {
                format!("stopped at the pod's end (reported as {})", s.reason)
            } else if s.reason.is_empty() {
                s.state.to_string()
            } else {
                format!("{} {}", s.state, s.reason)
            };
            let mut title = format!(
                "{} {} → {}: {label}",
                lane.name,
                fmt_secs(s.start),
                fmt_secs(s.end)
            );
            if !s.detail.is_empty() {
                let _ = write!(title, " ({})", s.detail);
            }
            let _ = write!(
                o,
                "<rect class=\"{class}\" data-state=\"{}\" data-reason=\"{}\" data-start=\"{:.3}\" \
                 data-end=\"{:.3}\" x=\"{x0:.1}\" y=\"{:.1}\" width=\"{w:.1}\" height=\"{SPAN_H:.1}\">\
                 <title>{}</title></rect>",
                s.state,
                esc(&s.reason),
                s.start,
                s.end,
                mid - SPAN_H / 2.0,
                esc(&title)
            );
            // Room for the reason inside the span: about 6 px a character.
            let text = if s.reason.is_empty() || s.state == "stopped" {
                s.state
            } else {
                s.reason.as_str()
            };
            if w > text.len() as f64 * 6.0 + 6.0 {
                let _ = write!(
                    o,
                    "<text class=\"span-text\" x=\"{:.1}\" y=\"{:.1}\">{}</text>",
                    x0 + 3.0,
                    mid + 3.5,
                    esc(text)
                );
            }
        }
        for (t, count) in restarts {
            let x = scale.x(t);
            let _ = write!(
                o,
                "<line class=\"restart\" data-t=\"{t:.3}\" data-count=\"{count}\" x1=\"{x:.1}\" \
                 y1=\"{:.1}\" x2=\"{x:.1}\" y2=\"{:.1}\"><title>{} restart #{count}</title></line>",
                y + 1.0,
                y + LANE_H - 1.0,
                esc(&fmt_secs(t))
            );
        }
        for m in timeline
            .markers
            .iter()
            .filter(|m| m.container.as_deref() == Some(lane.name.as_str()))
        {
            marker_shape(&mut o, m, scale.x(m.t), y + 5.0);
        }
        o.push_str("</g>");
    }

    // The deletion and its grace period, over every row.
    if let Some(d) = timeline.deletion {
        let (x0, x1) = (scale.x(d.t), scale.x(d.t + d.grace));
        let _ = write!(
            o,
            "<rect id=\"deletion\" data-t=\"{:.3}\" data-grace=\"{:.0}\" x=\"{x0:.1}\" y=\"{:.1}\" \
             width=\"{:.1}\" height=\"{:.1}\"><title>deleted at {}, grace period {}s (ends at {})</title></rect>\
             <line class=\"deletion-line\" x1=\"{x0:.1}\" y1=\"{:.1}\" x2=\"{x0:.1}\" y2=\"{lanes_end:.1}\"/>",
            d.t,
            d.grace,
            top - 2.0,
            (x1 - x0).max(1.0),
            lanes_end - top + 2.0,
            esc(&fmt_secs(d.t)),
            d.grace,
            esc(&fmt_secs(d.t + d.grace)),
            top - 2.0
        );
    }

    legend(&mut o, legend_y);
    o.push_str("</svg>");
    o
}

/// The legend: each colour and marker with its meaning.
fn legend(o: &mut String, y: f64) {
    const SWATCHES: [(&str, &str); 10] = [
        (
            "span state-waiting reason-ContainerCreating",
            "waiting (creating)",
        ),
        ("span state-waiting", "waiting"),
        ("span state-waiting reason-CrashLoopBackOff", "back-off"),
        ("span state-running", "running"),
        ("span state-ready", "ready"),
        ("span state-terminated reason-Completed", "completed"),
        ("span state-terminated reason-Error", "error"),
        ("span state-terminated reason-OOMKilled", "OOM killed"),
        ("span state-stopped", "sidecar stopped at the end"),
        ("cond-False", "condition False"),
    ];
    /// The top row's colours: the pod's phase (and a condition True, drawn alike).
    const PHASES: [&str; 5] = ["Pending", "Running", "Succeeded", "Failed", "Unknown"];
    let _ = write!(o, "<g class=\"legend\" id=\"legend\">");
    for (i, (class, text)) in SWATCHES.iter().enumerate() {
        let x = 8.0 + (i % 5) as f64 * 200.0;
        let yy = y + (i / 5) as f64 * 18.0;
        let _ = write!(
            o,
            "<rect class=\"{class}\" x=\"{x:.1}\" y=\"{yy:.1}\" width=\"22\" height=\"12\"/>\
             <text x=\"{:.1}\" y=\"{:.1}\">{text}</text>",
            x + 28.0,
            yy + 10.0
        );
    }
    let py = y + 36.0;
    let _ = write!(
        o,
        "<g id=\"legend-phase\"><text x=\"8\" y=\"{:.1}\">phase:</text>",
        py + 10.0
    );
    for (i, phase) in PHASES.iter().enumerate() {
        let x = 60.0 + i as f64 * 120.0;
        let _ = write!(
            o,
            "<rect class=\"phase phase-{phase}\" data-phase=\"{phase}\" x=\"{x:.1}\" y=\"{py:.1}\" \
             width=\"22\" height=\"12\"/><text x=\"{:.1}\" y=\"{:.1}\">{phase}</text>",
            x + 28.0,
            py + 10.0
        );
    }
    o.push_str("</g>");
    let yy = y + 66.0;
    let items = [
        (
            "<circle class=\"marker event\" cx=\"19\" cy=\"0\" r=\"3.5\"/>",
            "event (hover for its message)",
        ),
        (
            "<line class=\"marker probe-failure\" x1=\"19\" y1=\"-7\" x2=\"19\" y2=\"7\"/>",
            "probe failure",
        ),
        (
            "<polygon class=\"marker hook\" points=\"19,-5 24,0 19,5 14,0\"/>",
            "hook",
        ),
        (
            "<polygon class=\"marker signal\" points=\"15,-6 23,-6 19,1\"/>",
            "signal",
        ),
        (
            "<line class=\"restart\" x1=\"19\" y1=\"-7\" x2=\"19\" y2=\"7\"/>",
            "restart",
        ),
    ];
    for (i, (shape, text)) in items.iter().enumerate() {
        let x = i as f64 * 200.0;
        let _ = write!(
            o,
            "<g transform=\"translate({x:.1},{yy:.1})\">{shape}<text x=\"36\" y=\"4\">{text}</text></g>"
        );
    }
    let _ = write!(
        o,
        "<rect id=\"legend-deletion\" x=\"8\" y=\"{:.1}\" width=\"22\" height=\"12\" fill=\"#d64541\" \
         fill-opacity=\"0.12\" stroke=\"#d64541\"/><text x=\"36\" y=\"{:.1}\">deletion: grace period</text>",
        yy + 12.0,
        yy + 22.0
    );
    o.push_str("</g>");
}
