//! A pod's life as a picture: the timeline model and its one renderer (server-side SVG).
//!
//! A [`Timeline`] is what is known of a pod over time: its status snapshots (the same
//! [`StatusSnapshot`] `podvisor simulate` prints), markers (events, probe failures, hooks,
//! signals) and its deletion with the grace period. It is built either from a simulation's
//! records ([`Timeline::from_sim`]) or from what the API serves — the agent's recorded status
//! transitions ([`Transition`]) and the pod's core/v1 Events ([`Timeline::from_api`]) — and
//! [`svg::render`] draws it; [`html::page`] wraps the drawing in a self-contained page. Both
//! `podvisor simulate --output html|svg` and `podvisor dashboard` use this module, so the
//! picture is the same everywhere.
//!
//! What it does not do: IO or reading the clock (the caller passes `now`).

mod from_api;
mod from_sim;
pub mod html;
pub mod svg;

use crate::sim::StatusSnapshot;
use k8s_openapi::api::core::v1::{Pod, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, Time};
use serde::{Deserialize, Serialize};

/// How many status transitions of a pod are kept (the oldest go first).
pub const HISTORY_LIMIT: usize = 500;

/// One recorded change of a pod's status, as the agent keeps it and the API serves it
/// (`GET .../pods/NAME/history`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Transition {
    /// When the agent published it (microseconds: several transitions share a second).
    pub time: MicroTime,
    /// The pod's `metadata.deletionTimestamp` then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deletion_timestamp: Option<Time>,
    /// The pod's `metadata.deletionGracePeriodSeconds` then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deletion_grace_period_seconds: Option<i64>,
    /// The pod's status.
    pub status: PodStatus,
}

impl Transition {
    /// The transition `pod` is at `time`.
    pub fn of(pod: &Pod, time: k8s_openapi::jiff::Timestamp) -> Transition {
        Transition {
            time: MicroTime(time),
            deletion_timestamp: pod.metadata.deletion_timestamp.clone(),
            deletion_grace_period_seconds: pod.metadata.deletion_grace_period_seconds,
            status: pod.status.clone().unwrap_or_default(),
        }
    }
}

/// Which list a container comes from; lanes are drawn in this order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum LaneKind {
    /// An init container that runs to completion.
    Init,
    /// An init container with `restartPolicy: Always`.
    Sidecar,
    /// A regular container.
    Regular,
    /// An ephemeral (debug) container.
    Ephemeral,
}

impl LaneKind {
    /// `init`, `sidecar`, `regular`, `ephemeral`.
    pub fn as_str(self) -> &'static str {
        match self {
            LaneKind::Init => "init",
            LaneKind::Sidecar => "sidecar",
            LaneKind::Regular => "regular",
            LaneKind::Ephemeral => "ephemeral",
        }
    }
}

/// One container's lane.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lane {
    /// The container's name.
    pub name: String,
    /// Its kind.
    pub kind: LaneKind,
}

/// What a marker stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MarkerKind {
    /// An event (`Started`, `BackOff`, `Killing`, ...).
    Event,
    /// A failed probe (the kubelet's `Unhealthy` event).
    ProbeFailure,
    /// A lifecycle hook ran or failed.
    Hook,
    /// A signal the runtime sent (simulations only).
    Signal,
}

impl MarkerKind {
    /// The marker's CSS class.
    pub fn as_str(self) -> &'static str {
        match self {
            MarkerKind::Event => "event",
            MarkerKind::ProbeFailure => "probe-failure",
            MarkerKind::Hook => "hook",
            MarkerKind::Signal => "signal",
        }
    }
}

/// A point in time worth a mark.
#[derive(Debug, Clone, PartialEq)]
pub struct Marker {
    /// Seconds since the timeline's origin.
    pub t: f64,
    /// The container it is about (`None`: the pod).
    pub container: Option<String>,
    /// What it is.
    pub kind: MarkerKind,
    /// A `Warning` event (or a failure).
    pub warning: bool,
    /// The event reason (or the hook/signal's name).
    pub reason: String,
    /// The message shown on hover.
    pub message: String,
    /// How many times it happened (an aggregated event's `count`, or repeats folded).
    pub count: i32,
    /// When it was last seen (seconds since the origin; `t` for a single occurrence).
    pub last: f64,
}

impl Marker {
    /// The key kubectl's event aggregation folds by: the same reason, message and object.
    fn fold_key(&self) -> (&Option<String>, MarkerKind, bool, &str, &str) {
        (
            &self.container,
            self.kind,
            self.warning,
            &self.reason,
            &self.message,
        )
    }
}

/// Folds repeated markers (same container, kind, reason and message) into the first, with
/// the sum of their counts and the last time seen, as kubectl's `BackOff (x29 over 4m40s)`:
/// a crash loop's ~90 events become a handful of marks. `markers` must be in time order.
pub fn fold_markers(markers: Vec<Marker>) -> Vec<Marker> {
    let mut out: Vec<Marker> = Vec::new();
    for m in markers {
        match out.iter_mut().find(|o| o.fold_key() == m.fold_key()) {
            Some(o) => {
                o.count += m.count;
                o.last = o.last.max(m.last).max(m.t);
            }
            None => out.push(m),
        }
    }
    out
}

/// The pod's deletion: when it was asked, and its grace period.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Deletion {
    /// Seconds since the origin.
    pub t: f64,
    /// The grace period, in seconds.
    pub grace: f64,
}

/// Everything the picture shows (see the module docs).
#[derive(Debug, Clone, PartialEq)]
pub struct Timeline {
    /// `namespace/name`.
    pub pod: String,
    /// The origin's wall-clock time as RFC 3339 (the axis is in seconds since it).
    pub origin: String,
    /// The lanes, init → sidecar → regular → ephemeral, each in spec order.
    pub lanes: Vec<Lane>,
    /// Status snapshots in time order, seconds since the origin.
    pub snapshots: Vec<(f64, StatusSnapshot)>,
    /// Markers in time order.
    pub markers: Vec<Marker>,
    /// The deletion, if the pod was deleted.
    pub deletion: Option<Deletion>,
    /// Where the picture ends (seconds since the origin).
    pub end: f64,
}

/// The lanes of `pod`'s spec, in drawing order.
pub fn lanes_of(pod: &Pod) -> Vec<Lane> {
    let mut lanes = Vec::new();
    if let Some(spec) = &pod.spec {
        for c in spec.init_containers.iter().flatten() {
            let kind = if podvisor_api::pod::is_sidecar(c) {
                LaneKind::Sidecar
            } else {
                LaneKind::Init
            };
            lanes.push(Lane {
                name: c.name.clone(),
                kind,
            });
        }
        lanes.extend(spec.containers.iter().map(|c| Lane {
            name: c.name.clone(),
            kind: LaneKind::Regular,
        }));
        lanes.extend(spec.ephemeral_containers.iter().flatten().map(|c| Lane {
            name: c.name.clone(),
            kind: LaneKind::Ephemeral,
        }));
    }
    // A stable sort keeps spec order within a kind.
    lanes.sort_by_key(|l| l.kind);
    lanes
}

/// The kind of an event reason as a marker.
fn marker_kind(reason: &str) -> MarkerKind {
    match reason {
        "Unhealthy" => MarkerKind::ProbeFailure,
        "FailedPostStartHook" | "FailedPreStopHook" => MarkerKind::Hook,
        _ => MarkerKind::Event,
    }
}

impl Timeline {
    /// Adds lanes for containers seen in snapshots but not in the spec (an ephemeral container
    /// added later), and sorts the markers by time.
    fn finish(mut self) -> Timeline {
        let mut extra = Vec::new();
        for (_, s) in &self.snapshots {
            for c in &s.containers {
                if !self.lanes.iter().any(|l| l.name == c.name)
                    && !extra.iter().any(|l: &Lane| l.name == c.name)
                {
                    let kind = if c.ephemeral {
                        LaneKind::Ephemeral
                    } else if c.init {
                        LaneKind::Init
                    } else {
                        LaneKind::Regular
                    };
                    extra.push(Lane {
                        name: c.name.clone(),
                        kind,
                    });
                }
            }
        }
        self.lanes.extend(extra);
        self.lanes.sort_by_key(|l| l.kind);
        self.markers.sort_by(|a, b| a.t.total_cmp(&b.t));
        self.markers = fold_markers(std::mem::take(&mut self.markers));
        let last = self
            .snapshots
            .iter()
            .map(|(t, _)| *t)
            .chain(self.markers.iter().map(|m| m.last.max(m.t)))
            .chain(self.deletion.iter().map(|d| d.t + d.grace))
            .fold(0.0_f64, f64::max);
        self.end = self.end.max(last).max(1.0);
        self
    }
}
