//! `podvisor serve` end to end, driven by the real `kubectl`: pods created, running, logged and
//! deleted through the API; a restart of `serve` that re-adopts a running container without
//! restarting it; static pods from `--manifests`. Each test starts its own `serve` on a free
//! port with its own state directory, and kills whatever it left behind.

#![allow(missing_docs)]

use podvisor_testkit::{MarkerIn, Signal, alive, signal_marked};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

const KUBECTL: &str = "/usr/bin/kubectl";
/// What each test waits for at most for one state to be reached.
const WAIT: Duration = Duration::from_secs(20);

/// The pod of the brief: exits 0 on SIGTERM, writes its pid first (`$$$$`: Kubernetes turns
/// `$$` into `$` in commands).
fn looping_pod(name: &str, pid_file: &Path) -> String {
    format!(
        r#"apiVersion: v1
kind: Pod
metadata:
  name: {name}
spec:
  terminationGracePeriodSeconds: 10
  containers:
  - name: app
    image: busybox
    command: [sh, -c, 'echo $$$$ > {pid}; echo hello from {name}; trap "exit 0" TERM; while true; do sleep 1; done']
"#,
        pid = pid_file.display()
    )
}

/// One test's directory and processes; removes and kills them on drop.
struct World {
    dir: PathBuf,
    serve: Option<Child>,
    runs: u32,
}

impl World {
    /// None (and a note) unless running as root: the process runtime needs it.
    fn new(tag: &str) -> Option<World> {
        if !rustix::process::geteuid().is_root() {
            eprintln!("skipped: podvisor serve's process runtime needs root");
            return None;
        }
        if !Path::new(KUBECTL).exists() {
            eprintln!("skipped: {KUBECTL} is not installed");
            return None;
        }
        static N: AtomicU64 = AtomicU64::new(0);
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .subsec_nanos();
        let dir = std::env::temp_dir().join(format!(
            "pvserve-{tag}-{}-{}-{nanos}",
            std::process::id(),
            N.fetch_add(1, Ordering::SeqCst)
        ));
        std::fs::create_dir_all(dir.join("state")).unwrap();
        Some(World {
            dir,
            serve: None,
            runs: 0,
        })
    }

    fn state(&self) -> PathBuf {
        self.dir.join("state")
    }

    fn kubeconfig(&self) -> PathBuf {
        self.state().join("kubeconfig")
    }

    /// Starts `podvisor serve` on a free port; returns once the kubeconfig is written (the API
    /// answers), with the time that took.
    fn start(&mut self, extra: &[&str]) -> Duration {
        self.runs += 1;
        let log = std::fs::File::create(self.dir.join(format!("serve-{}.log", self.runs))).unwrap();
        let started = Instant::now();
        let child = Command::new(env!("CARGO_BIN_EXE_podvisor"))
            .arg("serve")
            .arg("--state-dir")
            .arg(self.state())
            .args(["--listen", "127.0.0.1:0", "--backoff", "reduced"])
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("podvisor serve starts");
        self.serve = Some(child);
        while !self.kubeconfig().exists() {
            if let Some(status) = self.serve.as_mut().unwrap().try_wait().unwrap() {
                panic!("serve exited with {status}:\n{}", self.logs());
            }
            assert!(
                started.elapsed() < WAIT,
                "no kubeconfig after {WAIT:?}:\n{}",
                self.logs()
            );
            std::thread::sleep(Duration::from_millis(2));
        }
        started.elapsed()
    }

    fn logs(&self) -> String {
        (1..=self.runs)
            .map(|n| {
                let text = std::fs::read_to_string(self.dir.join(format!("serve-{n}.log")))
                    .unwrap_or_default();
                format!("--- serve run {n} ---\n{text}")
            })
            .collect()
    }

    fn serve_pid(&self) -> i32 {
        i32::try_from(self.serve.as_ref().unwrap().id()).unwrap()
    }

    fn signal(&self, sig: Signal) {
        podvisor_testkit::signal(self.serve_pid(), sig);
    }

    /// Waits for `serve` to exit; its exit code.
    fn wait_exit(&mut self, timeout: Duration) -> Option<i32> {
        let start = Instant::now();
        let child = self.serve.as_mut().unwrap();
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                return status.code();
            }
            assert!(
                start.elapsed() < timeout,
                "serve did not exit within {timeout:?}:\n{}",
                self.logs()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn kubectl(&self, args: &[&str]) -> Output {
        Command::new(KUBECTL)
            .arg("--kubeconfig")
            .arg(self.kubeconfig())
            .arg("--cache-dir")
            .arg(self.dir.join("kube-cache"))
            .args(args)
            .stdin(Stdio::null())
            .output()
            .expect("kubectl runs")
    }

    /// kubectl's stdout, asserting success.
    fn kubectl_ok(&self, args: &[&str]) -> String {
        let out = self.kubectl(args);
        assert!(
            out.status.success(),
            "kubectl {args:?} failed: {}{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
            self.logs()
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn create(&self, manifest: &str) {
        let path = self.dir.join("manifest.yaml");
        std::fs::write(&path, manifest).unwrap();
        self.kubectl_ok(&["create", "-f", path.to_str().unwrap()]);
    }

    /// The pid a container wrote to `path`.
    fn read_pid(&self, pod: &str, path: &Path) -> i32 {
        let start = Instant::now();
        loop {
            if let Some(pid) = std::fs::read_to_string(path)
                .ok()
                .and_then(|s| s.trim().parse().ok())
            {
                return pid;
            }
            if start.elapsed() > WAIT {
                let logs = self.kubectl(&["logs", pod]);
                let yaml = self.kubectl(&["get", "pod", pod, "-o", "yaml"]);
                panic!(
                    "no pid in {}; logs: {}{}\n{}",
                    path.display(),
                    String::from_utf8_lossy(&logs.stdout),
                    String::from_utf8_lossy(&logs.stderr),
                    String::from_utf8_lossy(&yaml.stdout)
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn jsonpath(&self, pod: &str, path: &str) -> String {
        let out = self.kubectl(&["get", "pod", pod, "-o", &format!("jsonpath={path}")]);
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Polls `kubectl` until `check` holds for the output of `args`.
    fn wait_for(&self, what: &str, args: &[&str], check: impl Fn(&Output) -> bool) -> Output {
        let start = Instant::now();
        loop {
            let out = self.kubectl(args);
            if check(&out) {
                return out;
            }
            assert!(
                start.elapsed() < WAIT,
                "{what}: not after {WAIT:?}; last: {}{}\n{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr),
                self.logs()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    fn wait_phase(&self, pod: &str, phase: &str) {
        self.wait_for(
            &format!("pod {pod} {phase}"),
            &["get", "pod", pod, "-o", "jsonpath={.status.phase}"],
            |o| String::from_utf8_lossy(&o.stdout) == phase,
        );
    }

    fn wait_gone(&self, pod: &str) {
        self.wait_for(&format!("pod {pod} gone"), &["get", "pod", pod], |o| {
            !o.status.success() && String::from_utf8_lossy(&o.stderr).contains("NotFound")
        });
    }
}

impl Drop for World {
    fn drop(&mut self) {
        if let Some(child) = &mut self.serve {
            let _ = child.kill();
            let _ = child.wait();
        }
        // Shims carry the state directory in their arguments; containers are their children.
        signal_marked(
            &self.dir.display().to_string(),
            MarkerIn::Cmdline,
            Signal::KILL,
        );
        if std::thread::panicking() {
            eprintln!("{}", self.logs());
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn node_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_lowercase())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".to_string())
}

#[test]
fn serve_runs_pods_for_kubectl() {
    let Some(mut w) = World::new("kubectl") else {
        return;
    };
    let took = w.start(&["--drain-on-exit"]);
    eprintln!("serve answered after {} ms", took.as_millis());

    let pid_file = w.dir.join("x.pid");
    w.create(&looping_pod("x", &pid_file));
    w.wait_phase("x", "Running");
    let table = w.wait_for("x ready", &["get", "pods"], |o| {
        String::from_utf8_lossy(&o.stdout)
            .lines()
            .any(|l| l.starts_with("x ") && l.contains("1/1") && l.contains("Running"))
    });
    let table = String::from_utf8_lossy(&table.stdout).into_owned();
    assert!(table.starts_with("NAME"), "{table}");
    let pid = w.read_pid("x", &pid_file);
    assert!(alive(pid));
    let logs = w.wait_for("x logs", &["logs", "x"], |o| {
        String::from_utf8_lossy(&o.stdout).contains("hello from x")
    });
    assert_eq!(String::from_utf8_lossy(&logs.stdout), "hello from x\n");

    // A graceful delete: the container exits 0 on SIGTERM, the object goes (T9).
    let deleted = Instant::now();
    w.kubectl_ok(&["delete", "pod", "x", "--wait=false"]);
    w.wait_gone("x");
    assert!(
        deleted.elapsed() < Duration::from_secs(8),
        "the trap ends it at once"
    );
    assert!(!alive(pid), "the container was stopped");

    // A terminal pod stays until deleted; deleting it removes it at once.
    w.create(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: once}\nspec:\n  restartPolicy: Never\n  \
         containers:\n  - name: app\n    image: busybox\n    command: [sh, -c, 'echo done']\n",
    );
    w.wait_phase("once", "Succeeded");
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(w.jsonpath("once", "{.status.phase}"), "Succeeded");
    let deleted = Instant::now();
    w.kubectl_ok(&["delete", "pod", "once", "--wait=false"]);
    w.wait_gone("once");
    assert!(deleted.elapsed() < Duration::from_secs(3));

    // Events reach the API.
    let events = w.kubectl_ok(&["get", "events", "-o", "jsonpath={.items[*].reason}"]);
    assert!(events.contains("Started"), "{events}");

    // SIGTERM with --drain-on-exit deletes the pods first.
    let pid_file = w.dir.join("last.pid");
    w.create(&looping_pod("last", &pid_file));
    w.wait_phase("last", "Running");
    let pid = w.read_pid("last", &pid_file);
    w.signal(Signal::TERM);
    assert_eq!(
        w.wait_exit(Duration::from_secs(15)),
        Some(0),
        "{}",
        w.logs()
    );
    assert!(!alive(pid), "drained");

    // The drain removed the pod objects too: a new serve on the state finds nothing.
    std::fs::remove_file(w.kubeconfig()).ok();
    w.start(&[]);
    let pods = w.kubectl_ok(&["get", "pods", "-o", "name"]);
    assert_eq!(pods, "", "drained pods are deleted");
    assert!(
        w.logs()
            .contains("pods: 0 recovered, 0 started, 0 orphaned"),
        "{}",
        w.logs()
    );
    w.signal(Signal::TERM);
    assert_eq!(w.wait_exit(Duration::from_secs(10)), Some(0));
}

/// Section 0.8 of the conformance examples: a finalizer pins a deleted pod, so its final
/// container statuses can be read; the object goes when the last finalizer is removed.
#[test]
fn serve_keeps_a_finalized_pod_until_its_finalizers_go() {
    let Some(mut w) = World::new("finalizers") else {
        return;
    };
    w.start(&["--drain-on-exit"]);
    let pid_file = w.dir.join("pinned.pid");
    let manifest = looping_pod("pinned", &pid_file).replace(
        "  name: pinned\n",
        "  name: pinned\n  finalizers: [example.com/pin]\n",
    );
    w.create(&manifest);
    w.wait_phase("pinned", "Running");
    let pid = w.read_pid("pinned", &pid_file);
    w.kubectl_ok(&["delete", "pod", "pinned", "--wait=false"]);
    // The containers stop; the object stays, marked, with their final statuses.
    w.wait_for(
        "pinned's container terminated",
        &[
            "get",
            "pod",
            "pinned",
            "-o",
            "jsonpath={.status.containerStatuses[0].state.terminated.reason}",
        ],
        |o| String::from_utf8_lossy(&o.stdout) == "Completed",
    );
    assert!(!alive(pid), "the container was stopped");
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(
        w.jsonpath(
            "pinned",
            "{.metadata.deletionGracePeriodSeconds} {.metadata.finalizers[0]}"
        ),
        "0 example.com/pin"
    );
    assert!(
        !w.jsonpath("pinned", "{.metadata.deletionTimestamp}")
            .is_empty()
    );
    // No finalizer may be added now.
    let out = w.kubectl(&[
        "patch",
        "pod",
        "pinned",
        "--type=merge",
        "-p",
        r#"{"metadata":{"finalizers":["example.com/pin","example.com/more"]}}"#,
    ]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains(
            "metadata.finalizers: Forbidden: no new finalizers can be added if the object is being deleted"
        ),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Removing the finalizer removes the pod.
    w.kubectl_ok(&[
        "patch",
        "pod",
        "pinned",
        "--type=json",
        "-p",
        r#"[{"op":"remove","path":"/metadata/finalizers"}]"#,
    ]);
    w.wait_gone("pinned");
    w.signal(Signal::TERM);
    assert_eq!(
        w.wait_exit(Duration::from_secs(15)),
        Some(0),
        "{}",
        w.logs()
    );
}

#[test]
fn serve_restart_readopts_running_containers() {
    let Some(mut w) = World::new("restart") else {
        return;
    };
    w.start(&[]);
    let pid_file = w.dir.join("r.pid");
    w.create(&looping_pod("r", &pid_file));
    w.wait_phase("r", "Running");
    w.wait_for(
        "r ready",
        &[
            "get",
            "pod",
            "r",
            "-o",
            "jsonpath={.status.containerStatuses[0].ready}",
        ],
        |o| String::from_utf8_lossy(&o.stdout) == "true",
    );
    let pid = w.read_pid("r", &pid_file);
    let before_id = w.jsonpath("r", "{.status.containerStatuses[0].containerID}");
    let before_ready = w.jsonpath(
        "r",
        "{.status.conditions[?(@.type==\"Ready\")].lastTransitionTime}",
    );
    assert!(before_id.starts_with("podvisor://"), "{before_id}");

    // The agent dies; the container does not.
    w.signal(Signal::KILL);
    w.wait_exit(Duration::from_secs(5));
    assert!(alive(pid));
    std::fs::remove_file(w.kubeconfig()).ok();

    let took = w.start(&[]);
    eprintln!(
        "restart: serve answered {} ms after it was started again",
        took.as_millis()
    );
    assert!(took < Duration::from_secs(3), "{took:?}");
    // The new process publishes its first status at once: Ready stays True throughout.
    let settle = Instant::now();
    while settle.elapsed() < Duration::from_millis(1500) {
        assert_eq!(
            w.jsonpath("r", "{.status.conditions[?(@.type==\"Ready\")].status}"),
            "True",
            "Ready flapped"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let logs = w.logs();
    assert!(
        logs.contains("pods: 1 recovered, 0 started, 0 orphaned"),
        "{logs}"
    );
    eprintln!(
        "{}",
        logs.lines()
            .filter(|l| l.contains("serving"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert!(alive(pid), "the container was not restarted");
    assert_eq!(w.read_pid("r", &pid_file), pid);
    assert_eq!(
        w.jsonpath("r", "{.status.containerStatuses[0].containerID}"),
        before_id
    );
    assert_eq!(
        w.jsonpath("r", "{.status.containerStatuses[0].restartCount}"),
        "0"
    );
    assert_eq!(w.jsonpath("r", "{.status.phase}"), "Running");
    assert_eq!(
        w.jsonpath("r", "{.status.conditions[?(@.type==\"Ready\")].status}"),
        "True"
    );
    assert_eq!(
        w.jsonpath(
            "r",
            "{.status.conditions[?(@.type==\"Ready\")].lastTransitionTime}"
        ),
        before_ready,
        "Ready never went False"
    );
    let events: serde_json::Value =
        serde_json::from_str(&w.kubectl_ok(&["get", "events", "-o", "json"])).unwrap();
    let starts: i64 = events["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["involvedObject"]["name"] == "r" && e["reason"] == "Started")
        .map(|e| e["count"].as_i64().unwrap_or(1))
        .sum();
    assert_eq!(starts, 1, "one start only: {events}");
    assert!(String::from_utf8_lossy(&w.kubectl(&["logs", "r"]).stdout).contains("hello from r"));

    // Deleting still works on the re-adopted container.
    w.kubectl_ok(&["delete", "pod", "r", "--wait=false"]);
    w.wait_gone("r");
    assert!(!alive(pid));
    w.signal(Signal::TERM);
    assert_eq!(w.wait_exit(Duration::from_secs(10)), Some(0));
}

#[test]
fn serve_runs_static_pods_from_manifests() {
    let Some(mut w) = World::new("static") else {
        return;
    };
    let manifests = w.dir.join("manifests");
    std::fs::create_dir_all(&manifests).unwrap();
    let file = manifests.join("web.yaml");
    let write = |word: &str| {
        let mut f = std::fs::File::create(&file).unwrap();
        write!(
            f,
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: web}}\nspec:\n  \
             terminationGracePeriodSeconds: 5\n  containers:\n  - name: app\n    \
             image: busybox\n    command: [sh, -c, 'echo {word}; trap \"exit 0\" TERM; \
             while true; do sleep 1; done']\n"
        )
        .unwrap();
    };
    write("first");
    w.start(&[
        "--manifests",
        manifests.to_str().unwrap(),
        "--drain-on-exit",
    ]);
    let name = format!("web-{}", node_name());
    w.wait_phase(&name, "Running");
    let uid = w.jsonpath(&name, "{.metadata.uid}");
    assert_eq!(uid.len(), 32, "{uid}");
    assert_eq!(
        w.jsonpath(
            &name,
            "{.metadata.annotations.kubernetes\\.io/config\\.mirror}"
        ),
        uid
    );
    assert_eq!(
        w.jsonpath(
            &name,
            "{.metadata.annotations.kubernetes\\.io/config\\.hash}"
        ),
        uid
    );
    w.wait_for("static logs", &["logs", &name], |o| {
        String::from_utf8_lossy(&o.stdout).contains("first")
    });

    // An edited manifest is a new pod.
    write("second");
    w.wait_for(
        "the new static pod",
        &["get", "pod", &name, "-o", "jsonpath={.metadata.uid}"],
        |o| {
            let new = String::from_utf8_lossy(&o.stdout);
            !new.is_empty() && new != uid.as_str()
        },
    );
    w.wait_phase(&name, "Running");
    w.wait_for("new static logs", &["logs", &name], |o| {
        String::from_utf8_lossy(&o.stdout).contains("second")
    });

    // Deleting the mirror pod does not stop the static pod: the mirror comes back.
    let uid = w.jsonpath(&name, "{.metadata.uid}");
    w.kubectl_ok(&["delete", "pod", &name, "--wait=false"]);
    std::thread::sleep(Duration::from_millis(500));
    w.wait_phase(&name, "Running");
    assert_eq!(w.jsonpath(&name, "{.metadata.uid}"), uid);

    // A removed manifest stops the pod and removes its mirror.
    std::fs::remove_file(&file).unwrap();
    w.wait_gone(&name);
    w.signal(Signal::TERM);
    assert_eq!(w.wait_exit(Duration::from_secs(15)), Some(0));
}

/// Issue 7: a second `serve` on a state directory in use stops at once and names the first.
#[test]
fn a_second_serve_on_the_same_state_names_the_first() {
    let Some(mut w) = World::new("twice") else {
        return;
    };
    w.start(&[]);
    let first = w.serve_pid();
    let started = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_podvisor"))
        .arg("serve")
        .arg("--state-dir")
        .arg(w.state())
        .args(["--listen", "127.0.0.1:0"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains(&format!("another podvisor serve (pid {first})")),
        "{err}"
    );
    assert!(started.elapsed() < Duration::from_secs(5));
    w.signal(Signal::TERM);
    assert_eq!(w.wait_exit(WAIT), Some(0), "{}", w.logs());
}

/// Issue 7: a `serve` killed with SIGKILL while it was spawning leaves its descriptors (the
/// store's, the state lock's) for a moment to the child that had not exec'd yet; the next
/// `serve` waits for them instead of failing with "Database already open". Stood in for by a
/// process that holds both for 1.5 s, the lock naming a dead pid.
#[test]
fn serve_waits_for_what_a_dead_serve_left_holding_its_state() {
    let Some(mut w) = World::new("leftover") else {
        return;
    };
    w.start(&[]);
    w.signal(Signal::TERM);
    assert_eq!(w.wait_exit(WAIT), Some(0), "{}", w.logs());
    let mut gone = Command::new("true").spawn().unwrap();
    let dead_pid = gone.id();
    gone.wait().unwrap();
    std::fs::write(w.state().join("serve.lock"), format!("{dead_pid}\n")).unwrap();
    // The store is released first, as by the dead serve's child (it holds both; its exit
    // closes them together).
    let mut holder = Command::new("flock")
        .arg(w.state().join("serve.lock"))
        .arg("flock")
        .arg(w.state().join("store.redb"))
        .args(["sleep", "1.5"])
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    std::fs::remove_file(w.kubeconfig()).unwrap();
    let took = w.start(&[]);
    assert!(
        holder.try_wait().unwrap().is_some(),
        "serve started under the holder"
    );
    assert!(took > Duration::from_millis(900), "{took:?}");
    holder.wait().unwrap();
    w.signal(Signal::TERM);
    assert_eq!(w.wait_exit(WAIT), Some(0), "{}", w.logs());
}

/// Issue 7: a shim killed while `serve` is down is found dead by the next `serve`, which
/// treats it as a shim that dies under it: the container it left is killed (never a second
/// copy beside the new one), its exit is 137, `SandboxChanged`, and the pod runs again in a
/// new sandbox.
#[test]
fn a_shim_killed_while_serve_is_down_is_a_lost_sandbox() {
    let Some(mut w) = World::new("lostshim") else {
        return;
    };
    w.start(&[]);
    let pid_file = w.dir.join("l.pid");
    w.create(&looping_pod("l", &pid_file));
    w.wait_phase("l", "Running");
    let old = w.read_pid("l", &pid_file);
    let uid = w.jsonpath("l", "{.metadata.uid}");
    w.signal(Signal::TERM);
    assert_eq!(w.wait_exit(WAIT), Some(0), "{}", w.logs());
    let pod_dir = w.state().join("pods").join(&uid).display().to_string();
    let shim = podvisor_testkit::all_processes()
        .into_iter()
        .find(|p| p.cmdline.contains(" shim ") && p.cmdline.contains(&pod_dir))
        .expect("the pod's shim");
    podvisor_testkit::signal(shim.pid, Signal::KILL);
    let start = Instant::now();
    while alive(shim.pid) {
        assert!(start.elapsed() < WAIT, "the shim does not die");
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(
        alive(old),
        "the container outlives its shim until serve returns"
    );
    std::fs::remove_file(w.kubeconfig()).ok();
    std::fs::remove_file(&pid_file).unwrap();
    w.start(&[]);
    let new = w.read_pid("l", &pid_file);
    assert_ne!(new, old);
    let start = Instant::now();
    while alive(old) {
        assert!(
            start.elapsed() < WAIT,
            "the old container still runs beside {new}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    w.wait_for(
        "l restarted once, its lost instance 137",
        &[
            "get",
            "pod",
            "l",
            "-o",
            "jsonpath={.status.containerStatuses[0].restartCount} \
             {.status.containerStatuses[0].lastState.terminated.exitCode} \
             {.status.containerStatuses[0].ready}",
        ],
        |o| String::from_utf8_lossy(&o.stdout) == "1 137 true",
    );
    let events = w.kubectl_ok(&["get", "events", "--field-selector", "involvedObject.name=l"]);
    assert!(events.contains("SandboxChanged"), "{events}");
    let copies = podvisor_testkit::all_processes()
        .into_iter()
        .filter(|p| p.cmdline.contains(&pid_file.display().to_string()))
        .count();
    assert_eq!(copies, 1, "one copy of the container");
    w.kubectl_ok(&["delete", "pod", "l", "--wait=false"]);
    w.wait_gone("l");
    assert!(!alive(new));
    w.signal(Signal::TERM);
    assert_eq!(w.wait_exit(WAIT), Some(0), "{}", w.logs());
}
