//! The process runtime with real processes: a real `podvisor shim`, cgroups, mount namespaces.
//!
//! Needs root (cgroups, mounts): skipped with a printed reason otherwise. The shim is the
//! `podvisor` binary: `$PODVISOR_BIN`, else `target/<profile>/podvisor` next to this test's
//! `deps/` directory, built on demand with `cargo build -p podvisor` when missing (run that
//! first to test a freshly changed shim).
//!
//! Every test leaves nothing behind: its pod is removed, and a guard SIGKILLs whatever still
//! runs in the shim's session and deletes the test's directory.

mod common;
#[path = "process_runtime/log_rotation.rs"]
mod log_rotation;
#[path = "process_runtime/paths.rs"]
mod paths;

use common::{require_root, shim_exe};
use k8s_openapi::api::core::v1::Pod;
use podvisor_runtime::process::{ProcessRuntime, ProcessSandbox};
use podvisor_runtime::{ContainerExit, Runtime, RuntimeEvent, StartRequest, Started};
use podvisor_testkit::{Proc, Signal, all_processes, remove_pod_cgroup, signal};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;
use tokio::sync::mpsc;

static COUNTER: AtomicU32 = AtomicU32::new(0);

/// One pod under test, with everything needed to clean up after it.
struct Harness {
    root: PathBuf,
    runtime: ProcessRuntime,
    pod: Pod,
    sandbox: Option<ProcessSandbox>,
    events: mpsc::UnboundedReceiver<RuntimeEvent>,
    shim_pid: u32,
}

fn make_pod(uid: &str, containers: serde_json::Value, volumes: serde_json::Value) -> Pod {
    serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": format!("p{uid}"), "namespace": "default", "uid": uid},
        "spec": {"restartPolicy": "Never", "containers": containers, "volumes": volumes},
    }))
    .expect("pod")
}

impl Harness {
    /// `containers`/`volumes` may use `ROOT` in strings: the test's own directory.
    async fn new(containers: serde_json::Value, volumes: serde_json::Value) -> Harness {
        Harness::with_pod_security(containers, volumes, json!(null)).await
    }

    /// [`Harness::new`] with the pod's `spec.securityContext`.
    async fn with_pod_security(
        containers: serde_json::Value,
        volumes: serde_json::Value,
        security_context: serde_json::Value,
    ) -> Harness {
        let n = COUNTER.fetch_add(1, Ordering::SeqCst);
        let root = std::env::temp_dir().join(format!("pv-rt-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(&root).unwrap();
        let uid = format!("{:08x}-0000-4000-8000-{n:012x}", std::process::id());
        let fill = |v: serde_json::Value| -> serde_json::Value {
            serde_json::from_str(&v.to_string().replace("ROOT", root.to_str().unwrap())).unwrap()
        };
        let mut pod = make_pod(&uid, fill(containers), fill(volumes));
        pod.spec.as_mut().unwrap().security_context =
            serde_json::from_value(security_context).expect("pod securityContext");
        let runtime = ProcessRuntime::new(root.join("state"), shim_exe()).expect("runtime");
        let (tx, events) = mpsc::unbounded_channel();
        let sandbox = runtime.create_sandbox(&pod, tx).await.expect("sandbox");
        let shim_pid = sandbox.shim_pid();
        Harness {
            root,
            runtime,
            pod,
            sandbox: Some(sandbox),
            events,
            shim_pid,
        }
    }

    fn sandbox(&self) -> &ProcessSandbox {
        self.sandbox.as_ref().expect("sandbox")
    }

    fn container(&self, name: &str) -> k8s_openapi::api::core::v1::Container {
        let spec = self.pod.spec.as_ref().unwrap();
        spec.containers
            .iter()
            .find(|c| c.name == name)
            .expect("container")
            .clone()
    }

    async fn start(&self, name: &str, instance: u64) -> Started {
        self.start_nth(name, instance, 0).await
    }

    /// Starts `name` as its `restart_count`-th restart.
    async fn start_nth(&self, name: &str, instance: u64, restart_count: i32) -> Started {
        let request = StartRequest {
            pod: self.pod.clone(),
            instance,
            container: self.container(name),
            restart_count,
            objects: Default::default(),
        };
        self.runtime
            .start_container(self.sandbox(), request)
            .await
            .expect("start")
    }

    async fn next_exit(&mut self) -> (u64, ContainerExit) {
        let event = tokio::time::timeout(Duration::from_secs(20), self.events.recv())
            .await
            .expect("an exit within 20 s")
            .expect("event channel open");
        let RuntimeEvent::Exited { instance, exit } = event else {
            panic!("expected an exit, got {event:?}");
        };
        (instance, exit)
    }

    fn log(&self, name: &str) -> String {
        let path = self.sandbox().paths().log_dir.join(name).join("0.log");
        std::fs::read_to_string(&path).unwrap_or_default()
    }

    async fn remove(&mut self) {
        if let Some(sandbox) = self.sandbox.take() {
            self.runtime
                .remove_sandbox(&sandbox)
                .await
                .expect("remove sandbox");
        }
    }
}

impl Drop for Harness {
    fn drop(&mut self) {
        // Whatever is left in the shim's session (the shim included) goes.
        for p in session_processes(self.shim_pid) {
            signal(p.pid, Signal::KILL);
        }
        // A failed test may leave its pod's cgroups: remove them (children first).
        remove_pod_cgroup(self.pod.metadata.uid.as_deref().unwrap_or_default());
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

/// Processes (zombies included) in the session `sid`.
fn session_processes(sid: u32) -> Vec<Proc> {
    all_processes()
        .into_iter()
        .filter(|p| u32::try_from(p.session) == Ok(sid))
        .collect()
}

/// Waits until `check` holds (up to 5 s), then asserts it.
async fn eventually(what: &str, mut check: impl FnMut() -> bool) {
    for _ in 0..500 {
        if check() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("timed out waiting for: {what}");
}

fn c(name: &str, command: &[&str]) -> serde_json::Value {
    json!({"name": name, "image": "none", "command": command})
}

#[tokio::test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
async fn logs_exit_codes_and_times() {
    require_root();
    let mut h = Harness::new(
        json!([
            c(
                "echo",
                &["sh", "-c", "echo out; echo err >&2; printf partial; exit 3"]
            ),
            c("selfkill", &["sh", "-c", "kill -TERM $$$$"])
        ]),
        json!([]),
    )
    .await;
    let started = h.start("echo", 1).await;
    assert!(started.container_id.starts_with("podvisor://"));
    assert_eq!(started.container_id.len(), "podvisor://".len() + 64);
    let (instance, exit) = h.next_exit().await;
    assert_eq!(
        (instance, exit.exit_code, exit.signal, exit.oom_killed),
        (1, 3, None, false)
    );
    assert!(exit.started_at <= exit.finished_at);
    assert!(exit.started_at >= started.started_at - jiff::SignedDuration::from_secs(1));
    let log = h.log("echo");
    let lines: Vec<&str> = log.lines().collect();
    assert!(lines.iter().any(|l| l.ends_with(" stdout F out")), "{log}");
    assert!(lines.iter().any(|l| l.ends_with(" stderr F err")), "{log}");
    assert!(
        lines
            .iter()
            .any(|l| l.contains(" stdout ") && l.ends_with("partial")),
        "{log}"
    );
    let tail = exit.log_tail.expect("log tail");
    assert!(tail.contains("out") && tail.contains("err"), "{tail}");

    h.start("selfkill", 2).await;
    let (instance, exit) = h.next_exit().await;
    assert_eq!((instance, exit.exit_code, exit.signal), (2, 143, Some(15)));
    h.remove().await;
    assert!(
        !h.root
            .join(format!(
                "state/pods/{}",
                h.pod.metadata.uid.as_ref().unwrap()
            ))
            .exists()
    );
    assert!(
        h.root
            .join("state/logs")
            .read_dir()
            .unwrap()
            .next()
            .is_some(),
        "logs are kept"
    );
    // ... until the pod's object is gone.
    h.runtime
        .remove_pod_logs(h.pod.metadata.uid.as_deref().unwrap());
    assert!(
        h.root
            .join("state/logs")
            .read_dir()
            .unwrap()
            .next()
            .is_none()
    );
}

/// M13: the kubelet's container GC keeps one dead instance per container (`MaxPerPodContainer`):
/// once a restart runs, older log files and instance directories go.
#[tokio::test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
async fn m13_only_the_newest_dead_instance_keeps_its_files() {
    require_root();
    let mut h = Harness::new(
        json!([c("crash", &["sh", "-c", "echo run; exit 1"])]),
        json!([]),
    )
    .await;
    // Rotated files of the first two instances (the container log manager's) go with them.
    let rotated_dir = h.sandbox().paths().log_dir.join("crash");
    std::fs::create_dir_all(&rotated_dir).unwrap();
    for rotated in ["0.log.20261207-200000.gz", "1.log.20261207-200000"] {
        std::fs::write(rotated_dir.join(rotated), "").unwrap();
    }
    for (n, instance) in (1..=4).enumerate() {
        h.start_nth("crash", instance, i32::try_from(n).unwrap())
            .await;
        let (done, exit) = h.next_exit().await;
        assert_eq!((done, exit.exit_code), (instance, 1));
    }
    let paths = h.sandbox().paths().clone();
    let names = |dir: PathBuf| -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    };
    let log_dir = paths.log_dir.join("crash");
    let instances = paths.pod_dir.join("containers").join("crash");
    eventually("old files pruned", || {
        names(log_dir.clone()) == ["2.log", "3.log"] && names(instances.clone()) == ["3", "4"]
    })
    .await;
    assert_eq!(
        std::fs::read_to_string(log_dir.join("2.log"))
            .unwrap()
            .lines()
            .count(),
        1
    );
    h.remove().await;
}

#[tokio::test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
async fn termination_message_and_missing_binary() {
    require_root();
    let mut h = Harness::new(
        json!([
            {"name": "msg", "image": "none", "command": ["sh", "-c", "printf bye > ROOT/tm/msg; exit 1"],
             "terminationMessagePath": "ROOT/tm/msg"},
            c("missing", &["no-such-binary-podvisor"]),
            c("missing-abs", &["/no/such/binary"]),
        ]),
        json!([]),
    )
    .await;
    h.start("msg", 1).await;
    let (_, exit) = h.next_exit().await;
    assert_eq!(exit.exit_code, 1);
    assert_eq!(exit.termination_message.as_deref(), Some("bye"));
    // The message went to the per-instance host file, through the bind mount.
    assert_eq!(std::fs::read_to_string(h.root.join("tm/msg")).unwrap(), "");

    let request = StartRequest {
        pod: h.pod.clone(),
        instance: 2,
        container: h.container("missing"),
        restart_count: 0,
        objects: Default::default(),
    };
    let err = h
        .runtime
        .start_container(h.sandbox(), request)
        .await
        .unwrap_err();
    assert_eq!(err.reason, "RunContainerError");
    assert!(err.created);
    assert!(
        err.message
            .starts_with("failed to create containerd task: ")
            && err
                .message
                .contains("exec: \"no-such-binary-podvisor\": executable file not found in $PATH"),
        "{}",
        err.message
    );
    let request = StartRequest {
        pod: h.pod.clone(),
        instance: 3,
        container: h.container("missing-abs"),
        restart_count: 0,
        objects: Default::default(),
    };
    let err = h
        .runtime
        .start_container(h.sandbox(), request)
        .await
        .unwrap_err();
    assert!(
        err.message
            .contains("stat /no/such/binary: no such file or directory"),
        "{}",
        err.message
    );
    h.remove().await;
}

#[tokio::test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
async fn signal_reaches_the_whole_process_group() {
    require_root();
    let mut h = Harness::new(
        json!([c("sleeper", &["sh", "-c", "sleep 100 & sleep 100"])]),
        json!([]),
    )
    .await;
    let started = h.start("sleeper", 1).await;
    let shim = h.shim_pid;
    eventually("two sleeps run", || {
        session_processes(shim)
            .iter()
            .filter(|p| p.cmdline == "sleep 100")
            .count()
            == 2
    })
    .await;
    assert_eq!(
        session_processes(shim)
            .iter()
            .find(|p| p.pid.cast_unsigned() == started.pid)
            .map(|p| p.ppid),
        Some(shim.cast_signed())
    );
    h.runtime.signal(h.sandbox(), 1, 15).await.unwrap();
    let (_, exit) = h.next_exit().await;
    assert_eq!((exit.exit_code, exit.signal), (143, Some(15)));
    eventually("only the shim is left", || {
        session_processes(shim)
            .iter()
            .all(|p| p.pid.cast_unsigned() == shim)
    })
    .await;
    h.remove().await;
    eventually("the shim is gone", || session_processes(shim).is_empty()).await;
}

#[tokio::test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
async fn kill_stops_what_ignores_sigterm() {
    require_root();
    let mut h = Harness::new(
        json!([
            // `setsid` leaves the process group: only the cgroup still holds it.
            c(
                "stubborn",
                &[
                    "sh",
                    "-c",
                    "trap '' TERM; setsid sleep 1017 & sleep 100 & sleep 100; wait"
                ]
            ),
            c(
                "quitter",
                &["sh", "-c", "setsid sleep 1018 & sleep 0.2; exit 0"]
            ),
        ]),
        json!([]),
    )
    .await;
    let running = |marker: &str| {
        all_processes()
            .iter()
            .any(|p| p.cmdline == marker && !p.is_zombie())
    };
    h.start("quitter", 2).await;
    eventually("the escapee runs", || running("sleep 1018")).await;
    let (instance, exit) = h.next_exit().await;
    assert_eq!((instance, exit.exit_code), (2, 0));
    assert!(
        !running("sleep 1018"),
        "a container's processes end with its main process"
    );

    h.start("stubborn", 1).await;
    let shim = h.shim_pid;
    eventually("sleeps run", || {
        session_processes(shim)
            .iter()
            .filter(|p| p.cmdline == "sleep 100")
            .count()
            == 2
            && running("sleep 1017")
    })
    .await;
    h.runtime.signal(h.sandbox(), 1, 15).await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(h.events.try_recv().is_err(), "SIGTERM is ignored");
    h.runtime.signal(h.sandbox(), 1, 9).await.unwrap();
    let (_, exit) = h.next_exit().await;
    assert_eq!((exit.exit_code, exit.signal), (137, Some(9)));
    eventually("nothing left", || {
        session_processes(shim)
            .iter()
            .all(|p| p.pid.cast_unsigned() == shim)
    })
    .await;
    assert!(!running("sleep 1017"), "SIGKILL reaches the whole cgroup");
    h.remove().await;
}

#[tokio::test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
async fn memory_limit_ends_in_oom_kill() {
    require_root();
    let mut h = Harness::new(
        json!([{"name": "hog", "image": "none",
                "command": ["python3", "-c", "s = 'x' * (256 * 1024 * 1024); print(len(s))"],
                "resources": {"limits": {"memory": "32Mi"}}}]),
        json!([]),
    )
    .await;
    h.start("hog", 1).await;
    let (_, exit) = h.next_exit().await;
    assert_eq!(
        (exit.exit_code, exit.signal, exit.oom_killed),
        (137, Some(9), true)
    );
    h.remove().await;
}

/// In-place resize (`UpdateContainerResources`): the running container's memory cgroup takes
/// the new limit without a restart (same process, same cgroup); a limit below what the
/// container uses is refused with the kubelet's message and leaves the limit as it was.
#[tokio::test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
async fn resize_changes_the_memory_limit_in_place() {
    require_root();
    let mut h = Harness::new(
        json!([{"name": "app", "image": "none",
                "command": ["python3", "-c",
                            "import time\ns = bytearray(24 * 1024 * 1024)\nfor i in range(0, len(s), 4096): s[i] = 1\nprint('ready', flush=True)\ntime.sleep(600)"],
                "resources": {"limits": {"memory": "64Mi"}}}]),
        json!([]),
    )
    .await;
    let started = h.start("app", 1).await;
    let uid = h.pod.metadata.uid.clone().unwrap();
    let dir = PathBuf::from(format!("/sys/fs/cgroup/memory/podvisor/{uid}/app-1"));
    let limit = || {
        std::fs::read_to_string(dir.join("memory.limit_in_bytes"))
            .map(|s| s.trim().to_owned())
            .unwrap_or_default()
    };
    assert_eq!(limit(), (64u64 << 20).to_string());
    eventually("the container touched its memory", || {
        h.log("app").contains("ready")
    })
    .await;
    let resources = |m: &str| -> k8s_openapi::api::core::v1::ResourceRequirements {
        serde_json::from_value(json!({"limits": {"memory": m}})).unwrap()
    };
    let applied = h
        .runtime
        .update_container_resources(h.sandbox(), 1, "app", resources("128Mi"))
        .await
        .expect("resize up");
    assert_eq!(applied, resources("128Mi"));
    assert_eq!(limit(), (128u64 << 20).to_string());
    // Below the ~24 MiB in use: refused, the limit stays.
    let refused = h
        .runtime
        .update_container_resources(h.sandbox(), 1, "app", resources("8Mi"))
        .await
        .expect_err("below usage");
    let text = refused.to_string();
    assert!(
        text.starts_with(&format!(
            "attempting to set container \"app\" memory limit ({}) below current usage (",
            8u64 << 20
        )),
        "{text}"
    );
    assert_eq!(limit(), (128u64 << 20).to_string());
    // Down again, above the usage: applied in place.
    h.runtime
        .update_container_resources(h.sandbox(), 1, "app", resources("48Mi"))
        .await
        .expect("resize down");
    assert_eq!(limit(), (48u64 << 20).to_string());
    // The same process ran throughout.
    let procs = std::fs::read_to_string(dir.join("cgroup.procs")).unwrap();
    assert!(
        procs.lines().any(|p| p.trim() == started.pid.to_string()),
        "{procs}"
    );
    assert!(h.events.try_recv().is_err(), "no exit");
    h.remove().await;
}

/// V15 (`PodLevelResources`): the pod's own memory limit is its cgroup's, so a container
/// without a limit of its own is OOM-killed at it, and reported so.
#[tokio::test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
async fn v15_the_pod_level_memory_limit_is_the_pod_cgroups() {
    require_root();
    let mut h = Harness::new(
        json!([{"name": "hog", "image": "none",
                "command": ["python3", "-c", "s = 'x' * (256 * 1024 * 1024); print(len(s))"]}]),
        json!([]),
    )
    .await;
    h.pod.spec.as_mut().unwrap().resources =
        Some(serde_json::from_value(json!({"limits": {"memory": "32Mi"}})).unwrap());
    h.start("hog", 1).await;
    let (_, exit) = h.next_exit().await;
    assert_eq!(
        (exit.exit_code, exit.signal, exit.oom_killed),
        (137, Some(9), true)
    );
    h.remove().await;
}

#[tokio::test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
async fn volumes_are_mounted_shared_and_read_only() {
    require_root();
    let mut h = Harness::new(
        json!([
            {"name": "writer", "image": "none",
             "command": ["sh", "-c", "echo hello > ROOT/mnt/shared/f && echo mem > ROOT/mnt/mem/f && sleep 100"],
             "volumeMounts": [{"name": "shared", "mountPath": "ROOT/mnt/shared"},
                              {"name": "mem", "mountPath": "ROOT/mnt/mem"}]},
            {"name": "reader", "image": "none",
             "command": ["sh", "-c", "cat ROOT/in/shared/f ROOT/in/mem/f; stat -f -c %T ROOT/in/mem; cat ROOT/ro/host-file; touch ROOT/ro/new"],
             "volumeMounts": [{"name": "shared", "mountPath": "ROOT/in/shared"},
                              {"name": "mem", "mountPath": "ROOT/in/mem"},
                              {"name": "host", "mountPath": "ROOT/ro", "readOnly": true}]},
        ]),
        json!([
            {"name": "shared", "emptyDir": {}},
            {"name": "mem", "emptyDir": {"medium": "Memory", "sizeLimit": "8Mi"}},
            {"name": "host", "hostPath": {"path": "ROOT/host", "type": "DirectoryOrCreate"}},
        ]),
    )
    .await;
    std::fs::write(h.root.join("host/host-file"), "from-host\n").unwrap();
    h.start("writer", 1).await;
    let volume = h.sandbox().paths().pod_dir.join("volumes/shared/f");
    eventually("the writer wrote", || volume.exists()).await;
    h.start("reader", 2).await;
    let (instance, exit) = h.next_exit().await;
    assert_eq!(instance, 2);
    let log = h.log("reader");
    assert!(log.contains("stdout F hello"), "{log}");
    assert!(log.contains("stdout F mem"), "{log}");
    assert!(log.contains("stdout F tmpfs"), "{log}");
    assert!(log.contains("stdout F from-host"), "{log}");
    assert!(log.contains("Read-only file system"), "{log}");
    assert_eq!(exit.exit_code, 1);
    // The mounts were private to the containers.
    assert!(!h.root.join("mnt/shared/f").exists());
    assert!(!h.root.join("host/new").exists());
    h.runtime.signal(h.sandbox(), 1, 9).await.unwrap();
    h.next_exit().await;
    h.remove().await;
}

#[tokio::test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
async fn m7_host_path_type_checks() {
    require_root();
    let root = std::env::temp_dir().join(format!("pv-rt-hp-{}", std::process::id()));
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(root.join("file"), "").unwrap();
    let runtime = ProcessRuntime::new(root.join("state"), shim_exe()).unwrap();
    for (n, (path, type_, expect)) in [
        ("missing", "Directory", "is not a directory"),
        ("file", "Directory", "is not a directory"),
        ("missing", "File", "is not a file"),
        ("file", "Socket", "is not a socket file"),
        ("file", "CharDevice", "is not a character device"),
        ("file", "BlockDevice", "is not a block device"),
    ]
    .into_iter()
    .enumerate()
    {
        let path = root.join(path);
        let volumes = json!([{"name": "v", "hostPath": {"path": path, "type": type_}}]);
        let pod = make_pod(&format!("hp-{n}"), json!([c("x", &["true"])]), volumes);
        let (tx, _rx) = mpsc::unbounded_channel();
        let err = runtime.create_sandbox(&pod, tx).await.unwrap_err();
        assert_eq!(err.reason, "FailedMount");
        let want = format!("hostPath type check failed: {} {expect}", path.display());
        assert!(err.message.ends_with(&want), "{} / {want}", err.message);
        // A sandbox that never came up leaves no directory behind.
        let paths = runtime.pod_paths(&pod).unwrap();
        assert!(
            !paths.pod_dir.exists(),
            "{} is left",
            paths.pod_dir.display()
        );
        assert!(
            !paths.log_dir.exists(),
            "{} is left",
            paths.log_dir.display()
        );
    }
    let _ = std::fs::remove_dir_all(&root);
}

#[tokio::test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
async fn exec_runs_in_the_container_view_and_times_out() {
    require_root();
    let mut h = Harness::new(
        json!([{"name": "main", "image": "none", "command": ["sleep", "100"],
                "workingDir": "ROOT/work", "env": [{"name": "FOO", "value": "bar"}],
                "volumeMounts": [{"name": "data", "mountPath": "ROOT/data"}]}]),
        json!([{"name": "data", "emptyDir": {}}]),
    )
    .await;
    let started = h.start("main", 1).await;
    let shim = h.shim_pid;
    let argv = |s: &str| vec!["sh".to_owned(), "-c".to_owned(), s.to_owned()];
    let r = h
        .runtime
        .exec(
            h.sandbox(),
            1,
            argv(&format!(
                "echo $FOO; pwd; touch {}/data/x; echo oops >&2; exit 7",
                h.root.display()
            )),
            None,
        )
        .await
        .unwrap();
    let out = String::from_utf8_lossy(&r.output);
    assert_eq!((r.exit_code, r.timed_out), (7, false));
    // Stdout then stderr, as the kubelet appends them; stderr alone for CRI's error text.
    assert!(out.starts_with("bar\n") && out.ends_with("oops\n"), "{out}");
    assert!(out.contains("/work\n"), "{out}");
    assert_eq!(String::from_utf8_lossy(&r.stderr), "oops\n");
    assert!(
        h.sandbox().paths().pod_dir.join("volumes/data/x").exists(),
        "exec sees the mounts: {out}"
    );

    let t0 = std::time::Instant::now();
    let r = h
        .runtime
        .exec(
            h.sandbox(),
            1,
            argv("echo start; sleep 100 & sleep 100"),
            Some(Duration::from_millis(300)),
        )
        .await
        .unwrap();
    assert!(r.timed_out);
    assert_eq!(r.exit_code, 137);
    assert!(t0.elapsed() < Duration::from_secs(3));
    assert_eq!(String::from_utf8_lossy(&r.output), "start\n");
    // No exec process is left: the shim's only child is the container.
    eventually(
        "only the container is a child of the shim, no zombie",
        || {
            let procs = session_processes(shim);
            procs
                .iter()
                .filter(|p| p.ppid == shim.cast_signed())
                .map(|p| p.pid.cast_unsigned())
                .collect::<Vec<_>>()
                == vec![started.pid]
                && procs.len() == 2
                && procs.iter().all(|p| !p.is_zombie())
        },
    )
    .await;

    let big = h
        .runtime
        .exec(
            h.sandbox(),
            1,
            argv("head -c 20000 /dev/zero"),
            Some(Duration::from_secs(5)),
        )
        .await
        .unwrap();
    assert_eq!((big.exit_code, big.output.len()), (0, 10 * 1024));

    let err = h
        .runtime
        .exec(h.sandbox(), 1, vec!["no-such-probe".into()], None)
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("executable file not found in $PATH"),
        "{err}"
    );

    h.runtime.signal(h.sandbox(), 1, 9).await.unwrap();
    h.next_exit().await;
    h.remove().await;
}

#[tokio::test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
async fn the_shim_outlives_its_client_and_replays_exits() {
    require_root();
    let mut h = Harness::new(
        json!([
            c("long", &["sleep", "100"]),
            c("short", &["sh", "-c", "sleep 0.3; exit 4"])
        ]),
        json!([]),
    )
    .await;
    let long = h.start("long", 1).await;
    h.start("short", 2).await;
    // The agent goes away: its sandbox handle (and subscription) is dropped.
    drop(h.sandbox.take());
    tokio::time::sleep(Duration::from_millis(800)).await;
    let (tx, events) = mpsc::unbounded_channel();
    let sandbox = h
        .runtime
        .create_sandbox(&h.pod, tx)
        .await
        .expect("re-adopt");
    assert_eq!(
        sandbox.shim_pid(),
        h.shim_pid,
        "the same shim is re-adopted"
    );
    h.events = events;
    h.sandbox = Some(sandbox);
    let state = h.sandbox().state().await.unwrap();
    let running = state.iter().find(|i| i.instance == 1).unwrap();
    assert_eq!((running.pid, running.exit.is_none()), (long.pid, true));
    // The exit that happened while nobody listened is replayed.
    let (instance, exit) = h.next_exit().await;
    assert_eq!((instance, exit.exit_code), (2, 4));
    h.runtime.signal(h.sandbox(), 1, 9).await.unwrap();
    let (instance, _) = h.next_exit().await;
    assert_eq!(instance, 1);
    // The runtime acknowledges an exit right after handing it over: allow that round trip.
    let mut state = h.sandbox().state().await.unwrap();
    for _ in 0..100 {
        if state.iter().all(|i| i.acked) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
        state = h.sandbox().state().await.unwrap();
    }
    assert!(state.iter().all(|i| i.acked), "{state:?}");
    h.remove().await;
}

#[tokio::test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
async fn containers_inherit_only_stdio() {
    require_root();
    let mut h = Harness::new(json!([c("idle", &["sleep", "100"])]), json!([])).await;
    let started = h.start("idle", 1).await;
    let fds = |pid: u32| -> Vec<String> {
        let mut fds: Vec<String> = std::fs::read_dir(format!("/proc/{pid}/fd"))
            .unwrap()
            .map(|e| {
                let fd = e.unwrap().file_name().to_string_lossy().into_owned();
                let link = std::fs::read_link(format!("/proc/{pid}/fd/{fd}"));
                format!(
                    "{fd}:{}",
                    link.map(|l| l.display().to_string()).unwrap_or_default()
                )
            })
            .collect();
        fds.sort();
        fds
    };
    // The dynamic loader briefly holds the libraries it maps: wait for `sleep` to settle; a
    // leaked descriptor would stay.
    let mut seen = Vec::new();
    for _ in 0..100 {
        seen = fds(started.pid);
        if seen.len() == 3 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let numbers: Vec<&str> = seen.iter().map(|f| f.split(':').next().unwrap()).collect();
    assert_eq!(numbers, ["0", "1", "2"], "{seen:?}");
    assert!(
        seen[0].ends_with(":/dev/null") && seen[1].starts_with("1:pipe:"),
        "{seen:?}"
    );
    // Its own process group, child of the shim.
    let stat = std::fs::read_to_string(format!("/proc/{}/stat", started.pid)).unwrap();
    let f: Vec<&str> = stat[stat.rfind(')').unwrap() + 1..]
        .split_whitespace()
        .collect();
    assert_eq!(f[2], started.pid.to_string());
    // CVE-2024-21626's class: exec'd commands (probes, hooks, kubectl exec) see no descriptor
    // of the shim either, and start in the container's working directory, not in a leaked
    // one.
    // `ls -l /proc/self/fd`, then `pwd` (`ls` opens one descriptor itself, on that
    // directory).
    let script = "ls -l /proc/self/fd; pwd".to_owned();
    let foreign = |out: &str| -> Vec<String> {
        out.lines()
            .filter_map(|l| {
                let (left, target) = l.split_once(" -> ")?;
                let fd: u32 = left.split_whitespace().last()?.parse().ok()?;
                let own_dir = target.starts_with("/proc/") && target.ends_with("/fd");
                (fd > 2 && !own_dir).then(|| l.to_owned())
            })
            .collect()
    };
    let r = h
        .runtime
        .exec(
            h.sandbox(),
            1,
            vec!["sh".into(), "-c".into(), script.clone()],
            None,
        )
        .await
        .unwrap();
    let out = String::from_utf8_lossy(&r.output).into_owned();
    assert!(foreign(&out).is_empty() && out.ends_with("\n/\n"), "{out}");
    let session = h
        .runtime
        .exec_stream(
            h.sandbox(),
            1,
            podvisor_runtime::ExecRequest {
                attach: false,
                argv: vec!["sh".into(), "-c".into(), script],
                stdin: false,
                stdout: true,
                stderr: false,
                tty: false,
                size: None,
            },
        )
        .await
        .unwrap();
    let mut out = String::new();
    tokio::io::AsyncReadExt::read_to_string(&mut session.stdout.unwrap(), &mut out)
        .await
        .unwrap();
    assert!(foreign(&out).is_empty() && out.ends_with("\n/\n"), "{out}");
    h.runtime.signal(h.sandbox(), 1, 9).await.unwrap();
    h.next_exit().await;
    h.remove().await;
}

#[tokio::test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
async fn remove_sandbox_leaves_no_process_behind() {
    require_root();
    let mut h = Harness::new(
        json!([c("left", &["sh", "-c", "sleep 100 & sleep 100"])]),
        json!([{"name": "scratch", "emptyDir": {"medium": "Memory"}}]),
    )
    .await;
    h.start("left", 1).await;
    let shim = h.shim_pid;
    let pod_dir = h.sandbox().paths().pod_dir.clone();
    let uid = h.pod.metadata.uid.clone().unwrap();
    // What a shim that died may leave: the cgroups of a container and of one of its execs.
    for root in ["/sys/fs/cgroup/memory", "/sys/fs/cgroup/unified"] {
        let ghost = Path::new(root).join("podvisor").join(&uid).join("ghost-9");
        std::fs::create_dir_all(ghost.join("exec-1")).unwrap();
    }
    // The agent should stop containers first; if it does not, nothing may survive anyway.
    h.remove().await;
    eventually("the shim and its containers are gone", || {
        session_processes(shim).is_empty()
    })
    .await;
    assert!(!pod_dir.exists());
    for root in ["/sys/fs/cgroup/memory", "/sys/fs/cgroup/unified"] {
        let cgroup = Path::new(root).join("podvisor").join(&uid);
        assert!(!cgroup.exists(), "{} is left", cgroup.display());
    }
}

/// `securityContext` users (kubelet `DetermineEffectiveSecurityContext`,
/// `verifyRunAsNonRoot`): the main process, exec probes and exec hooks run as the effective
/// uid/gid with the pod's supplementary groups; a non-root container writes its termination
/// message and emptyDir; `runAsNonRoot` refuses an explicit root user.
#[tokio::test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
async fn containers_run_as_their_security_context_user() {
    use k8s_openapi::api::core::v1::{ExecAction, LifecycleHandler, Probe};
    use podvisor_runtime::probe::{ProbeResult, run_probe};
    use std::os::unix::fs::MetadataExt;
    require_root();
    let data = json!([{"name": "data", "mountPath": "ROOT/data"}]);
    let mut h = Harness::with_pod_security(
        json!([
            {"name": "ids", "image": "none", "volumeMounts": data, "command": ["sh", "-c",
                "id -u; id -g; id -G; echo \"HOME=$HOME\"; touch ROOT/data/by-ids; \
                 printf written-as-$(id -u) > /dev/termination-log"]},
            {"name": "override", "image": "none", "command": ["sh", "-c", "id -u; id -g; id -G"],
             "securityContext": {"runAsUser": 2000, "runAsGroup": 5000}},
            {"name": "main", "image": "none", "volumeMounts": data, "command": ["sleep", "100"]},
            {"name": "root", "image": "none", "command": ["true"],
             "securityContext": {"runAsNonRoot": true, "runAsUser": 0}},
        ]),
        json!([{"name": "data", "emptyDir": {}}]),
        json!({"runAsUser": 1000, "runAsGroup": 3000, "supplementalGroups": [4000]}),
    )
    .await;
    let volume = h.sandbox().paths().pod_dir.join("volumes/data");
    let passwd = std::fs::read_to_string("/etc/passwd").ok();
    let home = podvisor_runtime::config::security::home_dir(1000, passwd.as_deref());

    h.start("ids", 1).await;
    let (_, exit) = h.next_exit().await;
    assert_eq!(exit.exit_code, 0, "{}", h.log("ids"));
    let out: Vec<String> = h
        .log("ids")
        .lines()
        .map(|l| l.splitn(4, ' ').nth(3).unwrap_or_default().to_owned())
        .collect();
    assert_eq!(
        out,
        ["1000", "3000", "3000 4000", &format!("HOME={home}")],
        "{}",
        h.log("ids")
    );
    // The termination-message file (0600, owned by the container user) is writable by uid 1000.
    assert_eq!(exit.termination_message.as_deref(), Some("written-as-1000"));
    // ... and by it alone: no other container can forge the message.
    let tm = h.sandbox().paths().pod_dir.join("containers/ids/1");
    let meta = std::fs::metadata(tm.join("termination-log")).unwrap();
    assert_eq!(
        (meta.uid(), meta.gid(), meta.mode() & 0o7777),
        (1000, 3000, 0o600)
    );
    assert_eq!(std::fs::metadata(&tm).unwrap().mode() & 0o7777, 0o700);
    let meta = std::fs::metadata(volume.join("by-ids")).unwrap();
    assert_eq!((meta.uid(), meta.gid()), (1000, 3000));

    // The container's runAsUser and runAsGroup override the pod's; the groups stay the pod's.
    h.start("override", 2).await;
    let (_, exit) = h.next_exit().await;
    assert_eq!(exit.exit_code, 0);
    let log = h.log("override");
    let out: Vec<&str> = log
        .lines()
        .filter_map(|l| l.splitn(4, ' ').nth(3))
        .collect();
    assert_eq!(out, ["2000", "5000", "5000 4000"], "{log}");

    // Exec (probes and hooks) runs as the container's user.
    h.start("main", 3).await;
    let main = h.container("main");
    let r = h
        .runtime
        .exec(
            h.sandbox(),
            3,
            vec!["sh".into(), "-c".into(), "id -u; id -g; id -G".into()],
            None,
        )
        .await
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&r.output),
        "1000\n3000\n3000 4000\n"
    );
    let probe = |script: &str| Probe {
        exec: Some(ExecAction {
            command: Some(vec!["sh".into(), "-c".into(), script.into()]),
        }),
        timeout_seconds: Some(5),
        ..Probe::default()
    };
    let result = run_probe(
        &h.runtime,
        h.sandbox(),
        3,
        &main,
        &probe("test $(id -u) = 1000"),
    )
    .await;
    assert_eq!(result, ProbeResult::Success);
    let result = run_probe(
        &h.runtime,
        h.sandbox(),
        3,
        &main,
        &probe("test $(id -u) = 0"),
    )
    .await;
    assert!(matches!(result, ProbeResult::Failure(_)), "{result:?}");
    let hook = LifecycleHandler {
        exec: Some(ExecAction {
            command: Some(vec![
                "sh".into(),
                "-c".into(),
                format!("id -u > {}/data/by-hook", h.root.display()),
            ]),
        }),
        ..LifecycleHandler::default()
    };
    let hooked =
        podvisor_runtime::hooks::run_hook(&h.runtime, h.sandbox(), 3, &main, &hook, "p").await;
    assert_eq!(hooked, Ok(()));
    assert_eq!(
        std::fs::read_to_string(volume.join("by-hook")).unwrap(),
        "1000\n"
    );
    let meta = std::fs::metadata(volume.join("by-hook")).unwrap();
    assert_eq!((meta.uid(), meta.gid()), (1000, 3000));

    // runAsNonRoot with an explicit runAsUser 0: not started, the kubelet's message.
    let request = StartRequest {
        pod: h.pod.clone(),
        instance: 4,
        container: h.container("root"),
        restart_count: 0,
        objects: Default::default(),
    };
    let err = h
        .runtime
        .start_container(h.sandbox(), request)
        .await
        .unwrap_err();
    assert_eq!(err.reason, "CreateContainerConfigError");
    assert!(!err.created);
    let pod = h.pod.metadata.name.clone().unwrap();
    let uid = h.pod.metadata.uid.clone().unwrap();
    assert_eq!(
        err.message,
        format!(
            "container's runAsUser breaks non-root policy (pod: \"{pod}_default({uid})\", \
             container: root)"
        )
    );

    h.runtime.signal(h.sandbox(), 3, 9).await.unwrap();
    h.next_exit().await;
    h.remove().await;
}

/// Every process an exec (probe, hook, `kubectl exec`) started is killed when it ends, even
/// one that left its process group with `setsid`; the container itself keeps running.
#[tokio::test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
async fn an_exec_leaves_no_process_behind() {
    use podvisor_runtime::ExecRequest;
    require_root();
    let mut h = Harness::new(json!([c("main", &["sleep", "100"])]), json!([])).await;
    let started = h.start("main", 1).await;
    let marked = |marker: &str| {
        all_processes()
            .into_iter()
            .filter(|p| p.cmdline == format!("sleep {marker}") && !p.is_zombie())
            .count()
    };
    let argv = |marker: &str| {
        vec![
            "sh".to_owned(),
            "-c".to_owned(),
            format!("setsid sleep {marker} & sleep {marker} & echo started"),
        ]
    };
    let r = h
        .runtime
        .exec(
            h.sandbox(),
            1,
            argv("3001.417"),
            Some(Duration::from_secs(5)),
        )
        .await
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&r.output), "started\n");
    eventually("the probe's processes are gone", || marked("3001.417") == 0).await;

    let session = h
        .runtime
        .exec_stream(
            h.sandbox(),
            1,
            ExecRequest {
                attach: false,
                argv: argv("3002.417"),
                stdin: false,
                stdout: true,
                stderr: true,
                tty: false,
                size: None,
            },
        )
        .await
        .unwrap();
    assert_eq!(session.exit.await.unwrap(), 0);
    eventually("the exec's processes are gone", || marked("3002.417") == 0).await;
    // The container is untouched.
    assert!(podvisor_testkit::alive(started.pid.cast_signed()));
    h.runtime.signal(h.sandbox(), 1, 9).await.unwrap();
    h.next_exit().await;
    h.remove().await;
}

/// Issue 7: the shim starts an attempt of a container (name + restartCount) once, whatever it
/// is asked afterwards, and so does the pod's next shim after this one died (the journal
/// keeps every start).
#[tokio::test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
async fn a_shim_starts_each_attempt_of_a_container_once() {
    require_root();
    let mut h = Harness::new(json!([c("app", &["sleep", "100"])]), json!([])).await;
    let first = h.start("app", 1).await;
    let again = StartRequest {
        pod: h.pod.clone(),
        instance: 2,
        container: h.container("app"),
        restart_count: 0,
        objects: Default::default(),
    };
    let refused = h
        .runtime
        .start_container(h.sandbox(), again.clone())
        .await
        .expect_err("the same attempt again is refused");
    assert!(refused.message.contains("already started"), "{refused:?}");
    assert!(podvisor_testkit::alive(first.pid.cast_signed()));
    // The shim dies; the runtime sees it and settles the pod's instances.
    signal(h.shim_pid, Signal::KILL);
    let event = tokio::time::timeout(Duration::from_secs(20), h.events.recv())
        .await
        .expect("an event within 20 s")
        .expect("event channel open");
    assert!(
        matches!(event, RuntimeEvent::SandboxLost { .. }),
        "{event:?}"
    );
    // The pod's next shim remembers the attempt.
    let (tx, events) = mpsc::unbounded_channel();
    let sandbox = h.runtime.create_sandbox(&h.pod, tx).await.expect("sandbox");
    h.shim_pid = sandbox.shim_pid();
    h.events = events;
    h.sandbox = Some(sandbox);
    let again = StartRequest {
        pod: h.pod.clone(),
        instance: 3,
        ..again
    };
    let refused = h
        .runtime
        .start_container(h.sandbox(), again)
        .await
        .expect_err("a new shim refuses the attempt too");
    assert!(refused.message.contains("already started"), "{refused:?}");
    let next = h.start_nth("app", 4, 1).await;
    h.runtime.signal(h.sandbox(), 4, 9).await.unwrap();
    let (instance, _) = h.next_exit().await;
    assert_eq!(instance, 4);
    assert!(!podvisor_testkit::alive(next.pid.cast_signed()));
    h.remove().await;
}

/// Issue 7: a restarted agent reads the shim's view only after the shim has handled what the
/// dead agent had already sent: a start on a connection accepted before the `State` one is
/// in the answer.
#[tokio::test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
async fn state_waits_for_the_requests_an_earlier_agent_sent() {
    use podvisor_runtime::shim::client::ShimClient;
    use podvisor_runtime::shim::protocol::{Request, Response, layout};
    use std::io::{BufRead, Write};
    require_root();
    let mut h = Harness::new(json!([c("app", &["sleep", "100"])]), json!([])).await;
    let socket = layout::socket(&h.sandbox().paths().pod_dir);
    // The dead agent's connection: accepted, its request not read yet.
    let mut earlier = std::os::unix::net::UnixStream::connect(&socket).unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let client = ShimClient::connect(&socket).await.unwrap();
    let state = tokio::spawn(async move { client.state().await });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !state.is_finished(),
        "State did not wait for the earlier connection"
    );
    let config =
        podvisor_runtime::config::build(&h.pod, &h.container("app"), 7, 0, h.sandbox().paths())
            .unwrap();
    let start = Request::Start {
        instance: 7,
        config: Box::new(config),
    };
    let mut line = serde_json::to_vec(&start).unwrap();
    line.push(b'\n');
    earlier.write_all(&line).unwrap();
    let mut answer = String::new();
    std::io::BufReader::new(&earlier)
        .read_line(&mut answer)
        .unwrap();
    let answer: Response = serde_json::from_str(&answer).unwrap();
    assert!(matches!(answer, Response::Started { .. }), "{answer:?}");
    let (_, instances) = tokio::time::timeout(Duration::from_secs(10), state)
        .await
        .expect("State answers once the earlier request is done")
        .unwrap()
        .unwrap();
    assert_eq!(
        instances.iter().map(|i| i.instance).collect::<Vec<_>>(),
        [7],
        "{instances:?}"
    );
    h.runtime.signal(h.sandbox(), 7, 9).await.unwrap();
    h.next_exit().await;
    h.remove().await;
}

/// Issue 7: a shim that died while no agent watched it (`kill -9` while `serve` was down) is
/// a lost sandbox when the next agent reads it: what it left is killed (the container's own
/// children too), each instance it started gets its exit (137 when none was journaled), and
/// the pod's next shim replays none of them.
#[tokio::test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
async fn a_shim_that_died_unwatched_is_read_as_a_lost_sandbox() {
    use podvisor_runtime::process::SandboxView;
    require_root();
    let mut h = Harness::new(
        json!([
            c("app", &["sh", "-c", "sleep 100 & sleep 100"]),
            c("done", &["sh", "-c", "exit 3"])
        ]),
        json!([]),
    )
    .await;
    let app = h.start("app", 1).await;
    h.start("done", 2).await;
    assert_eq!(h.next_exit().await.0, 2);
    // The agent goes away (its subscription with it), then the shim is killed.
    drop(h.sandbox.take());
    tokio::time::sleep(Duration::from_millis(200)).await;
    signal(h.shim_pid, Signal::KILL);
    eventually("the shim is gone", || {
        !podvisor_testkit::alive(h.shim_pid.cast_signed())
    })
    .await;
    assert!(podvisor_testkit::alive(app.pid.cast_signed()));
    let view = h.runtime.sandbox_view(&h.pod).await.expect("a view");
    let SandboxView::Lost(instances) = view else {
        panic!("not lost: {view:?}");
    };
    let exits: Vec<(u64, i32)> = instances
        .iter()
        .map(|i| (i.instance, i.exit.as_ref().map_or(-1, |e| e.exit_code)))
        .collect();
    assert_eq!(exits, [(1, 137), (2, 3)], "{instances:?}");
    eventually("what the dead shim left is killed", || {
        session_processes(h.shim_pid).is_empty()
    })
    .await;
    // The pod's next shim replays nothing and refuses the attempts the dead one ran.
    let (tx, events) = mpsc::unbounded_channel();
    let sandbox = h.runtime.create_sandbox(&h.pod, tx).await.expect("sandbox");
    h.shim_pid = sandbox.shim_pid();
    h.events = events;
    h.sandbox = Some(sandbox);
    let state = h.sandbox().state().await.unwrap();
    assert!(
        state.iter().all(|i| i.acked && i.exit.is_some()),
        "{state:?}"
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(h.events.try_recv().is_err(), "an exit was replayed");
    let view = h.runtime.sandbox_view(&h.pod).await.expect("a view");
    assert!(matches!(view, SandboxView::Live(_)), "{view:?}");
    h.remove().await;
}

/// Issue 7 §7.3: recovery reads a sandbox through the `Runtime` trait (CRI's
/// `ListPodSandbox` + `ListContainers`): every instance with the container ID its start
/// reported, running or with its exit; a removed sandbox is no longer listed.
#[tokio::test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
async fn the_runtime_lists_a_live_sandbox_and_its_instances() {
    use podvisor_runtime::SandboxState;
    require_root();
    let mut h = Harness::new(
        json!([
            c("app", &["sleep", "100"]),
            c("done", &["sh", "-c", "exit 3"])
        ]),
        json!([]),
    )
    .await;
    let uid = h.pod.metadata.uid.clone().unwrap();
    let app = h.start("app", 1).await;
    let done = h.start("done", 2).await;
    assert_eq!(h.next_exit().await.0, 2);
    assert!(h.runtime.list_sandboxes().await.contains(&uid));
    let state = Runtime::sandbox_state(&h.runtime, &h.pod).await.unwrap();
    let SandboxState::Live(mut records) = state else {
        panic!("not live: {state:?}");
    };
    records.sort_by_key(|r| r.instance);
    let seen: Vec<(u64, &str, &str, Option<i32>)> = records
        .iter()
        .map(|r| {
            (
                r.instance,
                r.name.as_str(),
                r.container_id.as_str(),
                r.exit.as_ref().map(|e| e.exit_code),
            )
        })
        .collect();
    assert_eq!(
        seen,
        [
            (1, "app", app.container_id.as_str(), None),
            (2, "done", done.container_id.as_str(), Some(3)),
        ]
    );
    assert_eq!(
        records[0].started_at.as_second(),
        app.started_at.as_second()
    );
    h.runtime.signal(h.sandbox(), 1, 9).await.unwrap();
    h.next_exit().await;
    h.remove().await;
    assert!(!h.runtime.list_sandboxes().await.contains(&uid));
    let state = Runtime::sandbox_state(&h.runtime, &h.pod).await.unwrap();
    assert_eq!(state, SandboxState::Absent);
}

/// Issue 7: a shim keeps none of the agent's descriptors (the store's, the state lock's, or
/// one the agent's own parent left without close-on-exec) and leads a session of its own.
#[tokio::test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
async fn the_shim_holds_no_descriptor_of_the_agent() {
    use std::os::fd::AsRawFd;
    require_root();
    let marker = std::env::temp_dir().join(format!("pv-agent-fd-{}", std::process::id()));
    let file = std::fs::File::create(&marker).unwrap();
    // As inherited from a careless parent: no close-on-exec.
    rustix::io::fcntl_setfd(&file, rustix::io::FdFlags::empty()).unwrap();
    let h = Harness::new(json!([c("app", &["sleep", "100"])]), json!([])).await;
    let links: Vec<String> = std::fs::read_dir(format!("/proc/{}/fd", h.shim_pid))
        .unwrap()
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .map(|l| l.display().to_string())
        .collect();
    assert!(
        !links.iter().any(|l| l == &marker.display().to_string()),
        "the shim holds the agent's fd {}: {links:?}",
        file.as_raw_fd()
    );
    let pod_dir = h.sandbox().paths().pod_dir.display().to_string();
    for link in &links {
        assert!(
            link.starts_with(&pod_dir)
                || link.starts_with("socket:")
                || link.starts_with("pipe:")
                || link == "/dev/null",
            "the shim holds {link}: {links:?}"
        );
    }
    let me = all_processes()
        .into_iter()
        .find(|p| u32::try_from(p.pid) == Ok(h.shim_pid))
        .unwrap();
    assert_eq!(u32::try_from(me.session), Ok(h.shim_pid), "{me:?}");
    drop(file);
    let _ = std::fs::remove_file(&marker);
    let mut h = h;
    h.remove().await;
}
