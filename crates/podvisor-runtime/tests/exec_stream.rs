//! `Runtime::exec_stream` of the process runtime with real processes (`kubectl exec`'s path):
//! streams, exit codes, the container's view, a TTY, containerd's error text, and nothing left
//! behind when the caller goes away.
//!
//! Needs root (cgroups, mounts): `#[ignore]`d unless run as root with `--include-ignored`. The shim is the
//! `podvisor` binary (`$PODVISOR_BIN`, else `target/<profile>/podvisor`, built when missing).

mod common;

use common::{require_root, shim_exe};
use k8s_openapi::api::core::v1::Pod;
use podvisor_runtime::process::{ProcessRuntime, ProcessSandbox};
use podvisor_runtime::{ExecRequest, ExecSession, Runtime, StartRequest, TermSize};
use podvisor_testkit::{Signal, all_processes, remove_pod_cgroup, signal};
use serde_json::json;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::mpsc;

static COUNTER: AtomicU32 = AtomicU32::new(0);
/// The tests count this process's descriptors: one at a time.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// One running pod (container `main`, instance 1) and its clean-up.
struct Pod1 {
    root: PathBuf,
    runtime: ProcessRuntime,
    pod: Pod,
    sandbox: Option<ProcessSandbox>,
    shim_pid: u32,
    main_pid: i32,
    _events: mpsc::UnboundedReceiver<podvisor_runtime::RuntimeEvent>,
}

impl Pod1 {
    async fn start() -> Pod1 {
        Pod1::start_with(json!({})).await
    }

    /// A pod whose container `main` also has `extra` (its command, `stdin`, `tty`...).
    async fn start_with(extra: serde_json::Value) -> Pod1 {
        let n = COUNTER.fetch_add(1, Ordering::SeqCst);
        let root = std::env::temp_dir().join(format!("pv-xs-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(root.join("work")).unwrap();
        let uid = format!("{:08x}-0000-4000-9000-{n:012x}", std::process::id());
        let pod: Pod = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": format!("x{n}"), "namespace": "default", "uid": uid},
            "spec": {"restartPolicy": "Never",
                "containers": [{"name": "main", "image": "none", "command": ["sleep", "100"],
                    "workingDir": root.join("work"),
                    "env": [{"name": "FOO", "value": "bar"}],
                    "volumeMounts": [{"name": "data", "mountPath": root.join("data")}]}],
                "volumes": [{"name": "data", "emptyDir": {}}]},
        }))
        .unwrap();
        let mut pod = pod;
        let mut container =
            serde_json::to_value(&pod.spec.as_ref().unwrap().containers[0]).unwrap();
        for (k, v) in extra.as_object().unwrap() {
            container[k] = v.clone();
        }
        pod.spec.as_mut().unwrap().containers[0] = serde_json::from_value(container).unwrap();
        let runtime = ProcessRuntime::new(root.join("state"), shim_exe()).expect("runtime");
        let (tx, events) = mpsc::unbounded_channel();
        let sandbox = runtime.create_sandbox(&pod, tx).await.expect("sandbox");
        let container = pod.spec.as_ref().unwrap().containers[0].clone();
        let request = StartRequest {
            pod: pod.clone(),
            instance: 1,
            container,
            restart_count: 0,
            objects: Default::default(),
        };
        let started = runtime
            .start_container(&sandbox, request)
            .await
            .expect("start");
        Pod1 {
            root,
            runtime,
            pod,
            shim_pid: sandbox.shim_pid(),
            main_pid: started.pid.cast_signed(),
            sandbox: Some(sandbox),
            _events: events,
        }
    }

    async fn exec(&self, argv: &[&str], stdin: bool, tty: bool) -> ExecSession {
        self.try_exec(argv, stdin, tty).await.expect("exec_stream")
    }

    async fn try_exec(
        &self,
        argv: &[&str],
        stdin: bool,
        tty: bool,
    ) -> Result<ExecSession, podvisor_runtime::RuntimeError> {
        let request = ExecRequest {
            attach: false,
            argv: argv.iter().map(|s| (*s).to_owned()).collect(),
            stdin,
            stdout: true,
            stderr: !tty,
            tty,
            size: None,
        };
        let sandbox = self.sandbox.as_ref().expect("sandbox");
        self.runtime.exec_stream(sandbox, 1, request).await
    }

    async fn attach(&self, stdin: bool, tty: bool) -> ExecSession {
        let request = ExecRequest {
            attach: true,
            argv: Vec::new(),
            stdin,
            stdout: true,
            stderr: !tty,
            tty,
            size: None,
        };
        let sandbox = self.sandbox.as_ref().expect("sandbox");
        self.runtime
            .exec_stream(sandbox, 1, request)
            .await
            .expect("attach")
    }

    /// The container's log so far.
    fn log(&self) -> String {
        let uid = self.pod.metadata.uid.as_deref().unwrap();
        let name = self.pod.metadata.name.as_deref().unwrap();
        let path = self
            .root
            .join("state/logs")
            .join(format!("default_{name}_{uid}"))
            .join("main/0.log");
        std::fs::read_to_string(path).unwrap_or_default()
    }

    /// The shim's children other than the container's main process (exec processes, zombies).
    fn exec_children(&self) -> Vec<i32> {
        let shim = self.shim_pid.cast_signed();
        all_processes()
            .into_iter()
            .filter(|p| p.ppid == shim && p.pid != self.main_pid)
            .map(|p| p.pid)
            .collect()
    }

    async fn remove(mut self) {
        if let Some(sandbox) = self.sandbox.take() {
            self.runtime.remove_sandbox(&sandbox).await.expect("remove");
        }
    }
}

impl Drop for Pod1 {
    fn drop(&mut self) {
        for p in all_processes() {
            if u32::try_from(p.session) == Ok(self.shim_pid) {
                signal(p.pid, Signal::KILL);
            }
        }
        remove_pod_cgroup(self.pod.metadata.uid.as_deref().unwrap_or_default());
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

async fn read_all(reader: Option<podvisor_runtime::ExecReader>) -> String {
    let mut out = Vec::new();
    if let Some(mut r) = reader {
        tokio::time::timeout(Duration::from_secs(10), r.read_to_end(&mut out))
            .await
            .expect("output ends within 10 s")
            .expect("read");
    }
    String::from_utf8_lossy(&out).into_owned()
}

async fn eventually(what: &str, mut check: impl FnMut() -> bool) {
    for _ in 0..500 {
        if check() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("timed out waiting for: {what}");
}

fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").map_or(0, Iterator::count)
}

#[tokio::test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
async fn streams_stdin_stdout_stderr_and_the_exit_code_in_the_container_view() {
    require_root();
    let _serial = SERIAL.lock().await;
    let pod = Pod1::start().await;
    let fds_before = open_fds();
    let script = "read line; echo \"got $line\"; echo $FOO; pwd; ls /proc/self/fd; \
                  touch ../data/x; echo err >&2; exit 3";
    let mut session = pod.exec(&["sh", "-c", script], true, false).await;
    let mut stdin = session.stdin.take().expect("stdin");
    stdin.write_all(b"hi\n").await.unwrap();
    drop(stdin);
    let (out, err) = tokio::join!(
        read_all(session.stdout.take()),
        read_all(session.stderr.take())
    );
    let code = tokio::time::timeout(Duration::from_secs(10), session.exit)
        .await
        .expect("exit within 10 s")
        .expect("exit");
    assert_eq!(code, 3);
    let work = pod.root.join("work");
    // Only 0, 1, 2 (and ls's own directory descriptor) reach the command.
    assert_eq!(
        out,
        format!("got hi\nbar\n{}\n0\n1\n2\n3\n", work.display()),
        "stdout"
    );
    assert_eq!(err, "err\n");
    let pod_dir = pod.sandbox.as_ref().unwrap().paths().pod_dir.clone();
    assert!(
        pod_dir.join("volumes/data/x").exists(),
        "exec sees the emptyDir"
    );
    eventually("the exec is reaped", || pod.exec_children().is_empty()).await;
    // No descriptor leaks in the agent (the session's tasks let go of theirs as they end; the
    // runtime may have closed one of its own meanwhile).
    eventually("no descriptor leaks in the agent", || {
        open_fds() <= fds_before
    })
    .await;
    pod.remove().await;
}

#[tokio::test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
async fn a_command_that_cannot_start_is_worded_as_containerd_words_it() {
    require_root();
    let _serial = SERIAL.lock().await;
    let pod = Pod1::start().await;
    let err = pod
        .try_exec(&["no-such-command"], false, false)
        .await
        .expect_err("no such command");
    let text = err.to_string();
    let (head, tail) = text
        .split_once("\": OCI runtime exec failed")
        .unwrap_or_else(|| panic!("{text}"));
    let id = head
        .strip_prefix("failed to exec in container: failed to start exec \"")
        .unwrap_or_else(|| panic!("{text}"));
    assert!(
        id.len() == 64 && id.chars().all(|c| c.is_ascii_hexdigit()),
        "{text}"
    );
    assert_eq!(
        tail,
        ": exec failed: unable to start container process: exec: \"no-such-command\": \
         executable file not found in $PATH: unknown"
    );
    // An instance that is not running.
    let sandbox = pod.sandbox.as_ref().unwrap();
    let request = ExecRequest {
        attach: false,
        argv: vec!["true".into()],
        stdin: false,
        stdout: true,
        stderr: true,
        tty: false,
        size: None,
    };
    assert!(pod.runtime.exec_stream(sandbox, 9, request).await.is_err());
    eventually("nothing left", || pod.exec_children().is_empty()).await;
    pod.remove().await;
}

#[tokio::test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
async fn dropping_the_session_kills_the_whole_process_group() {
    require_root();
    let _serial = SERIAL.lock().await;
    let pod = Pod1::start().await;
    let fds_before = open_fds();
    let mut session = pod
        .exec(
            &["sh", "-c", "sleep 100 & echo started; sleep 100"],
            true,
            false,
        )
        .await;
    let mut stdout = session.stdout.take().unwrap();
    let mut buf = [0_u8; 8];
    stdout.read_exact(&mut buf).await.unwrap();
    assert_eq!(&buf, b"started\n");
    assert!(!pod.exec_children().is_empty());
    drop(session);
    drop(stdout);
    eventually("the exec's process group is killed and reaped", || {
        pod.exec_children().is_empty()
    })
    .await;
    // No descriptor leaks in the agent (the session's tasks let go of theirs as they end; the
    // runtime may have closed one of its own meanwhile).
    eventually("no descriptor leaks in the agent", || {
        open_fds() <= fds_before
    })
    .await;
    pod.remove().await;
}

#[tokio::test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
async fn a_tty_is_the_controlling_terminal_and_resizes() {
    require_root();
    let _serial = SERIAL.lock().await;
    let pod = Pod1::start().await;
    let mut session = pod
        .exec(
            &["sh", "-c", "read x; tty; stty size; echo $TERM; exit $x"],
            true,
            true,
        )
        .await;
    let resize = session.resize.take().expect("resize");
    resize(TermSize {
        width: 100,
        height: 30,
    })
    .unwrap();
    let mut stdin = session.stdin.take().expect("stdin");
    stdin.write_all(b"5\n").await.unwrap();
    let out = read_all(session.stdout.take()).await;
    let code = session.exit.await.unwrap();
    assert_eq!(code, 5);
    // The terminal echoes the input and writes CR LF.
    let lines: Vec<&str> = out.split("\r\n").collect();
    assert_eq!(lines[0], "5", "{out:?}");
    assert!(lines[1].starts_with("/dev/pts/"), "{out:?}");
    assert_eq!(lines[2..], ["30 100", "xterm", ""], "{out:?}");
    drop(stdin);
    eventually("the exec is reaped", || pod.exec_children().is_empty()).await;
    pod.remove().await;
}

/// A TTY exec starts on a terminal of the size it was asked with: a command that asks at once
/// reads it, not 0x0 (kubectl's first resize would otherwise race the command's start).
#[tokio::test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
async fn a_tty_starts_with_the_size_it_was_given() {
    require_root();
    let _serial = SERIAL.lock().await;
    let pod = Pod1::start().await;
    let request = ExecRequest {
        attach: false,
        argv: vec!["stty".to_owned(), "size".to_owned()],
        stdin: false,
        stdout: true,
        stderr: false,
        tty: true,
        size: Some(TermSize {
            width: 91,
            height: 33,
        }),
    };
    let sandbox = pod.sandbox.as_ref().expect("sandbox");
    let mut session = pod
        .runtime
        .exec_stream(sandbox, 1, request)
        .await
        .expect("exec_stream");
    let out = read_all(session.stdout.take()).await;
    assert_eq!(session.exit.await.unwrap(), 0);
    assert_eq!(out, "33 91\r\n");
    eventually("the exec is reaped", || pod.exec_children().is_empty()).await;
    pod.remove().await;
}

/// Reads from `reader` until the output holds `want` (10 s at most).
async fn read_until(reader: &mut podvisor_runtime::ExecReader, want: &str) -> String {
    let mut out = Vec::new();
    let mut buf = [0_u8; 4096];
    while !String::from_utf8_lossy(&out).contains(want) {
        let n = tokio::time::timeout(Duration::from_secs(10), reader.read(&mut buf))
            .await
            .unwrap_or_else(|_| {
                panic!(
                    "no {want:?} within 10 s: {:?}",
                    String::from_utf8_lossy(&out)
                )
            })
            .expect("read");
        assert!(
            n > 0,
            "output ended before {want:?}: {:?}",
            String::from_utf8_lossy(&out)
        );
        out.extend_from_slice(&buf[..n]);
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `kubectl attach` / `kubectl run -i`: a container with `stdin` and `stdinOnce` reads what the
/// attach writes, and the end of that input is its stdin's end-of-file for good; its output
/// reaches the session and the CRI log; the session ends when the container does.
#[tokio::test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
async fn attach_with_stdin_once_feeds_the_container_and_closes_its_stdin() {
    require_root();
    let _serial = SERIAL.lock().await;
    let pod = Pod1::start_with(json!({
        "command": ["sh", "-c", "while read line; do echo got $line; done; echo stdin closed; exit 7"],
        "stdin": true,
        "stdinOnce": true,
    }))
    .await;
    // Without an attach, the container waits on its open stdin (it is not /dev/null).
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        podvisor_testkit::alive(pod.main_pid),
        "the container read end-of-file"
    );
    let mut session = pod.attach(true, false).await;
    let mut stdin = session.stdin.take().expect("stdin");
    let mut stdout = session.stdout.take().expect("stdout");
    stdin.write_all(b"one\n").await.unwrap();
    read_until(&mut stdout, "got one\n").await;
    drop(stdin);
    let rest = read_until(&mut stdout, "stdin closed\n").await;
    assert_eq!(rest, "stdin closed\n");
    let code = tokio::time::timeout(Duration::from_secs(10), session.exit)
        .await
        .expect("the attach ends with the container")
        .unwrap();
    assert_eq!(code, 0, "an attach's end is not the container's exit code");
    assert!(read_all(Some(stdout)).await.is_empty());
    let log = pod.log();
    assert!(log.contains(" stdout F got one\n"), "{log}");
    assert!(log.contains(" stdout F stdin closed\n"), "{log}");
    pod.remove().await;
}

/// Without `stdinOnce`, the end of an attach's input detaches it (the session ends, the
/// container's stdin stays open) and the next attach writes to the same stdin; output goes to
/// every attached session.
#[tokio::test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
async fn attach_without_stdin_once_detaches_and_the_next_attach_reaches_the_same_stdin() {
    require_root();
    let _serial = SERIAL.lock().await;
    let pod = Pod1::start_with(json!({
        "command": ["sh", "-c", "while read line; do echo got $line; echo oops $line >&2; done"],
        "stdin": true,
    }))
    .await;
    let mut first = pod.attach(true, false).await;
    let mut watcher = pod.attach(false, false).await;
    let mut watcher_err = watcher.stderr.take().expect("stderr");
    let mut stdin = first.stdin.take().expect("stdin");
    let mut stdout = first.stdout.take().expect("stdout");
    stdin.write_all(b"a\n").await.unwrap();
    read_until(&mut stdout, "got a\n").await;
    read_until(&mut watcher_err, "oops a\n").await;
    drop(stdin);
    tokio::time::timeout(Duration::from_secs(10), first.exit)
        .await
        .expect("the session detaches when its input ends")
        .unwrap();
    assert!(read_all(Some(stdout)).await.is_empty());
    assert!(podvisor_testkit::alive(pod.main_pid), "stdin was closed");
    let mut second = pod.attach(true, false).await;
    let mut stdin = second.stdin.take().expect("stdin");
    let mut stdout = second.stdout.take().expect("stdout");
    stdin.write_all(b"b\n").await.unwrap();
    read_until(&mut stdout, "got b\n").await;
    read_until(&mut watcher_err, "oops b\n").await;
    drop((stdin, stdout, second, watcher_err, watcher));
    pod.remove().await;
}

/// A container with `tty` runs on a terminal (its controlling terminal, `TERM=xterm`); an
/// attach types into it, resizes it and reads its output, which the log keeps as stdout.
#[tokio::test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
async fn attach_to_a_tty_container_types_resizes_and_reads() {
    require_root();
    let _serial = SERIAL.lock().await;
    let pod = Pod1::start_with(json!({
        "command": ["sh", "-c", "while read cmd; do eval \"$cmd\"; done"],
        "stdin": true,
        "tty": true,
    }))
    .await;
    let mut session = pod.attach(true, true).await;
    assert!(session.stderr.is_none());
    let resize = session.resize.take().expect("resize");
    resize(TermSize {
        width: 91,
        height: 17,
    })
    .unwrap();
    let mut stdin = session.stdin.take().expect("stdin");
    let mut stdout = session.stdout.take().expect("stdout");
    stdin
        .write_all(b"stty size; echo $TERM; tty\n")
        .await
        .unwrap();
    let out = read_until(&mut stdout, "/dev/pts/").await;
    assert!(out.contains("17 91\r\nxterm\r\n"), "{out:?}");
    stdin.write_all(b"exit 3\n").await.unwrap();
    tokio::time::timeout(Duration::from_secs(10), session.exit)
        .await
        .expect("the attach ends with the container")
        .unwrap();
    let log = pod.log();
    assert!(log.contains(" stdout "), "{log}");
    assert!(!log.contains(" stderr "), "{log}");
    assert!(log.contains("xterm"), "{log}");
    drop((stdin, stdout));
    pod.remove().await;
}

/// An attach to an instance that exited is refused in containerd's words.
#[tokio::test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
async fn attach_to_an_exited_container_is_refused() {
    require_root();
    let _serial = SERIAL.lock().await;
    let pod = Pod1::start_with(json!({"command": ["true"]})).await;
    eventually("the container exited", || {
        !podvisor_testkit::alive(pod.main_pid)
    })
    .await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let request = ExecRequest {
        attach: true,
        argv: Vec::new(),
        stdin: false,
        stdout: true,
        stderr: true,
        tty: false,
        size: None,
    };
    let sandbox = pod.sandbox.as_ref().expect("sandbox");
    let err = pod
        .runtime
        .exec_stream(sandbox, 1, request)
        .await
        .expect_err("attached to an exited container");
    assert!(err.to_string().contains("CONTAINER_EXITED"), "{err}");
    pod.remove().await;
}
