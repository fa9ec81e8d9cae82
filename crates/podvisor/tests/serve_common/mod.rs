//! Shared helpers of the `podvisor serve` suites driven by real clients (`python_client.rs`,
//! `restart_stress.rs`): one [`ServeCtx`] per test — a unique marker, a directory
//! `/tmp/<marker>` holding the state directory, manifests and the serve logs — that starts,
//! kills and restarts `podvisor serve` on that state, runs kubectl against it, scans `/proc`,
//! and on drop kills every process carrying the marker (serve, shims — their `--pod-dir` lies
//! under the directory —, containers — their commands carry the marker —, and all their
//! descendants), removes the pods' cgroups and the directory.

#![allow(dead_code)]

use podvisor_testkit::{MarkerIn, Proc, Signal, kill_marked, marked_processes, remove_pod_cgroups};
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// How long `serve` may take to answer after it was started.
pub const START_TIMEOUT: Duration = Duration::from_secs(30);

/// The kubectl to use: `PODVISOR_KUBECTL`, else the machine's.
pub fn kubectl_binary() -> PathBuf {
    podvisor_testkit::kubectl()
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
    /// A fresh context. Panics unless run as root (the tests that call this are `#[ignore]`d
    /// otherwise).
    pub fn new(tag: &str) -> ServeCtx {
        assert!(
            rustix::process::geteuid().is_root(),
            "needs root: this test is #[ignore]d unless run as root with --include-ignored (podvisor serve's process runtime needs cgroups and mount namespaces)"
        );
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
        ServeCtx {
            marker,
            dir,
            serve: None,
            runs: 0,
            envs: Vec::new(),
        }
    }

    pub fn state(&self) -> PathBuf {
        self.dir.join("state")
    }

    /// What is mounted in this test's directory, but the pods directory's own mount
    /// (podvisor's `sandbox::pods_mount`, there while `serve` runs): pods' namespaces and
    /// volumes.
    pub fn pod_mounts(&self) -> Vec<PathBuf> {
        let pods = self.state().join("pods");
        podvisor_testkit::mount_points_under(&self.dir)
            .into_iter()
            .filter(|p| *p != pods)
            .collect()
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
            // The host's own disk level must not evict this test's pods: no hard eviction
            // threshold unless the test sets one.
            .args(
                (!args.iter().any(|a| a.starts_with("--eviction-hard")))
                    .then_some("--eviction-hard="),
            )
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
        podvisor_testkit::signal(child.id(), Signal::TERM);
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

    /// Lets the ServiceAccount `ns`/`account` read what the `view` ClusterRole reads in its
    /// namespace (a RoleBinding, as a cluster's user grants in-cluster clients): under RBAC
    /// an account gets nothing it is not bound to.
    pub fn grant_view(&self, ns: &str, account: &str) {
        let sa = format!("--serviceaccount={ns}:{account}");
        self.kubectl_ok(&[
            "create",
            "rolebinding",
            &format!("{account}-view"),
            "--clusterrole=view",
            &sa,
            "-n",
            ns,
        ]);
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
        marked_processes(&self.marker, MarkerIn::Cmdline)
    }
}

impl Drop for ServeCtx {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("{}", self.last_logs(2));
        }
        self.kill9();
        let left = kill_marked(&self.marker, MarkerIn::Cmdline);
        if !left.is_empty() {
            eprintln!(
                "clean-up: killed {} leftover process(es) of {}",
                left.len(),
                self.marker
            );
        }
        remove_pod_cgroups(&self.state().join("pods"));
        // What a failed test left mounted (an `oci` pod's namespaces).
        podvisor_testkit::detach_mounts_under(&self.dir);
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
