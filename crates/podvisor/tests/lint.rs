//! `podvisor lint` (issue 11 §2) on the shipped `examples/lint/` manifests: the text and JSON
//! reports, the exit codes, and — for every finding that names a `podvisor simulate` command —
//! that running that very command (through `sh`, as a user would paste it) shows the failure
//! the finding promises. No root needed: lint and simulate run nothing.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::Value;

/// The workspace root: the examples' paths in the commands are relative to it.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn podvisor(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_podvisor"))
        .args(args)
        .current_dir(root())
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn lint_json(args: &[&str]) -> (Value, Option<i32>) {
    let mut all = vec!["lint", "--output", "json"];
    all.extend_from_slice(args);
    let out = podvisor(&all);
    let json = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}\n{}",
            stdout(&out),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (json, out.status.code())
}

/// `(id, path)` of every finding.
fn ids_and_paths(report: &Value) -> Vec<(String, String)> {
    report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["id"].as_str().unwrap().to_owned(),
                f["path"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

#[test]
fn lint_text_reads_like_a_compiler_and_exits_1_on_errors() {
    let out = podvisor(&["lint", "examples/lint/web.yaml", "--start-time", "45s"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let text = stdout(&out);
    for header in [
        "examples/lint/web.yaml:doc1: error[PL001 liveness-shorter-than-start]: Pod/web spec.containers[0].livenessProbe",
        "examples/lint/web.yaml:doc1: warning[PL003 liveness-same-as-readiness]: Pod/web spec.containers[0].livenessProbe",
        "examples/lint/web.yaml:doc1: warning[PL004 timeout-not-below-period]: Pod/web spec.containers[0].readinessProbe.timeoutSeconds",
        "examples/lint/web.yaml:doc1: error[PL005 prestop-longer-than-grace]: Pod/web spec.containers[0].lifecycle.preStop.exec",
        "examples/lint/web.yaml:doc1: error[PL007 probe-port-name-undeclared]: Pod/web spec.initContainers[0].readinessProbe.httpGet.port",
        "examples/lint/web.yaml:doc1: warning[PL010 sidecar-without-startup-probe]: Pod/web spec.initContainers[0]",
    ] {
        assert!(
            text.contains(&format!("{header}\n")),
            "missing {header:?} in\n{text}"
        );
    }
    assert!(text.contains("  why: ") && text.contains("  fix: ") && text.contains("  see: echo '"));
    assert!(
        text.ends_with("lint: 3 errors, 3 warnings, 0 infos; 1 object linted in 1 file\n"),
        "{text}"
    );
    // Without --start-time PL001 has nothing to compare with.
    let out = podvisor(&["lint", "examples/lint/web.yaml"]);
    assert!(!stdout(&out).contains("PL001"), "{}", stdout(&out));
}

#[test]
fn lint_json_lints_workload_templates_and_skips_other_kinds() {
    let (report, code) = lint_json(&["examples/lint/workloads.yaml"]);
    assert_eq!(code, Some(1), "{report:#}");
    assert_eq!(report["version"], 1);
    assert_eq!(
        ids_and_paths(&report),
        [
            ("PL009", "spec.template.spec.containers[0].readinessProbe"),
            (
                "PL006",
                "spec.jobTemplate.spec.template.spec.containers[0].livenessProbe"
            ),
            ("PL000", "spec.template.spec.restartPolicy"),
        ]
        .map(|(a, b)| (a.to_owned(), b.to_owned()))
    );
    let f = &report["findings"];
    assert_eq!(f[0]["kind"], "Deployment");
    assert_eq!(f[0]["level"], "warning");
    assert!(
        f[0]["message"]
            .as_str()
            .unwrap()
            .contains("40 pods: 20.0 processes/s"),
        "{f:#}"
    );
    assert_eq!(f[1]["name"], "report");
    assert_eq!(f[1]["document"], 2);
    assert!(
        f[1]["simulate"]["command"]
            .as_str()
            .unwrap()
            .contains("--pod report")
    );
    assert_eq!(f[2]["level"], "error");
    assert_eq!(
        f[2]["message"],
        "spec.template.spec.restartPolicy: Required value: valid values: \"OnFailure\", \"Never\""
    );
    assert_eq!(report["skipped"][0]["kind"], "Service");
    assert_eq!(report["skipped"][0]["document"], 4);
    assert_eq!(
        report["summary"],
        serde_json::json!({"errors": 1, "warnings": 2, "infos": 0, "objects": 3, "skipped": 1, "files": 1})
    );
    // --pods: the same Deployment counted as 3 pods stays under the limit.
    let (few, _) = lint_json(&["examples/lint/workloads.yaml", "--pods", "3"]);
    assert!(
        !ids_and_paths(&few).iter().any(|(id, _)| id == "PL009"),
        "{few:#}"
    );
}

#[test]
fn lint_explains_a_refused_success_threshold_instead_of_the_bare_error() {
    let (report, code) = lint_json(&["examples/lint/batch.yaml"]);
    assert_eq!(code, Some(1));
    assert_eq!(
        ids_and_paths(&report),
        [
            ("PL011", "spec.restartPolicy"),
            ("PL008", "spec.containers[0].livenessProbe.successThreshold"),
            ("PL002", "spec.containers[0].livenessProbe"),
        ]
        .map(|(a, b)| (a.to_owned(), b.to_owned()))
    );
}

#[test]
fn lint_exit_codes_0_for_warnings_2_for_unreadable_input() {
    // Only warnings (PL011): 0.
    let out = podvisor(&["lint", "examples/crashloop.yaml"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(stdout(&out).contains("warning[PL011"));
    let out = podvisor(&["lint", "examples/hello.yaml"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(stdout(&out).contains("lint: 0 errors, 0 warnings, 0 infos"));

    let dir = std::env::temp_dir().join(format!("pv-lint-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // Only an info (PL012): 0.
    let info = dir.join("info.yaml");
    std::fs::write(
        &info,
        "apiVersion: v1\nkind: Pod\nmetadata: {name: slow}\nspec:\n  containers:\n  - name: app\n    image: app\n    command: [app]\n    startupProbe: {tcpSocket: {port: 8080}, failureThreshold: 30}\n    livenessProbe: {tcpSocket: {port: 8080}, initialDelaySeconds: 60}\n",
    )
    .unwrap();
    let out = podvisor(&["lint", info.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(
        stdout(&out).contains(": info[PL012 initial-delay-with-startup-probe]: Pod/slow spec.containers[0].livenessProbe.initialDelaySeconds\n"),
        "{}",
        stdout(&out)
    );
    assert!(stdout(&out).contains("lint: 0 errors, 0 warnings, 1 info;"));
    let broken = dir.join("broken.yaml");
    std::fs::write(&broken, "apiVersion: v1\nkind: Pod\nmetadata: {name: [\n").unwrap();
    let missing = dir.join("missing.yaml");
    for (args, says) in [
        (vec![broken.to_str().unwrap()], "syntax error"),
        (vec![missing.to_str().unwrap()], "reading"),
        (
            vec!["examples/hello.yaml", "--start-time", "soon"],
            "--start-time",
        ),
        (vec!["examples/hello.yaml", "--pods", "0"], "--pods"),
    ] {
        let mut all = vec!["lint"];
        all.extend(args.iter().copied());
        let out = podvisor(&all);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    }
    // An unreadable file does not hide the others' findings.
    let (report, code) = lint_json(&[missing.to_str().unwrap(), "examples/lint/batch.yaml"]);
    assert_eq!(code, Some(2));
    assert_eq!(report["findings"].as_array().unwrap().len(), 3);
    assert!(
        report["unreadable"][0]["message"]
            .as_str()
            .unwrap()
            .contains("reading")
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Runs a finding's `see:` command as printed, with this build's `podvisor` first on `PATH`.
fn run_hint(command: &str) -> String {
    let bin_dir = Path::new(env!("CARGO_BIN_EXE_podvisor")).parent().unwrap();
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = Command::new("sh")
        .args(["-c", command])
        .env("PATH", path)
        .current_dir(root())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{command}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout(&out)
}

/// The lines of a timeline that contain `needle`.
fn lines_with<'a>(timeline: &'a str, needle: &str) -> Vec<&'a str> {
    timeline.lines().filter(|l| l.contains(needle)).collect()
}

/// Checks that a timeline shows what the finding of rule `id` promised.
fn assert_shows(id: &str, finding: &Value, timeline: &str) {
    let container = finding["message"]
        .as_str()
        .and_then(|m| m.split('"').nth(1))
        .unwrap_or_default()
        .to_owned();
    let killed_for_liveness = lines_with(timeline, "failed liveness probe, will be restarted");
    match id {
        // Killed before it could start, every run: restarts, then CrashLoopBackOff.
        "PL001" | "PL002" => {
            assert!(killed_for_liveness.len() >= 3, "{timeline}");
            assert!(timeline.contains("CrashLoopBackOff"), "{timeline}");
        }
        // Out of service first (readiness), then restarted (liveness).
        "PL003" => {
            let unready = timeline
                .find(&format!("[{container}] Readiness probe failed"))
                .expect("a readiness failure");
            let killed = timeline
                .find("failed liveness probe, will be restarted")
                .expect("a liveness kill");
            assert!(unready < killed, "{timeline}");
        }
        // The hook eats the grace period: the stop signal comes with the 2 s minimum, then
        // SIGKILL.
        "PL005" => {
            assert!(
                timeline.contains(&format!("runtime [{container}] SIGTERM (SIGKILL in 2s)")),
                "{timeline}"
            );
            assert!(
                timeline.contains(&format!("runtime [{container}] SIGKILL")),
                "{timeline}"
            );
        }
        // Killed once, never restarted, the pod Failed.
        "PL006" => {
            assert!(timeline.contains("event Normal  Killing"), "{timeline}");
            assert!(timeline.contains(" Failed "), "{timeline}");
            let restarts: Vec<_> = lines_with(timeline, "Started container");
            assert_eq!(restarts.len(), 1, "{timeline}");
        }
        // A readiness probe on an unresolvable port: running, never ready.
        "PL007" => {
            assert!(
                timeline.contains(&format!("{container}=running")),
                "{timeline}"
            );
            assert!(
                !timeline.contains(&format!("{container}=running,ready")),
                "{timeline}"
            );
        }
        // Completed, restarted, CrashLoopBackOff; never Succeeded.
        "PL011" => {
            assert!(timeline.contains("terminated(Completed,0)"), "{timeline}");
            assert!(timeline.contains("CrashLoopBackOff"), "{timeline}");
            assert!(!timeline.contains("Succeeded"), "{timeline}");
        }
        other => panic!("no check for the simulate command of {other}"),
    }
}

#[test]
fn every_simulate_command_lint_prints_shows_the_failure() {
    let mut checked = Vec::new();
    for args in [
        vec!["examples/lint/web.yaml", "--start-time", "45s"],
        vec!["examples/lint/web.yaml"],
        vec!["examples/lint/workloads.yaml"],
        vec!["examples/lint/batch.yaml"],
    ] {
        let (report, _) = lint_json(&args);
        for f in report["findings"].as_array().unwrap() {
            let Some(command) = f["simulate"]["command"].as_str() else {
                continue;
            };
            let id = f["id"].as_str().unwrap();
            let timeline = run_hint(command);
            assert_shows(id, f, &timeline);
            checked.push(id.to_owned());
        }
    }
    checked.sort();
    checked.dedup();
    assert_eq!(
        checked,
        [
            "PL001", "PL002", "PL003", "PL005", "PL006", "PL007", "PL011"
        ],
        "the rules whose failures the simulator shows"
    );
}

#[test]
fn simulate_runs_a_workload_template_chosen_by_name() {
    let out = podvisor(&[
        "simulate",
        "examples/lint/workloads.yaml",
        "--pod",
        "api",
        "--for",
        "5s",
    ]);
    assert!(out.status.success(), "{out:?}");
    let text = stdout(&out);
    assert!(text.contains("Started container api"), "{text}");
    assert!(!text.contains("report"), "{text}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("Service/api holds no pod template"));
    let none = podvisor(&["simulate", "examples/lint/workloads.yaml", "--pod", "nope"]);
    assert_eq!(none.status.code(), Some(2));
}

/// A manifest that needs a feature gate is invalid without it (PL000, the API server's
/// message) and lints clean with `--feature-gates`, as `validate` and `serve` take them.
#[test]
fn lint_validates_with_the_feature_gates_given() {
    let (json, code) = lint_json(&["examples/restart-all.yaml"]);
    assert_eq!(code, Some(1), "{json}");
    assert!(
        json.to_string()
            .contains("Unsupported value: \\\"RestartAllContainers\\\""),
        "{json}"
    );
    let (json, code) = lint_json(&[
        "--feature-gates",
        "RestartAllContainersOnContainerExits=true",
        "examples/restart-all.yaml",
    ]);
    assert_eq!(code, Some(0), "{json}");
    let out = podvisor(&[
        "lint",
        "--feature-gates",
        "Nope=true",
        "examples/restart-all.yaml",
    ]);
    assert_eq!(out.status.code(), Some(2));
}
