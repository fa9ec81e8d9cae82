//! `kubectl port-forward` through `podvisor serve` with every kubectl the machine has: 1.20
//! upgrades the connection to SPDY/3.1 itself, 1.32+ tunnel SPDY through a WebSocket
//! (`SPDY/3.1+portforward.k8s.io`). One pod serves two ports on the host's loopback (process
//! runtime): a file over HTTP, fetched by several connections at once, and an echo server
//! whose connection ends after the client's half-close. A port nothing listens on is reported on the
//! error stream as the kubelet words it. The Python client forwards by WebSocket channels
//! (`v4.channel.k8s.io`, ports in the query).

#![allow(missing_docs)]

use crate::kubectl_matrix::kubectls;
use crate::serve_common::ServeCtx;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Pseudo-random bytes (a fixed LCG: the content only has to differ from byte to byte).
fn noise(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed;
    (0..len)
        .map(|_| {
            x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            (x >> 33) as u8
        })
        .collect()
}

/// A running `kubectl port-forward` and the local ports it listens on, in order.
struct Forward {
    child: Child,
    local: Vec<u16>,
    stderr: std::sync::mpsc::Receiver<String>,
}

impl Forward {
    fn start(kubectl: &Path, ctx: &ServeCtx, pod: &str, remote: &[u16]) -> Forward {
        let mut args = vec![
            "--kubeconfig".to_owned(),
            ctx.kubeconfig().display().to_string(),
            "port-forward".to_owned(),
            format!("pod/{pod}"),
        ];
        args.extend(remote.iter().map(|p| format!(":{p}")));
        let mut child = Command::new(kubectl)
            .args(&args)
            .env_remove("KUBECONFIG")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("kubectl runs");
        let (tx, stderr) = std::sync::mpsc::channel();
        let err = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(err).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        // "Forwarding from 127.0.0.1:38211 -> 8080", one per port.
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let mut local = vec![0; remote.len()];
        let mut found = 0;
        while found < remote.len() {
            let line = lines
                .next()
                .unwrap_or_else(|| panic!("kubectl port-forward ended early"))
                .unwrap();
            if let Some(rest) = line.strip_prefix("Forwarding from 127.0.0.1:") {
                let (l, r) = rest.split_once(" -> ").unwrap();
                let r: u16 = r.trim().parse().unwrap();
                let at = remote.iter().position(|p| *p == r).unwrap();
                local[at] = l.parse().unwrap();
                found += 1;
            }
        }
        // Keep draining stdout ("Handling connection for ...").
        std::thread::spawn(move || lines.map_while(Result::ok).for_each(drop));
        Forward {
            child,
            local,
            stderr,
        }
    }

    fn stderr_lines(&self, within: Duration) -> String {
        let deadline = Instant::now() + within;
        let mut all = String::new();
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            match self.stderr.recv_timeout(left) {
                Ok(line) => {
                    all.push_str(&line);
                    all.push('\n');
                    if line.contains("error forwarding port") {
                        break;
                    }
                }
                Err(_) => break,
            }
        }
        all
    }
}

impl Drop for Forward {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn http_get(port: u16, path: &str) -> Vec<u8> {
    let mut conn = TcpStream::connect(("127.0.0.1", port)).unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    write!(conn, "GET {path} HTTP/1.0\r\nHost: pf\r\n\r\n").unwrap();
    let mut all = Vec::new();
    conn.read_to_end(&mut all).unwrap();
    let split = all
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| panic!("an HTTP answer: {:?}", String::from_utf8_lossy(&all)));
    let head = String::from_utf8_lossy(&all[..split]);
    assert!(
        head.starts_with("HTTP/1.") && head[8..].starts_with(" 200"),
        "{head}"
    );
    all[split + 4..].to_vec()
}

fn echo(port: u16, data: &[u8]) -> Vec<u8> {
    let mut conn = TcpStream::connect(("127.0.0.1", port)).unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    let writer = {
        let mut conn = conn.try_clone().unwrap();
        let data = data.to_vec();
        std::thread::spawn(move || {
            conn.write_all(&data).unwrap();
            conn.shutdown(Shutdown::Write).unwrap();
        })
    };
    let mut back = Vec::new();
    conn.read_to_end(&mut back).unwrap();
    writer.join().unwrap();
    back
}

/// What `serve`'s descriptors point at, counted by kind (for a failure's message: one run
/// under the full suite's load saw `too many open files`).
fn open_files(ctx: &ServeCtx) -> String {
    let Some(pid) = ctx.serve_pid() else {
        return "serve is not running".to_owned();
    };
    let mut kinds: std::collections::BTreeMap<String, usize> = Default::default();
    for entry in std::fs::read_dir(format!("/proc/{pid}/fd"))
        .into_iter()
        .flatten()
        .flatten()
    {
        let target = std::fs::read_link(entry.path())
            .map(|t| t.display().to_string())
            .unwrap_or_default();
        let kind = target
            .split([':', '['])
            .next()
            .unwrap_or_default()
            .to_owned();
        *kinds.entry(kind).or_default() += 1;
    }
    format!("{kinds:?}")
}

const SERVER: &str = r#"
import http.server, os, socket, socketserver, sys, threading
root, http_port, echo_port = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
os.chdir(root)
class Echo(socketserver.BaseRequestHandler):
    def handle(self):
        while True:
            chunk = self.request.recv(65536)
            if not chunk:
                break
            self.request.sendall(chunk)
class Threaded(socketserver.ThreadingMixIn, socketserver.TCPServer):
    allow_reuse_address = True
    daemon_threads = True
class Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *a):
        pass
echo = Threaded(("127.0.0.1", echo_port), Echo)
threading.Thread(target=echo.serve_forever, daemon=True).start()
Threaded(("127.0.0.1", http_port), Quiet).serve_forever()
"#;

#[test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
fn port_forward_with_every_kubectl_two_ports_concurrent_connections_and_errors() {
    let mut ctx = ServeCtx::new("pf");
    ctx.start(&[]);
    let root = ctx.path("www");
    std::fs::create_dir_all(&root).unwrap();
    let blob = noise(3 << 20, 7);
    std::fs::write(root.join("blob"), &blob).unwrap();
    let script = ctx.path("server.py");
    std::fs::write(&script, SERVER).unwrap();
    let (http_port, echo_port, closed_port) = (free_port(), free_port(), free_port());
    let manifest = format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: pf}}\nspec:\n  terminationGracePeriodSeconds: 1\n  containers:\n  - name: web\n    image: python\n    command: [python3, {}, {}, '{http_port}', '{echo_port}', '{}']\n    readinessProbe:\n      tcpSocket: {{port: {echo_port}}}\n      periodSeconds: 1\n",
        script.display(),
        root.display(),
        ctx.marker
    );
    let path = ctx.manifest("pf", &manifest);
    ctx.kubectl_ok(&["apply", "-f", path.to_str().unwrap()]);
    ctx.kubectl_ok(&["wait", "--for=condition=Ready", "pod/pf", "--timeout=60s"]);

    for (version, kubectl) in &kubectls() {
        let forward = Forward::start(kubectl, &ctx, "pf", &[http_port, echo_port]);
        let (web, echo_local) = (forward.local[0], forward.local[1]);
        // Four downloads at once on one session, each a stream pair of its own.
        let fetches: Vec<_> = (0..4)
            .map(|_| std::thread::spawn(move || http_get(web, "/blob")))
            .collect();
        for fetch in fetches {
            let got = fetch.join().unwrap();
            assert!(got == blob, "kubectl {version}: {} bytes back", got.len());
        }
        // Everything comes back, and the client's half-close reaches the pod: its server ends
        // the connection, which ends the client's.
        let sent = noise(1 << 20, 11);
        let back = echo(echo_local, &sent);
        assert!(
            back == sent,
            "kubectl {version}: echo of {} bytes",
            back.len()
        );
        drop(forward);

        // Nothing listens: the kubelet's words on the error stream.
        let forward = Forward::start(kubectl, &ctx, "pf", &[closed_port]);
        let mut conn = TcpStream::connect(("127.0.0.1", forward.local[0])).unwrap();
        conn.set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        let mut rest = Vec::new();
        let _ = conn.read_to_end(&mut rest);
        let stderr = forward.stderr_lines(Duration::from_secs(20));
        let uid = ctx.kubectl_ok(&["get", "pod", "pf", "-o", "jsonpath={.metadata.uid}"]);
        assert!(
            stderr.contains(&format!(
                "error forwarding port {closed_port} to pod pf_default, uid {uid}: failed to \
                 connect to localhost:{closed_port}, IPv4: dial tcp4 127.0.0.1:{closed_port}: \
                 connect: connection refused"
            )),
            "kubectl {version}: {stderr}\nserve's open files: {}",
            open_files(&ctx)
        );
    }

    // A pod that does not exist, and the plain GET kubectl never sends.
    let out = ctx.kubectl(&["port-forward", "pod/nope", "1234"]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("pods \"nope\" not found"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let raw = ctx.kubectl(&[
        "get",
        "--raw",
        "/api/v1/namespaces/default/pods/pf/portforward",
    ]);
    assert!(
        String::from_utf8_lossy(&raw.stderr).contains("Upgrade request required"),
        "{}",
        String::from_utf8_lossy(&raw.stderr)
    );
    assert_eq!(ctx.stop(Duration::from_secs(10)), Some(0));
}

/// An oci pod has a network of its own: `kubectl port-forward` reaches a server that listens
/// only on the pod's loopback (the connection is made inside the pod's network namespace, as
/// containerd makes it), which the pod's address does not answer for.
#[test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
fn port_forward_reaches_the_loopback_of_an_oci_pod() {
    let _one = crate::oci::one_at_a_time();
    let mut ctx = ServeCtx::new("pfo");
    crate::oci::load_busybox(&ctx, &[]);
    ctx.start(&["--runtime", "oci"]);
    let m = ctx.marker.clone();
    let manifest = ctx.manifest(
        "web",
        &format!(
            r#"apiVersion: v1
kind: Pod
metadata:
  name: web
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: web
    image: busybox:latest
    imagePullPolicy: IfNotPresent
    command: [sh, -c, 'mkdir -p /www && echo hello from {m} > /www/index.html && exec httpd -f -p 127.0.0.1:8080 -h /www']
    readinessProbe:
      exec: {{command: [wget, -q, -O, /dev/null, 'http://127.0.0.1:8080/index.html']}}
      periodSeconds: 1
"#
        ),
    );
    ctx.kubectl_ok(&["apply", "-f", manifest.to_str().unwrap()]);
    ctx.kubectl_ok(&["wait", "--for=condition=Ready", "pod/web", "--timeout=90s"]);
    let forward = Forward::start(&crate::serve_common::kubectl_binary(), &ctx, "web", &[8080]);
    let body = http_get(forward.local[0], "/index.html");
    assert_eq!(String::from_utf8_lossy(&body), format!("hello from {m}\n"));
    // The pod's address does not answer on 8080: the server listens on the pod's loopback.
    let ip = ctx.kubectl_ok(&["get", "pod", "web", "-o", "jsonpath={.status.podIP}"]);
    let addr: std::net::SocketAddr = format!("{ip}:8080").parse().unwrap();
    assert!(
        TcpStream::connect_timeout(&addr, Duration::from_secs(3)).is_err(),
        "{addr} answers"
    );
    drop(forward);
    ctx.kubectl_ok(&["delete", "pod", "web", "--wait=true"]);
    assert_eq!(ctx.stop(Duration::from_secs(10)), Some(0));
}

/// The official Python client's `portforward` (WebSocket by channels, `v4.channel.k8s.io`,
/// ports in the query) through `tests/python/portforward.py`: two ports in one session, then
/// the error channel of a port nothing listens on.
#[test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
fn python_client_port_forward_by_channels() {
    let python = crate::python_client::python();
    assert!(
        crate::python_client::has_kubernetes_client(&python),
        "the Python kubernetes client is not installed for {}",
        python.display()
    );
    let mut ctx = ServeCtx::new("pfpy");
    ctx.start(&[]);
    let root = ctx.path("www");
    std::fs::create_dir_all(&root).unwrap();
    let blob = noise(1 << 20, 3);
    std::fs::write(root.join("blob"), &blob).unwrap();
    let script = ctx.path("server.py");
    std::fs::write(&script, SERVER).unwrap();
    let (http_port, echo_port, closed_port) = (free_port(), free_port(), free_port());
    let manifest = format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: pfpy}}\nspec:\n  terminationGracePeriodSeconds: 1\n  containers:\n  - name: web\n    image: python\n    command: [python3, {}, {}, '{http_port}', '{echo_port}', '{}']\n    readinessProbe:\n      tcpSocket: {{port: {echo_port}}}\n      periodSeconds: 1\n",
        script.display(),
        root.display(),
        ctx.marker
    );
    let path = ctx.manifest("pfpy", &manifest);
    ctx.kubectl_ok(&["apply", "-f", path.to_str().unwrap()]);
    ctx.kubectl_ok(&["wait", "--for=condition=Ready", "pod/pfpy", "--timeout=60s"]);
    let client =
        std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/python/portforward.py");
    let mut child = Command::new(&python)
        .arg(&client)
        .arg(ctx.kubeconfig())
        .args([
            "pfpy",
            &http_port.to_string(),
            &echo_port.to_string(),
            &closed_port.to_string(),
        ])
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env_remove("KUBECONFIG")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python starts");
    let deadline = Instant::now() + Duration::from_secs(90);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "portforward.py failed:\n{stdout}{stderr}"
    );
    let uid = ctx.kubectl_ok(&["get", "pod", "pfpy", "-o", "jsonpath={.metadata.uid}"]);
    for step in [
        format!("ok: GET /blob: {} bytes", blob.len()),
        format!("ok: echo: {} bytes", 256 * 4096),
        format!(
            "ok: closed port: error forwarding port {closed_port} to pod pfpy_default, uid \
             {uid}: failed to connect to localhost:{closed_port}, IPv4: dial tcp4 \
             127.0.0.1:{closed_port}: connect: connection refused"
        ),
    ] {
        assert!(
            stdout.contains(&step),
            "missing {step:?}:\n{stdout}{stderr}"
        );
    }
    assert_eq!(ctx.stop(Duration::from_secs(10)), Some(0));
}
