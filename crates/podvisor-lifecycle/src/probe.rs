//! Probe workers: when each probe is due and how results are counted (6.1, 6.2).
//!
//! Running a probe is the driver's job; this module only decides timing and thresholds.

use crate::action::{InstanceId, ProbeKind};
use crate::time::secs;
use k8s_openapi::api::core::v1::Probe;
use k8s_openapi::jiff::{SignedDuration, Timestamp};

/// A probe result as cached per instance (R3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProbeResult {
    /// No result yet (startup's initial value).
    Unknown,
    /// Passed.
    Success,
    /// Failed.
    Failure,
}

impl ProbeResult {
    /// The value before the first probe of a new instance (R3): readiness Failure, liveness
    /// Success, startup Unknown.
    pub fn initial(kind: ProbeKind) -> ProbeResult {
        match kind {
            ProbeKind::Readiness => ProbeResult::Failure,
            ProbeKind::Liveness => ProbeResult::Success,
            ProbeKind::Startup => ProbeResult::Unknown,
        }
    }
}

/// Probe thresholds with R1 defaults applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProbeTiming {
    /// `initialDelaySeconds`.
    pub initial_delay: i64,
    /// `periodSeconds` (default 10).
    pub period: i64,
    /// `successThreshold` (default 1).
    pub success_threshold: i32,
    /// `failureThreshold` (default 3).
    pub failure_threshold: i32,
}

impl ProbeTiming {
    /// Reads a probe with R1 defaults for fields that are unset or 0.
    pub fn of(probe: &Probe) -> ProbeTiming {
        fn positive(v: Option<i32>, default: i32) -> i32 {
            match v {
                Some(v) if v > 0 => v,
                _ => default,
            }
        }
        ProbeTiming {
            initial_delay: i64::from(probe.initial_delay_seconds.unwrap_or(0).max(0)),
            period: i64::from(positive(probe.period_seconds, 10)),
            success_threshold: positive(probe.success_threshold, 1),
            failure_threshold: positive(probe.failure_threshold, 3),
        }
    }
}

/// One worker per (container, probe kind) (R2).
#[derive(Debug, Clone)]
pub struct ProbeWorker {
    /// Spec container name.
    pub container: String,
    /// Which probe.
    pub kind: ProbeKind,
    /// The probe spec.
    pub probe: Probe,
    /// Thresholds.
    pub timing: ProbeTiming,
    /// Start of the ticker (worker creation or last manual trigger, R4/R12).
    origin: Timestamp,
    /// When the next tick is due.
    pub next_tick: Timestamp,
    /// A probe has been handed to the driver and not answered yet.
    pub in_flight: Option<InstanceId>,
    /// The instance this worker last saw (R7).
    pub instance: Option<InstanceId>,
    /// On hold after a published liveness failure or any startup result (R8).
    pub on_hold: bool,
    /// The last raw result and how many times in a row it was seen (R11).
    last: Option<bool>,
    run: i32,
    /// The worker exited (R5, R9, R10).
    pub stopped: bool,
}

impl ProbeWorker {
    /// A worker created at `now`; it probes immediately, then every period (R4).
    pub fn new(container: &str, kind: ProbeKind, probe: &Probe, now: Timestamp) -> ProbeWorker {
        ProbeWorker {
            container: container.to_string(),
            kind,
            probe: probe.clone(),
            timing: ProbeTiming::of(probe),
            origin: now,
            next_tick: now,
            in_flight: None,
            instance: None,
            on_hold: false,
            last: None,
            run: 0,
            stopped: false,
        }
    }

    fn period(&self) -> SignedDuration {
        secs(self.timing.period)
    }

    /// Moves `next_tick` to the first ticker instant strictly after `now`. Like Go's ticker,
    /// ticks missed while a probe was running are dropped.
    pub fn schedule_after(&mut self, now: Timestamp) {
        let period = self.period().as_nanos();
        let elapsed = now.duration_since(self.origin).as_nanos();
        let n = if elapsed < 0 { 0 } else { elapsed / period + 1 };
        let offset = i64::try_from(n.saturating_mul(period)).unwrap_or(i64::MAX);
        self.next_tick = self.origin + SignedDuration::from_nanos(offset);
    }

    /// A manual trigger (R12): probe now and restart the ticker from now.
    pub fn trigger(&mut self, now: Timestamp) {
        self.origin = now;
        self.next_tick = now;
    }

    /// Switches to a new instance (R7): clears "on hold". The run counter is deliberately kept,
    /// as in released kubelets.
    pub fn observe_instance(&mut self, id: InstanceId) {
        if self.instance != Some(id) {
            self.instance = Some(id);
            self.on_hold = false;
        }
    }

    /// Counts one raw result (R11) and returns the result to publish, if a threshold was reached.
    /// After publishing a liveness failure or any startup result the worker goes on hold.
    pub fn count(&mut self, success: bool) -> Option<ProbeResult> {
        if self.last == Some(success) {
            self.run = self.run.saturating_add(1);
        } else {
            self.last = Some(success);
            self.run = 1;
        }
        let publish = if success && self.run >= self.timing.success_threshold {
            ProbeResult::Success
        } else if !success && self.run >= self.timing.failure_threshold {
            ProbeResult::Failure
        } else {
            return None;
        };
        if self.kind == ProbeKind::Startup
            || (self.kind == ProbeKind::Liveness && publish == ProbeResult::Failure)
        {
            self.on_hold = true;
            self.run = 0;
        }
        Some(publish)
    }
}
