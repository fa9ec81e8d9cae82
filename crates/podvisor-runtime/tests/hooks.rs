//! Lifecycle hook executor tests (spec section 7, H1 and H3) against real servers on
//! loopback and real host processes (through a fake `Runtime` whose `exec` spawns on the host).

use crate::host_exec::HostExec;
use k8s_openapi::api::core::v1::{
    Container, EnvVar, ExecAction, HTTPGetAction, HTTPHeader, LifecycleHandler, SleepAction,
    TCPSocketAction,
};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use podvisor_runtime::hooks::{HookOutcome, describe_handler, run_hook, run_hook_detailed};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

const POD: &str = "web_default(0b9d6a1e-5d7a-4c1c-9a57-3c7c4f1f0e11)";

fn container() -> Container {
    Container {
        name: "app".into(),
        env: Some(vec![EnvVar {
            name: "A".into(),
            value: Some("1".into()),
            ..Default::default()
        }]),
        ..Default::default()
    }
}

fn exec_handler(command: &[&str]) -> LifecycleHandler {
    LifecycleHandler {
        exec: Some(ExecAction {
            command: Some(command.iter().map(|s| (*s).to_string()).collect()),
        }),
        ..Default::default()
    }
}

fn http_handler(port: u16, path: &str, scheme: &str) -> LifecycleHandler {
    LifecycleHandler {
        http_get: Some(HTTPGetAction {
            port: IntOrString::Int(i32::from(port)),
            path: Some(path.into()),
            scheme: Some(scheme.into()),
            ..Default::default()
        }),
        ..Default::default()
    }
}

async fn hook(handler: &LifecycleHandler) -> Result<(), String> {
    run_hook(&HostExec::for_hooks(), &(), 1, &container(), handler, POD).await
}

/// A plain HTTP server answering every request with `status`, recording request heads. Like
/// Go's server, it answers a TLS handshake with a plain-HTTP 400.
async fn http_server(status: u16) -> (u16, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    tokio::spawn(async move {
        loop {
            let Ok((mut s, _)) = listener.accept().await else {
                return;
            };
            let log = log.clone();
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut buf = [0u8; 4096];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    let Ok(n) = s.read(&mut buf).await else {
                        return;
                    };
                    if n == 0 {
                        return;
                    }
                    head.extend_from_slice(&buf[..n]);
                    if !head[0].is_ascii_uppercase() {
                        let _ = s.write_all(b"HTTP/1.0 400 Bad Request\r\n\r\nClient sent an HTTP request to an HTTPS server.\n").await;
                        return;
                    }
                }
                log.lock()
                    .unwrap()
                    .push(String::from_utf8_lossy(&head).into_owned());
                let reply = format!("HTTP/1.1 {status} X\r\nContent-Length: 4\r\n\r\nbody");
                let _ = s.write_all(reply.as_bytes()).await;
                // Keep-alive: the client closes the connection when it is done.
                let _ = s.read(&mut buf).await;
            });
        }
    });
    (port, seen)
}

async fn closed_port() -> u16 {
    // A bound socket that never listens: connections are refused, and no other test can take
    // the port while this process lives (a dropped listener's port could be reused at once).
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let port = socket.local_addr().unwrap().port();
    std::mem::forget(socket);
    port
}

#[tokio::test]
async fn h1_exec_hook_success() {
    assert_eq!(hook(&exec_handler(&["sh", "-c", "exit 0"])).await, Ok(()));
}

#[tokio::test]
async fn h3_exec_hook_failure_text() {
    // The error carries stderr (CRI's ExecSync); the message, stdout then stderr.
    let result = hook(&exec_handler(&[
        "sh",
        "-c",
        "echo oops >&2; echo out; exit 2",
    ]))
    .await;
    assert_eq!(
        result,
        Err(format!(
            "Exec lifecycle hook ([sh -c echo oops >&2; echo out; exit 2]) for Container \"app\" in Pod \"{}\" \
             failed - error: command 'sh -c echo oops >&2; echo out; exit 2' exited with 2: oops\n, message: \"out\\noops\\n\"",
            POD.replace('"', "\\\"")
        ))
    );
}

#[tokio::test]
async fn h1_exec_hook_command_is_not_expanded() {
    // Unlike exec probes, hooks get no $(VAR) expansion.
    let result = hook(&exec_handler(&[
        "sh",
        "-c",
        "printf %s \"$0\"; exit 1",
        "$(A)",
    ]))
    .await;
    let err = result.unwrap_err();
    assert!(err.ends_with(", message: \"$(A)\""), "{err}");
    assert!(
        err.contains("([sh -c printf %s \"$0\"; exit 1 $(A)])"),
        "{err}"
    );
}

#[tokio::test]
async fn h1_exec_hook_runtime_error() {
    let result = hook(&exec_handler(&["/nonexistent/hook"]))
        .await
        .unwrap_err();
    let prefix = format!(
        "Exec lifecycle hook ([/nonexistent/hook]) for Container \"app\" in Pod \"{POD}\" failed - error: \
         exec \"/nonexistent/hook\": "
    );
    assert!(result.starts_with(&prefix), "{result}");
    assert!(result.ends_with(", message: \"\""), "{result}");
}

#[tokio::test]
async fn h1_http_hook_ignores_status_and_sends_lifecycle_headers() {
    let (port, seen) = http_server(500).await;
    assert_eq!(hook(&http_handler(port, "/hook?x=1", "HTTP")).await, Ok(()));
    let seen = seen.lock().unwrap().clone();
    assert_eq!(
        seen,
        [format!(
            "GET /hook?x=1 HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUser-Agent: kube-lifecycle/1.34\r\n\
             Accept: */*\r\nAccept-Encoding: gzip\r\n\r\n"
        )]
    );
}

#[tokio::test]
async fn h3_http_hook_transport_error_text() {
    let port = closed_port().await;
    assert_eq!(
        hook(&http_handler(port, "/hook", "HTTP")).await,
        Err(format!(
            "HTTP lifecycle hook (/hook) for Container \"app\" in Pod \"{POD}\" failed - error: \
             Get \"http://127.0.0.1:{port}/hook\": dial tcp 127.0.0.1:{port}: connect: connection refused"
        ))
    );
}

#[tokio::test]
async fn h3_http_hook_unknown_named_port() {
    let mut handler = http_handler(1, "/hook", "HTTP");
    handler.http_get.as_mut().unwrap().port = IntOrString::String("missing".into());
    assert_eq!(
        hook(&handler).await,
        Err(format!(
            "HTTP lifecycle hook (/hook) for Container \"app\" in Pod \"{POD}\" failed - error: \
             strconv.Atoi: parsing \"missing\": invalid syntax"
        ))
    );
}

#[tokio::test]
async fn h1_https_hook_falls_back_to_http_without_authorization() {
    let (port, seen) = http_server(204).await;
    let mut handler = http_handler(port, "/hook", "HTTPS");
    handler.http_get.as_mut().unwrap().http_headers = Some(vec![
        HTTPHeader {
            name: "Authorization".into(),
            value: "Bearer secret".into(),
        },
        HTTPHeader {
            name: "X-Kept".into(),
            value: "yes".into(),
        },
    ]);
    let outcome = run_hook_detailed(
        &HostExec::for_hooks(),
        &(),
        1,
        &container(),
        &handler,
        POD,
        std::future::pending(),
    )
    .await;
    assert_eq!(
        outcome,
        HookOutcome {
            result: Ok(()),
            http_fallback: Some(format!(
                "request to HTTPS lifecycle hook 127.0.0.1:{port} got HTTP response, retry with HTTP succeeded"
            )),
        }
    );
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 1);
    assert!(!seen[0].contains("Authorization"), "{}", seen[0]);
    assert!(seen[0].contains("X-Kept: yes\r\n"), "{}", seen[0]);
}

#[tokio::test(start_paused = true)]
async fn h1_sleep_hook_waits_its_seconds() {
    let handler = LifecycleHandler {
        sleep: Some(SleepAction { seconds: 30 }),
        ..Default::default()
    };
    let started = tokio::time::Instant::now();
    assert_eq!(hook(&handler).await, Ok(()));
    assert_eq!(started.elapsed().as_secs(), 30);
}

#[tokio::test(start_paused = true)]
async fn h1_sleep_hook_ends_early_when_the_container_terminates() {
    let handler = LifecycleHandler {
        sleep: Some(SleepAction { seconds: 30 }),
        ..Default::default()
    };
    let started = tokio::time::Instant::now();
    let terminated = tokio::time::sleep(Duration::from_secs(5));
    let outcome = run_hook_detailed(
        &HostExec::for_hooks(),
        &(),
        1,
        &container(),
        &handler,
        POD,
        terminated,
    )
    .await;
    assert_eq!(
        outcome.result,
        Err(format!(
            "Sleep lifecycle hook (30) for Container \"app\" in Pod \"{POD}\" failed - error: \
             container terminated before sleep hook finished"
        ))
    );
    assert_eq!(started.elapsed().as_secs(), 5);
}

/// V8: `sleep: {seconds: 0}` is valid by default (PodLifecycleSleepActionAllowZero, GA in
/// 1.34) and returns at once, successfully, even when the container has already terminated
/// (a zero sleep has nothing to cut short).
#[tokio::test(start_paused = true)]
async fn v8_zero_sleep_returns_at_once() {
    let handler = LifecycleHandler {
        sleep: Some(SleepAction { seconds: 0 }),
        ..Default::default()
    };
    let started = tokio::time::Instant::now();
    for _ in 0..64 {
        let outcome = run_hook_detailed(
            &HostExec::for_hooks(),
            &(),
            1,
            &container(),
            &handler,
            POD,
            std::future::ready(()),
        )
        .await;
        assert_eq!(outcome.result, Ok(()));
    }
    assert_eq!(started.elapsed(), Duration::ZERO);
}

#[tokio::test]
async fn h1_tcp_socket_hook_is_an_invalid_handler() {
    let handler = LifecycleHandler {
        tcp_socket: Some(TCPSocketAction {
            port: IntOrString::Int(8080),
            host: None,
        }),
        ..Default::default()
    };
    assert_eq!(
        hook(&handler).await,
        Err(
            "Cannot run handler: invalid handler: &LifecycleHandler{Exec:nil,HTTPGet:nil,\
             TCPSocket:&TCPSocketAction{Port:{0 8080 },Host:,},Sleep:nil,}"
                .into()
        )
    );
}

#[test]
fn describe_handler_matches_go_protobuf_strings() {
    let handler = LifecycleHandler {
        exec: Some(ExecAction {
            command: Some(vec!["/bin/drain".into(), "-t".into(), "5".into()]),
        }),
        http_get: Some(HTTPGetAction {
            path: Some("/api/health".into()),
            port: IntOrString::String("http".into()),
            scheme: Some("HTTP".into()),
            http_headers: Some(vec![HTTPHeader {
                name: "X".into(),
                value: "y".into(),
            }]),
            ..Default::default()
        }),
        sleep: Some(SleepAction { seconds: 5 }),
        tcp_socket: None,
    };
    assert_eq!(
        describe_handler(&handler),
        "&LifecycleHandler{Exec:&ExecAction{Command:[/bin/drain -t 5],},\
         HTTPGet:&HTTPGetAction{Path:/api/health,Port:{1 0 http},Host:,Scheme:HTTP,\
         HTTPHeaders:[]HTTPHeader{HTTPHeader{Name:X,Value:y,},},},TCPSocket:nil,\
         Sleep:&SleepAction{Seconds:5,},}"
    );
}
