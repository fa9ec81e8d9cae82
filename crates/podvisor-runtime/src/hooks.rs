//! Lifecycle hook executors (spec section 7, H1-H6; `pkg/kubelet/lifecycle/handlers.go`):
//! run one `postStart` or `preStop` handler against a container instance and report failure
//! with the text the kubelet records (the `PostStartHookError` message, H3).
//!
//! This module runs a handler; when to run it, how long to wait for it and what to do when
//! it fails (kill, grace-period accounting, events) is decided by `podvisor-lifecycle`.

use crate::probe::client::{self, GetRequest};
use crate::probe::gofmt::quote;
use crate::probe::http::{MAX_BODY, request_for_action};
use crate::{InstanceId, Runtime};
use k8s_openapi::api::core::v1::{
    Container, ExecAction, HTTPGetAction, LifecycleHandler, SleepAction, TCPSocketAction,
};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use std::future::Future;
use std::time::Duration;

/// Go's `net/http` error when an HTTPS request is answered in plain HTTP.
const HTTP_RESPONSE_TO_HTTPS: &str = "server gave HTTP response to HTTPS client";

/// Everything a hook run produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookOutcome {
    /// `Err` carries the failure text the kubelet reports for the hook.
    pub result: Result<(), String>,
    /// Set when an HTTPS hook got a plain-HTTP answer and the HTTP retry succeeded (H1): the
    /// message of the Warning event `LifecycleHTTPFallback`.
    pub http_fallback: Option<String>,
}

/// Runs `handler` for one container instance. `pod_full_name` is `<name>_<namespace>(<uid>)`.
/// `Err` is the failure text (H3), e.g. `Exec lifecycle hook ([sh -c exit 1]) for Container
/// "c" in Pod "p_ns(uid)" failed - error: command 'sh -c exit 1' exited with 1: , message: ""`.
pub async fn run_hook<R: Runtime>(
    rt: &R,
    sandbox: &R::Sandbox,
    instance: InstanceId,
    container: &Container,
    handler: &LifecycleHandler,
    pod_full_name: &str,
) -> Result<(), String> {
    let terminated = std::future::pending::<()>();
    run_hook_detailed(
        rt,
        sandbox,
        instance,
        container,
        handler,
        pod_full_name,
        terminated,
    )
    .await
    .result
}

/// Like [`run_hook`], and also reports the HTTPS-to-HTTP fallback (H1). A `sleep` handler
/// ends early with the kubelet's error when `terminated` completes (the container was
/// terminated); `exec` and `httpGet` handlers are not cancelled by it.
pub async fn run_hook_detailed<R: Runtime>(
    rt: &R,
    sandbox: &R::Sandbox,
    instance: InstanceId,
    container: &Container,
    handler: &LifecycleHandler,
    pod_full_name: &str,
    terminated: impl Future<Output = ()>,
) -> HookOutcome {
    let pod = quote(pod_full_name);
    let name = quote(&container.name);
    if let Some(exec) = &handler.exec {
        let result = run_exec(rt, sandbox, instance, exec)
            .await
            .map_err(|(err, output)| {
                format!(
                    "Exec lifecycle hook ({}) for Container {name} in Pod {pod} failed - error: \
                 {err}, message: {}",
                    go_slice(exec.command.as_deref().unwrap_or_default()),
                    quote(&output)
                )
            });
        return HookOutcome {
            result,
            http_fallback: None,
        };
    }
    if let Some(http_get) = &handler.http_get {
        let (result, http_fallback) = run_http(rt, sandbox, container, http_get).await;
        let result = result.map_err(|err| {
            format!(
                "HTTP lifecycle hook ({}) for Container {name} in Pod {pod} failed - error: {err}",
                http_get.path.as_deref().unwrap_or_default()
            )
        });
        return HookOutcome {
            result,
            http_fallback,
        };
    }
    if let Some(sleep) = &handler.sleep {
        // V8: a zero sleep (valid since PodLifecycleSleepActionAllowZero) returns at once;
        // racing it against `terminated` would fail it at random when the container is gone.
        if sleep.seconds <= 0 {
            return HookOutcome {
                result: Ok(()),
                http_fallback: None,
            };
        }
        let duration = Duration::from_secs(sleep.seconds.unsigned_abs());
        let result = tokio::select! {
            () = tokio::time::sleep(duration) => Ok(()),
            () = terminated => Err(format!(
                "Sleep lifecycle hook ({}) for Container {name} in Pod {pod} failed - error: \
                 container terminated before sleep hook finished",
                sleep.seconds
            )),
        };
        return HookOutcome {
            result,
            http_fallback: None,
        };
    }
    // tcpSocket passes validation for compatibility but has never been runnable.
    HookOutcome {
        result: Err(format!(
            "Cannot run handler: invalid handler: {}",
            describe_handler(handler)
        )),
        http_fallback: None,
    }
}

/// Runs an exec hook without a timeout (H1). `Err` is (error text, combined output).
async fn run_exec<R: Runtime>(
    rt: &R,
    sandbox: &R::Sandbox,
    instance: InstanceId,
    exec: &ExecAction,
) -> Result<(), (String, String)> {
    // Unlike exec probes, hook commands are passed to the runtime unexpanded.
    let argv = exec.command.clone().unwrap_or_default();
    let joined = argv.join(" ");
    match rt.exec(sandbox, instance, argv, None).await {
        Err(e) => Err((e.to_string(), String::new())),
        Ok(r) if r.exit_code == 0 => Ok(()),
        Ok(r) => {
            let output = String::from_utf8_lossy(&r.output).into_owned();
            // CRI's ExecSync error carries stderr; the message, stdout then stderr.
            let stderr = String::from_utf8_lossy(&r.stderr);
            let err = format!("command '{joined}' exited with {}: {stderr}", r.exit_code);
            Err((err, output))
        }
    }
}

/// Runs an HTTP hook: any response is success, only a transport error fails (H1).
async fn run_http<R: Runtime>(
    rt: &R,
    sandbox: &R::Sandbox,
    container: &Container,
    action: &HTTPGetAction,
) -> (Result<(), String>, Option<String>) {
    let pod_ip = rt.pod_ip(sandbox);
    let request = match request_for_action(action, container, &pod_ip, "lifecycle") {
        Ok(r) => r,
        Err(e) => return (Err(e), None),
    };
    let err = match send(request.clone()).await {
        Ok(()) => return (Ok(()), None),
        Err(err) => err,
    };
    if !err.contains(HTTP_RESPONSE_TO_HTTPS) {
        return (Err(err), None);
    }
    let mut retry = request;
    retry.url.scheme = "http".to_string();
    retry.header.del("Authorization");
    let authority = retry.url.authority.clone();
    match send(retry).await {
        Ok(()) => (
            Ok(()),
            Some(format!(
                "request to HTTPS lifecycle hook {authority} got HTTP response, retry with HTTP succeeded"
            )),
        ),
        Err(_) => (Err(err), None),
    }
}

/// The hook client: keep-alive and compression on, no timeout; the body is discarded.
async fn send(request: GetRequest) -> Result<(), String> {
    client::get(request, None, MAX_BODY).await.map(|_| ())
}

/// Formats a handler like its Go protobuf `String()` method, as `%v` prints it in the
/// kubelet's `invalid handler` error, e.g.
/// `&LifecycleHandler{Exec:nil,HTTPGet:nil,TCPSocket:&TCPSocketAction{Port:{0 8080 },Host:,},Sleep:nil,}`.
pub fn describe_handler(handler: &LifecycleHandler) -> String {
    format!(
        "&LifecycleHandler{{Exec:{},HTTPGet:{},TCPSocket:{},Sleep:{},}}",
        handler.exec.as_ref().map_or_else(nil, describe_exec),
        handler
            .http_get
            .as_ref()
            .map_or_else(nil, describe_http_get),
        handler
            .tcp_socket
            .as_ref()
            .map_or_else(nil, describe_tcp_socket),
        handler.sleep.as_ref().map_or_else(nil, describe_sleep),
    )
}

fn nil() -> String {
    "nil".to_string()
}

fn describe_exec(exec: &ExecAction) -> String {
    format!(
        "&ExecAction{{Command:{},}}",
        go_slice(exec.command.as_deref().unwrap_or_default())
    )
}

fn describe_http_get(action: &HTTPGetAction) -> String {
    let headers: String = action
        .http_headers
        .iter()
        .flatten()
        .map(|h| format!("HTTPHeader{{Name:{},Value:{},}},", h.name, h.value))
        .collect();
    format!(
        "&HTTPGetAction{{Path:{},Port:{},Host:{},Scheme:{},HTTPHeaders:[]HTTPHeader{{{headers}}},}}",
        action.path.as_deref().unwrap_or_default(),
        describe_port(&action.port),
        action.host.as_deref().unwrap_or_default(),
        action.scheme.as_deref().unwrap_or_default(),
    )
}

fn describe_tcp_socket(action: &TCPSocketAction) -> String {
    format!(
        "&TCPSocketAction{{Port:{},Host:{},}}",
        describe_port(&action.port),
        action.host.as_deref().unwrap_or_default()
    )
}

fn describe_sleep(action: &SleepAction) -> String {
    format!("&SleepAction{{Seconds:{},}}", action.seconds)
}

/// `%v` of an `intstr.IntOrString` value: `{Type IntVal StrVal}`.
fn describe_port(port: &IntOrString) -> String {
    match port {
        IntOrString::Int(n) => format!("{{0 {n} }}"),
        IntOrString::String(s) => format!("{{1 0 {s}}}"),
    }
}

/// `%v` of a Go `[]string`: `[a b c]`.
fn go_slice(items: &[String]) -> String {
    format!("[{}]", items.join(" "))
}
