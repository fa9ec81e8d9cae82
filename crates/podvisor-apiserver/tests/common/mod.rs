//! A real API server on 127.0.0.1:0 with a fresh store and state directory, driven by the
//! real kubectl and by a small HTTPS client.

#![allow(dead_code)]

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use axum::body::Body;
use http_body_util::BodyExt;
use hyper::Request;
use hyper_util::rt::TokioIo;
use podvisor_apiserver::{ApiServer, ApiState, ServeConfig};
use podvisor_store::Store;
use serde_json::Value;
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, ServerName};
use tokio_rustls::rustls::{self, ClientConfig, RootCertStore};

/// The kubectl under test (`PODVISOR_KUBECTL` overrides, e.g. a 1.34 binary).
pub fn kubectl_binary() -> String {
    podvisor_testkit::kubectl().display().to_string()
}

/// The node name the test servers use.
pub const NODE: &str = "podvisor-test-node";

/// A running server.
pub struct TestServer {
    pub dir: tempfile::TempDir,
    pub kubeconfig: PathBuf,
    pub addr: SocketAddr,
    pub token: String,
    pub ca_pem: String,
    pub log_root: PathBuf,
    pub state: ApiState,
    pub rt: tokio::runtime::Runtime,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    served: Option<tokio::task::JoinHandle<()>>,
    caches: AtomicUsize,
}

/// What a command printed.
#[derive(Debug)]
pub struct Run {
    pub ok: bool,
    pub stdout: String,
    pub stderr: String,
}

impl From<Output> for Run {
    fn from(o: Output) -> Self {
        Run {
            ok: o.status.success(),
            stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
        }
    }
}

impl TestServer {
    /// Starts a server and waits for its kubeconfig.
    pub fn start() -> TestServer {
        Self::start_with_history(None)
    }

    /// Starts a server whose `pods/history` reads `history`.
    pub fn start_with_history(
        history: Option<std::sync::Arc<dyn podvisor_apiserver::PodHistory>>,
    ) -> TestServer {
        let dir = tempfile::tempdir().unwrap();
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let state_dir = dir.path().join("state");
        std::fs::create_dir_all(&state_dir).unwrap();
        let log_root = state_dir.join("logs");
        let store = Store::open(&state_dir.join("store.redb")).unwrap();
        // The node the agent would register: the scheduler filters pods against it.
        store
            .create(
                &podvisor_store::Key::cluster("nodes", NODE),
                serde_json::json!({
                    "apiVersion": "v1", "kind": "Node",
                    "metadata": {"name": NODE, "labels": {"kubernetes.io/hostname": NODE}},
                    "spec": {},
                    "status": {"allocatable": {"cpu": "8", "memory": "16Gi", "pods": "110"}},
                }),
            )
            .unwrap();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let config = ServeConfig {
            listen: "127.0.0.1:0".parse().unwrap(),
            state_dir: state_dir.clone(),
            store,
            log_root: log_root.clone(),
            node_name: NODE.to_owned(),
            pod_network: None,
        };
        let server: ApiServer = rt
            .block_on(ApiServer::bind(config))
            .unwrap()
            .with_bookmark_interval(Duration::from_secs(1));
        let server = match history {
            Some(h) => server.with_history(h),
            None => server,
        };
        let addr = server.local_addr();
        let token = server.token().to_owned();
        let ca_pem = server.ca_pem().to_owned();
        let kubeconfig = server.kubeconfig_path();
        let state = server.state().clone();
        let served = rt.spawn(async move {
            server
                .run(async {
                    let _ = stopped.await;
                })
                .await
                .unwrap();
        });
        let deadline = Instant::now() + Duration::from_secs(10);
        while !kubeconfig.exists() {
            assert!(Instant::now() < deadline, "no kubeconfig after 10 s");
            std::thread::sleep(Duration::from_millis(20));
        }
        TestServer {
            dir,
            kubeconfig,
            addr,
            token,
            ca_pem,
            log_root,
            state,
            rt,
            stop: Some(stop),
            served: Some(served),
            caches: AtomicUsize::new(0),
        }
    }

    /// A kubectl command with the kubeconfig and a fresh cache directory.
    pub fn kubectl_command(&self, args: &[&str]) -> Command {
        let n = self.caches.fetch_add(1, Ordering::SeqCst);
        let cache = self.dir.path().join(format!("cache-{n}"));
        let mut cmd = Command::new(kubectl_binary());
        cmd.arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .arg("--cache-dir")
            .arg(cache)
            .args(args)
            .env_remove("KUBECONFIG")
            .stdin(Stdio::null());
        cmd
    }

    /// Runs kubectl to completion.
    pub fn kubectl(&self, args: &[&str]) -> Run {
        self.kubectl_command(args).output().unwrap().into()
    }

    /// Runs kubectl with `stdin` as input (`-f -`).
    pub fn kubectl_stdin(&self, args: &[&str], stdin: &str) -> Run {
        use std::io::Write;
        let mut child = self
            .kubectl_command(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(stdin.as_bytes())
            .unwrap();
        child.wait_with_output().unwrap().into()
    }

    /// Runs kubectl and asserts success.
    pub fn kubectl_ok(&self, args: &[&str]) -> String {
        let r = self.kubectl(args);
        assert!(r.ok, "kubectl {args:?} failed: {}{}", r.stdout, r.stderr);
        r.stdout
    }

    /// Creates a pod from YAML through kubectl.
    pub fn create(&self, yaml: &str) {
        let r = self.kubectl_stdin(&["create", "-f", "-"], yaml);
        assert!(r.ok, "create failed: {}{}", r.stdout, r.stderr);
    }

    /// Merges `status` into a pod's status through the status subresource (as the node
    /// agent will).
    pub fn patch_status(&self, name: &str, status: &Value) {
        let patch = serde_json::json!({ "status": status }).to_string();
        self.kubectl_ok(&[
            "patch",
            "pod",
            name,
            "--subresource=status",
            "--type=merge",
            "-p",
            &patch,
        ]);
    }

    /// One HTTPS request with the token; returns status, headers and body.
    pub fn request(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: Option<&str>,
    ) -> (u16, hyper::HeaderMap, String) {
        self.rt.block_on(async {
            let (parts, body) = self.raw(method, path, headers, body, true).await;
            let bytes = body.collect().await.unwrap().to_bytes();
            (
                parts.status.as_u16(),
                parts.headers,
                String::from_utf8_lossy(&bytes).into_owned(),
            )
        })
    }

    /// A JSON request; returns status and parsed body.
    pub fn json(&self, method: &str, path: &str, body: Option<&Value>) -> (u16, Value) {
        let text = body.map(Value::to_string);
        let (code, _, body) = self.request(
            method,
            path,
            &[("content-type", "application/json")],
            text.as_deref(),
        );
        (
            code,
            serde_json::from_str(&body).unwrap_or(Value::String(body)),
        )
    }

    /// Starts a request and returns the response head and the streaming body.
    pub async fn raw(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: Option<&str>,
        auth: bool,
    ) -> (hyper::http::response::Parts, hyper::body::Incoming) {
        let mut roots = RootCertStore::empty();
        for c in CertificateDer::pem_slice_iter(self.ca_pem.as_bytes()) {
            roots.add(c.unwrap()).unwrap();
        }
        let config =
            ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
                .with_safe_default_protocol_versions()
                .unwrap()
                .with_root_certificates(roots)
                .with_no_client_auth();
        let connector = TlsConnector::from(Arc::new(config));
        let tcp = TcpStream::connect(self.addr).await.unwrap();
        let name = ServerName::IpAddress(self.addr.ip().into());
        let tls = connector.connect(name, tcp).await.unwrap();
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
            .await
            .unwrap();
        tokio::spawn(conn);
        let mut req = Request::builder()
            .method(method)
            .uri(path)
            .header("host", self.addr.to_string());
        if auth {
            req = req.header("authorization", format!("Bearer {}", self.token));
        }
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let req = req
            .body(body.map_or_else(Body::empty, |b| Body::from(b.to_owned())))
            .unwrap();
        let resp = sender.send_request(req).await.unwrap();
        resp.into_parts()
    }

    /// Writes a CRI log file for a pod's container instance.
    pub fn write_log(&self, ns: &str, name: &str, uid: &str, container: &str, n: u32, text: &str) {
        let dir = self
            .log_root
            .join(format!("{ns}_{name}_{uid}"))
            .join(container);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(format!("{n}.log")), text).unwrap();
    }

    /// Stops the server (as `serve` does on SIGTERM) and returns how long it took to stop.
    pub fn shutdown(&mut self) -> Duration {
        let started = Instant::now();
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(served) = self.served.take() {
            self.rt
                .block_on(async { tokio::time::timeout(Duration::from_secs(30), served).await })
                .expect("the server stops within 30 s")
                .unwrap();
        }
        started.elapsed()
    }

    /// The directory tests may write scratch files to.
    pub fn scratch(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

/// A minimal valid pod manifest.
pub fn pod_yaml(name: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  labels:\n    app: {name}\nspec:\n  containers:\n  - name: app\n    image: busybox\n    command: [sleep, '3600']\n"
    )
}
