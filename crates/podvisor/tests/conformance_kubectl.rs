//! The scenarios of `../shared/spec/conformance-examples.md` through the real kubectl (issue 4):
//! ONE `podvisor serve` for the whole file, shared by every scenario, each running in its own
//! thread (distinct pod names, ports and scratch paths), the pods driven only through
//! the kubectl on PATH (`podvisor_testkit::kubectl`). Manifests are under `tests/conformance/` (verbatim from the document
//! where it gives them); the event log and its predicates are `conformance_support`'s.
//!
//! The harness operations of section 0.1, mapped onto kubectl:
//! - `CREATE`: `kubectl create -f -`, after a watch on the pod's name is established.
//! - `GET`: a watch, `kubectl get pods --field-selector metadata.name=NAME -w -o json
//!   --output-watch-events`, started before `CREATE` (every write of the object is an observed
//!   update, each with the time the harness read it); `kubectl get pod NAME -o json` where one
//!   read is needed (not found = gone). The final status of a deleted pod (0.8) is the object of
//!   the watch's `DELETED` event.
//! - `LIST(labelSelector)`: `kubectl get pods -l SELECTOR -o json` (and a label-selected watch).
//! - `LOGS`: `kubectl logs NAME -c C [--previous]`.
//! - `DELETE(pod, N)`: `kubectl delete pod NAME --grace-period=N --wait=false` (`--force` with
//!   0, which kubectl otherwise turns into 1), then the pod is gone once the watch reported
//!   `DELETED` and `kubectl get` says `NotFound`.
//! - `UPDATE`: `kubectl patch pod NAME --type=merge -p ...` for the spec, and `kubectl patch pod
//!   NAME --subresource=status --type=strategic -p ...` for readiness-gate conditions (the patch
//!   upstream sends: a merge patch would replace the whole `conditions` list).
//! - `EVENTS`: `kubectl get events --field-selector involvedObject.name=NAME -o json`.
//! - The event log `/tmp/kpl/sNN/ev.log`: podvisor mounts the emptyDir privately, so the file is
//!   `<state>/pods/<uid>/volumes/scratch/ev.log` (uid from `kubectl get pod NAME -o
//!   jsonpath={.metadata.uid}`), hard-linked out of the emptyDir as soon as it appears (the
//!   emptyDir goes with the pod), so every line ever appended stays readable.
//!
//! The document names UPDATE scenarios (65, 73) without giving them; `u65` and `u73` here
//! translate the upstream tests they stand for ("should allow activeDeadlineSeconds to be
//! updated", "should support pod readiness gates") so that UPDATE is exercised too.
//!
//! Two tests run the scenarios, one after the other: against `serve` with the process runtime,
//! and against `serve --runtime oci` (runc containers from the `busybox` image, a network
//! namespace and pod IP per pod: `oci_run.rs` says how section 0 maps onto that run).
//!
//! Needs root (`#[ignore]`d unless run as root with `--include-ignored`) and a kubectl (on PATH, or `PODVISOR_KUBECTL`);
//! the oci run also runc, the CNI plugins, docker-registry, skopeo, python3 and dash
//! (`scripts/install-test-deps`).
//! The modules under `conformance_kubectl/`: `harness` (serve, watches, pods through kubectl,
//! readers of the Pod object), `oci_run` (the oci run's image, registry and manifests), `checks` (the check sequences the scenarios share, named after
//! what upstream asserts), and the scenarios by area: `examples` (the document's own),
//! `init_sidecar`, `probes`, `lifecycle`.
//!
//! `PODVISOR_CONFORMANCE_ONLY=s05,s60` runs only the named scenarios. At the end every pod must
//! be gone and no process of the state directory (shims, containers) may be left; `serve` is
//! stopped, everything carrying the state directory in its command line killed and the
//! directories removed, passing or not. Up to 16 scenarios run at once on the 2 cores; up to 3
//! that fail then are run once more on their own, and pass as `FLAKY` (printed with the first
//! failure) if they pass alone.

mod conformance_support;

#[path = "conformance_kubectl/checks.rs"]
mod checks;
#[path = "conformance_kubectl/examples.rs"]
mod examples;
#[path = "conformance_kubectl/harness.rs"]
mod harness;
#[path = "conformance_kubectl/init_sidecar.rs"]
mod init_sidecar;
#[path = "conformance_kubectl/lifecycle.rs"]
mod lifecycle;
#[path = "conformance_kubectl/oci_run.rs"]
mod oci_run;
#[path = "conformance_kubectl/probes.rs"]
mod probes;

use conformance_support::{require_root, secs};
use harness::{KUBECTL, Runtime, ScenarioFn, Server};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

// ----------------------------------------------------------------------------------------------
// The test

/// Every scenario, by id: the document's examples first, then the translations of the other
/// upstream tests, by area.
fn scenarios() -> Vec<(&'static str, ScenarioFn)> {
    [
        examples::SCENARIOS,
        init_sidecar::SCENARIOS,
        probes::SCENARIOS,
        lifecycle::SCENARIOS,
    ]
    .concat()
}

/// At most this many scenarios run at once (`PODVISOR_CONFORMANCE_JOBS`, default 16): most of
/// a scenario's time is waiting, but 2 cores shared by every scenario's pods and kubectls must
/// still keep probe and grace timings honest.
fn max_jobs() -> usize {
    std::env::var("PODVISOR_CONFORMANCE_JOBS")
        .ok()
        .and_then(|s| s.parse().ok())
        .filter(|&n| n > 0)
        .unwrap_or(16)
}

/// A counting semaphore for [`max_jobs`].
struct Slots {
    free: Mutex<usize>,
    freed: Condvar,
}

impl Slots {
    fn acquire(&self) {
        let mut free = self.free.lock().unwrap();
        while *free == 0 {
            free = self.freed.wait(free).unwrap();
        }
        *free -= 1;
    }

    fn release(&self) {
        *self.free.lock().unwrap() += 1;
        self.freed.notify_one();
    }
}

/// At most this many failed scenarios are run again on their own.
const MAX_RETRIES: usize = 3;

/// Waits (20 s at most) until no pod and no process of the state directory but serve is left.
fn wait_until_idle(srv: &Server) {
    let deadline = Instant::now() + secs(20);
    while Instant::now() < deadline {
        let pods = srv.kubectl(&["get", "pods", "-o", "name"], None);
        if pods.stdout.is_empty() && srv.leftovers().is_empty() {
            return;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn panic_text(e: &Box<dyn std::any::Any + Send>) -> String {
    e.downcast_ref::<String>()
        .cloned()
        .or_else(|| e.downcast_ref::<&str>().map(|s| (*s).to_string()))
        .unwrap_or_else(|| "panicked".to_string())
}

#[test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
fn conformance_scenarios_through_kubectl() {
    run_all(Runtime::Process);
}

/// The same scenarios under `serve --runtime oci` (see `oci_run.rs`).
#[test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
fn conformance_scenarios_through_kubectl_oci() {
    run_all(Runtime::Oci);
}

/// One run at a time. The two runs could share the machine (an oci pod has a network
/// namespace of its own and no host scratch directory), but 2 cores running both runs' 16
/// scenarios at once (measured: 3.9 min for both, against about 4 min for each alone) make
/// start latencies of several seconds (oci starts wait for the node's serial image pulls)
/// that squeeze the scenarios' timing windows: a run after the other keeps them honest.
static ONE_RUN_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Every scenario against one `serve --runtime <runtime>`.
fn run_all(runtime: Runtime) {
    require_root("conformance_kubectl");
    let _one = ONE_RUN_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    assert!(
        KUBECTL.exists(),
        "{} is not installed (scripts/test installs it)",
        KUBECTL.display()
    );
    let only: Option<Vec<String>> = std::env::var("PODVISOR_CONFORMANCE_ONLY")
        .ok()
        .map(|s| s.split(',').map(|s| s.trim().to_string()).collect());
    // A failed scenario is reported once, at the end, with its timeline.
    let all = scenarios();
    let mut ids: Vec<&str> = all.iter().map(|(id, _)| *id).collect();
    ids.sort_unstable();
    let dup = ids.windows(2).find(|w| w[0] == w[1]);
    assert!(dup.is_none(), "scenario id used twice: {dup:?}");
    let ids: Vec<String> = ids.into_iter().map(str::to_string).collect();
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let scenario = std::thread::current()
            .name()
            .filter(|n| ids.iter().any(|id| id == n))
            .map(str::to_string);
        match scenario {
            Some(id) => eprintln!("{id}: FAILED (details at the end)"),
            None => default_hook(info),
        }
    }));
    let started = Instant::now();
    let srv = Server::start(runtime);
    let slots = Slots {
        free: Mutex::new(max_jobs()),
        freed: Condvar::new(),
    };
    let results: Vec<(&str, Duration, Result<(), String>)> = std::thread::scope(|s| {
        let srv = &srv;
        let slots = &slots;
        let handles: Vec<_> = all
            .iter()
            .filter(|(id, _)| only.as_ref().is_none_or(|o| o.iter().any(|x| x == id)))
            .map(|&(id, f)| {
                let h = std::thread::Builder::new()
                    .name(id.to_string())
                    .spawn_scoped(s, move || {
                        slots.acquire();
                        let t0 = Instant::now();
                        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(srv)));
                        slots.release();
                        (t0.elapsed(), r.map_err(|e| panic_text(&e)))
                    })
                    .unwrap();
                (id, h)
            })
            .collect();
        handles
            .into_iter()
            .map(|(id, h)| {
                let (took, r) = h.join().expect("the scenario thread catches its panics");
                (id, took, r)
            })
            .collect()
    });
    let mut results = results;
    // A scenario that failed under the load of all the others gets one more run on its own,
    // once everything else is gone: a real fault fails twice, a timing window squeezed by 2
    // busy cores does not. Flakes are reported; more than `MAX_RETRIES` failures are not
    // retried (that is a regression, not noise).
    let failed_ids: Vec<&str> = results
        .iter()
        .filter(|(_, _, r)| r.is_err())
        .map(|(id, _, _)| *id)
        .collect();
    let mut flaky = Vec::new();
    if !failed_ids.is_empty() && failed_ids.len() <= MAX_RETRIES {
        wait_until_idle(&srv);
        for id in failed_ids {
            let f = all.iter().find(|(i, _)| *i == id).map(|(_, f)| *f).unwrap();
            eprintln!("{id}: running it again on its own");
            let t0 = Instant::now();
            let retry = std::thread::scope(|s| {
                std::thread::Builder::new()
                    .name(id.to_string())
                    .spawn_scoped(s, || {
                        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(&srv)))
                            .map_err(|e| panic_text(&e))
                    })
                    .unwrap()
                    .join()
                    .expect("the scenario thread catches its panics")
            });
            let entry = results.iter_mut().find(|(i, _, _)| *i == id).unwrap();
            if retry.is_ok() {
                let first = entry.2.clone().err().unwrap_or_default();
                flaky.push(format!(
                    "{id}: failed with the others, passed alone:\n{first}"
                ));
                *entry = (id, t0.elapsed(), Ok(()));
            }
            wait_until_idle(&srv);
        }
    }
    let scenarios_took = started.elapsed();

    // Every pod is gone, and so is every process of the state directory but serve.
    let mut problems = Vec::new();
    let pods = srv.kubectl(&["get", "pods", "-o", "name"], None);
    let pods = String::from_utf8_lossy(&pods.stdout).trim().to_string();
    if !pods.is_empty() {
        problems.push(format!("pods left at the end: {pods}"));
    }
    let deadline = Instant::now() + secs(20);
    let mut left = srv.leftovers();
    while !left.is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
        left = srv.leftovers();
    }
    if !left.is_empty() {
        problems.push(format!("processes left 20 s after the last pod: {left:?}"));
    }
    let pulls = (runtime == Runtime::Oci).then(|| oci_run::pull_costs(&srv));
    srv.stop();
    let leaked = srv.leftovers();
    drop(srv);

    eprintln!("\nconformance scenarios through kubectl, --runtime {runtime:?}:");
    for (id, took, r) in &results {
        eprintln!(
            "  {id:5} {:6.1} s  {}",
            took.as_secs_f64(),
            if r.is_ok() { "ok" } else { "FAILED" }
        );
    }
    eprintln!(
        "  all scenarios {:.1} s, with serve's start and stop {:.1} s",
        scenarios_took.as_secs_f64(),
        started.elapsed().as_secs_f64()
    );
    if let Some(p) = pulls {
        eprintln!("  {p}");
    }
    for f in &flaky {
        eprintln!("FLAKY {f}");
    }
    if !leaked.is_empty() {
        problems.push(format!("processes still there after the kill: {leaked:?}"));
    }
    let failed: Vec<String> = results
        .iter()
        .filter_map(|(id, _, r)| r.as_ref().err().map(|e| format!("=== {id}: {e}")))
        .chain(problems)
        .collect();
    assert!(failed.is_empty(), "\n{}", failed.join("\n\n"));
}
