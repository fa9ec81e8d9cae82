//! Probe rules: budgets against the start time (R11, R13, R15), liveness doubling as readiness,
//! timeouts against periods (R4), named ports (R19, R16) and success thresholds.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, LifecycleHandler, Probe};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::hint::{Simulation, probe_script};
use super::{ContainerAt, Draft, Level, PodView, Rule, probes_of, secs};

/// `PL001`: a liveness probe without a startup probe gives up before the container has started.
pub const LIVENESS_SHORTER_THAN_START: Rule = Rule {
    id: "PL001",
    name: "liveness-shorter-than-start",
    level: Level::Error,
};

/// `PL002`: a liveness probe without a startup probe gives up sooner than the readiness probe
/// allows the container to become ready.
pub const LIVENESS_SHORTER_THAN_READINESS: Rule = Rule {
    id: "PL002",
    name: "liveness-shorter-than-readiness",
    level: Level::Warning,
};

/// `PL003`: the liveness probe checks what the readiness probe checks, and gives up no later.
pub const LIVENESS_SAME_AS_READINESS: Rule = Rule {
    id: "PL003",
    name: "liveness-same-as-readiness",
    level: Level::Warning,
};

/// `PL004`: `timeoutSeconds >= periodSeconds`.
pub const TIMEOUT_NOT_BELOW_PERIOD: Rule = Rule {
    id: "PL004",
    name: "timeout-not-below-period",
    level: Level::Warning,
};

/// `PL007`: a probe or hook names a port the container does not declare.
pub const PROBE_PORT_NAME_UNDECLARED: Rule = Rule {
    id: "PL007",
    name: "probe-port-name-undeclared",
    level: Level::Error,
};

/// `PL008`: `successThreshold` other than 1 on a liveness or startup probe.
pub const SUCCESS_THRESHOLD_NOT_ONE: Rule = Rule {
    id: "PL008",
    name: "success-threshold-not-one",
    level: Level::Error,
};

/// `PL012`: `initialDelaySeconds` on a liveness or readiness probe held back by a startup probe.
pub const INITIAL_DELAY_WITH_STARTUP_PROBE: Rule = Rule {
    id: "PL012",
    name: "initial-delay-with-startup-probe",
    level: Level::Info,
};

/// A probe's timings after defaulting (R1).
struct Timings {
    delay: i64,
    period: i64,
    failures: i64,
    timeout: i64,
}

impl Timings {
    fn of(p: &Probe) -> Timings {
        let v = |x: Option<i32>, d: i32| i64::from(x.filter(|v| *v > 0).unwrap_or(d));
        Timings {
            delay: i64::from(p.initial_delay_seconds.unwrap_or(0).max(0)),
            period: v(p.period_seconds, 10),
            failures: v(p.failure_threshold, 3),
            timeout: v(p.timeout_seconds, 1),
        }
    }

    /// `initialDelaySeconds + failureThreshold × periodSeconds` (R15's allowance).
    fn budget(&self) -> i64 {
        self.delay + self.failures * self.period
    }

    fn describe(&self) -> String {
        format!(
            "initialDelaySeconds {} + failureThreshold {} × periodSeconds {}",
            self.delay, self.failures, self.period
        )
    }
}

fn dur(s: i64) -> Duration {
    Duration::from_secs(u64::try_from(s).unwrap_or(0))
}

/// The liveness probes that run from the container's start: no startup probe gates them (R11).
fn ungated_liveness<'a>(v: &PodView<'a>) -> Vec<(ContainerAt<'a>, &'a Probe)> {
    v.probed_containers()
        .into_iter()
        .filter(|c| c.container.startup_probe.is_none())
        .filter_map(|c| c.container.liveness_probe.as_ref().map(|p| (c, p)))
        .collect()
}

/// A handler-only copy of a probe, as YAML flow text for a fix (`httpGet: {path: /, port: 8080}`).
fn handler_text(p: &Probe) -> String {
    let value = serde_json::to_value(p).unwrap_or_default();
    let Some(map) = value.as_object() else {
        return String::new();
    };
    map.iter()
        .filter(|(k, _)| matches!(k.as_str(), "exec" | "httpGet" | "tcpSocket" | "grpc"))
        .map(|(k, v)| format!("{k}: {}", flow_yaml(v)))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A JSON value as YAML flow text: strings bare when YAML reads them back as the same string.
fn flow_yaml(v: &serde_json::Value) -> String {
    use serde_json::Value;
    match v {
        Value::Object(m) => format!(
            "{{{}}}",
            m.iter()
                .map(|(k, v)| format!("{k}: {}", flow_yaml(v)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        Value::Array(a) => format!(
            "[{}]",
            a.iter().map(flow_yaml).collect::<Vec<_>>().join(", ")
        ),
        Value::String(s) => {
            let plain = !s.is_empty()
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "/_.-".contains(c))
                && !s.starts_with(['-', '.'])
                && s.parse::<f64>().is_err()
                && !matches!(
                    s.to_ascii_lowercase().as_str(),
                    "true" | "false" | "yes" | "no" | "on" | "off" | "null" | "y" | "n"
                );
            if plain { s.clone() } else { v.to_string() }
        }
        other => other.to_string(),
    }
}

/// The startup probe that covers `start`: the liveness probe's check and period, and enough
/// failures.
fn startup_fix(p: &Probe, start: Duration) -> String {
    let t = Timings::of(p);
    let start_s = i64::try_from(start.as_secs() + u64::from(start.subsec_nanos() > 0)).unwrap_or(0);
    let failures = (start_s + t.period - 1) / t.period;
    format!(
        "add a startupProbe with the same check and failureThreshold × periodSeconds ≥ {} — e.g. \
         startupProbe: {{{}, periodSeconds: {}, failureThreshold: {}}}; the liveness probe \
         starts only once it succeeds, and keeps its quick restarts for a hung container",
        secs(start),
        handler_text(p),
        t.period,
        failures.max(1)
    )
}

/// The script of a container that answers its liveness probe only after `start`: each run's
/// clock restarts, so the restarts never end.
fn slow_start(container: &str, start: Duration, budget: i64) -> Simulation {
    Simulation {
        script: Some(probe_script(&[(
            container,
            "liveness",
            &[(Duration::ZERO, false), (start, true)],
        )])),
        duration: dur((budget * 6).max(120)),
        shows: format!(
            "`Killing` events (\"failed liveness probe, will be restarted\") every run, then \
             CrashLoopBackOff: the container is never up for {}",
            secs(start)
        ),
    }
}

/// PL001 (R11, R15): with `--start-time`, a liveness probe not gated by a startup probe must
/// allow at least that long.
pub(crate) fn liveness_shorter_than_start(v: &PodView<'_>) -> Vec<Draft> {
    let Some(start) = v.options.start_time else {
        return Vec::new();
    };
    ungated_liveness(v)
        .into_iter()
        .filter_map(|(c, p)| {
            let t = Timings::of(p);
            (dur(t.budget()) < start).then(|| Draft {
                rule: LIVENESS_SHORTER_THAN_START,
                path: format!("{}.livenessProbe", c.path),
                message: format!(
                    "container {:?}: the liveness probe gives up after {}s ({}), before the {} \
                     the container takes to start (--start-time), and no startupProbe holds it back",
                    c.container.name,
                    t.budget(),
                    t.describe(),
                    secs(start)
                ),
                why: "without a startupProbe the liveness probe runs from the container's start: \
                      the kubelet kills the container before it can answer, and every restart \
                      starts it over — restarts, then CrashLoopBackOff, never a started container"
                    .to_owned(),
                fix: startup_fix(p, start),
                simulation: Some(slow_start(&c.container.name, start, t.budget())),
            })
        })
        .collect()
}

/// PL002 (R11, R15): a liveness probe not gated by a startup probe gives up sooner than the
/// readiness probe's own allowance (`initialDelaySeconds + failureThreshold × periodSeconds`),
/// which says how long the author expects the start to take. Quiet when PL001 already reports
/// the probe.
pub(crate) fn liveness_shorter_than_readiness(v: &PodView<'_>) -> Vec<Draft> {
    ungated_liveness(v)
        .into_iter()
        .filter_map(|(c, p)| {
            let live = Timings::of(p);
            let ready = Timings::of(c.container.readiness_probe.as_ref()?);
            let covered_by_pl001 = v.options.start_time.is_some_and(|s| dur(live.budget()) < s);
            (live.budget() < ready.budget() && !covered_by_pl001).then(|| {
                let start = dur(ready.budget());
                Draft {
                    rule: LIVENESS_SHORTER_THAN_READINESS,
                    path: format!("{}.livenessProbe", c.path),
                    message: format!(
                        "container {:?}: the liveness probe gives up after {}s ({}), the \
                         readiness probe allows {}s ({}) to become ready, and no startupProbe \
                         holds the liveness probe back",
                        c.container.name,
                        live.budget(),
                        live.describe(),
                        ready.budget(),
                        ready.describe()
                    ),
                    why: "a container that takes as long to start as its readiness probe allows \
                          is killed by its liveness probe first, and every restart starts it over"
                        .to_owned(),
                    fix: startup_fix(p, start),
                    simulation: Some(slow_start(&c.container.name, start, live.budget())),
                }
            })
        })
        .collect()
}

/// What a probe checks, without its timings.
fn same_check(a: &Probe, b: &Probe) -> bool {
    a.exec == b.exec && a.http_get == b.http_get && a.tcp_socket == b.tcp_socket && a.grpc == b.grpc
}

/// PL003: the liveness probe checks what the readiness probe checks and gives up no later, so
/// an overloaded container is restarted rather than taken out of service.
pub(crate) fn liveness_same_as_readiness(v: &PodView<'_>) -> Vec<Draft> {
    v.probed_containers()
        .into_iter()
        .filter_map(|c| {
            let live = c.container.liveness_probe.as_ref()?;
            let ready = c.container.readiness_probe.as_ref()?;
            let (lt, rt) = (Timings::of(live), Timings::of(ready));
            let live_gives_up = lt.failures * lt.period;
            let ready_gives_up = rt.failures * rt.period;
            (same_check(live, ready) && live_gives_up <= ready_gives_up).then(|| {
                let name = &c.container.name;
                // Both fail for a while after the container has been up a minute (an overload),
                // then pass again.
                let (from, to) = (Duration::from_secs(60), Duration::from_secs(60 + 120));
                let stretches = [(Duration::ZERO, true), (from, false), (to, true)];
                Draft {
                    rule: LIVENESS_SAME_AS_READINESS,
                    path: format!("{}.livenessProbe", c.path),
                    message: format!(
                        "container {name:?}: the liveness probe checks what the readiness probe \
                         checks ({}) and gives up after {live_gives_up}s of failures, no later \
                         than readiness ({ready_gives_up}s)",
                        handler_text(live)
                    ),
                    why: "when the check fails because the container is busy or a dependency is \
                          down, readiness would take the pod out of service until it recovers; \
                          the liveness probe restarts it instead, dropping its work and adding \
                          load when it comes back"
                        .to_owned(),
                    fix: "give the liveness probe a cheaper check of the process itself (e.g. a \
                          /livez that does not call dependencies, or tcpSocket), or at least a \
                          failureThreshold × periodSeconds well above the readiness probe's"
                        .to_owned(),
                    simulation: Some(Simulation {
                        script: Some(probe_script(&[
                            (name, "liveness", &stretches),
                            (name, "readiness", &stretches),
                        ])),
                        duration: Duration::from_secs(300),
                        shows: "the readiness failure at 60s is followed by a `Killing` event \
                                (\"failed liveness probe, will be restarted\") and a restart"
                            .to_owned(),
                    }),
                }
            })
        })
        .collect()
}

/// PL004 (R4): a probe runs on a ticker of `periodSeconds` and one attempt at a time; an
/// attempt that takes up to `timeoutSeconds` swallows the ticks meanwhile.
pub(crate) fn timeout_not_below_period(v: &PodView<'_>) -> Vec<Draft> {
    let mut out = Vec::new();
    for c in v.probed_containers() {
        for (field, p) in probes_of(c.container) {
            let t = Timings::of(p);
            if t.timeout < t.period {
                continue;
            }
            out.push(Draft {
                rule: TIMEOUT_NOT_BELOW_PERIOD,
                path: format!("{}.{field}.timeoutSeconds", c.path),
                message: format!(
                    "container {:?}: {field} timeoutSeconds {} is not below periodSeconds {}",
                    c.container.name, t.timeout, t.period
                ),
                why: format!(
                    "the kubelet runs one attempt of a probe at a time on a ticker of \
                     periodSeconds and drops the ticks that pass while an attempt runs: with \
                     timeoutSeconds {} ≥ periodSeconds {}, a hanging endpoint keeps an attempt \
                     in flight all the time (for an exec probe, a process always running in the \
                     container), the probe really runs every {}s, and failureThreshold {} takes \
                     {}s to reach",
                    t.timeout,
                    t.period,
                    t.timeout,
                    t.failures,
                    t.failures * t.timeout
                ),
                fix: format!(
                    "make timeoutSeconds smaller than periodSeconds (e.g. timeoutSeconds: {}), or \
                     raise periodSeconds above {}",
                    (t.period - 1).max(1),
                    t.timeout
                ),
                simulation: None,
            });
        }
    }
    out
}

/// PL012 (R13): with a startup probe, a liveness or readiness probe's `initialDelaySeconds`
/// still counts from the container's start, not from the startup probe's success (as the docs
/// say): it only delays anything when the startup probe passes sooner.
pub(crate) fn initial_delay_with_startup_probe(v: &PodView<'_>) -> Vec<Draft> {
    let mut out = Vec::new();
    for c in v.probed_containers() {
        if c.container.startup_probe.is_none() {
            continue;
        }
        for (field, p) in probes_of(c.container) {
            let delay = p.initial_delay_seconds.unwrap_or(0);
            if field == "startupProbe" || delay <= 0 {
                continue;
            }
            out.push(Draft {
                rule: INITIAL_DELAY_WITH_STARTUP_PROBE,
                path: format!("{}.{field}.initialDelaySeconds", c.path),
                message: format!(
                    "container {:?}: {field} initialDelaySeconds {delay} with a startupProbe: the \
                     delay counts from the container's start, not from the startup probe's success",
                    c.container.name
                ),
                why: format!(
                    "the kubelet holds the probe back until the startup probe passes, and then \
                     still skips it until {delay}s after the container started \
                     (state.running.startedAt); a startup that took longer has used the delay up, \
                     so it does not give the app {delay}s more after starting, as the \
                     documentation suggests"
                ),
                fix:
                    "remove initialDelaySeconds (the startup probe already holds the probe back), \
                      or make the startup probe pass only once the app is ready for this probe"
                        .to_owned(),
                simulation: None,
            });
        }
    }
    out
}

/// The ports of a handler that are names (`port: http`), with their field path.
fn named_ports(probe_or_hook: HandlerRef<'_>) -> Option<(String, &str)> {
    fn name(port: &IntOrString) -> Option<&str> {
        match port {
            IntOrString::String(s) if s.parse::<i64>().is_err() => Some(s.as_str()),
            IntOrString::String(_) | IntOrString::Int(_) => None,
        }
    }
    let (http, tcp) = match probe_or_hook {
        HandlerRef::Probe(p) => (p.http_get.as_ref(), p.tcp_socket.as_ref()),
        HandlerRef::Hook(h) => (h.http_get.as_ref(), h.tcp_socket.as_ref()),
    };
    if let Some(h) = http
        && let Some(n) = name(&h.port)
    {
        return Some(("httpGet.port".to_owned(), n));
    }
    if let Some(t) = tcp
        && let Some(n) = name(&t.port)
    {
        return Some(("tcpSocket.port".to_owned(), n));
    }
    None
}

#[derive(Clone, Copy)]
enum HandlerRef<'a> {
    Probe(&'a Probe),
    Hook(&'a LifecycleHandler),
}

fn declares(c: &Container, name: &str) -> bool {
    c.ports
        .iter()
        .flatten()
        .any(|p| p.name.as_deref() == Some(name))
}

/// PL007 (R19, R16): a probe's or hook's named port must be one of the container's `ports`;
/// otherwise the kubelet cannot resolve it (`strconv.Atoi: parsing "http": invalid syntax`)
/// and every attempt errors.
pub(crate) fn probe_port_name_undeclared(v: &PodView<'_>) -> Vec<Draft> {
    let mut out = Vec::new();
    for c in v.probed_containers() {
        let mut handlers: Vec<(String, HandlerRef<'_>)> = probes_of(c.container)
            .into_iter()
            .map(|(f, p)| (f.to_owned(), HandlerRef::Probe(p)))
            .collect();
        if let Some(l) = &c.container.lifecycle {
            for (f, h) in [("postStart", &l.post_start), ("preStop", &l.pre_stop)] {
                if let Some(h) = h {
                    handlers.push((format!("lifecycle.{f}"), HandlerRef::Hook(h)));
                }
            }
        }
        for (field, h) in handlers {
            let Some((port_field, name)) = named_ports(h) else {
                continue;
            };
            if declares(c.container, name) {
                continue;
            }
            let declared: Vec<String> = c
                .container
                .ports
                .iter()
                .flatten()
                .filter_map(|p| {
                    p.name
                        .as_ref()
                        .map(|n| format!("{n:?} ({})", p.container_port))
                })
                .collect();
            let probe_kind = field.strip_suffix("Probe");
            out.push(Draft {
                rule: PROBE_PORT_NAME_UNDECLARED,
                path: format!("{}.{field}.{port_field}", c.path),
                message: format!(
                    "container {:?}: {field} uses the port name {name:?}, which the container \
                     does not declare ({})",
                    c.container.name,
                    if declared.is_empty() {
                        "it declares no named ports".to_owned()
                    } else {
                        format!("it declares {}", declared.join(", "))
                    }
                ),
                why: format!(
                    "the kubelet looks a named port up in this container's own ports only; it \
                     cannot resolve {name:?} (strconv.Atoi: parsing {name:?}: invalid syntax), \
                     so every attempt errors{}",
                    match probe_kind {
                        Some("liveness") =>
                            ": the probe never passes and the container is restarted again and again",
                        Some("startup") =>
                            ": the container never counts as started and is restarted again and again",
                        Some(_) => ": the container never becomes ready",
                        None => ": the hook fails every time",
                    }
                ),
                fix: format!(
                    "declare the port in this container (ports: [{{name: {name}, containerPort: \
                     N}}]) or use the port number"
                ),
                simulation: probe_kind.map(|kind| Simulation {
                    script: Some(probe_script(&[(
                        &c.container.name,
                        kind,
                        &[(Duration::ZERO, false)],
                    )])),
                    duration: Duration::from_secs(180),
                    shows: match kind {
                        "readiness" => "the container stays running but never ready (0/1)",
                        _ => "`Killing` events and restarts, then CrashLoopBackOff",
                    }
                    .to_owned(),
                }),
            });
        }
    }
    out
}

/// PL008: liveness and startup probes must have `successThreshold` 1 (the API server refuses
/// others: `must be 1`); this rule says why, on the manifests that fail validation for it.
pub(crate) fn success_threshold_not_one(v: &PodView<'_>) -> Vec<Draft> {
    let mut out = Vec::new();
    for c in v.probed_containers() {
        for (field, p) in probes_of(c.container) {
            let st = p.success_threshold.unwrap_or(1);
            if field == "readinessProbe" || st == 1 {
                continue;
            }
            out.push(Draft {
                rule: SUCCESS_THRESHOLD_NOT_ONE,
                path: format!("{}.{field}.successThreshold", c.path),
                message: format!(
                    "container {:?}: {field} successThreshold is {st}; the API server accepts \
                     only 1 here (Invalid value: {st}: must be 1)",
                    c.container.name
                ),
                why: "a liveness or startup probe acts on its first success (started, alive); \
                      requiring several would only delay that, so the API server refuses the \
                      pod and nothing of it runs"
                    .to_owned(),
                fix: format!(
                    "set successThreshold: 1 (or remove it){}",
                    if st > 1 {
                        "; to wait for several successes before traffic, put successThreshold on \
                         the readinessProbe"
                    } else {
                        ""
                    }
                ),
                simulation: None,
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lint::Options;
    use crate::lint::test_support::run;

    const SLOW: &str = "apiVersion: v1\nkind: Pod\nmetadata: {name: web}\nspec:\n  containers:\n  - name: app\n    image: busybox\n    command: [sleep, '3600']\n    ports: [{name: http, containerPort: 8080}]\n    livenessProbe:\n      httpGet: {path: /healthz, port: http}\n      periodSeconds: 5\n";

    fn start(s: u64) -> Options {
        Options {
            start_time: Some(Duration::from_secs(s)),
            pods: None,
        }
    }

    #[test]
    fn pl001_fires_when_the_budget_is_below_the_start_time() {
        let d = run(liveness_shorter_than_start, SLOW, &start(45));
        assert_eq!(d.len(), 1, "{d:?}");
        assert_eq!(d[0].path, "spec.containers[0].livenessProbe");
        assert!(d[0].message.contains("after 15s"), "{}", d[0].message);
        assert!(
            d[0].fix.contains("periodSeconds: 5, failureThreshold: 9"),
            "{}",
            d[0].fix
        );
        let script = d[0].simulation.as_ref().unwrap().script.as_ref().unwrap();
        assert!(script.contains("{from: 45s, result: success}"), "{script}");
    }

    #[test]
    fn pl001_is_quiet_with_enough_budget_a_startup_probe_or_no_start_time() {
        assert!(run(liveness_shorter_than_start, SLOW, &start(15)).is_empty());
        assert!(run(liveness_shorter_than_start, SLOW, &Options::default()).is_empty());
        let gated = format!(
            "{SLOW}    startupProbe:\n      httpGet: {{path: /healthz, port: http}}\n      failureThreshold: 30\n"
        );
        assert!(run(liveness_shorter_than_start, &gated, &start(45)).is_empty());
    }

    #[test]
    fn pl002_fires_when_readiness_allows_longer() {
        let yaml = format!(
            "{SLOW}    readinessProbe:\n      httpGet: {{path: /ready, port: http}}\n      initialDelaySeconds: 20\n"
        );
        let d = run(liveness_shorter_than_readiness, &yaml, &Options::default());
        assert_eq!(d.len(), 1, "{d:?}");
        assert!(d[0].message.contains("allows 50s"), "{}", d[0].message);
        // PL001 already says it when the start time is given and short enough.
        assert!(run(liveness_shorter_than_readiness, &yaml, &start(60)).is_empty());
    }

    #[test]
    fn pl002_is_quiet_when_liveness_allows_as_long() {
        let yaml = format!(
            "{SLOW}    readinessProbe:\n      httpGet: {{path: /ready, port: http}}\n      periodSeconds: 5\n"
        );
        assert!(run(liveness_shorter_than_readiness, &yaml, &Options::default()).is_empty());
    }

    #[test]
    fn pl003_fires_on_the_same_check() {
        let yaml = format!(
            "{SLOW}    readinessProbe:\n      httpGet: {{path: /healthz, port: http}}\n      periodSeconds: 5\n"
        );
        let d = run(liveness_same_as_readiness, &yaml, &Options::default());
        assert_eq!(d.len(), 1, "{d:?}");
        assert_eq!(d[0].rule, LIVENESS_SAME_AS_READINESS);
    }

    #[test]
    fn pl003_is_quiet_for_another_check_or_a_more_patient_liveness() {
        let other = format!(
            "{SLOW}    readinessProbe:\n      httpGet: {{path: /ready, port: http}}\n      periodSeconds: 5\n"
        );
        assert!(run(liveness_same_as_readiness, &other, &Options::default()).is_empty());
        let patient = format!(
            "{SLOW}      failureThreshold: 12\n    readinessProbe:\n      httpGet: {{path: /healthz, port: http}}\n      periodSeconds: 5\n"
        );
        assert!(run(liveness_same_as_readiness, &patient, &Options::default()).is_empty());
    }

    #[test]
    fn pl004_fires_when_the_timeout_reaches_the_period() {
        let yaml = format!("{SLOW}      timeoutSeconds: 5\n");
        let d = run(timeout_not_below_period, &yaml, &Options::default());
        assert_eq!(d.len(), 1, "{d:?}");
        assert_eq!(d[0].path, "spec.containers[0].livenessProbe.timeoutSeconds");
        assert!(run(timeout_not_below_period, SLOW, &Options::default()).is_empty());
    }

    #[test]
    fn pl007_fires_on_an_undeclared_port_name() {
        let yaml = SLOW.replace("port: http}", "port: healthz}");
        let d = run(probe_port_name_undeclared, &yaml, &Options::default());
        assert_eq!(d.len(), 1, "{d:?}");
        assert_eq!(d[0].path, "spec.containers[0].livenessProbe.httpGet.port");
        assert!(d[0].message.contains("\"http\" (8080)"), "{}", d[0].message);
        assert!(d[0].simulation.is_some());
    }

    #[test]
    fn pl007_is_quiet_for_declared_names_and_numbers() {
        assert!(run(probe_port_name_undeclared, SLOW, &Options::default()).is_empty());
        let numeric = SLOW.replace("port: http}", "port: 8080}");
        assert!(run(probe_port_name_undeclared, &numeric, &Options::default()).is_empty());
    }

    #[test]
    fn pl012_notes_a_liveness_delay_behind_a_startup_probe() {
        let yaml = format!(
            "{SLOW}      initialDelaySeconds: 20\n    startupProbe:\n      httpGet: {{path: /healthz, port: http}}\n      failureThreshold: 30\n"
        );
        let d = run(initial_delay_with_startup_probe, &yaml, &Options::default());
        assert_eq!(d.len(), 1, "{d:?}");
        assert_eq!(
            d[0].path,
            "spec.containers[0].livenessProbe.initialDelaySeconds"
        );
        assert_eq!(d[0].rule.level, Level::Info);
    }

    #[test]
    fn pl012_is_quiet_without_a_startup_probe_or_a_delay() {
        let delayed = format!("{SLOW}      initialDelaySeconds: 20\n");
        assert!(
            run(
                initial_delay_with_startup_probe,
                &delayed,
                &Options::default()
            )
            .is_empty()
        );
        let gated = format!(
            "{SLOW}    startupProbe:\n      httpGet: {{path: /healthz, port: http}}\n      initialDelaySeconds: 5\n"
        );
        assert!(
            run(
                initial_delay_with_startup_probe,
                &gated,
                &Options::default()
            )
            .is_empty()
        );
    }

    #[test]
    fn pl008_explains_a_liveness_success_threshold() {
        // The API server refuses it, so the rule sees the pod without validation.
        let mut t =
            crate::lint::decode_targets(&format!("{SLOW}      successThreshold: 2\n"), "t.yaml")
                .unwrap();
        let crate::lint::Entry::Target(t) = t.remove(0) else {
            panic!("a target")
        };
        assert_eq!(t.problems.len(), 1, "{:?}", t.problems);
        let spec = t.pod.spec.clone().unwrap();
        let view = PodView {
            pod: &t.pod,
            spec: &spec,
            kind: "Pod",
            options: &Options::default(),
        };
        let d = success_threshold_not_one(&view);
        assert_eq!(d.len(), 1);
        assert_eq!(t.problems[0].path, d[0].path);
    }

    #[test]
    fn pl008_is_quiet_for_readiness() {
        let yaml = format!(
            "{SLOW}    readinessProbe:\n      httpGet: {{path: /ready, port: http}}\n      successThreshold: 3\n"
        );
        assert!(run(success_threshold_not_one, &yaml, &Options::default()).is_empty());
    }
}
