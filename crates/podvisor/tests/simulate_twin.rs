//! `simulate` without a script reads what the manifest's commands do (issue 33), and the twin
//! check: for manifests of the shapes it reads, `simulate` and a real `podvisor run` of the
//! same pod give the same timeline — the same events (a repeated one folded, as kubectl folds
//! it) and READY changes in the same order, each within [`TOLERANCE`] of the other, and the
//! same end.

use std::process::{Command, Output};
use std::time::Duration;

/// How far apart the real and the simulated time of one line may be: a real start takes some
/// tens of milliseconds more than the virtual one, and they add up over a crash loop.
const TOLERANCE: f64 = 2.0;

fn podvisor() -> Command {
    Command::new(env!("CARGO_BIN_EXE_podvisor"))
}

fn lines(out: &Output) -> Vec<serde_json::Value> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}")))
        .collect()
}

/// A file of this test process's own holding `text` (removed when dropped).
struct Temp(std::path::PathBuf);

impl Temp {
    fn new(text: &str) -> Temp {
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let path = std::env::temp_dir().join(format!(
            "podvisor-simulate-twin-{}-{n}.yaml",
            std::process::id()
        ));
        std::fs::write(&path, text).unwrap();
        Temp(path)
    }

    fn path(&self) -> &str {
        self.0.to_str().unwrap()
    }
}

impl Drop for Temp {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// `podvisor simulate` of `manifest` (written to a file) with `args`.
fn simulate(manifest: &str, args: &[&str]) -> Output {
    let file = Temp::new(manifest);
    let out = podvisor()
        .arg("simulate")
        .arg(file.path())
        .args(args)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

const CRASH_LOOP: &str = "apiVersion: v1\nkind: Pod\nmetadata: {name: crashy}\nspec:\n  \
    terminationGracePeriodSeconds: 2\n  containers:\n  - name: app\n    image: busybox\n    \
    command: [sh, -c, 'sleep 1; exit 1']\n";

fn started_at(lines: &[serde_json::Value]) -> Vec<f64> {
    lines
        .iter()
        .filter(|l| l["kind"] == "event" && l["reason"] == "Started")
        .map(|l| l["t"].as_f64().unwrap())
        .collect()
}

#[test]
fn simulate_without_a_script_shows_a_crash_loop_from_its_command() {
    let out = simulate(CRASH_LOOP, &["--for", "2m"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.starts_with("inferred: app runs 1s then exits 1 (from \"sleep 1; exit 1\")\n"),
        "{text}"
    );
    assert!(text.contains("CrashLoopBackOff"), "{text}");
    assert!(
        text.ends_with("  120.000s  end of the simulation (nothing happened after 115s)\n"),
        "{text}"
    );
    // The default curve: a run of 1 s, restarted at once, then after 10, 20 and 40 s.
    let json = lines(&simulate(CRASH_LOOP, &["--for", "2m", "-o", "json"]));
    assert_eq!(started_at(&json), [0.0, 1.0, 12.0, 33.0, 74.0]);
    assert_eq!(json[0]["kind"], "note");
    assert_eq!(json[0]["note"], "inferred");
    assert_eq!(json[0]["container"], "app");
    let last = json.last().unwrap();
    assert_eq!((&last["kind"], &last["t"]), (&"end".into(), &120.0.into()));
    let backoffs = json.iter().filter(|l| l["reason"] == "BackOff").count();
    assert!(backoffs >= 3, "{json:?}");
    // A script still wins: a container that never exits has no restarts.
    let script = Temp::new("containers: {app: {runs: [{}]}}");
    let scripted = lines(&simulate(
        CRASH_LOOP,
        &["--for", "2m", "-o", "json", "--script", script.path()],
    ));
    assert_eq!(started_at(&scripted), [0.0]);
    assert_eq!(scripted[0]["note"], "scripted");
}

#[test]
fn simulate_lists_what_it_assumed() {
    let manifest = "apiVersion: v1\nkind: Pod\nmetadata: {name: web}\nspec:\n  containers:\n  \
        - name: web\n    image: nginx\n    command: [nginx, -g, 'daemon off;']\n    \
        readinessProbe: {httpGet: {port: 80}}\n";
    let out = simulate(manifest, &["--for", "5m"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.starts_with(
            "assumed: web runs until stopped (nginx: unknown command)\nassumed: web readiness \
             probe succeeds (httpGet: a server the simulator cannot model)\n"
        ),
        "{text}"
    );
    assert!(text.ends_with("  300.000s  end of the simulation (nothing happened after 0s)\n"));
}

// ----- the twin check -----

fn require_root() {
    assert!(
        rustix::process::geteuid().is_root(),
        "needs root: this test is #[ignore]d unless run as root with --include-ignored (podvisor's process runtime needs cgroups and mount namespaces)"
    );
}

/// A real `podvisor run -o json` of `manifest`; with `stop_after`, SIGTERM then (a pod that
/// never ends by itself).
fn run_real(manifest: &str, args: &[&str], stop_after: Option<Duration>) -> Vec<serde_json::Value> {
    let args: Vec<&str> = ["-o", "json"]
        .into_iter()
        .chain(args.iter().copied())
        .collect();
    let child = crate::run::spawn_run(manifest, &args);
    if let Some(after) = stop_after {
        std::thread::sleep(after);
        let pid = child.id().to_string();
        assert!(
            Command::new("kill")
                .args(["-TERM", &pid])
                .status()
                .unwrap()
                .success()
        );
    }
    let out = child.wait_with_output().unwrap();
    lines(&out)
}

/// The timeline's comparable lines before `until`: events (repeats folded) and READY changes,
/// as (what, t).
fn comparable(lines: &[serde_json::Value], until: f64) -> Vec<(String, f64)> {
    let mut out: Vec<(String, f64)> = Vec::new();
    let mut ready = String::new();
    for l in lines {
        let t = l["t"].as_f64().unwrap_or(0.0);
        if t >= until {
            break;
        }
        let what = match l["kind"].as_str() {
            Some("event") => format!("event {} [{}]", l["reason"], l["container"]),
            Some("status") if l["ready"].as_str() != Some(ready.as_str()) => {
                ready = l["ready"].as_str().unwrap_or_default().to_string();
                format!("READY {ready}")
            }
            _ => continue,
        };
        if out.last().is_some_and(|(last, _)| *last == what) {
            continue; // A repeat, as kubectl folds it.
        }
        out.push((what, t));
    }
    out
}

fn assert_twins(real: &[serde_json::Value], sim: &[serde_json::Value], until: f64) {
    let (r, s) = (comparable(real, until), comparable(sim, until));
    let names = |v: &[(String, f64)]| v.iter().map(|(w, _)| w.clone()).collect::<Vec<_>>();
    assert_eq!(names(&r), names(&s), "real {r:?}\nsimulated {s:?}");
    for ((what, tr), (_, ts)) in r.iter().zip(&s) {
        assert!(
            (tr - ts).abs() <= TOLERANCE,
            "{what}: real at {tr}s, simulated at {ts}s\nreal {r:?}\nsimulated {s:?}"
        );
    }
}

fn last_status(lines: &[serde_json::Value]) -> &serde_json::Value {
    lines
        .iter()
        .rev()
        .find(|l| l["kind"] == "status")
        .expect("a status line")
}

#[test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
fn twin_a_crash_loop_read_from_its_command() {
    require_root();
    let args = ["--backoff", "reduced"];
    let real = run_real(CRASH_LOOP, &args, Some(Duration::from_secs(25)));
    let sim = lines(&simulate(
        CRASH_LOOP,
        &["--for", "25s", "-o", "json", "--backoff", "reduced"],
    ));
    // Starts at 0, 1 (at once), then after 1, 2, 4, 8 s of back-off: 0, 1, 3, 6, 11, 20.
    assert_eq!(started_at(&sim), [0.0, 1.0, 3.0, 6.0, 11.0, 20.0]);
    // Up to shortly before the interrupt (the real run's delete is not the simulation's).
    assert_twins(&real, &sim, 23.0);
}

#[test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
fn twin_an_init_container_then_an_app_that_succeeds() {
    require_root();
    let manifest = "apiVersion: v1\nkind: Pod\nmetadata: {name: steps}\nspec:\n  restartPolicy: \
        Never\n  initContainers:\n  - {name: setup, image: busybox, command: [sleep, '1']}\n  \
        containers:\n  - {name: app, image: busybox, command: [sh, -c, 'sleep 2; exit 0']}\n";
    let real = run_real(manifest, &[], None);
    let sim = lines(&simulate(manifest, &["--for", "1m", "-o", "json"]));
    assert_twins(&real, &sim, f64::MAX);
    assert_eq!(last_status(&sim)["phase"], "Succeeded");
    assert_eq!(last_status(&real)["phase"], "Succeeded");
}

#[test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
fn twin_a_readiness_probe_on_a_file_the_container_creates() {
    require_root();
    // The process runtime's /tmp is the host's: a file of this test's own, removed at the end.
    // The run ends between two probes (8.5 s; period 1 s): a probe racing the exit would fail
    // for real as the process goes, which is no inference's business.
    let file = format!("/tmp/podvisor-twin-ready-{}", std::process::id());
    let _ = std::fs::remove_file(&file);
    let manifest = format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: ready}}\nspec:\n  restartPolicy: Never\n  \
         containers:\n  - name: app\n    image: busybox\n    \
         command: [sh, -c, 'sleep 2; touch {file}; sleep 6.5']\n    \
         readinessProbe: {{exec: {{command: [cat, {file}]}}, periodSeconds: 1}}\n"
    );
    let sim_out = simulate(&manifest, &["--for", "1m"]);
    let text = String::from_utf8_lossy(&sim_out.stdout);
    assert!(
        text.contains(&format!(
            "inferred: app readiness probe fails until 2s, then succeeds (from \"cat {file}\")"
        )),
        "{text}"
    );
    let real = run_real(&manifest, &[], None);
    let _ = std::fs::remove_file(&file);
    let sim = lines(&simulate(&manifest, &["--for", "1m", "-o", "json"]));
    assert_twins(&real, &sim, f64::MAX);
    assert_eq!(last_status(&real)["phase"], "Succeeded");
}
