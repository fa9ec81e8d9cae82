//! Shared helpers of the `podvisor serve` suites driven by real clients (`python_client.rs`,
//! `restart_stress.rs`): one [`ServeCtx`] per test — a unique marker, a directory
//! `/tmp/<marker>` holding the state directory, manifests and the serve logs — that starts,
//! kills and restarts `podvisor serve` on that state, runs kubectl against it, scans `/proc`,
//! and on drop kills every process carrying the marker (serve, shims — their `--pod-dir` lies
//! under the directory —, containers — their commands carry the marker —, and all their
//! descendants), removes the pods' cgroups and the directory.

#![allow(dead_code)]

use rustix::process::{Pid, Signal};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// How long `serve` may take to answer after it was started.
pub const START_TIMEOUT: Duration = Duration::from_secs(30);

/// The kubectl to use: `PODVISOR_KUBECTL`, else the machine's.
pub fn kubectl_binary() -> PathBuf {
    std::env::var_os("PODVISOR_KUBECTL")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/bin/kubectl"))
}

/// One test's `serve`, directory and processes.
pub struct ServeCtx {
    pub marker: String,
    pub dir: PathBuf,
    serve: Option<Child>,
    /// How many times `serve` was started (its logs are `serve-<n>.log`).
    pub runs: u32,
    /// Extra environment for `serve` (`PODVISOR_DEBUG=1`, say).
    pub envs: Vec<(String, String)>,
}

impl ServeCtx {
    /// A fresh context; `None` (with the reason printed) when the test cannot run here.
    pub fn new(tag: &str) -> Option<ServeCtx> {
        if !rustix::process::geteuid().is_root() {
            eprintln!(
                "skipped: podvisor serve's process runtime needs root (this runs as non-root)"
            );
            return None;
        }
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .subsec_nanos();
        // Short: the shim's socket lives ~70 bytes deeper and must fit in sun_path (108).
        let marker = format!(
            "pv{tag}-{:x}{:x}{:x}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::SeqCst),
            nanos & 0xffff
        );
        let dir = std::env::temp_dir().join(&marker);
        std::fs::create_dir_all(dir.join("state")).unwrap();
        Some(ServeCtx {
            marker,
            dir,
            serve: None,
            runs: 0,
            envs: Vec::new(),
        })
    }

    pub fn state(&self) -> PathBuf {
        self.dir.join("state")
    }

    pub fn kubeconfig(&self) -> PathBuf {
        self.state().join("kubeconfig")
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.dir.join(rel)
    }

    /// Starts `podvisor serve --state-dir <dir>/state --listen 127.0.0.1:0 ARGS` and waits until
    /// it answers (its kubeconfig appears); returns how long that took.
    pub fn start(&mut self, args: &[&str]) -> Duration {
        assert!(self.serve.is_none(), "serve is already running");
        // The new serve writes its own; a stale one must not pass for it.
        let _ = std::fs::remove_file(self.kubeconfig());
        self.runs += 1;
        let log = std::fs::File::create(self.log_path(self.runs)).unwrap();
        let started = Instant::now();
        let child = Command::new(env!("CARGO_BIN_EXE_podvisor"))
            .arg("serve")
            .arg("--state-dir")
            .arg(self.state())
            .args(["--listen", "127.0.0.1:0"])
            .args(args)
            .env("RUST_BACKTRACE", "1")
            .envs(self.envs.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("podvisor serve starts");
        self.serve = Some(child);
        while !self.kubeconfig().exists() {
            if let Some(status) = self.serve.as_mut().unwrap().try_wait().unwrap() {
                self.serve = None;
                panic!("serve exited with {status}:\n{}", self.last_logs(3));
            }
            assert!(
                started.elapsed() < START_TIMEOUT,
                "serve did not answer within {START_TIMEOUT:?}:\n{}",
                self.last_logs(3)
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        started.elapsed()
    }

    pub fn serve_pid(&self) -> Option<i32> {
        self.serve.as_ref().map(|c| i32::try_from(c.id()).unwrap())
    }

    /// `kill -9` serve and reaps it.
    pub fn kill9(&mut self) {
        if let Some(mut child) = self.serve.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// SIGTERM, then waits up to `timeout` for serve to exit; its exit code.
    pub fn stop(&mut self, timeout: Duration) -> Option<i32> {
        let mut child = self.serve.take()?;
        if let Some(pid) = Pid::from_raw(i32::try_from(child.id()).unwrap()) {
            let _ = rustix::process::kill_process(pid, Signal::TERM);
        }
        let start = Instant::now();
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                return status.code();
            }
            if start.elapsed() > timeout {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "serve did not stop within {timeout:?}:\n{}",
                    self.last_logs(1)
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn log_path(&self, run: u32) -> PathBuf {
        self.dir.join(format!("serve-{run}.log"))
    }

    /// The stderr of the last `n` runs of serve.
    pub fn last_logs(&self, n: u32) -> String {
        (self.runs.saturating_sub(n) + 1..=self.runs)
            .map(|run| {
                let text = std::fs::read_to_string(self.log_path(run)).unwrap_or_default();
                format!("--- serve run {run} ---\n{text}")
            })
            .collect()
    }

    /// Every serve log line containing `what`, over all runs.
    pub fn grep_logs(&self, what: &str) -> Vec<String> {
        (1..=self.runs)
            .flat_map(|run| {
                std::fs::read_to_string(self.log_path(run))
                    .unwrap_or_default()
                    .lines()
                    .filter(|l| l.contains(what))
                    .map(|l| format!("[run {run}] {l}"))
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    /// A kubectl command against this serve (its own cache directory).
    pub fn kubectl_command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(kubectl_binary());
        cmd.arg("--kubeconfig")
            .arg(self.kubeconfig())
            .arg("--cache-dir")
            .arg(self.dir.join("kube-cache"))
            .arg("--request-timeout=10s")
            .args(args)
            .env_remove("KUBECONFIG")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        cmd
    }

    pub fn kubectl(&self, args: &[&str]) -> Output {
        self.kubectl_command(args).output().expect("kubectl runs")
    }

    /// kubectl's stdout, asserting success.
    pub fn kubectl_ok(&self, args: &[&str]) -> String {
        let out = self.kubectl(args);
        assert!(
            out.status.success(),
            "kubectl {args:?} failed: {}{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
            self.last_logs(2)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Writes `manifest` to a file of its own and returns its path.
    pub fn manifest(&self, name: &str, manifest: &str) -> PathBuf {
        let path = self.dir.join(format!("{name}.yaml"));
        std::fs::write(&path, manifest).unwrap();
        path
    }

    /// Every live process carrying the marker, and their descendants (zombies included).
    pub fn processes(&self) -> Vec<Proc> {
        marked_processes(&self.marker)
    }
}

impl Drop for ServeCtx {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("{}", self.last_logs(2));
        }
        self.kill9();
        let left = kill_marked(&self.marker);
        if !left.is_empty() {
            eprintln!(
                "clean-up: killed {} leftover process(es) of {}",
                left.len(),
                self.marker
            );
        }
        remove_pod_cgroups(&self.state().join("pods"));
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// One process, from `/proc`.
#[derive(Debug, Clone)]
pub struct Proc {
    pub pid: i32,
    pub ppid: i32,
    /// `R`, `S`, `Z`, ...
    pub state: char,
    pub cmdline: String,
}

/// Every process but this one.
pub fn all_processes() -> Vec<Proc> {
    let me = i32::try_from(std::process::id()).unwrap();
    let mut out = Vec::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return out;
    };
    for entry in dir.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<i32>().ok())
        else {
            continue;
        };
        if pid == me {
            continue;
        }
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let Some(close) = stat.rfind(')') else {
            continue;
        };
        let mut fields = stat[close + 1..].split_whitespace();
        let state = fields.next().and_then(|s| s.chars().next()).unwrap_or('?');
        let ppid = fields.next().and_then(|s| s.parse().ok()).unwrap_or(0);
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline"))
            .map(|b| {
                String::from_utf8_lossy(&b)
                    .replace('\0', " ")
                    .trim()
                    .to_string()
            })
            .unwrap_or_default();
        out.push(Proc {
            pid,
            ppid,
            state,
            cmdline,
        });
    }
    out
}

/// Processes whose command line carries `marker`, and all their descendants.
pub fn marked_processes(marker: &str) -> Vec<Proc> {
    let all = all_processes();
    let mut set: BTreeSet<i32> = all
        .iter()
        .filter(|p| p.cmdline.contains(marker))
        .map(|p| p.pid)
        .collect();
    loop {
        let before = set.len();
        for p in &all {
            if set.contains(&p.ppid) {
                set.insert(p.pid);
            }
        }
        if set.len() == before {
            break;
        }
    }
    all.into_iter().filter(|p| set.contains(&p.pid)).collect()
}

/// SIGKILLs every marked process (and descendant) until none is left alive (5 s at most);
/// returns what was found first.
pub fn kill_marked(marker: &str) -> Vec<Proc> {
    let first = marked_processes(marker);
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut left: Vec<Proc> = first.iter().filter(|p| p.state != 'Z').cloned().collect();
    while !left.is_empty() && Instant::now() < deadline {
        for p in &left {
            if let Some(pid) = Pid::from_raw(p.pid) {
                let _ = rustix::process::kill_process(pid, Signal::KILL);
            }
        }
        std::thread::sleep(Duration::from_millis(50));
        left = marked_processes(marker)
            .into_iter()
            .filter(|p| p.state != 'Z')
            .collect();
    }
    first
}

/// Whether `pid` is alive (a zombie is not).
pub fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| Some(s[s.rfind(')')? + 1..].split_whitespace().next()? != "Z"))
        .unwrap_or(false)
}

/// Removes the cgroups killed pods may have left (`<hierarchy>/podvisor/<uid>/<container>`).
pub fn remove_pod_cgroups(pods_dir: &Path) {
    let Ok(entries) = std::fs::read_dir(pods_dir) else {
        return;
    };
    let uids: Vec<_> = entries.flatten().map(|e| e.file_name()).collect();
    let Ok(hierarchies) = std::fs::read_dir("/sys/fs/cgroup") else {
        return;
    };
    let mut roots: Vec<PathBuf> = hierarchies.flatten().map(|e| e.path()).collect();
    roots.push(PathBuf::from("/sys/fs/cgroup"));
    for root in roots {
        for uid in &uids {
            let pod = root.join("podvisor").join(uid);
            if let Ok(children) = std::fs::read_dir(&pod) {
                for c in children.flatten() {
                    if c.path().is_dir() {
                        let _ = std::fs::remove_dir(c.path());
                    }
                }
                let _ = std::fs::remove_dir(&pod);
            }
        }
    }
}
