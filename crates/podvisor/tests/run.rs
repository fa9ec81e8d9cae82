//! `podvisor run` end to end: real processes under the process runtime, one short pod each.

use std::io::Write;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The tests that run pods need root (the process runtime's cgroups and mount namespaces): they
/// are `#[ignore]`d, and fail saying so when run without root anyway (without root, `podvisor
/// run` waits for ever on a container that cannot start).
fn require_root() {
    assert!(
        rustix::process::geteuid().is_root(),
        "needs root: this test is #[ignore]d unless run as root with --include-ignored (podvisor's process runtime needs cgroups and mount namespaces)"
    );
}

fn podvisor() -> Command {
    Command::new(env!("CARGO_BIN_EXE_podvisor"))
}

/// Starts `podvisor run - ARGS...` with `manifest` written to its stdin, output piped.
pub(crate) fn spawn_run(manifest: &str, args: &[&str]) -> std::process::Child {
    let mut child = podvisor()
        .arg("run")
        .arg("-")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("podvisor starts");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(manifest.as_bytes())
        .unwrap();
    child
}

/// Runs `podvisor run - ARGS...` with `manifest` on stdin.
fn run(manifest: &str, args: &[&str]) -> Output {
    spawn_run(manifest, args).wait_with_output().unwrap()
}

fn json_lines(out: &Output) -> Vec<serde_json::Value> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}")))
        .collect()
}

fn last_status(lines: &[serde_json::Value]) -> &serde_json::Value {
    lines
        .iter()
        .rev()
        .find(|l| l["kind"] == "status")
        .expect("a status line")
}

fn pod(name: &str, policy: &str, script: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}}}\nspec:\n  restartPolicy: {policy}\n  \
         terminationGracePeriodSeconds: 5\n  containers:\n  - name: app\n    image: busybox\n    \
         command: [sh, -c, '{script}']\n"
    )
}

#[test]
fn bad_input_exits_2_before_running_anything() {
    let out = run(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: Bad_Name}\nspec:\n  containers: []\n",
        &[],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.starts_with("-: The Pod \"Bad_Name\" is invalid: "),
        "{err}"
    );
}

#[test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
fn a_pod_that_succeeds_ends_the_run_with_0() {
    require_root();
    let out = run(&pod("ok", "Never", "echo hi; exit 0"), &["-o", "json"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines = json_lines(&out);
    let last = last_status(&lines);
    assert_eq!(last["phase"], "Succeeded");
    assert_eq!(last["status_text"], "Completed");
    assert!(last.get("pod").is_none(), "one pod: the simulate format");
    // The pod's IP once its sandbox is up (a process pod shares the host's network).
    assert_eq!(last["podIP"], "127.0.0.1", "{last}");
    let reasons: Vec<&str> = lines
        .iter()
        .filter(|l| l["kind"] == "event")
        .map(|l| l["reason"].as_str().unwrap())
        .collect();
    assert_eq!(reasons, ["Created", "Started"]);
    assert!(
        !String::from_utf8_lossy(&out.stdout).contains("| hi"),
        "JSON output carries no container output"
    );
    // Text output shows what the container wrote, prefixed with its name; --no-logs hides it.
    let text = run(&pod("ok", "Never", "echo hi; echo there >&2; exit 0"), &[]);
    assert_eq!(text.status.code(), Some(0));
    let stdout = String::from_utf8_lossy(&text.stdout);
    assert!(
        stdout.contains("\napp | hi\n") && stdout.contains("\napp | there\n"),
        "{stdout}"
    );
    assert!(stdout.contains("pod/ok IP 127.0.0.1\n"), "{stdout}");
    // What the container wrote comes before the status row that follows it in time.
    let hi = stdout.find("\napp | hi\n").unwrap();
    let completed = stdout.find("Completed").expect("the Completed row");
    assert!(hi < completed, "{stdout}");
    // The closing summary: the phase, how long it ran, each container's end.
    assert!(stdout.contains("\npod/ok Succeeded after "), "{stdout}");
    assert!(
        stdout.ends_with("  app: terminated Completed (exit 0), restarts 0\n"),
        "{stdout}"
    );
    let quiet = run(&pod("ok", "Never", "echo hi; exit 0"), &["--no-logs"]);
    assert!(!String::from_utf8_lossy(&quiet.stdout).contains("| hi"));
}

/// A Job runs as the pod of its template, and `run` says what it made of it (issue 33).
#[test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
fn a_job_runs_as_its_templates_pod() {
    require_root();
    let job = "apiVersion: batch/v1\nkind: Job\nmetadata: {name: once}\nspec:\n  template:\n    \
               spec:\n      restartPolicy: Never\n      containers:\n      - {name: job, image: \
               busybox, command: [sh, -c, 'echo done']}\n";
    let out = run(job, &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("-: Job/once: running one pod of its template; rollouts"),
        "{stderr}"
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("job | done"), "{stdout}");
}

#[test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
fn a_failed_pod_ends_the_run_with_1() {
    require_root();
    let manifest = format!(
        "{}---\n{}",
        pod("bad", "Never", "exit 3"),
        pod("good", "OnFailure", "exit 0")
    );
    let out = run(&manifest, &["-o", "json"]);
    assert_eq!(out.status.code(), Some(1));
    let lines = json_lines(&out);
    let bad: Vec<_> = lines
        .iter()
        .filter(|l| l["pod"] == "bad")
        .cloned()
        .collect();
    let last = last_status(&bad);
    assert_eq!(last["phase"], "Failed");
    assert_eq!(last["containers"][0]["exit_code"], 3);
}

#[test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
fn sigterm_deletes_the_pods_gracefully() {
    require_root();
    let child = spawn_run(
        &pod("sleeper", "Always", "sleep 600"),
        &["--output", "text"],
    );
    std::thread::sleep(Duration::from_secs(2));
    let pid = child.id().to_string();
    let killed = Command::new("kill").args(["-TERM", &pid]).status().unwrap();
    assert!(killed.success());
    let start = Instant::now();
    let out = child.wait_with_output().unwrap();
    assert!(start.elapsed() < Duration::from_secs(10));
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "healthy when interrupted: {text}"
    );
    assert!(text.starts_with("NAME      READY   STATUS"), "{text}");
    assert!(
        text.contains("Normal Killing pod/sleeper [app] Stopping container app"),
        "{text}"
    );
    assert!(text.contains("Terminating"), "{text}");
    // The graceful delete, appended: one line at its start, one at its end.
    assert!(
        text.contains("\ndeleting pod/sleeper: grace period 5s\n"),
        "{text}"
    );
    assert!(text.contains("\ndeleted pod/sleeper after "), "{text}");
    assert!(
        !text.contains("left…"),
        "no countdown when not a terminal: {text}"
    );
    assert!(
        text.contains("\n  app: terminated Error (exit 143), restarts 0\n"),
        "{text}"
    );
}

/// A crash loop's BackOff events are folded when appended: the first, then the 2nd, 4th…
/// with their count, never every repeat.
#[test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
fn back_off_events_are_folded() {
    require_root();
    let child = spawn_run(
        &pod("crashy", "Always", "echo boom; exit 1"),
        &["--output", "text", "--max-restart-period", "1s"],
    );
    std::thread::sleep(Duration::from_secs(12));
    let pid = child.id().to_string();
    assert!(
        Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success()
    );
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let back_offs: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("BackOff pod/crashy [app] Back-off restarting failed container app"))
        .collect();
    assert!(back_offs.len() >= 2, "{text}");
    assert!(!back_offs[0].contains("(x"), "{text}");
    assert!(back_offs[1].ends_with(" (x2)"), "{text}");
    for (line, n) in back_offs.iter().skip(1).zip([2, 4, 8, 16, 32]) {
        assert!(line.ends_with(&format!(" (x{n})")), "{text}");
    }
    // Each run's output sits between its start and the row saying it exited.
    let lines: Vec<&str> = text.lines().collect();
    let booms: Vec<usize> = (0..lines.len())
        .filter(|&k| lines[k] == "app | boom")
        .collect();
    assert!(booms.len() >= 2, "{text}");
    for k in booms {
        let before = lines[k - 1];
        assert!(
            before.contains(" Running ") || before.contains("Started container app"),
            "line {k}: {text}"
        );
        if k + 1 < lines.len() && !lines[k + 1].starts_with("Deleting") {
            assert!(lines[k + 1].contains(" Error "), "line {k}: {text}");
        }
    }
    assert!(text.contains("\npod/crashy "), "a summary: {text}");
    assert!(text.contains("\n  app: "), "{text}");
}

#[test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
fn configmaps_and_secrets_come_from_the_same_file() {
    require_root();
    let out_file = std::env::temp_dir().join(format!("pv-run-cfg-{}", std::process::id()));
    let manifest = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: settings}}\ndata: {{mode: fast}}\n---\n\
         apiVersion: v1\nkind: Secret\nmetadata: {{name: creds}}\nstringData: {{token: t0p}}\n---\n\
         apiVersion: v1\nkind: Pod\nmetadata: {{name: cfg}}\nspec:\n  restartPolicy: Never\n  \
         containers:\n  - name: app\n    image: busybox\n    \
         command: [sh, -c, 'echo $MODE $(cat /secret/token) > {out}']\n    \
         env: [{{name: MODE, valueFrom: {{configMapKeyRef: {{name: settings, key: mode}}}}}}]\n    \
         volumeMounts: [{{name: s, mountPath: /secret}}]\n  \
         volumes: [{{name: s, secret: {{secretName: creds}}}}]\n",
        out = out_file.display()
    );
    let out = run(&manifest, &["-o", "json"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let written = std::fs::read_to_string(&out_file).unwrap();
    let _ = std::fs::remove_file(&out_file);
    assert_eq!(written.trim(), "fast t0p");
    assert!(!String::from_utf8_lossy(&out.stdout).contains("t0p"));

    // An invalid Secret is refused before anything runs.
    let bad = "apiVersion: v1\nkind: Secret\nmetadata: {name: tls}\ntype: kubernetes.io/tls\n";
    let out = run(bad, &[]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr).trim(),
        "-: The Secret \"tls\" is invalid: [data[tls.crt]: Required value, data[tls.key]: Required value]"
    );
}

/// Errors about a manifest begin with its name as given on the command line (`-` for stdin),
/// whether the decoder or validation finds them.
#[test]
fn manifest_errors_begin_with_the_files_name() {
    let dir = std::env::temp_dir().join(format!("podvisor-run-names-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let typed = dir.join("app.yaml");
    std::fs::write(
        &typed,
        "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec:\n  containers: [{name: c, image: busybox, command: [true]}]\n",
    )
    .unwrap();
    let invalid = dir.join("bad.yaml");
    std::fs::write(
        &invalid,
        "apiVersion: v1\nkind: Pod\nmetadata: {name: Bad_Name}\nspec:\n  containers: []\n",
    )
    .unwrap();
    let out = podvisor()
        .arg("run")
        .arg(&typed)
        .arg(&invalid)
        .arg(dir.join("missing.yaml"))
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = err.lines().collect();
    assert!(
        lines[0].starts_with(&format!("{}: document 1, line 5: ", typed.display())),
        "{err}"
    );
    assert!(
        lines[1].starts_with(&format!(
            "{}: The Pod \"Bad_Name\" is invalid: ",
            invalid.display()
        )),
        "{err}"
    );
    assert!(
        lines[2].starts_with(&format!(
            "{}: reading the file: ",
            dir.join("missing.yaml").display()
        )),
        "{err}"
    );
    let out = run(
        "kind: Pod\napiVersion: v1\nmetadata: {name: a}\nspec: {containers: 1}\n",
        &[],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.starts_with("-: document 1"), "{err}");
}

/// A pod that needs a feature gate which is off: the error, then the exact flag to pass and
/// the commands that take it.
#[test]
fn a_gated_field_says_which_flag_to_pass() {
    let example = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/restart-all.yaml"
    );
    let out = podvisor().args(["run", example]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(
            "hint: the restart rule action RestartAllContainers needs the alpha feature gate \
             RestartAllContainersOnContainerExits: pass \
             --feature-gates=RestartAllContainersOnContainerExits=true to podvisor run, serve, \
             simulate, validate, lint or apply"
        ),
        "{err}"
    );
}
