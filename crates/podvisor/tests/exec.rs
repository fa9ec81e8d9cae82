//! `kubectl exec` against `podvisor serve` (WebSockets, `v5.channel.k8s.io`), with the real
//! kubectl: `PODVISOR_KUBECTL` (else the one on PATH), and kubectl 1.34 too when it is at
//! `/root/.cache/podvisor-test/kubectl-1.34/kubectl`. Streams stay apart, exit codes come
//! through, stdin reaches the command, the command sees the container's env, working directory
//! and emptyDir, `-c` picks the container, errors read as against a real cluster, a TTY works,
//! and a client that goes away takes its command with it.

#![allow(missing_docs)]

use crate::serve_common;

use serve_common::{ServeCtx, kubectl_binary};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const KUBECTL_134: &str = "/root/.cache/podvisor-test/kubectl-1.34/kubectl";

/// The kubectls to run: the chosen one, and 1.34 when present and different.
fn kubectls() -> Vec<PathBuf> {
    let mut all = vec![kubectl_binary()];
    if Path::new(KUBECTL_134).exists() && all[0] != Path::new(KUBECTL_134) {
        all.push(PathBuf::from(KUBECTL_134));
    }
    all.retain(|k| k.exists());
    all
}

/// `bin` with this serve's kubeconfig and a cache directory of its own.
fn ctx_kubectl_command(ctx: &ServeCtx, bin: &Path) -> Command {
    let mut cmd = Command::new(bin);
    cmd.arg("--kubeconfig")
        .arg(ctx.kubeconfig())
        .arg("--cache-dir")
        .arg(
            ctx.dir
                .join(format!("cache-{}", bin.to_string_lossy().len())),
        )
        .env_remove("KUBECONFIG");
    cmd
}

fn kubectl(ctx: &ServeCtx, bin: &Path, args: &[&str], stdin: Option<&[u8]>) -> Output {
    let mut cmd = ctx_kubectl_command(ctx, bin);
    cmd.args(args)
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("kubectl runs");
    if let Some(input) = stdin {
        let mut pipe = child.stdin.take().unwrap();
        pipe.write_all(input).unwrap();
    }
    child.wait_with_output().unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn pods(ctx: &ServeCtx) -> String {
    let m = &ctx.marker;
    let dir = ctx.dir.display();
    format!(
        r#"apiVersion: v1
kind: Pod
metadata:
  name: ex
spec:
  containers:
  - name: app
    image: busybox
    command: [sh, -c, 'sleep 1000; : {m}']
    workingDir: {dir}/work
    env: [{{name: WHO, value: app}}]
    volumeMounts: [{{name: data, mountPath: {dir}/data}}]
  - name: side
    image: busybox
    command: [sh, -c, 'sleep 1000; : {m}']
    env: [{{name: WHO, value: side}}]
  volumes: [{{name: data, emptyDir: {{}}}}]
---
apiVersion: v1
kind: Pod
metadata:
  name: done
spec:
  restartPolicy: Never
  containers:
  - name: app
    image: busybox
    command: [sh, -c, 'exit 0; : {m}']
---
apiVersion: v1
kind: Pod
metadata:
  name: waiting
spec:
  initContainers:
  - name: init
    image: busybox
    command: [sh, -c, 'sleep 1000; : {m}']
  containers:
  - name: app
    image: busybox
    command: [sh, -c, 'sleep 1000; : {m}']
"#
    )
}

fn wait_for(ctx: &ServeCtx, what: &str, mut check: impl FnMut() -> bool) {
    let start = Instant::now();
    while !check() {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "timed out waiting for {what}:\n{}",
            ctx.last_logs(1)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
fn kubectl_exec_streams_exit_codes_ttys_and_errors() {
    let mut ctx = ServeCtx::new("ex");
    let kubectls = kubectls();
    assert!(
        !kubectls.is_empty(),
        "no kubectl (scripts/test installs kubectl 1.34)"
    );
    std::fs::create_dir_all(ctx.path("work")).unwrap();
    ctx.start(&[]);
    let manifest = ctx.manifest("pods", &pods(&ctx));
    ctx.kubectl_ok(&["apply", "-f", manifest.to_str().unwrap()]);
    wait_for(&ctx, "ex Running, done Succeeded, waiting Init:0/1", || {
        let out = ctx.kubectl_ok(&["get", "pods", "--no-headers"]);
        out.lines()
            .any(|l| l.starts_with("ex ") && l.contains("2/2") && l.contains("Running"))
            && out
                .lines()
                .any(|l| l.starts_with("done ") && l.contains("Completed"))
            && out
                .lines()
                .any(|l| l.starts_with("waiting ") && l.contains("Init:0/1"))
    });
    let data = ctx.path("data");

    for bin in &kubectls {
        let run = |args: &[&str], stdin: Option<&[u8]>| kubectl(&ctx, bin, args, stdin);
        let label = bin.display();
        eprintln!("kubectl exec with {label}");

        // Streams apart, the exit code through.
        let out = run(
            &[
                "exec",
                "ex",
                "-c",
                "app",
                "--",
                "sh",
                "-c",
                "echo out; echo err >&2; exit 3",
            ],
            None,
        );
        assert_eq!(out.status.code(), Some(3), "{label}: {out:?}");
        assert_eq!(text(&out.stdout), "out\n", "{label}");
        assert_eq!(
            text(&out.stderr),
            "err\ncommand terminated with exit code 3\n",
            "{label}"
        );

        // Stdin, to its end.
        let out = run(
            &["exec", "-i", "ex", "-c", "app", "--", "cat"],
            Some(b"hi\n"),
        );
        assert!(out.status.success(), "{label}: {out:?}");
        assert_eq!(text(&out.stdout), "hi\n", "{label}");

        // The container's view: env, working directory, emptyDir.
        let script = format!(
            "echo $WHO; pwd; echo x > {}/f; cat {}/f",
            data.display(),
            data.display()
        );
        let out = run(
            &["exec", "ex", "-c", "app", "--", "sh", "-c", &script],
            None,
        );
        assert!(out.status.success(), "{label}: {out:?}");
        assert_eq!(
            text(&out.stdout),
            format!("app\n{}\nx\n", ctx.path("work").display()),
            "{label}"
        );
        // `-c` picks the container.
        let out = run(
            &["exec", "ex", "-c", "side", "--", "sh", "-c", "echo $WHO"],
            None,
        );
        assert_eq!(text(&out.stdout), "side\n", "{label}: {out:?}");

        // Errors, as kubectl prints them against a real cluster.
        let out = run(&["exec", "ex", "-c", "nope", "--", "true"], None);
        assert_eq!(out.status.code(), Some(1));
        assert_eq!(
            text(&out.stderr),
            "Error from server (BadRequest): container nope is not valid for pod ex\n",
            "{label}"
        );
        let out = run(&["exec", "ex", "-c", "app", "--", "no-such-command"], None);
        assert_eq!(out.status.code(), Some(1));
        let err = text(&out.stderr);
        assert!(
            err.starts_with(
                "error: Internal error occurred: Internal error occurred: error executing \
                 command in container: failed to exec in container: failed to start exec \""
            ) && err.ends_with(
                "\": OCI runtime exec failed: exec failed: unable to start container process: \
                 exec: \"no-such-command\": executable file not found in $PATH: unknown\n"
            ),
            "{label}: {err}"
        );
        let out = run(&["exec", "waiting", "-c", "app", "--", "true"], None);
        assert_eq!(out.status.code(), Some(1));
        assert_eq!(
            text(&out.stderr),
            "error: Internal error occurred: unable to upgrade connection: container not \
             found (\"app\")\n",
            "{label}"
        );
        let out = run(&["exec", "done", "--", "true"], None);
        assert_eq!(out.status.code(), Some(1));
        assert_eq!(
            text(&out.stderr),
            "error: cannot exec into a container in a completed pod; current phase is \
             Succeeded\n",
            "{label}"
        );

        // A TTY: `script` gives kubectl a terminal of 33 rows and 91 columns.
        if Path::new("/usr/bin/script").exists() {
            let line = format!(
                "stty rows 33 cols 91; {} --kubeconfig {} --cache-dir {} exec -it ex -c app -- \
                 sh -c 'tty; stty size; exit 5'",
                bin.display(),
                ctx.kubeconfig().display(),
                ctx.dir.join("cache-tty").display()
            );
            let out = Command::new("script")
                .args(["-qec", &line, "/dev/null"])
                .stdin(Stdio::piped())
                .output()
                .unwrap();
            let shown = text(&out.stdout);
            assert!(shown.contains("/dev/pts/"), "{label}: {shown:?}");
            assert!(shown.contains("33 91\r\n"), "{label}: {shown:?}");
            assert_eq!(out.status.code(), Some(5), "{label}: {shown:?}");
        }

        // A client that goes away takes its command's whole process group with it.
        let mark = format!("gone{}", label.to_string().len());
        let script = format!("sleep 300 & sleep 300; : {mark}");
        let mut child = Command::new(bin)
            .arg("--kubeconfig")
            .arg(ctx.kubeconfig())
            .args(["exec", "ex", "-c", "app", "--", "sh", "-c", &script])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let running = || {
            podvisor_testkit::all_processes()
                .iter()
                .any(|p| p.cmdline.contains(&mark))
        };
        wait_for(&ctx, "the exec runs", running);
        child.kill().unwrap();
        child.wait().unwrap();
        wait_for(&ctx, "the exec is gone with its client", || !running());
    }
    // Every exec process was reaped: the shims' only children are the containers.
    let shims: Vec<i32> = ctx
        .processes()
        .iter()
        .filter(|p| p.cmdline.contains(" shim "))
        .map(|p| p.pid)
        .collect();
    wait_for(&ctx, "no exec process or zombie under the shims", || {
        podvisor_testkit::all_processes()
            .iter()
            .filter(|p| shims.contains(&p.ppid))
            .all(|p| p.cmdline.contains(&ctx.marker))
    });
}

/// `kubectl attach` and `kubectl run -i --rm` (WebSockets, `pods/attach`): the container's own
/// stdin (`stdin`, `stdinOnce`) is fed by the client, its output comes back, the end of the
/// client's input is the container's end-of-file, and `--rm` deletes the pod afterwards; a TTY
/// container is typed into through `kubectl attach -it`.
#[test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
fn kubectl_attach_and_run_interactive() {
    let mut ctx = ServeCtx::new("at");
    let kubectls = kubectls();
    assert!(
        !kubectls.is_empty(),
        "no kubectl (scripts/test installs kubectl 1.34)"
    );
    ctx.start(&[]);
    let m = ctx.marker.clone();
    for (n, bin) in kubectls.iter().enumerate() {
        let run = |args: &[&str], stdin: Option<&[u8]>| kubectl(&ctx, bin, args, stdin);
        let label = bin.display();
        eprintln!("kubectl attach with {label}");
        let name = format!("att{n}");
        let manifest = ctx.manifest(
            &name,
            &format!(
                r#"apiVersion: v1
kind: Pod
metadata:
  name: {name}
spec:
  restartPolicy: Never
  containers:
  - name: app
    image: busybox
    command: [sh, -c, 'while read l; do echo got $l; done; echo bye; : {m}']
    stdin: true
    stdinOnce: true
"#
            ),
        );
        ctx.kubectl_ok(&["apply", "-f", manifest.to_str().unwrap()]);
        wait_for(&ctx, "the pod runs", || {
            ctx.kubectl_ok(&["get", "pod", &name, "--no-headers"])
                .contains("Running")
        });
        let out = run(&["attach", "-i", &name, "-c", "app"], Some(b"x\ny\n"));
        assert!(out.status.success(), "{label}: {out:?}");
        assert_eq!(text(&out.stdout), "got x\ngot y\nbye\n", "{label}: {out:?}");
        wait_for(&ctx, "the pod completes after its stdin closed", || {
            ctx.kubectl_ok(&["get", "pod", &name, "--no-headers"])
                .contains("Completed")
        });
        let logs = ctx.kubectl_ok(&["logs", &name]);
        assert_eq!(logs, "got x\ngot y\nbye\n", "{label}");
        // A completed pod cannot be attached to (kubectl says so itself).
        let out = run(&["attach", "-i", &name], Some(b"z\n"));
        assert!(!out.status.success(), "{label}: {out:?}");
        assert!(
            text(&out.stderr).contains("completed pod"),
            "{label}: {out:?}"
        );

        // `kubectl run -i --rm`: create, wait for Running, attach, then delete.
        let rr = format!("rr{n}");
        let script = format!("read l; echo got $l; : {m}");
        let out = run(
            &[
                "run",
                &rr,
                "-i",
                "--rm",
                "--restart=Never",
                "--image=busybox",
                "--command",
                "--",
                "sh",
                "-c",
                &script,
            ],
            Some(b"hello\n"),
        );
        assert!(out.status.success(), "{label}: {out:?}");
        assert!(
            text(&out.stdout).starts_with("got hello\n"),
            "{label}: {out:?}"
        );
        wait_for(&ctx, "--rm deleted the pod", || {
            !ctx.kubectl(&["get", "pod", &rr]).status.success()
        });

        // A TTY container, typed into through `script` (kubectl needs a terminal for -t).
        if Path::new("/usr/bin/script").exists() {
            let tty = format!("tty{n}");
            let manifest = ctx.manifest(
                &tty,
                &format!(
                    r#"apiVersion: v1
kind: Pod
metadata:
  name: {tty}
spec:
  restartPolicy: Never
  containers:
  - name: app
    image: busybox
    command: [sh, -c, 'read cmd; eval "$cmd"; : {m}']
    stdin: true
    tty: true
"#
                ),
            );
            ctx.kubectl_ok(&["apply", "-f", manifest.to_str().unwrap()]);
            wait_for(&ctx, "the tty pod runs", || {
                ctx.kubectl_ok(&["get", "pod", &tty, "--no-headers"])
                    .contains("Running")
            });
            let line = format!(
                "stty rows 21 cols 77; {} --kubeconfig {} --cache-dir {} attach -it {tty}",
                bin.display(),
                ctx.kubeconfig().display(),
                ctx.dir.join("cache-tty").display()
            );
            let mut child = Command::new("script")
                .args(["-qec", &line, "/dev/null"])
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .spawn()
                .unwrap();
            // Typed once kubectl is attached (it says so on the terminal first).
            std::thread::sleep(Duration::from_secs(2));
            let mut keys = child.stdin.take().unwrap();
            keys.write_all(b"stty size; exit 4\r").unwrap();
            let out = child.wait_with_output().unwrap();
            drop(keys);
            let shown = text(&out.stdout);
            assert!(shown.contains("21 77\r\n"), "{label}: {shown:?}");
            wait_for(&ctx, "the tty pod ends with its code", || {
                ctx.kubectl_ok(&["get", "pod", &tty, "--no-headers"])
                    .contains("Error")
            });
        }
    }
}

/// The `jsonpath` of the ephemeral container `name`'s status field `field`.
fn ephemeral_status(ctx: &ServeCtx, pod: &str, name: &str, field: &str) -> String {
    let path =
        format!("jsonpath={{.status.ephemeralContainerStatuses[?(@.name==\"{name}\")]{field}}}");
    ctx.kubectl_ok(&["get", "pod", pod, "-o", &path])
}

/// `kubectl debug` (A14, `pods/ephemeralcontainers`): a debugger with a command runs once in
/// the running pod, its output is `kubectl logs -c`, its status is in
/// `ephemeralContainerStatuses` (terminated, never ready, never restarted) while the pod stays
/// `Running` 1/1; `kubectl debug -i` attaches to a shell fed through stdin; a name that is
/// already taken is refused with the API server's words; the debugger dies with the pod. The
/// process runtime has no PID namespaces: `--target` changes nothing of what a host process
/// sees (every process of the host, the target's included).
#[test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
fn kubectl_debug_ephemeral_containers() {
    let mut ctx = ServeCtx::new("dbg");
    let kubectls = kubectls();
    assert!(
        !kubectls.is_empty(),
        "no kubectl (scripts/test installs kubectl 1.34)"
    );
    ctx.start(&[]);
    let m = ctx.marker.clone();
    let manifest = ctx.manifest(
        "dbg",
        &format!(
            r#"apiVersion: v1
kind: Pod
metadata:
  name: dbg
spec:
  containers:
  - name: app
    image: busybox
    command: [sh, -c, 'sleep 1000; : {m} app']
"#
        ),
    );
    ctx.kubectl_ok(&["apply", "-f", manifest.to_str().unwrap()]);
    wait_for(&ctx, "the pod runs", || {
        ctx.kubectl_ok(&["get", "pod", "dbg", "--no-headers"])
            .contains("Running")
    });
    for (n, bin) in kubectls.iter().enumerate() {
        let run = |args: &[&str], stdin: Option<&[u8]>| kubectl(&ctx, bin, args, stdin);
        let label = bin.display();
        eprintln!("kubectl debug with {label}");

        // Non-interactive, with a command: kubectl patches the subresource and returns.
        let name = format!("debugger{n}");
        let script =
            format!("echo hello from $0; pgrep -f '{m} app' >/dev/null && echo sees app; exit 3");
        let out = run(
            &[
                "debug",
                "dbg",
                "--image=busybox",
                "--target=app",
                "-c",
                &name,
                "--",
                "sh",
                "-c",
                &script,
                &name,
            ],
            None,
        );
        assert!(out.status.success(), "{label}: {out:?}");
        wait_for(&ctx, "the debugger ends", || {
            ephemeral_status(&ctx, "dbg", &name, ".state.terminated.exitCode") == "3"
        });
        let logs = ctx.kubectl_ok(&["logs", "dbg", "-c", &name]);
        assert_eq!(logs, format!("hello from {name}\nsees app\n"), "{label}");
        assert_eq!(
            ephemeral_status(&ctx, "dbg", &name, ".state.terminated.reason"),
            "Error"
        );
        assert_eq!(ephemeral_status(&ctx, "dbg", &name, ".ready"), "false");
        assert_eq!(ephemeral_status(&ctx, "dbg", &name, ".restartCount"), "0");
        let pod: serde_json::Value =
            serde_json::from_str(&ctx.kubectl_ok(&["get", "pod", "dbg", "-o", "json"])).unwrap();
        let spec = &pod["spec"]["ephemeralContainers"][n * 2];
        assert_eq!(spec["name"], name.as_str(), "{label}");
        assert_eq!(spec["targetContainerName"], "app", "{label}");
        let row = ctx.kubectl_ok(&["get", "pod", "dbg", "--no-headers"]);
        assert!(
            row.contains("1/1") && row.contains("Running"),
            "{label}: {row}"
        );

        // Interactive: `-i` waits for the container to run and attaches to its stdin. kubectl
        // debug sets no `stdinOnce`, so the end of the client's input would detach it (as
        // containerd's attach does): the input stays open until the shell has exited.
        let shell = format!("shell{n}");
        let mut child = ctx_kubectl_command(&ctx, bin)
            .args([
                "debug",
                "-i",
                "dbg",
                "--image=busybox",
                "-c",
                &shell,
                "--",
                "sh",
            ])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("kubectl runs");
        let mut keys = child.stdin.take().unwrap();
        keys.write_all(b"echo typed in; exit 0\n").unwrap();
        let out = child.wait_with_output().unwrap();
        drop(keys);
        assert!(out.status.success(), "{label}: {out:?}");
        assert!(text(&out.stdout).contains("typed in\n"), "{label}: {out:?}");
        wait_for(&ctx, "the shell ends", || {
            ephemeral_status(&ctx, "dbg", &shell, ".state.terminated.exitCode") == "0"
        });
        assert_eq!(ctx.kubectl_ok(&["logs", "dbg", "-c", &shell]), "typed in\n");

        // A taken name: the API server's validation, through kubectl.
        let out = run(
            &["debug", "dbg", "--image=busybox", "-c", "app", "--", "true"],
            None,
        );
        assert!(!out.status.success(), "{label}: {out:?}");
        let err = text(&out.stderr);
        assert!(err.contains("Duplicate value: \"app\""), "{label}: {err}");
    }
    // Never restarted, however long the pod runs on.
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(
        ephemeral_status(&ctx, "dbg", "debugger0", ".restartCount"),
        "0"
    );
    // A debugger still running dies with the pod.
    let out = kubectl(
        &ctx,
        &kubectls[0],
        &[
            "debug",
            "dbg",
            "--image=busybox",
            "-c",
            "last",
            "--",
            "sh",
            "-c",
            &format!("sleep 1000; : {m} last"),
        ],
        None,
    );
    assert!(out.status.success(), "{out:?}");
    wait_for(&ctx, "the last debugger runs", || {
        !ephemeral_status(&ctx, "dbg", "last", ".state.running.startedAt").is_empty()
    });
    ctx.kubectl_ok(&["delete", "pod", "dbg", "--grace-period=1"]);
    let (app, last) = (format!("{m} app"), format!("{m} last"));
    wait_for(&ctx, "the app and the debugger are gone", || {
        !podvisor_testkit::all_processes()
            .iter()
            .any(|p| p.cmdline.contains(&app) || p.cmdline.contains(&last))
    });
    wait_for(&ctx, "the pod is gone", || {
        !ctx.kubectl(&["get", "pod", "dbg"]).status.success()
    });
}
