//! Probes (V5), lifecycle handlers (V8) and stop signals.

use k8s_openapi::api::core::v1::{
    ExecAction, GRPCAction, HTTPGetAction, Lifecycle, LifecycleHandler, Probe, SleepAction,
    TCPSocketAction,
};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::Ctx;
use super::field::{FieldError, Path};
use super::names::{is_http_header_name, is_valid_port_name, is_valid_port_num};

const IS_NEGATIVE_MSG: &str = "must be greater than or equal to 0";

/// The handler of a probe or lifecycle hook, in the order Kubernetes checks
/// the alternatives.
struct Handler<'a> {
    exec: Option<&'a ExecAction>,
    http_get: Option<&'a HTTPGetAction>,
    tcp_socket: Option<&'a TCPSocketAction>,
    grpc: Option<&'a GRPCAction>,
    sleep: Option<&'a SleepAction>,
}

fn from_probe(p: &Probe) -> Handler<'_> {
    Handler {
        exec: p.exec.as_ref(),
        http_get: p.http_get.as_ref(),
        tcp_socket: p.tcp_socket.as_ref(),
        grpc: p.grpc.as_ref(),
        sleep: None,
    }
}

fn from_lifecycle(h: &LifecycleHandler) -> Handler<'_> {
    Handler {
        exec: h.exec.as_ref(),
        http_get: h.http_get.as_ref(),
        tcp_socket: h.tcp_socket.as_ref(),
        grpc: None,
        sleep: h.sleep.as_ref(),
    }
}

/// Kubernetes' `ValidatePortNumOrName`.
pub(crate) fn validate_port_num_or_name(port: &IntOrString, path: &Path) -> Vec<FieldError> {
    match port {
        IntOrString::Int(n) => is_valid_port_num(i64::from(*n))
            .into_iter()
            .map(|m| FieldError::invalid(path, *n, m))
            .collect(),
        IntOrString::String(s) => is_valid_port_name(s)
            .into_iter()
            .map(|m| FieldError::invalid(path, s, m))
            .collect(),
    }
}

fn validate_http_get(h: &HTTPGetAction, path: &Path) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if h.path.as_deref().unwrap_or("").is_empty() {
        errs.push(FieldError::required(&path.child("path"), ""));
    }
    errs.extend(validate_port_num_or_name(&h.port, &path.child("port")));
    let scheme = h.scheme.as_deref().unwrap_or("");
    if scheme != "HTTP" && scheme != "HTTPS" {
        errs.push(FieldError::not_supported(
            &path.child("scheme"),
            scheme,
            &["HTTP", "HTTPS"],
        ));
    }
    for header in h.http_headers.iter().flatten() {
        for msg in is_http_header_name(&header.name) {
            errs.push(FieldError::invalid(
                &path.child("httpHeaders"),
                &header.name,
                msg,
            ));
        }
    }
    errs
}

fn validate_sleep(sleep: &SleepAction, path: &Path, ctx: &Ctx<'_>) -> Vec<FieldError> {
    // A missing grace period is reported elsewhere; do not pile on.
    let Some(grace) = ctx.grace_period else {
        return Vec::new();
    };
    // PodLifecycleSleepActionAllowZero is GA (1.34): zero is valid.
    let s = sleep.seconds;
    if s < 0 || s > grace {
        return vec![FieldError::invalid(
            path,
            s,
            format!("must be non-negative and less than terminationGracePeriodSeconds ({grace})"),
        )];
    }
    Vec::new()
}

fn validate_handler(h: &Handler<'_>, path: &Path, ctx: &Ctx<'_>) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let mut n = 0;
    let mut one = |set: bool, name: &str, errs: &mut Vec<FieldError>| -> bool {
        if !set {
            return false;
        }
        if n > 0 {
            errs.push(FieldError::forbidden(
                &path.child(name),
                "may not specify more than 1 handler type",
            ));
            false
        } else {
            n += 1;
            true
        }
    };
    if one(h.exec.is_some(), "exec", &mut errs)
        && let Some(exec) = h.exec
        && exec.command.as_ref().is_none_or(Vec::is_empty)
    {
        errs.push(FieldError::required(
            &path.child("exec").child("command"),
            "",
        ));
    }
    if one(h.http_get.is_some(), "httpGet", &mut errs)
        && let Some(http) = h.http_get
    {
        errs.extend(validate_http_get(http, &path.child("httpGet")));
    }
    if one(h.tcp_socket.is_some(), "tcpSocket", &mut errs)
        && let Some(tcp) = h.tcp_socket
    {
        errs.extend(validate_port_num_or_name(
            &tcp.port,
            &path.child("tcpSocket").child("port"),
        ));
    }
    if one(h.grpc.is_some(), "grpc", &mut errs)
        && let Some(grpc) = h.grpc
    {
        errs.extend(validate_port_num_or_name(
            &IntOrString::Int(grpc.port),
            &path.child("grpc").child("port"),
        ));
    }
    if one(h.sleep.is_some(), "sleep", &mut errs)
        && let Some(sleep) = h.sleep
    {
        errs.extend(validate_sleep(sleep, &path.child("sleep"), ctx));
    }
    if n == 0 {
        errs.push(FieldError::required(path, "must specify a handler type"));
    }
    errs
}

fn nonnegative(v: Option<i32>, path: &Path) -> Option<FieldError> {
    let v = v.unwrap_or(0);
    (v < 0).then(|| FieldError::invalid(path, v, IS_NEGATIVE_MSG))
}

fn validate_probe(p: &Probe, path: &Path, ctx: &Ctx<'_>) -> Vec<FieldError> {
    let mut errs = validate_handler(&from_probe(p), path, ctx);
    errs.extend(nonnegative(
        p.initial_delay_seconds,
        &path.child("initialDelaySeconds"),
    ));
    errs.extend(nonnegative(
        p.timeout_seconds,
        &path.child("timeoutSeconds"),
    ));
    errs.extend(nonnegative(p.period_seconds, &path.child("periodSeconds")));
    errs.extend(nonnegative(
        p.success_threshold,
        &path.child("successThreshold"),
    ));
    errs.extend(nonnegative(
        p.failure_threshold,
        &path.child("failureThreshold"),
    ));
    if let Some(t) = p.termination_grace_period_seconds
        && t <= 0
    {
        errs.push(FieldError::invalid(
            &path.child("terminationGracePeriodSeconds"),
            t,
            "must be greater than 0",
        ));
    }
    errs
}

/// Which probe is being validated: the rules differ slightly.
#[derive(Clone, Copy)]
pub(crate) enum ProbeKind {
    Liveness,
    Readiness,
    Startup,
}

/// Kubernetes' `validateLivenessProbe` / `validateReadinessProbe` /
/// `validateStartupProbe`.
pub(crate) fn validate_probe_of(
    kind: ProbeKind,
    probe: Option<&Probe>,
    path: &Path,
    ctx: &Ctx<'_>,
) -> Vec<FieldError> {
    let Some(p) = probe else {
        return Vec::new();
    };
    let mut errs = validate_probe(p, path, ctx);
    match kind {
        ProbeKind::Liveness | ProbeKind::Startup => {
            let st = p.success_threshold.unwrap_or(0);
            if st != 1 {
                errs.push(FieldError::invalid(
                    &path.child("successThreshold"),
                    st,
                    "must be 1",
                ));
            }
        }
        ProbeKind::Readiness => {
            if let Some(t) = p.termination_grace_period_seconds {
                errs.push(FieldError::invalid(
                    &path.child("terminationGracePeriodSeconds"),
                    t,
                    "must not be set for readinessProbes",
                ));
            }
        }
    }
    errs
}

/// Linux signal names accepted by `lifecycle.stopSignal`.
fn linux_stop_signals() -> Vec<String> {
    let mut v: Vec<String> = [
        "SIGABRT",
        "SIGALRM",
        "SIGBUS",
        "SIGCHLD",
        "SIGCLD",
        "SIGCONT",
        "SIGFPE",
        "SIGHUP",
        "SIGILL",
        "SIGINT",
        "SIGIO",
        "SIGIOT",
        "SIGKILL",
        "SIGPIPE",
        "SIGPOLL",
        "SIGPROF",
        "SIGPWR",
        "SIGQUIT",
        "SIGSEGV",
        "SIGSTKFLT",
        "SIGSTOP",
        "SIGSYS",
        "SIGTERM",
        "SIGTRAP",
        "SIGTSTP",
        "SIGTTIN",
        "SIGTTOU",
        "SIGURG",
        "SIGUSR1",
        "SIGUSR2",
        "SIGVTALRM",
        "SIGWINCH",
        "SIGXCPU",
        "SIGXFSZ",
        "SIGRTMIN",
        "SIGRTMAX",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    for i in 1..=15 {
        v.push(format!("SIGRTMIN+{i}"));
    }
    for i in 1..=14 {
        v.push(format!("SIGRTMAX-{i}"));
    }
    v.sort();
    v
}

fn validate_stop_signal(signal: &str, path: &Path, ctx: &Ctx<'_>) -> Vec<FieldError> {
    match ctx.os {
        None => vec![FieldError::forbidden(
            path,
            "may not be set for containers with empty `spec.os.name`",
        )],
        Some("linux") => {
            let allowed = linux_stop_signals();
            if allowed.iter().any(|s| s == signal) {
                Vec::new()
            } else {
                vec![FieldError::not_supported(path, signal, &allowed)]
            }
        }
        Some("windows") => {
            if signal == "SIGKILL" || signal == "SIGTERM" {
                Vec::new()
            } else {
                vec![FieldError::not_supported(
                    path,
                    signal,
                    &["SIGKILL", "SIGTERM"],
                )]
            }
        }
        // An invalid os.name is reported by the pod spec checks.
        Some(_) => Vec::new(),
    }
}

/// Kubernetes' `validateLifecycle` (V8), plus `stopSignal`.
pub(crate) fn validate_lifecycle(l: &Lifecycle, path: &Path, ctx: &Ctx<'_>) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if let Some(h) = &l.post_start {
        errs.extend(validate_handler(
            &from_lifecycle(h),
            &path.child("postStart"),
            ctx,
        ));
    }
    if let Some(h) = &l.pre_stop {
        errs.extend(validate_handler(
            &from_lifecycle(h),
            &path.child("preStop"),
            ctx,
        ));
    }
    if let Some(sig) = &l.stop_signal {
        errs.extend(validate_stop_signal(sig, &path.child("stopSignal"), ctx));
    }
    errs
}
