//! The check sequences the scenarios share, each named after what the upstream tests assert:
//! container outcomes, phases and conditions, properties of every observed update, events,
//! kubectl's columns, and the orderings of the event log ([`EvChecks`]). Each records its
//! failures in the scenario's [`Checks`] with a message saying what was expected and what was
//! seen; none panics.

use super::harness::*;
use crate::conformance_support::{Checks, EvLog, secs};
use serde_json::Value;
use std::process::Output;
use std::time::Instant;

// ----------------------------------------------------------------------------------------------
// Every observed update

/// Checks `ok` on each update of `obs`; a failure reads `t=<seconds>: <what(update)>`.
pub(crate) fn check_each(
    c: &mut Checks,
    pod: &Pod,
    obs: &[Obs],
    ok: impl Fn(&Value) -> bool,
    what: impl Fn(&Value) -> String,
) {
    for o in obs {
        if !ok(&o.pod) {
            c.check(false, format!("t={:.3}: {}", pod.t(o), what(&o.pod)));
        }
    }
}

/// The restartCount of each of `names` is 0 on every update of `obs` (`what`: the failure).
pub(crate) fn check_not_restarted(
    c: &mut Checks,
    pod: &Pod,
    obs: &[Obs],
    names: &[&str],
    what: &str,
) {
    for o in obs {
        for name in names {
            c.check(
                restart_count(cstatus(&o.pod, name)) == 0,
                format!("t={:.3}: {name} {what}", pod.t(o)),
            );
        }
    }
}

/// No container or init container of the pod ever restarted: the restart counts of every
/// observed update sum to 0.
pub(crate) fn check_no_restarts(c: &mut Checks, pod: &Pod) {
    for o in pod.observations() {
        let sum: u64 = ["containerStatuses", "initContainerStatuses"]
            .iter()
            .filter_map(|k| o.pod["status"][k].as_array())
            .flatten()
            .map(restart_count)
            .sum();
        c.check(
            sum == 0,
            format!("t={:.3}: restart counts sum to {sum}", pod.t(&o)),
        );
    }
}

/// restartCount of `name` never decreases over the observed updates.
pub(crate) fn check_monotonic(c: &mut Checks, pod: &Pod, name: &str) {
    let mut previous = 0;
    for o in pod.observations() {
        let n = restart_count(cstatus(&o.pod, name));
        if cstatus(&o.pod, name).is_null() {
            continue;
        }
        c.check(
            n >= previous,
            format!("t={:.3}: restartCount went down to {n}", pod.t(&o)),
        );
        previous = previous.max(n);
    }
}

/// The phase of every update of `obs` is `want`.
pub(crate) fn check_phase_throughout(c: &mut Checks, pod: &Pod, obs: &[Obs], want: &str) {
    check_each(
        c,
        pod,
        obs,
        |p| phase(p) == want,
        |p| format!("phase {want} (is {})", phase(p)),
    );
}

/// P5 (1.32+): once the pod is Running, it does not go back to Pending before it ends.
pub(crate) fn check_never_pending_after_running(c: &mut Checks, pod: &Pod) {
    let mut running = false;
    for o in pod.observations() {
        let ph = phase(&o.pod);
        c.check(
            !(running && ph == "Pending"),
            format!("t={:.3}: back to Pending after Running", pod.t(&o)),
        );
        running |= ph == "Running";
    }
}

/// `name` waits with `PodInitializing` in every update of `obs` that has its status.
pub(crate) fn check_always_pod_initializing(c: &mut Checks, pod: &Pod, obs: &[Obs], name: &str) {
    check_each(
        c,
        pod,
        obs,
        |p| {
            let cs = cstatus(p, name);
            cs.is_null()
                || (state_kind(cs) == "waiting" && state(cs)["reason"] == "PodInitializing")
        },
        |p| format!("{name} waits with PodInitializing ({})", show(p, name)),
    );
}

/// D3: `Initialized`, once True, stays True (a sidecar restarting after initialization does not
/// undo it).
pub(crate) fn check_initialized_stays(c: &mut Checks, pod: &Pod) {
    let mut was = false;
    for o in pod.observations() {
        let s = cond_status(&o.pod, "Initialized");
        c.check(
            !(was && s == "False"),
            format!(
                "t={:.3}: Initialized went from True back to False",
                pod.t(&o)
            ),
        );
        was |= s == "True";
    }
}

/// Upstream's `initialized`: (every init container terminated with 0, one failed).
pub(crate) fn init_progress(p: &Value) -> (bool, bool) {
    let want = p["spec"]["initContainers"].as_array().map_or(0, Vec::len);
    let statuses = p["status"]["initContainerStatuses"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let mut all = statuses.len() == want;
    let mut failed = false;
    for s in &statuses {
        let t = &s["state"]["terminated"];
        if !t.is_object() {
            all = false;
        } else if t["exitCode"] != 0 {
            all = false;
            failed = true;
        }
    }
    (all, failed)
}

/// The invariants upstream's init-container tests state for every observed update (01, 02):
/// while initialization is unfinished, `app` (when it has a status) waits with
/// `PodInitializing` and no restarts; `Initialized`, once present, stays present, has a
/// `lastTransitionTime`, is never `Unknown`, is True exactly when every init container
/// succeeded, and never goes back from True to False.
pub(crate) fn check_init_invariants(c: &mut Checks, pod: &Pod, app: &str) {
    let mut was_initialized = false;
    let mut present = false;
    for o in pod.observations() {
        let p = &o.pod;
        let t = pod.t(&o);
        let (all, failed) = init_progress(p);
        let a = cstatus(p, app);
        if (!all || failed) && !a.is_null() {
            c.check(
                state_kind(a) == "waiting" && state(a)["reason"] == "PodInitializing",
                format!(
                    "t={t:.3}: init unfinished but {app} is {} {}",
                    state_kind(a),
                    state(a)["reason"]
                ),
            );
            c.check(
                restart_count(a) == 0,
                format!(
                    "t={t:.3}: init unfinished but {app} restartCount {}",
                    a["restartCount"]
                ),
            );
        }
        let ic = cond(p, "Initialized");
        if ic.is_null() {
            c.check(
                !present,
                format!("t={t:.3}: condition Initialized disappeared"),
            );
            continue;
        }
        present = true;
        let s = ic["status"].as_str().unwrap_or("");
        c.check(
            s == "True" || s == "False",
            format!("t={t:.3}: Initialized is {s:?}"),
        );
        c.check(
            ic["lastTransitionTime"]
                .as_str()
                .is_some_and(|l| !l.is_empty()),
            format!("t={t:.3}: Initialized has no lastTransitionTime"),
        );
        c.check(
            (s == "True") == (all && !failed),
            format!("t={t:.3}: Initialized {s} but all init containers done = {all}"),
        );
        c.check(
            !(was_initialized && s == "False"),
            format!("t={t:.3}: Initialized went from True back to False"),
        );
        was_initialized |= s == "True";
    }
}

// ----------------------------------------------------------------------------------------------
// One update: phase, containers, conditions

/// The phase of `p` is `want`.
pub(crate) fn check_phase(c: &mut Checks, p: &Value, want: &str) {
    c.check(phase(p) == want, format!("phase {want} (is {})", phase(p)));
}

/// The final status (the object of the `DELETED` event) has phase `want`.
pub(crate) fn check_final_phase(c: &mut Checks, last: &Obs, want: &str) {
    c.check(
        phase(&last.pod) == want,
        format!("final phase {want} (is {})", phase(&last.pod)),
    );
}

/// `name` is terminated with `code` and `reason` in `o`.
pub(crate) fn check_terminated(
    c: &mut Checks,
    pod: &Pod,
    o: &Obs,
    name: &str,
    code: i64,
    reason: &str,
) {
    c.check(
        terminated_with(cstatus(&o.pod, name), code, reason),
        format!(
            "t={:.3}: {name} terminated with {code}/{reason} ({})",
            pod.t(o),
            show(&o.pod, name)
        ),
    );
}

/// Each `(name, code, reason)` of `want` is terminated so in `o`.
pub(crate) fn check_all_terminated(c: &mut Checks, pod: &Pod, o: &Obs, want: &[(&str, i64, &str)]) {
    for &(name, code, reason) in want {
        check_terminated(c, pod, o, name, code, reason);
    }
}

/// `lastState.terminated` of `name` in `p` has `code` and `reason` (the previous instance).
pub(crate) fn check_last_terminated(
    c: &mut Checks,
    p: &Value,
    name: &str,
    code: i64,
    reason: &str,
) {
    let last = &cstatus(p, name)["lastState"]["terminated"];
    c.check(
        last["exitCode"] == code && last["reason"] == reason,
        format!("{name} lastState terminated {code} / {reason} (is {last})"),
    );
}

/// `LOGS(name, previous)` answers after a restart (section 0.3: the previous instance's log
/// stays readable); `want` on its text where the content matters.
pub(crate) fn check_previous_logs(
    c: &mut Checks,
    pod: &Pod,
    name: &str,
    want: impl Fn(&str) -> bool,
) {
    let previous = pod.logs(name, true);
    c.check(
        previous.as_deref().is_ok_and(want),
        format!("LOGS({name}, previous) after the restart: {previous:?}"),
    );
}

/// Condition `Initialized` False with `ContainersNotInitialized` and `message`.
pub(crate) fn check_not_initialized(c: &mut Checks, p: &Value, message: &str) {
    let ic = cond(p, "Initialized");
    c.check(
        ic["status"] == "False"
            && ic["reason"] == "ContainersNotInitialized"
            && ic["message"] == message,
        format!("Initialized False/ContainersNotInitialized/{message:?} (is {ic})"),
    );
}

/// D4, D5: `ContainersReady` and `Ready` False with `reason` (and `message` when given).
pub(crate) fn check_not_ready(c: &mut Checks, p: &Value, reason: &str, message: Option<&str>) {
    for t in ["ContainersReady", "Ready"] {
        let k = cond(p, t);
        c.check(
            k["status"] == "False"
                && k["reason"] == reason
                && message.is_none_or(|m| k["message"] == m),
            format!(
                "{t} False/{reason}{} (is {k})",
                message.map(|m| format!("/{m:?}")).unwrap_or_default()
            ),
        );
    }
}

/// D4, D5: `ContainersReady` and `Ready` False for `ContainersNotReady`, naming `unready`.
pub(crate) fn check_containers_not_ready(c: &mut Checks, p: &Value, unready: &str) {
    let message = format!("containers with unready status: [{unready}]");
    check_not_ready(c, p, "ContainersNotReady", Some(&message));
}

/// D3, D4, D5 for a terminal pod: `ContainersReady` and `Ready` False with reason
/// `PodCompleted`/`PodFailed`; `Initialized` True with reason `PodCompleted` when Succeeded.
pub(crate) fn check_terminal_conditions(c: &mut Checks, p: &Value) {
    let reason = if phase(p) == "Succeeded" {
        "PodCompleted"
    } else {
        "PodFailed"
    };
    check_not_ready(c, p, reason, None);
    if reason == "PodCompleted" {
        let k = cond(p, "Initialized");
        c.check(
            k["status"] == "True" && k["reason"] == "PodCompleted",
            format!("Initialized True/PodCompleted (is {k})"),
        );
    }
}

/// Every condition of `order` is True in `p` and their `lastTransitionTime`s do not decrease
/// along `order`; the times (NaN when missing).
pub(crate) fn check_condition_order(c: &mut Checks, p: &Value, order: &[&str]) -> Vec<f64> {
    let mut times = Vec::new();
    for t in order {
        c.check(cond_status(p, t) == "True", format!("{t} present and True"));
        times.push(ts(&cond(p, t)["lastTransitionTime"]).unwrap_or(f64::NAN));
    }
    for (i, w) in times.windows(2).enumerate() {
        c.check(
            w[0] <= w[1],
            format!(
                "lastTransitionTime {} ({}) <= {} ({})",
                order[i],
                w[0],
                order[i + 1],
                w[1]
            ),
        );
    }
    times
}

/// A readiness probe's initial delay of `delay` s: `Ready.lastTransitionTime` comes at least
/// that long after `name`'s `state.running.startedAt` (two status timestamps of 1 s
/// resolution: the document's ±1 s). The seconds between them.
pub(crate) fn check_ready_after_delay(
    c: &mut Checks,
    p: &Value,
    name: &str,
    delay: f64,
) -> Option<f64> {
    let ready_at = ts(&cond(p, "Ready")["lastTransitionTime"]);
    let took = started_at(p, name).zip(ready_at).map(|(s, r)| r - s);
    c.check(
        took.is_some_and(|d| d >= delay - 1.0),
        format!(
            "Ready.lastTransitionTime - {name} state.running.startedAt = {took:?} s: at least \
             the {delay} s initial delay"
        ),
    );
    took
}

/// M1: the pod of `p` failed with reason `DeadlineExceeded` and the kubelet's message.
pub(crate) fn check_deadline_exceeded(c: &mut Checks, p: &Value) {
    let st = &p["status"];
    c.check(
        st["reason"] == "DeadlineExceeded" && st["message"] == DEADLINE_MESSAGE,
        format!(
            "reason DeadlineExceeded (is {} {})",
            st["reason"], st["message"]
        ),
    );
}

/// M1: the pod failed (the update `failed`, when the harness saw it) no earlier than
/// `deadline` s after `status.startTime` of `p`, and at most `at_most` s after when given (the
/// harness reads the same host clock; a status timestamp has 1 s resolution).
pub(crate) fn check_deadline_timing(
    c: &mut Checks,
    p: &Value,
    failed: &Obs,
    deadline: f64,
    at_most: Option<f64>,
) {
    let start = ts(&p["status"]["startTime"]);
    let at = wall(failed);
    c.check(
        start.is_some_and(|s| at - s >= deadline - 1.0 && at_most.is_none_or(|m| at - s <= m)),
        format!(
            "Failed {:?} s after status.startTime (deadline {deadline} s)",
            start.map(|s| at - s)
        ),
    );
}

/// `EVENTS(pod)`: the Normal `DeadlineExceeded` event with the kubelet's message.
pub(crate) fn check_deadline_event(c: &mut Checks, pod: &Pod) {
    c.check(
        pod.events().iter().any(|e| {
            e["reason"] == "DeadlineExceeded"
                && e["type"] == "Normal"
                && e["message"] == DEADLINE_MESSAGE
        }),
        "EVENTS: Normal DeadlineExceeded",
    );
}

/// The message of an active deadline's expiry (status and event).
pub(crate) const DEADLINE_MESSAGE: &str =
    "Pod was active on the node longer than the specified deadline";

// ----------------------------------------------------------------------------------------------
// Events and kubectl

/// `EVENTS(pod)`: an event with `reason` about `field_path` whose message satisfies `msg`.
pub(crate) fn has_event(
    pod: &Pod,
    reason: &str,
    field_path: &str,
    msg: impl Fn(&str) -> bool,
) -> bool {
    pod.events().iter().any(|e| {
        e["reason"] == reason
            && e["involvedObject"]["fieldPath"] == field_path
            && msg(e["message"].as_str().unwrap_or(""))
    })
}

/// `EVENTS(pod)`: an event with `reason` about `field_path` and exactly `message`.
pub(crate) fn check_event(
    c: &mut Checks,
    pod: &Pod,
    reason: &str,
    field_path: &str,
    message: &str,
) {
    c.check(
        has_event(pod, reason, field_path, |m| m == message),
        format!("EVENTS: {reason} `{message}` for {field_path}"),
    );
}

/// kubectl's READY and STATUS columns are `ready` and `status` now.
pub(crate) fn check_kubectl(c: &mut Checks, pod: &Pod, ready: &str, status: &str) {
    let cols = pod.kubectl_cols();
    c.check(
        cols[1] == ready && cols[2] == status,
        format!("kubectl READY {ready} STATUS {status} (is {cols:?})"),
    );
}

/// Once the pod satisfies `pred` (within 60 s), runs `kubectl get` and, if the pod still
/// satisfies it afterwards (an update in between makes the reading moot), checks READY and
/// STATUS; with `restarts_of`, also that RESTARTS shows that container's restartCount with the
/// age of its last restart, `N (<age> ago)` (K8).
pub(crate) fn check_kubectl_while(
    c: &mut Checks,
    pod: &Pod,
    what: &str,
    pred: impl Fn(&Value) -> bool,
    ready: &str,
    status: &str,
    restarts_of: Option<&str>,
) {
    pod.wait(what, secs(60), &pred);
    let cols = pod.kubectl_cols();
    let now = pod.last();
    if !pred(&now.pod) {
        eprintln!("{}: {what}: the pod changed during kubectl get", pod.name);
        return;
    }
    match restarts_of {
        None => c.check(
            cols[1] == ready && cols[2] == status,
            format!("{what}: kubectl READY {ready} STATUS {status} (is {cols:?})"),
        ),
        Some(name) => {
            let rc = restart_count(cstatus(&now.pod, name));
            c.check(
                cols[1] == ready
                    && cols[2] == status
                    && cols[3].starts_with(&format!("{rc} ("))
                    && cols[3].ends_with(" ago)"),
                format!(
                    "{what}: kubectl READY {ready} STATUS {status} RESTARTS {rc} (..ago) (is \
                     {cols:?})"
                ),
            );
        }
    }
}

// ----------------------------------------------------------------------------------------------
// The event log (section 0.4)

/// The ordering predicates of section 0.4 as checks over one reading of the event log, each
/// failing with the predicate's name: `EvChecks::new(&mut c, &ev).starts_before(x, y)`.
pub(crate) struct EvChecks<'a> {
    c: &'a mut Checks,
    ev: &'a EvLog,
}

impl<'a> EvChecks<'a> {
    pub(crate) fn new(c: &'a mut Checks, ev: &'a EvLog) -> EvChecks<'a> {
        EvChecks { c, ev }
    }

    fn record(&mut self, ok: bool, what: String) -> &mut Self {
        self.c.check(ok, what);
        self
    }

    /// `x` completes before `y` starts.
    pub(crate) fn completes_before(&mut self, x: &str, y: &str) -> &mut Self {
        self.record(
            self.ev.completes_before(x, y),
            format!("{x} completes before {y} starts"),
        )
    }

    /// StartsBefore(x, y).
    pub(crate) fn starts_before(&mut self, x: &str, y: &str) -> &mut Self {
        self.record(
            self.ev.starts_before(x, y),
            format!("StartsBefore({x}, {y})"),
        )
    }

    /// ExitsBefore(x, y).
    pub(crate) fn exits_before(&mut self, x: &str, y: &str) -> &mut Self {
        self.record(self.ev.exits_before(x, y), format!("ExitsBefore({x}, {y})"))
    }

    /// Overlap(x, y) (upstream `RunTogether`).
    pub(crate) fn overlap(&mut self, x: &str, y: &str) -> &mut Self {
        self.record(self.ev.overlap(x, y), format!("Overlap({x}, {y})"))
    }

    /// OverlapFrom(x, y) (upstream `RunTogetherLhsFirst`).
    pub(crate) fn overlap_from(&mut self, x: &str, y: &str) -> &mut Self {
        self.record(self.ev.overlap_from(x, y), format!("OverlapFrom({x}, {y})"))
    }

    /// Not OverlapFrom(x, y).
    pub(crate) fn no_overlap_from(&mut self, x: &str, y: &str) -> &mut Self {
        self.record(
            !self.ev.overlap_from(x, y),
            format!("not OverlapFrom({x}, {y})"),
        )
    }

    /// Restarted(x): at least two `x Starting`.
    pub(crate) fn restarted(&mut self, x: &str) -> &mut Self {
        self.record(self.ev.restarted(x), format!("Restarted({x})"))
    }

    /// NotRestarted(x) for each of `xs`: exactly one `x Starting`.
    pub(crate) fn not_restarted(&mut self, xs: &[&str]) -> &mut Self {
        for x in xs {
            self.record(self.ev.not_restarted(x), format!("NotRestarted({x})"));
        }
        self
    }

    /// Starts(x): some `x Starting`.
    pub(crate) fn starts(&mut self, x: &str) -> &mut Self {
        self.record(
            self.ev.first(x, "Starting").is_some(),
            format!("Starts({x})"),
        )
    }

    /// DoesntStart(x) for each of `xs`: no `x Starting`.
    pub(crate) fn doesnt_start(&mut self, xs: &[&str]) -> &mut Self {
        for x in xs {
            self.record(
                self.ev.first(x, "Starting").is_none(),
                format!("DoesntStart({x})"),
            );
        }
        self
    }

    /// Exits(x): some `x Exiting`.
    pub(crate) fn exits(&mut self, x: &str) -> &mut Self {
        self.record(self.ev.first(x, "Exiting").is_some(), format!("Exits({x})"))
    }

    /// StartsBefore(x, y) for every `x` before `y` in `chain`.
    pub(crate) fn all_start_before(&mut self, chain: &[&str]) -> &mut Self {
        for (i, x) in chain.iter().enumerate() {
            for y in &chain[i + 1..] {
                self.starts_before(x, y);
            }
        }
        self
    }

    /// Sidecars `ri` (in spec order) around the regular container `main`: each starts before
    /// every later one and before `main` (StartsBefore), and they stop after `main` in reverse
    /// order (ExitsBefore(main, each), then from each sidecar to the one before it).
    pub(crate) fn sidecars_around(&mut self, ri: &[&str], main: &str) -> &mut Self {
        let chain: Vec<&str> = ri.iter().copied().chain([main]).collect();
        self.all_start_before(&chain);
        for x in ri {
            self.exits_before(main, x);
        }
        self.stop_in_reverse(None, ri)
    }

    /// Each container of `chain` runs after the one before it: StartsBefore and ExitsBefore
    /// for each consecutive pair (and `x` completes before `y` starts when `serial`).
    pub(crate) fn in_order(&mut self, chain: &[&str], serial: bool) -> &mut Self {
        for w in chain.windows(2) {
            if serial {
                self.completes_before(w[0], w[1]);
            }
            self.starts_before(w[0], w[1]);
            self.exits_before(w[0], w[1]);
        }
        self
    }

    /// T5: the sidecars `ri` (in spec order) stop in reverse order after `main`: ExitsBefore
    /// from `main` (when given) to the last sidecar, then from each sidecar to the one before.
    pub(crate) fn stop_in_reverse(&mut self, main: Option<&str>, ri: &[&str]) -> &mut Self {
        if let (Some(main), Some(last)) = (main, ri.last()) {
            self.exits_before(main, last);
        }
        for w in ri.windows(2).rev() {
            self.exits_before(w[1], w[0]);
        }
        self
    }
}

// ----------------------------------------------------------------------------------------------
// UPDATE and the hook observer

/// An `UPDATE` (kubectl's output `out`) was accepted; `what` says which.
pub(crate) fn check_accepted(c: &mut Checks, out: &Output, what: &str) {
    c.check(
        out.status.success(),
        format!("{what}: {}", String::from_utf8_lossy(&out.stderr)),
    );
}

/// An `UPDATE` was refused with an error containing `error`.
pub(crate) fn check_refused(c: &mut Checks, out: &Output, error: &str, what: &str) {
    let err = String::from_utf8_lossy(&out.stderr);
    c.check(
        !out.status.success() && err.contains(error),
        format!("{what}: {err}"),
    );
}

/// OBS logged `line` by `deadline` (`when` describes the deadline); when it did.
pub(crate) fn check_observed(
    c: &mut Checks,
    obs: &Pod,
    line: &str,
    deadline: Instant,
    when: &str,
) -> Option<Instant> {
    let seen = wait_observed(obs, line, deadline);
    c.check(seen.is_some(), format!("observer logged {line} {when}"));
    seen
}

/// OBS has not logged `line` (yet).
pub(crate) fn check_not_observed(c: &mut Checks, obs: &Pod, line: &str, what: &str) {
    c.check(
        obs.logs("observer", false)
            .is_ok_and(|l| !l.lines().any(|l| l == line)),
        what.to_string(),
    );
}
