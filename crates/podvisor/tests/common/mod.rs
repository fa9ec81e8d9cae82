//! Shared helpers of the end-to-end suites (`e2e_*.rs`): run `podvisor run` on real processes
//! with a hard timeout, collect its JSON lines, find (and kill) every process a test left
//! behind, and serve real HTTP and gRPC endpoints for probes and hooks.
//!
//! Every test gets a [`Ctx`]: a unique marker string, a temporary directory named after it
//! (`/tmp/<marker>`, holding the manifests, the state directory and shared log files) and, on
//! drop, a clean-up that SIGKILLs every process carrying the marker and removes the directory.
//! The marker reaches every process of the run: podvisor itself (an environment variable), the
//! shims (their `--pod-dir` lies under the directory) and every container and exec child (an
//! `env` entry added to each container of each manifest).

#![allow(dead_code)]

use podvisor_testkit::{MarkerIn, Proc, kill_marked, marked_processes, remove_pod_cgroups};
use rustix::process::{Pid, Signal};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU16, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// The environment variable carrying the marker.
pub const MARKER_ENV: &str = "PODVISOR_E2E_MARKER";

/// How long one `podvisor run` may take before the test gives up (and kills it).
pub const RUN_TIMEOUT: Duration = Duration::from_secs(60);

/// Seconds since the Unix epoch.
pub fn epoch() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

/// `["sh", "-c", script]`.
pub fn sh(script: &str) -> Value {
    json!(["sh", "-c", script])
}

/// A Pod manifest.
pub fn pod(name: &str, spec: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec})
}

/// A shell line appending `<what> <epoch seconds>` to `log` (GNU date: nanoseconds).
pub fn log_line(log: &Path, what: &str) -> String {
    format!("echo {what} $(date +%s.%N) >> {}", log.display())
}

/// One test's world: marker, directory, clean-up.
pub struct Ctx {
    pub marker: String,
    pub dir: PathBuf,
}

static COUNTER: AtomicU64 = AtomicU64::new(0);

impl Ctx {
    /// A fresh context. Panics unless run as root: the process runtime needs it (mount
    /// namespaces, cgroups), and the tests that call this are `#[ignore]`d otherwise.
    pub fn new(tag: &str) -> Ctx {
        assert!(
            rustix::process::geteuid().is_root(),
            "needs root: this test is #[ignore]d unless run as root with --include-ignored (podvisor's process runtime needs cgroups and mount namespaces)"
        );
        let tag: String = tag
            .chars()
            .filter(|c| c.is_ascii_alphanumeric())
            .take(12)
            .collect::<String>()
            .to_lowercase();
        let n = COUNTER.fetch_add(1, Ordering::SeqCst);
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .subsec_nanos();
        // Fixed width after the tag, so that no marker is a prefix of another; short, as the
        // shim's socket lives 70 bytes deeper and must fit in sun_path (108 bytes).
        let marker = format!(
            "pve2e-{tag}-{:08x}{:04x}{:04x}",
            std::process::id(),
            n & 0xffff,
            nanos & 0xffff
        );
        let mut base = std::env::temp_dir();
        if base.as_os_str().len() + marker.len() > 40 {
            base = PathBuf::from("/tmp");
        }
        let dir = base.join(&marker);
        std::fs::create_dir_all(&dir).unwrap();
        Ctx { marker, dir }
    }

    /// A path inside the test directory.
    pub fn path(&self, rel: &str) -> PathBuf {
        self.dir.join(rel)
    }

    /// A directory inside the test directory (for a `hostPath`).
    pub fn mkdir(&self, rel: &str) -> PathBuf {
        let p = self.path(rel);
        std::fs::create_dir_all(&p).unwrap();
        p
    }

    /// Starts `podvisor run --output json --backoff reduced --state-dir <dir>/state ARGS` on
    /// `pods` (one manifest file each), after adding the marker to every container's env.
    pub fn spawn(&self, pods: &[Value], args: &[&str]) -> Running {
        let mut files = Vec::new();
        for (i, p) in pods.iter().enumerate() {
            let mut p = p.clone();
            for list in ["containers", "initContainers"] {
                if let Some(cs) = p["spec"][list].as_array_mut() {
                    for c in cs {
                        let env = c
                            .as_object_mut()
                            .unwrap()
                            .entry("env")
                            .or_insert_with(|| json!([]));
                        env.as_array_mut()
                            .unwrap()
                            .push(json!({"name": MARKER_ENV, "value": self.marker}));
                    }
                }
            }
            let file = self.path(&format!("pod-{i}.json"));
            std::fs::write(&file, serde_json::to_vec_pretty(&p).unwrap()).unwrap();
            files.push(file);
        }
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_podvisor"));
        cmd.arg("run")
            .args(&files)
            .args(["--output", "json", "--backoff", "reduced", "--state-dir"])
            .arg(self.path("state"))
            .args(args)
            .env(MARKER_ENV, &self.marker)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        // Its own process group: a timeout kills podvisor and whatever it spawned in it.
        std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
        let started = Instant::now();
        let started_epoch = epoch();
        let mut child = cmd.spawn().expect("podvisor starts");
        let shared = Arc::new(Shared::default());
        let stdout = child.stdout.take().unwrap();
        let out = Arc::clone(&shared);
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let received = epoch();
                let mut value: Value = serde_json::from_str(&line).unwrap_or_else(
                    |e| json!({"kind": "unparsable", "line": line, "error": e.to_string()}),
                );
                // When the line arrived (Unix seconds), to place `t` on the wall clock.
                value["_received"] = json!(received);
                out.lines.lock().unwrap().push(value);
                out.changed.notify_all();
            }
            *out.eof.lock().unwrap() = true;
            out.changed.notify_all();
        });
        let mut stderr = child.stderr.take().unwrap();
        let err_reader = std::thread::spawn(move || {
            let mut s = String::new();
            let _ = stderr.read_to_string(&mut s);
            s
        });
        Running {
            child: Some(child),
            shared,
            reader: Some(reader),
            err_reader: Some(err_reader),
            started,
            spawned_epoch: started_epoch,
            marker: self.marker.clone(),
        }
    }

    /// [`Ctx::spawn`] and [`Running::wait`] with [`RUN_TIMEOUT`].
    pub fn run(&self, pods: &[Value], args: &[&str]) -> Run {
        self.spawn(pods, args).wait(RUN_TIMEOUT)
    }

    /// Every live process carrying this test's marker, and their descendants.
    pub fn processes(&self) -> Vec<Proc> {
        marked_processes(&self.marker, MarkerIn::CmdlineOrEnviron)
    }
}

impl Drop for Ctx {
    fn drop(&mut self) {
        let left = kill_marked(&self.marker, MarkerIn::CmdlineOrEnviron);
        if !left.is_empty() {
            eprintln!(
                "clean-up: killed {} leftover process(es) of {}",
                left.len(),
                self.marker
            );
        }
        remove_pod_cgroups(&self.path("state/pods"));
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[derive(Default)]
struct Shared {
    lines: Mutex<Vec<Value>>,
    eof: Mutex<bool>,
    changed: Condvar,
}

/// A `podvisor run` in progress.
pub struct Running {
    child: Option<Child>,
    shared: Arc<Shared>,
    reader: Option<std::thread::JoinHandle<()>>,
    err_reader: Option<std::thread::JoinHandle<String>>,
    started: Instant,
    /// When podvisor was spawned (Unix epoch seconds).
    spawned_epoch: f64,
    marker: String,
}

impl Running {
    /// podvisor's pid.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().unwrap().id()
    }

    /// The lines so far.
    pub fn lines(&self) -> Vec<Value> {
        self.shared.lines.lock().unwrap().clone()
    }

    /// Waits until a line satisfies `pred`, and returns it; panics (after killing the run)
    /// when `timeout` passes or podvisor's output ends first.
    pub fn wait_for(
        &mut self,
        what: &str,
        timeout: Duration,
        pred: impl Fn(&Value) -> bool,
    ) -> Value {
        self.wait_until(what, timeout, |lines| {
            lines.iter().find(|l| pred(l)).cloned()
        })
    }

    /// Waits until `n` lines satisfy `pred`; returns the `n`th.
    pub fn wait_count(
        &mut self,
        what: &str,
        timeout: Duration,
        n: usize,
        pred: impl Fn(&Value) -> bool,
    ) -> Value {
        self.wait_until(what, timeout, |lines| {
            lines.iter().filter(|l| pred(l)).nth(n - 1).cloned()
        })
    }

    /// Waits until `check` finds something in the lines so far.
    pub fn wait_until(
        &mut self,
        what: &str,
        timeout: Duration,
        check: impl Fn(&[Value]) -> Option<Value>,
    ) -> Value {
        let deadline = Instant::now() + timeout;
        let mut lines = self.shared.lines.lock().unwrap();
        loop {
            if let Some(found) = check(&lines) {
                return found;
            }
            let now = Instant::now();
            if now >= deadline || *self.shared.eof.lock().unwrap() {
                let dump = dump(&lines);
                drop(lines);
                self.kill();
                panic!("timed out waiting for {what} ({timeout:?}); output:\n{dump}");
            }
            lines = self
                .shared
                .changed
                .wait_timeout(lines, (deadline - now).min(Duration::from_millis(200)))
                .unwrap()
                .0;
        }
    }

    /// Waits for a status line satisfying `pred`.
    pub fn wait_status(
        &mut self,
        what: &str,
        timeout: Duration,
        pred: impl Fn(&Value) -> bool,
    ) -> Value {
        self.wait_for(what, timeout, |l| l["kind"] == "status" && pred(l))
    }

    /// Waits for an event with this reason (and container, if given).
    pub fn wait_event(
        &mut self,
        reason: &str,
        container: Option<&str>,
        timeout: Duration,
    ) -> Value {
        self.wait_events(reason, container, 1, timeout)
    }

    /// Waits for the `n`th event with this reason (and container, if given).
    pub fn wait_events(
        &mut self,
        reason: &str,
        container: Option<&str>,
        n: usize,
        timeout: Duration,
    ) -> Value {
        self.wait_count(&format!("{n} event(s) {reason}"), timeout, n, |l| {
            l["kind"] == "event"
                && l["reason"] == reason
                && container.is_none_or(|c| l["container"] == c)
        })
    }

    /// Sends SIGTERM to podvisor: every pod is deleted gracefully.
    pub fn terminate(&self) {
        if let Some(child) = &self.child {
            podvisor_testkit::signal(child.id(), Signal::TERM);
        }
    }

    /// SIGKILLs podvisor's process group and every process carrying the marker.
    fn kill(&mut self) {
        if let Some(child) = self.child.as_mut() {
            if let Some(pgid) = pid(child.id()) {
                let _ = rustix::process::kill_process_group(pgid, Signal::KILL);
            }
            let _ = child.wait();
        }
        kill_marked(&self.marker, MarkerIn::CmdlineOrEnviron);
    }

    /// Waits for podvisor to exit (killing everything and panicking after `timeout`), then
    /// checks that no process of the run is left (panics listing them otherwise).
    pub fn wait(mut self, timeout: Duration) -> Run {
        let deadline = self.started + timeout;
        let mut child = self.child.take().unwrap();
        let code = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status.code();
            }
            if Instant::now() >= deadline {
                if let Some(pgid) = pid(child.id()) {
                    let _ = rustix::process::kill_process_group(pgid, Signal::KILL);
                }
                let _ = child.wait();
                kill_marked(&self.marker, MarkerIn::CmdlineOrEnviron);
                let lines = self.lines();
                panic!(
                    "podvisor run did not finish within {timeout:?}; output:\n{}",
                    dump(&lines)
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let elapsed = self.started.elapsed();
        if let Some(r) = self.reader.take() {
            let _ = r.join();
        }
        let stderr = self
            .err_reader
            .take()
            .map(|r| r.join().unwrap_or_default())
            .unwrap_or_default();
        let lines = self.lines();
        // Shims and containers are gone once podvisor has returned; give stragglers a moment
        // (a reaper tick) before calling them leaks.
        let leftovers = settle(&self.marker, Duration::from_secs(3));
        let run = Run {
            started_epoch: wall_offset(&lines, self.spawned_epoch),
            lines,
            code,
            stderr,
            elapsed,
        };
        assert!(
            leftovers.is_empty(),
            "processes left behind after podvisor exited: {leftovers:#?}\n{}",
            run.dump()
        );
        run
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if self.child.is_some() {
            self.kill();
        }
    }
}

/// Polls until no marked process remains or `limit` passes; returns what remains.
fn settle(marker: &str, limit: Duration) -> Vec<Proc> {
    let deadline = Instant::now() + limit;
    loop {
        let left = marked_processes(marker, MarkerIn::CmdlineOrEnviron);
        if left.is_empty() || Instant::now() >= deadline {
            return left;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The Unix time of podvisor's `t = 0`: every line arrived after it happened, so the earliest
/// `received - t` is the closest estimate (the spawn time `fallback` comes before podvisor has
/// even loaded).
fn wall_offset(lines: &[Value], fallback: f64) -> f64 {
    let best = lines
        .iter()
        .filter_map(|l| Some(l["_received"].as_f64()? - l["t"].as_f64()?))
        .fold(f64::INFINITY, f64::min);
    if best.is_finite() { best } else { fallback }
}

fn pid(raw: u32) -> Option<Pid> {
    Pid::from_raw(i32::try_from(raw).ok()?)
}

/// A finished `podvisor run`.
pub struct Run {
    pub lines: Vec<Value>,
    pub code: Option<i32>,
    pub stderr: String,
    pub elapsed: Duration,
    /// The Unix time of `t = 0` (see [`wall_offset`]).
    pub started_epoch: f64,
}

impl Run {
    /// Every line, one per row, plus stderr (for assertion messages).
    pub fn dump(&self) -> String {
        format!(
            "{}--- exit {:?}, stderr:\n{}",
            dump(&self.lines),
            self.code,
            self.stderr
        )
    }

    /// The status lines.
    pub fn statuses(&self) -> Vec<&Value> {
        self.lines
            .iter()
            .filter(|l| l["kind"] == "status")
            .collect()
    }

    /// The last status line.
    pub fn final_status(&self) -> &Value {
        self.lines
            .iter()
            .rev()
            .find(|l| l["kind"] == "status")
            .unwrap_or_else(|| panic!("no status line\n{}", self.dump()))
    }

    /// Events with this reason, in order.
    pub fn events(&self, reason: &str) -> Vec<&Value> {
        self.lines
            .iter()
            .filter(|l| l["kind"] == "event" && l["reason"] == reason)
            .collect()
    }

    /// Events with this reason about this container.
    pub fn container_events(&self, reason: &str, container: &str) -> Vec<&Value> {
        self.events(reason)
            .into_iter()
            .filter(|e| e["container"] == container)
            .collect()
    }

    /// When the pod's deletion began: the first `Killing` event with `Stopping container`.
    pub fn deletion_time(&self) -> Option<f64> {
        self.first_time(|l| {
            l["kind"] == "event"
                && l["reason"] == "Killing"
                && l["message"]
                    .as_str()
                    .is_some_and(|m| m.starts_with("Stopping container"))
        })
    }

    /// This container's events with this reason before the deletion began (a probe in
    /// flight when its container is stopped fails, as with the kubelet; tests look at what
    /// happened before).
    pub fn events_before_deletion(&self, reason: &str, container: &str) -> Vec<&Value> {
        let end = self.deletion_time().unwrap_or(f64::INFINITY);
        self.container_events(reason, container)
            .into_iter()
            .filter(|e| t(e) < end)
            .collect()
    }

    /// The messages of the events with this reason.
    pub fn messages(&self, reason: &str) -> Vec<String> {
        self.events(reason)
            .iter()
            .map(|e| e["message"].as_str().unwrap_or_default().to_string())
            .collect()
    }

    /// The times (`t`) of this container's events with this reason.
    pub fn event_times(&self, reason: &str, container: &str) -> Vec<f64> {
        self.container_events(reason, container)
            .iter()
            .map(|e| t(e))
            .collect()
    }

    /// The `t` of the first line satisfying `pred`.
    pub fn first_time(&self, pred: impl Fn(&Value) -> bool) -> Option<f64> {
        self.lines.iter().find(|l| pred(l)).map(t)
    }

    /// The `t` of the first status line where this container satisfies `pred`.
    pub fn first_container_time(&self, name: &str, pred: impl Fn(&Value) -> bool) -> Option<f64> {
        self.first_time(|l| l["kind"] == "status" && find_container(l, name).is_some_and(&pred))
    }

    /// A container of the final status.
    pub fn final_container(&self, name: &str) -> &Value {
        container(self.final_status(), name)
    }

    /// RESTARTS of the final status.
    pub fn restarts(&self) -> i64 {
        self.final_status()["restarts"].as_i64().unwrap()
    }

    /// The distinct STATUS column values, in order of appearance.
    pub fn status_texts(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for s in self.statuses() {
            let text = s["status_text"].as_str().unwrap_or_default().to_string();
            if out.last() != Some(&text) {
                out.push(text);
            }
        }
        out
    }
}

/// `t` of a line.
pub fn t(line: &Value) -> f64 {
    line["t"].as_f64().unwrap()
}

/// A container (init or regular) of a status line, by name.
pub fn find_container<'a>(status: &'a Value, name: &str) -> Option<&'a Value> {
    status["containers"]
        .as_array()?
        .iter()
        .find(|c| c["name"] == name)
}

/// Like [`find_container`], panicking when it is missing.
pub fn container<'a>(status: &'a Value, name: &str) -> &'a Value {
    find_container(status, name).unwrap_or_else(|| panic!("no container {name} in {status}"))
}

fn dump(lines: &[Value]) -> String {
    let mut s = String::new();
    for l in lines {
        if l["kind"] == "event" {
            s.push_str(&format!(
                "{:>7.3} event  {} {} [{}] {}\n",
                l["t"].as_f64().unwrap_or(-1.0),
                l["type"].as_str().unwrap_or("?"),
                l["reason"].as_str().unwrap_or("?"),
                l["container"].as_str().unwrap_or(""),
                l["message"]
            ));
        } else if l["kind"] == "status" {
            let cs: Vec<String> = l["containers"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|c| {
                    format!(
                        "{}={}/{}/{}/ready:{}/rc:{}",
                        c["name"].as_str().unwrap_or("?"),
                        c["state"].as_str().unwrap_or("?"),
                        c["reason"],
                        c["exit_code"],
                        c["ready"],
                        c["restart_count"]
                    )
                })
                .collect();
            s.push_str(&format!(
                "{:>7.3} status {} {} {} reason:{} {}\n",
                l["t"].as_f64().unwrap_or(-1.0),
                l["phase"].as_str().unwrap_or("?"),
                l["status_text"].as_str().unwrap_or("?"),
                l["ready"].as_str().unwrap_or("?"),
                l["reason"],
                cs.join(" ")
            ));
        } else {
            s.push_str(&format!("{l}\n"));
        }
    }
    s
}

// ----- ports and servers -----

/// A TCP port nothing listens on for as long as this lives: a bound socket that never
/// listens (connections are refused, and no other test can take the port meanwhile).
pub struct RefusedPort {
    pub port: u16,
    _socket: rustix::fd::OwnedFd,
}

impl RefusedPort {
    pub fn new() -> RefusedPort {
        use rustix::net::{AddressFamily, SocketType, bind, getsockname, socket};
        let socket = socket(AddressFamily::INET, SocketType::STREAM, None).unwrap();
        let addr = std::net::SocketAddrV4::new(std::net::Ipv4Addr::LOCALHOST, 0);
        bind(&socket, &addr).unwrap();
        let bound = getsockname(&socket).unwrap();
        let port = std::net::SocketAddr::try_from(bound).unwrap().port();
        RefusedPort {
            port,
            _socket: socket,
        }
    }
}

/// One request the test HTTP server received.
#[derive(Debug, Clone)]
pub struct HttpRequest {
    pub path: String,
    pub headers: HashMap<String, String>,
    /// Unix epoch seconds.
    pub at: f64,
}

#[derive(Default)]
struct HttpState {
    status: AtomicU16,
    delay_ms: AtomicU64,
    stop: AtomicBool,
    requests: Mutex<Vec<HttpRequest>>,
    log: Mutex<Option<PathBuf>>,
}

/// A real HTTP/1.1 server on 127.0.0.1 (a free port), answering every request with the
/// current status code after the current delay; it records each request and, when given a
/// log file, appends `http <path> <epoch>` to it on arrival.
pub struct HttpServer {
    pub port: u16,
    state: Arc<HttpState>,
}

impl HttpServer {
    pub fn start(status: u16) -> HttpServer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let state = Arc::new(HttpState::default());
        state.status.store(status, Ordering::SeqCst);
        let st = Arc::clone(&state);
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                if st.stop.load(Ordering::SeqCst) {
                    return;
                }
                let Ok(conn) = conn else { continue };
                let st = Arc::clone(&st);
                std::thread::spawn(move || serve(conn, &st));
            }
        });
        HttpServer { port, state }
    }

    pub fn set_status(&self, status: u16) {
        self.state.status.store(status, Ordering::SeqCst);
    }

    pub fn set_delay(&self, delay: Duration) {
        self.state
            .delay_ms
            .store(u64::try_from(delay.as_millis()).unwrap(), Ordering::SeqCst);
    }

    pub fn log_to(&self, log: &Path) {
        *self.state.log.lock().unwrap() = Some(log.to_path_buf());
    }

    pub fn requests(&self) -> Vec<HttpRequest> {
        self.state.requests.lock().unwrap().clone()
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        self.state.stop.store(true, Ordering::SeqCst);
        // Wakes the accept loop so that it sees the flag.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

fn serve(mut conn: TcpStream, st: &HttpState) {
    let _ = conn.set_read_timeout(Some(Duration::from_secs(10)));
    let mut head = Vec::new();
    let mut buf = [0_u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        match conn.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
    let at = epoch();
    let text = String::from_utf8_lossy(&head).into_owned();
    let mut lines = text.split("\r\n");
    let path = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .unwrap_or_default()
        .to_string();
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    if let Some(log) = st.log.lock().unwrap().as_ref() {
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .unwrap();
        writeln!(f, "http{} {at:.6}", path.replace('/', "-")).unwrap();
    }
    st.requests
        .lock()
        .unwrap()
        .push(HttpRequest { path, headers, at });
    if st.stop.load(Ordering::SeqCst) {
        return;
    }
    std::thread::sleep(Duration::from_millis(st.delay_ms.load(Ordering::SeqCst)));
    let status = st.status.load(Ordering::SeqCst);
    let _ = write!(
        conn,
        "HTTP/1.1 {status} Test\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\
         Connection: close\r\n\r\nok"
    );
}

/// A real gRPC health server (`grpc.health.v1.Health`, tonic-health) on 127.0.0.1 (a free
/// port): the service `""` is SERVING, and each of `not_serving` is NOT_SERVING. It runs on
/// its own thread until the test process ends.
pub fn grpc_health_server(not_serving: &[&str]) -> u16 {
    let not_serving: Vec<String> = not_serving.iter().map(ToString::to_string).collect();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let (reporter, service) = tonic_health::server::health_reporter();
            for name in &not_serving {
                reporter
                    .set_service_status(name.as_str(), tonic_health::ServingStatus::NotServing)
                    .await;
            }
            let incoming =
                tonic::transport::server::TcpIncoming::bind("127.0.0.1:0".parse().unwrap())
                    .unwrap();
            tx.send(incoming.local_addr().unwrap().port()).unwrap();
            tonic::transport::Server::builder()
                .add_service(service)
                .serve_with_incoming(incoming)
                .await
                .unwrap();
        });
    });
    rx.recv_timeout(Duration::from_secs(10))
        .expect("the gRPC server starts")
}

/// Reads a log file written with [`log_line`] (or by [`HttpServer::log_to`]): `(what, epoch)`.
pub fn read_log(path: &Path) -> Vec<(String, f64)> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let (what, at) = l.rsplit_once(' ')?;
            Some((what.to_string(), at.parse().ok()?))
        })
        .collect()
}

/// Waits until the log has every one of `whats` (e.g. containers logging that their SIGTERM
/// trap is set: signalling them earlier would race the shell's start-up).
pub fn wait_log(log: &Path, whats: &[&str], timeout: Duration) {
    let deadline = Instant::now() + timeout;
    loop {
        let entries = read_log(log);
        if whats.iter().all(|w| entries.iter().any(|(e, _)| e == w)) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{whats:?} not all in the log: {entries:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Waits until `path` exists.
pub fn wait_path(path: &Path, timeout: Duration) {
    let deadline = Instant::now() + timeout;
    while !path.exists() {
        assert!(
            Instant::now() < deadline,
            "{} never appeared",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The position of `what` in a log (panics with the log when missing).
pub fn pos(log: &[(String, f64)], what: &str) -> usize {
    log.iter()
        .position(|(w, _)| w == what)
        .unwrap_or_else(|| panic!("{what} missing from the log {log:?}"))
}

/// The time of `what` in a log.
pub fn at(log: &[(String, f64)], what: &str) -> f64 {
    log[pos(log, what)].1
}
