//! `podvisor serve` killed with SIGKILL 35 times in a row while pods run, and started again on
//! the same state directory after each kill: during pod creation (a `kubectl create` in flight,
//! a pod being started), during a termination (a `kubectl delete` in flight, a container
//! running its TERM trap), during a restart back-off, during an exec probe, and around the
//! death of a pod's shim: `victim`'s shim is killed while serve is down (the next serve finds
//! it dead) or while serve runs (serve is killed while it handles the loss).
//!
//! After every restart, once the node settles (each settling is timed): one process per
//! running container and no orphan or zombie (below), every acknowledged pod there, `long` and
//! every churn pod that stayed healthy still Ready since the same moment (no Ready flap), and
//! `victim` running one process again, with one restart and one `SandboxChanged` per shim
//! killed (its lost container killed, never left running beside the new one).
//!
//! The pods: `long` (runs for ever, writes its pid to a hostPath file at start, exec readiness
//! probe), `crash` (logs `start <pid>` and `crash <pid>` to a hostPath file and exits 3, under
//! the reduced back-off capped at 4 s) and `churn-N` pods the test creates and deletes through
//! kubectl (one delete in three forced). At the end, with serve running again:
//!
//! - no pod lost or duplicated: every pod whose `kubectl create` exited 0 exists and runs unless
//!   it was deleted; every pod whose `kubectl delete` exited 0 is gone; nothing else exists;
//!   one shim per pod, at most one main process per container;
//! - no container restarted by the agent's death: `long` keeps restartCount 0, its container ID,
//!   its pid (alive), one start, one `Started` event and no `Killing`; every `crash` instance
//!   ended by itself (each `start` line has its `crash` line, instances never overlap), its
//!   restartCount is its number of starts − 1, the loop goes on (no exit lost) and its
//!   back-off curve (immediate, 1 s, 2 s, 4 s, 4 s, ...) goes on across the kills; no churn
//!   container started twice;
//! - no orphan or zombie: every process carrying the test's marker is serve, a shim of a pod
//!   that exists, or a process below such a shim; none is a zombie.
//!
//! The kill moments come from a seeded generator: the seed is printed, and
//! `PODVISOR_STRESS_SEED=<n>` replays a run (`PODVISOR_STRESS_KILLS` changes the count; at most
//! `MAX_CHURN` churn pods live at once, so a long run does not pile them up). The last line is
//! a summary of the figures (`scripts/stress-restarts` runs it long).

#![allow(missing_docs)]

mod serve_common;

use podvisor_testkit::{Proc, alive};
use serde_json::Value;
use serve_common::{ServeCtx, kubectl_binary};
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::{Child, Output};
use std::time::{Duration, Instant};

const DEFAULT_KILLS: usize = 35;
/// At most this many churn pods may exist at once: beyond, a kill during a delete replaces
/// a kill during a create.
const MAX_CHURN: usize = 6;
/// How long the node may take to settle after a restart.
const RESTART_SETTLE: Duration = Duration::from_secs(30);
const DEFAULT_SEED: u64 = 0x0050_d715_0b5e_55ed;
/// Reduced back-off capped at 4 s, so the crash loop keeps turning during the test.
const SERVE_ARGS: &[&str] = &["--backoff", "reduced", "--max-restart-period", "4s"];
/// How long the final checks wait for the node to settle.
const SETTLE: Duration = Duration::from_secs(40);

/// splitmix64: small, seedable, good enough to pick delays.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    /// A duration between `lo` and `hi` milliseconds.
    fn millis(&mut self, lo: u64, hi: u64) -> Duration {
        Duration::from_millis(lo + self.below(hi - lo + 1))
    }
}

fn env_number(name: &str) -> Option<u64> {
    let text = std::env::var(name).ok()?;
    let text = text.trim();
    match text.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => text.parse().ok(),
    }
}

/// What the API told the test about a churn pod.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fate {
    /// `kubectl create` exited 0.
    Created,
    /// `kubectl create` failed (serve died under it): the pod may or may not exist.
    MaybeCreated,
    /// `kubectl delete` exited 0.
    Deleted,
    /// `kubectl delete` failed (serve died under it): the pod may be deleted or not.
    MaybeDeleted,
}

struct Stress {
    ctx: ServeCtx,
    rng: Rng,
    churn: BTreeMap<String, Fate>,
    long_dir: PathBuf,
    crash_dir: PathBuf,
    /// Each churn pod's container appends its pid to `<churn_dir>/<name>` when it starts.
    churn_dir: PathBuf,
    /// `long`'s container pid and ID, once it ran.
    long_pid: i32,
    long_id: String,
    /// The highest restartCount of `crash` seen so far.
    crash_restarts: i64,
    /// `victim` appends its pid to `<victim_dir>/pids` when it starts.
    victim_dir: PathBuf,
    /// `victim`'s UID (its shim's pod directory).
    victim_uid: String,
    /// How many times `victim`'s shim was killed.
    victim_kills: i64,
    /// How many of those kills were while serve ran (serve is killed a moment later).
    victim_kills_while_up: i64,
    /// `lastTransitionTime` of the Ready condition of each pod that became Ready and must stay
    /// so (`long`, and churn pods until someone deletes them).
    ready_since: BTreeMap<String, String>,
    /// How long each restarted serve took to answer, and then the node to settle.
    answered: Vec<Duration>,
    settled: Vec<Duration>,
    /// How many kills of each kind.
    kinds: BTreeMap<&'static str, usize>,
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

impl Stress {
    fn marker(&self) -> &str {
        &self.ctx.marker
    }

    fn long_manifest(&self) -> String {
        let dir = self.long_dir.display();
        format!(
            r#"apiVersion: v1
kind: Pod
metadata: {{name: long}}
spec:
  terminationGracePeriodSeconds: 5
  volumes:
  - name: data
    hostPath: {{path: {dir}, type: DirectoryOrCreate}}
  containers:
  - name: app
    image: busybox
    command: [sh, -c, ': {marker} long; echo $$$$ > {dir}/pid; echo start >> {dir}/starts; trap "exit 0" TERM; while true; do sleep 1; done']
    volumeMounts: [{{name: data, mountPath: {dir}}}]
    readinessProbe:
      exec: {{command: [sh, -c, 'sleep 0.3; test -s {dir}/pid']}}
      periodSeconds: 1
      timeoutSeconds: 5
"#,
            marker = self.marker()
        )
    }

    fn crash_manifest(&self) -> String {
        let dir = self.crash_dir.display();
        format!(
            r#"apiVersion: v1
kind: Pod
metadata: {{name: crash}}
spec:
  terminationGracePeriodSeconds: 2
  volumes:
  - name: data
    hostPath: {{path: {dir}, type: DirectoryOrCreate}}
  containers:
  - name: app
    image: busybox
    command: [sh, -c, ': {marker} crash; echo "start $$$$ $(date +%s.%N)" >> {dir}/log; sleep 0.4; echo "crash $$$$ $(date +%s.%N)" >> {dir}/log; exit 3']
    volumeMounts: [{{name: data, mountPath: {dir}}}]
"#,
            marker = self.marker()
        )
    }

    /// A pod that takes about a second to stop on SIGTERM (a kill lands inside its termination).
    fn churn_manifest(&self, name: &str) -> String {
        format!(
            r#"apiVersion: v1
kind: Pod
metadata: {{name: {name}}}
spec:
  terminationGracePeriodSeconds: 3
  containers:
  - name: app
    image: busybox
    command: [sh, -c, ': {marker} {name}; echo $$$$ >> {dir}/{name}; trap "sleep 1; exit 0" TERM; while true; do sleep 0.2; done']
    volumeMounts: [{{name: data, mountPath: {dir}}}]
  volumes:
  - name: data
    hostPath: {{path: {dir}, type: DirectoryOrCreate}}
"#,
            marker = self.marker(),
            dir = self.churn_dir.display()
        )
    }

    /// A pod whose shim the test kills: no probe (Ready as soon as it runs again).
    fn victim_manifest(&self) -> String {
        let dir = self.victim_dir.display();
        format!(
            r#"apiVersion: v1
kind: Pod
metadata: {{name: victim}}
spec:
  terminationGracePeriodSeconds: 2
  volumes:
  - name: data
    hostPath: {{path: {dir}, type: DirectoryOrCreate}}
  containers:
  - name: app
    image: busybox
    command: [sh, -c, ': {marker} victim; echo $$$$ >> {dir}/pids; trap "exit 0" TERM; while true; do sleep 1; done']
    volumeMounts: [{{name: data, mountPath: {dir}}}]
"#,
            marker = self.marker()
        )
    }

    /// SIGKILLs the shim of the pod `name` whose UID is `uid`; its pid.
    fn kill_shim_of(&self, name: &str, uid: &str) -> i32 {
        let pod_dir = format!("{}/pods/{uid}", self.ctx.state().display());
        let shim = self
            .ctx
            .processes()
            .into_iter()
            .find(|p| p.cmdline.contains(" shim ") && p.cmdline.contains(&pod_dir))
            .unwrap_or_else(|| panic!("no shim for {name}"));
        podvisor_testkit::signal(shim.pid, podvisor_testkit::Signal::KILL);
        shim.pid
    }

    /// Starts `kubectl ARGS` without waiting.
    fn kubectl_spawn(&self, args: &[&str]) -> Child {
        self.ctx
            .kubectl_command(args)
            .spawn()
            .expect("kubectl runs")
    }

    fn pods(&self) -> Vec<Value> {
        let out = self.ctx.kubectl_ok(&["get", "pods", "-o", "json"]);
        let list: Value = serde_json::from_str(&out).expect("a PodList");
        list["items"].as_array().cloned().unwrap_or_default()
    }

    fn pod(&self, name: &str) -> Option<Value> {
        let out = self.ctx.kubectl(&["get", "pod", name, "-o", "json"]);
        if !out.status.success() {
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(err.contains("NotFound"), "kubectl get pod {name}: {err}");
            return None;
        }
        Some(serde_json::from_slice(&out.stdout).expect("a Pod"))
    }

    fn read_pid(&self) -> Option<i32> {
        std::fs::read_to_string(self.long_dir.join("pid"))
            .ok()
            .and_then(|s| s.trim().parse().ok())
    }

    /// The cheap invariant checked after every restart: `long`'s container is the same process
    /// and started once.
    fn check_long_process(&self, when: &str) {
        assert_eq!(
            self.read_pid(),
            Some(self.long_pid),
            "{when}: long's pid changed"
        );
        assert!(alive(self.long_pid), "{when}: long's container died");
        let starts = std::fs::read_to_string(self.long_dir.join("starts")).unwrap_or_default();
        assert_eq!(starts.lines().count(), 1, "{when}: long started again");
    }

    /// `crash`'s log as (word, pid, time) triples.
    fn crash_log(&self) -> Vec<(String, i32, f64)> {
        std::fs::read_to_string(self.crash_dir.join("log"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| {
                let mut words = l.split_whitespace();
                let word = words.next()?.to_string();
                let pid = words.next()?.parse().ok()?;
                let time = words.next()?.parse().ok()?;
                Some((word, pid, time))
            })
            .collect()
    }

    fn kill_and_restart(&mut self, i: usize, what: &str) {
        let killed = Instant::now();
        let at = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        self.ctx.kill9();
        // The agent stays dead a moment: exits happen while nobody listens.
        let down = self.rng.millis(0, 300);
        std::thread::sleep(down);
        let took = self.ctx.start(SERVE_ARGS);
        eprintln!(
            "kill {:>2} at {at:.3}: {what}; down {} ms, serve answered after {} ms",
            i + 1,
            down.as_millis(),
            took.as_millis()
        );
        assert!(killed.elapsed() < Duration::from_secs(30));
        self.answered.push(took);
        self.check_long_process(&format!("after kill {}", i + 1));
        let settling = Instant::now();
        self.check_after_restart(i);
        self.settled.push(settling.elapsed());
    }

    /// Kill while no shim dies: the shim of `victim` is killed while serve is down (the next
    /// serve finds it dead), or while serve runs, which is killed a moment later (while it
    /// handles the loss: kills what is left, records the exits, makes a new sandbox).
    fn kill_victim_shim(&mut self, i: usize, while_down: bool) {
        let what = if while_down {
            self.ctx.kill9();
            let shim = self.kill_shim_of("victim", &self.victim_uid);
            format!("victim's shim {shim} killed while serve was down")
        } else {
            let shim = self.kill_shim_of("victim", &self.victim_uid);
            self.victim_kills_while_up += 1;
            let delay = self.rng.millis(0, 600);
            std::thread::sleep(delay);
            format!(
                "victim's shim {shim} killed {} ms before serve",
                delay.as_millis()
            )
        };
        self.victim_kills += 1;
        self.kill_and_restart(i, &what);
    }

    /// Churn pods that may exist.
    fn live_churn(&self) -> Vec<String> {
        self.churn
            .iter()
            .filter(|(_, f)| **f != Fate::Deleted)
            .map(|(n, _)| n.clone())
            .collect()
    }

    /// Kill during pod creation: a `kubectl create` in flight, or the new pod starting.
    fn kill_during_create(&mut self, i: usize) {
        if self.live_churn().len() >= MAX_CHURN {
            self.kill_during_termination(i);
            return;
        }
        *self.kinds.entry("create").or_default() += 1;
        let name = format!("churn-{i}");
        let file = self.ctx.manifest(&name, &self.churn_manifest(&name));
        let child = self.kubectl_spawn(&["create", "-f", file.to_str().unwrap()]);
        let delay = self.rng.millis(0, 700);
        std::thread::sleep(delay);
        self.ctx.kill9();
        let out = child.wait_with_output().unwrap();
        let fate = if out.status.success() {
            Fate::Created
        } else {
            Fate::MaybeCreated
        };
        self.churn.insert(name.clone(), fate);
        self.kill_and_restart(
            i,
            &format!("create {name} ({} ms in, {fate:?})", delay.as_millis()),
        );
    }

    /// Kill during a termination: a `kubectl delete` in flight, or the container in its trap.
    fn kill_during_termination(&mut self, i: usize) {
        let candidates = self.live_churn();
        if candidates.is_empty() {
            self.kill_during_create(i);
            return;
        }
        *self.kinds.entry("delete").or_default() += 1;
        let name =
            candidates[usize::try_from(self.rng.below(candidates.len() as u64)).unwrap()].clone();
        // One delete in three is forced: the object goes at once, the containers after it.
        let force = self.rng.below(3) == 0;
        let mut args = vec!["delete", "pod", &name, "--wait=false"];
        if force {
            args.extend(["--grace-period=0", "--force"]);
        }
        let child = self.kubectl_spawn(&args);
        let delay = self.rng.millis(0, 1500);
        std::thread::sleep(delay);
        self.ctx.kill9();
        let out = child.wait_with_output().unwrap();
        let not_found = String::from_utf8_lossy(&out.stderr).contains("NotFound");
        let fate = if out.status.success() {
            Fate::Deleted
        } else if not_found {
            // An acknowledged pod that the API does not know is a lost pod.
            assert!(
                self.churn[&name] != Fate::Created,
                "delete {name}: the acknowledged pod is gone: {}",
                text(&out)
            );
            Fate::Deleted
        } else {
            Fate::MaybeDeleted
        };
        // Deleted or maybe: it may go Unready now.
        self.ready_since.remove(&name);
        self.churn.insert(name.clone(), fate);
        self.kill_and_restart(
            i,
            &format!(
                "delete {name}{} ({} ms in, {fate:?})",
                if force { " --force" } else { "" },
                delay.as_millis()
            ),
        );
    }

    /// Kill while `crash` waits in CrashLoopBackOff.
    fn kill_during_backoff(&mut self, i: usize) {
        *self.kinds.entry("back-off").or_default() += 1;
        let start = Instant::now();
        let mut seen = false;
        while start.elapsed() < Duration::from_secs(10) {
            let out = self.ctx.kubectl(&[
                "get",
                "pod",
                "crash",
                "-o",
                "jsonpath={.status.containerStatuses[0].state.waiting.reason} {.status.containerStatuses[0].restartCount}",
            ]);
            let text = String::from_utf8_lossy(&out.stdout).into_owned();
            let mut words = text.split_whitespace();
            let reason = words.next().unwrap_or("");
            if let Some(n) = words.next().and_then(|n| n.parse::<i64>().ok()) {
                assert!(
                    n >= self.crash_restarts,
                    "crash's restartCount went back from {} to {n}",
                    self.crash_restarts
                );
                self.crash_restarts = n;
            }
            if reason == "CrashLoopBackOff" {
                seen = true;
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let delay = self.rng.millis(0, 800);
        std::thread::sleep(delay);
        self.kill_and_restart(
            i,
            &format!(
                "crash back-off ({}; {} ms in)",
                if seen { "CrashLoopBackOff" } else { "not seen" },
                delay.as_millis()
            ),
        );
    }

    /// Kill at a random moment of `long`'s probe period (its exec probe runs 0.3 s of each 1 s).
    fn kill_during_probe(&mut self, i: usize) {
        *self.kinds.entry("probe").or_default() += 1;
        let delay = self.rng.millis(300, 1500);
        std::thread::sleep(delay);
        self.kill_and_restart(i, &format!("probe ({} ms in)", delay.as_millis()));
    }

    // ----- final checks -----

    /// Polls `check` until it returns `Ok` or `SETTLE` passes; panics with its last error.
    fn eventually<T>(
        &mut self,
        what: &str,
        mut check: impl FnMut(&mut Self) -> Result<T, String>,
    ) -> T {
        let start = Instant::now();
        loop {
            match check(self) {
                Ok(v) => return v,
                Err(e) if start.elapsed() > SETTLE => {
                    panic!(
                        "{what}: not after {SETTLE:?}: {e}\n{}",
                        self.ctx.last_logs(2)
                    )
                }
                Err(_) => std::thread::sleep(Duration::from_millis(250)),
            }
        }
    }

    fn check_pods(&mut self) {
        let churn = self.churn.clone();
        self.eventually("every acknowledged write is there", |s| {
            let pods = s.pods();
            let by_name: HashMap<String, &Value> = pods
                .iter()
                .map(|p| (p["metadata"]["name"].as_str().unwrap().to_string(), p))
                .collect();
            for name in by_name.keys() {
                if !["long", "crash", "victim"].contains(&name.as_str())
                    && !churn.contains_key(name)
                {
                    return Err(format!("an unknown pod {name} exists"));
                }
            }
            for required in ["long", "crash", "victim"] {
                if !by_name.contains_key(required) {
                    panic!("pod {required} was lost");
                }
            }
            for (name, fate) in &churn {
                let pod = by_name.get(name);
                let deleting = pod.is_some_and(|p| !p["metadata"]["deletionTimestamp"].is_null());
                let phase = pod.map(|p| p["status"]["phase"].as_str().unwrap_or("").to_string());
                let ready = pod.is_some_and(|p| {
                    p["status"]["containerStatuses"][0]["ready"] == Value::Bool(true)
                });
                match (fate, pod) {
                    (Fate::Created, None) => panic!("acknowledged pod {name} was lost"),
                    (Fate::Created, Some(_)) if deleting => {
                        panic!("pod {name} is being deleted, but nobody deleted it")
                    }
                    (Fate::Deleted | Fate::MaybeDeleted, Some(_)) if deleting => {
                        return Err(format!("{name} is still terminating"));
                    }
                    (Fate::Deleted, Some(_)) => {
                        panic!("the acknowledged delete of {name} is missing")
                    }
                    (_, Some(_)) if phase.as_deref() != Some("Running") || !ready => {
                        return Err(format!("{name} is {phase:?}, ready {ready}"));
                    }
                    _ => {}
                }
            }
            Ok(())
        });
        // No churn container was started twice; the running ones once, and never restarted.
        let pods = self.pods();
        for (name, fate) in &churn {
            let starts = std::fs::read_to_string(self.churn_dir.join(name)).unwrap_or_default();
            let starts = starts.lines().count();
            assert!(starts <= 1, "{name} ({fate:?}) was started {starts} times");
            let Some(pod) = pods.iter().find(|p| p["metadata"]["name"] == name.as_str()) else {
                continue;
            };
            let status = &pod["status"]["containerStatuses"][0];
            assert_eq!(starts, 1, "{name} runs but did not start once: {status}");
            assert_eq!(status["restartCount"], 0, "{name} was restarted: {status}");
        }
    }

    fn check_long(&mut self) {
        let pod = self.eventually("long is ready", |s| {
            let pod = s.pod("long").expect("long exists");
            let ready = pod["status"]["conditions"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|c| c["type"] == "Ready" && c["status"] == "True");
            if ready {
                Ok(pod)
            } else {
                Err(format!("{}", pod["status"]))
            }
        });
        let status = &pod["status"]["containerStatuses"][0];
        assert_eq!(status["restartCount"], 0, "long was restarted: {status}");
        assert_eq!(
            status["containerID"],
            self.long_id.as_str(),
            "long's container changed: {status}"
        );
        assert!(status["state"]["running"].is_object(), "{status}");
        self.check_long_process("at the end");
        let events: Value =
            serde_json::from_str(&self.ctx.kubectl_ok(&["get", "events", "-o", "json"])).unwrap();
        let count = |reason: &str| -> i64 {
            events["items"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|e| e["involvedObject"]["name"] == "long" && e["reason"] == reason)
                .map(|e| e["count"].as_i64().unwrap_or(1))
                .sum()
        };
        assert_eq!(count("Started"), 1, "long started once: {events}");
        assert_eq!(count("Killing"), 0, "nobody stopped long: {events}");
    }

    /// One `SandboxChanged` per shim of `victim` killed, one `Started` per new sandbox. A loss
    /// seen by a running serve may be reported twice: when serve is killed after the event but
    /// before the new sandbox is recorded, the next serve finds the old sandbox dead again (the
    /// kubelet, restarted there, also says `SandboxChanged` again). The starts stay exact.
    fn check_victim_events(&mut self) {
        let events: Value =
            serde_json::from_str(&self.ctx.kubectl_ok(&["get", "events", "-o", "json"])).unwrap();
        let count = |reason: &str| -> i64 {
            events["items"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|e| e["involvedObject"]["name"] == "victim" && e["reason"] == reason)
                .map(|e| e["count"].as_i64().unwrap_or(1))
                .sum()
        };
        let changed = count("SandboxChanged");
        assert!(
            (self.victim_kills..=self.victim_kills + self.victim_kills_while_up).contains(&changed),
            "one SandboxChanged per lost sandbox of victim (at most one more per loss seen by a \
             running serve): {changed} for {} losses, {} seen while serve ran",
            self.victim_kills,
            self.victim_kills_while_up
        );
        assert_eq!(count("Started"), self.victim_kills + 1, "victim's starts");
    }

    fn check_crash(&mut self) {
        // The loop goes on after the last restart (no exit was lost)...
        let before = self
            .crash_log()
            .iter()
            .filter(|(w, ..)| w == "crash")
            .count();
        self.eventually("crash keeps crashing", |s| {
            let crashes = s.crash_log().iter().filter(|(w, ..)| w == "crash").count();
            if crashes >= before + 2 {
                Ok(())
            } else {
                Err(format!("{crashes} crashes, {before} before"))
            }
        });
        // ... and, at a moment it waits in back-off, its status counts exactly its own crashes.
        let (log, status) = self.eventually("crash's status matches its log", |s| {
            let log = s.crash_log();
            let pod = s.pod("crash").expect("crash exists");
            let status = pod["status"]["containerStatuses"][0].clone();
            let starts = log.iter().filter(|(w, ..)| w == "start").count();
            let crashes = log.iter().filter(|(w, ..)| w == "crash").count();
            let waiting = status["state"]["waiting"]["reason"] == "CrashLoopBackOff";
            let restarts = status["restartCount"].as_i64().unwrap_or(-1);
            let settled = waiting && starts == crashes && s.crash_log().len() == log.len();
            if settled && restarts == i64::try_from(starts).unwrap() - 1 {
                Ok((log, status))
            } else {
                Err(format!(
                    "{starts} starts, {crashes} crashes, restartCount {restarts}, state {}",
                    status["state"]
                ))
            }
        });
        let restarts = status["restartCount"].as_i64().unwrap();
        assert!(
            restarts >= self.crash_restarts,
            "restartCount went back: {status}"
        );
        assert_eq!(status["lastState"]["terminated"]["exitCode"], 3, "{status}");
        // Every instance ended by itself, one after the other.
        for (n, pair) in log.chunks(2).enumerate() {
            let ok = pair.len() == 2
                && pair[0].0 == "start"
                && pair[1].0 == "crash"
                && pair[0].1 == pair[1].1;
            assert!(
                ok,
                "instance {n} of crash did not run start..crash alone: {log:?}"
            );
        }
        // The back-off after each crash went on across the kills: the first restart is
        // immediate (B1), then 1 s, 2 s, 4 s, 4 s, ... (reduced, capped at 4 s). Later is fine
        // (the agent may have been down when it expired), earlier is not.
        let gaps: Vec<f64> = log
            .windows(2)
            .filter(|w| w[0].0 == "crash" && w[1].0 == "start")
            .map(|w| w[1].2 - w[0].2)
            .collect();
        for (n, gap) in gaps.iter().enumerate().skip(1) {
            let delay = f64::from(1_u32 << (n - 1).min(2));
            assert!(
                *gap >= delay - 0.1,
                "restart {} of crash came {gap:.3} s after its crash, before its {delay} s \
                 back-off: {gaps:?}",
                n + 1
            );
        }
        let gaps: Vec<String> = gaps.iter().map(|g| format!("{g:.1}")).collect();
        if std::env::var_os("PODVISOR_STRESS_VERBOSE").is_some() {
            for (word, pid, time) in &log {
                eprintln!("crash log: {time:.3} {word} {pid}");
            }
        }
        eprintln!(
            "crash: {} starts, restartCount {restarts}, back-offs (s): {}",
            log.len() / 2,
            gaps.join(" ")
        );
    }

    /// Every process carrying the marker is serve, a shim of an existing pod (one per pod) or
    /// below one; at most one main process per container; no zombie.
    fn check_processes(&mut self) {
        self.eventually("no orphan, duplicate or zombie process", |s| {
            let pods = s.pods();
            s.process_problems(&pods).map(drop)
        });
    }

    /// What [`Stress::check_processes`] checks, once: the main processes of each container
    /// (by the name after the marker), or what is wrong.
    fn process_problems(&self, pods: &[Value]) -> Result<BTreeMap<String, Vec<i32>>, String> {
        let serve_pid = self.ctx.serve_pid().expect("serve runs");
        let marker = self.marker().to_string();
        let pods_dir = format!("{}/pods/", self.ctx.state().display());
        let uids: HashMap<String, String> = pods
            .iter()
            .map(|p| {
                (
                    p["metadata"]["uid"].as_str().unwrap().to_string(),
                    p["metadata"]["name"].as_str().unwrap().to_string(),
                )
            })
            .collect();
        let procs = self.ctx.processes();
        let by_pid: HashMap<i32, &Proc> = procs.iter().map(|p| (p.pid, p)).collect();
        let mut shims: HashMap<i32, String> = HashMap::new();
        let mut shim_of_uid: BTreeMap<String, Vec<i32>> = BTreeMap::new();
        for p in &procs {
            if p.cmdline.contains(" shim ") {
                let uid = p
                    .cmdline
                    .split_once(&pods_dir)
                    .and_then(|(_, rest)| rest.split(['/', ' ']).next())
                    .unwrap_or("")
                    .to_string();
                shims.insert(p.pid, uid.clone());
                shim_of_uid.entry(uid).or_default().push(p.pid);
            }
        }
        for (uid, pids) in &shim_of_uid {
            let Some(name) = uids.get(uid) else {
                return Err(format!(
                    "shim(s) {pids:?} of pod {uid}, which does not exist"
                ));
            };
            if pids.len() > 1 {
                return Err(format!("{} shims for pod {name}: {pids:?}", pids.len()));
            }
        }
        let mut containers: BTreeMap<String, Vec<i32>> = BTreeMap::new();
        for p in &procs {
            if p.state == 'Z' {
                return Err(format!("zombie: {p:?}"));
            }
            if p.pid == serve_pid || shims.contains_key(&p.pid) {
                continue;
            }
            // Below a shim of an existing pod?
            let mut up = p.ppid;
            let mut under = None;
            for _ in 0..64 {
                if let Some(uid) = shims.get(&up) {
                    under = Some(uid.clone());
                    break;
                }
                match by_pid.get(&up) {
                    Some(parent) => up = parent.ppid,
                    None => break,
                }
            }
            if under.is_none() {
                return Err(format!("an orphan process: {p:?}"));
            }
            if shims.contains_key(&p.ppid) && p.cmdline.contains(&marker) {
                let name = p
                    .cmdline
                    .split_once(&marker)
                    .and_then(|(_, rest)| rest.split_whitespace().next())
                    .unwrap_or("?")
                    .trim_end_matches(';')
                    .to_string();
                containers.entry(name).or_default().push(p.pid);
            }
        }
        for (name, pids) in &containers {
            if pids.len() > 1 {
                return Err(format!(
                    "{} processes for container of {name}: {pids:?}",
                    pids.len()
                ));
            }
        }
        if containers.get("long") != Some(&vec![self.long_pid]) {
            return Err(format!(
                "long's container is not {}: {containers:?}",
                self.long_pid
            ));
        }
        for (uid, name) in &uids {
            if name != "crash" && !shim_of_uid.contains_key(uid) {
                return Err(format!("pod {name} runs no shim"));
            }
        }
        Ok(containers)
    }

    /// The checks after every restart (see the module docs), polled until the node settles.
    fn check_after_restart(&mut self, i: usize) {
        let when = format!("after kill {}", i + 1);
        let ready = self.eventually_within(&when, RESTART_SETTLE, |s| {
            let pods = s.pods();
            let containers = s.process_problems(&pods)?;
            let by_name: HashMap<String, &Value> = pods
                .iter()
                .map(|p| (p["metadata"]["name"].as_str().unwrap().to_string(), p))
                .collect();
            for required in ["long", "crash", "victim"] {
                assert!(
                    by_name.contains_key(required),
                    "{when}: pod {required} was lost"
                );
            }
            for (name, fate) in &s.churn {
                assert!(
                    *fate != Fate::Created || by_name.contains_key(name),
                    "{when}: the acknowledged pod {name} was lost"
                );
            }
            // No Ready flap: still Ready since the same moment.
            for (name, since) in &s.ready_since {
                let Some(pod) = by_name.get(name) else {
                    continue;
                };
                let ready = ready_condition(pod);
                assert!(
                    ready
                        .as_ref()
                        .is_some_and(|(status, t)| status == "True" && t == since),
                    "{when}: {name} was Ready since {since}, now {ready:?}: {}",
                    pod["status"]
                );
            }
            // `victim` runs again, once, after each loss of its shim.
            let status = &by_name["victim"]["status"]["containerStatuses"][0];
            let restarts = status["restartCount"].as_i64().unwrap_or(-1);
            if restarts != s.victim_kills || status["ready"] != true {
                return Err(format!(
                    "victim: restartCount {restarts} (expected {}), {status}",
                    s.victim_kills
                ));
            }
            let pids = std::fs::read_to_string(s.victim_dir.join("pids")).unwrap_or_default();
            let pids: Vec<i32> = pids.lines().filter_map(|l| l.parse().ok()).collect();
            if containers.get("victim") != pids.last().map(|p| vec![*p]).as_ref() {
                return Err(format!(
                    "victim runs {:?}, its last start was {:?}",
                    containers.get("victim"),
                    pids.last()
                ));
            }
            let victim_marker = format!("{} victim", s.marker());
            let current = pids.last().copied();
            for old in pids[..pids.len().saturating_sub(1)]
                .iter()
                .filter(|&&p| Some(p) != current)
            {
                // The pid alone may have been reused (a long run wraps pid_max).
                let cmdline = std::fs::read(format!("/proc/{old}/cmdline")).unwrap_or_default();
                let still =
                    alive(*old) && String::from_utf8_lossy(&cmdline).contains(&victim_marker);
                assert!(!still, "{when}: an old victim ({old}) still runs");
            }
            let ready: Vec<(String, String)> = pods
                .iter()
                .filter(|p| p["metadata"]["deletionTimestamp"].is_null())
                .filter_map(|p| {
                    let name = p["metadata"]["name"].as_str()?.to_string();
                    let churn = s
                        .churn
                        .get(&name)
                        .is_some_and(|f| matches!(f, Fate::Created | Fate::MaybeCreated));
                    let (status, since) = ready_condition(p)?;
                    (churn && status == "True").then_some((name, since))
                })
                .collect();
            Ok(ready)
        });
        for (name, since) in ready {
            self.ready_since.entry(name).or_insert(since);
        }
    }

    /// Polls `check` until it returns `Ok` or `limit` passes; panics with its last error.
    fn eventually_within<T>(
        &mut self,
        what: &str,
        limit: Duration,
        mut check: impl FnMut(&mut Self) -> Result<T, String>,
    ) -> T {
        let start = Instant::now();
        loop {
            match check(self) {
                Ok(v) => return v,
                Err(e) if start.elapsed() > limit => {
                    panic!(
                        "{what}: not after {limit:?}: {e}\n{}",
                        self.ctx.last_logs(2)
                    )
                }
                Err(_) => std::thread::sleep(Duration::from_millis(100)),
            }
        }
    }
}

/// The Ready condition of a pod: (status, lastTransitionTime).
fn ready_condition(pod: &Value) -> Option<(String, String)> {
    pod["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == "Ready")
        .map(|c| {
            (
                c["status"].as_str().unwrap_or("").to_string(),
                c["lastTransitionTime"].as_str().unwrap_or("").to_string(),
            )
        })
}

#[test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
fn serve_survives_kill_9_at_random_moments() {
    assert!(
        Path::new(&kubectl_binary()).exists(),
        "{} is not installed (scripts/test installs it)",
        kubectl_binary().display()
    );
    let mut ctx = ServeCtx::new("rs");
    ctx.envs.push(("PODVISOR_DEBUG".into(), "1".into()));
    let seed = env_number("PODVISOR_STRESS_SEED").unwrap_or(DEFAULT_SEED);
    let kills =
        env_number("PODVISOR_STRESS_KILLS").map_or(DEFAULT_KILLS, |n| usize::try_from(n).unwrap());
    eprintln!(
        "restart stress: seed {seed:#x} (PODVISOR_STRESS_SEED), {kills} kills, marker {}",
        ctx.marker
    );
    let long_dir = ctx.path("long");
    let crash_dir = ctx.path("crash");
    let churn_dir = ctx.path("churn");
    let victim_dir = ctx.path("victim");
    let mut s = Stress {
        ctx,
        rng: Rng(seed),
        churn: BTreeMap::new(),
        long_dir,
        crash_dir,
        churn_dir,
        long_pid: 0,
        long_id: String::new(),
        crash_restarts: 0,
        victim_dir,
        victim_uid: String::new(),
        victim_kills: 0,
        victim_kills_while_up: 0,
        ready_since: BTreeMap::new(),
        answered: Vec::new(),
        settled: Vec::new(),
        kinds: BTreeMap::new(),
    };
    let began = Instant::now();
    s.ctx.start(SERVE_ARGS);
    for (name, manifest) in [
        ("long", s.long_manifest()),
        ("crash", s.crash_manifest()),
        ("victim", s.victim_manifest()),
    ] {
        let file = s.ctx.manifest(name, &manifest);
        s.ctx.kubectl_ok(&["create", "-f", file.to_str().unwrap()]);
    }
    let pod = s.eventually("long is ready", |s| {
        let pod = s.pod("long").expect("long exists");
        if pod["status"]["containerStatuses"][0]["ready"] == true {
            Ok(pod)
        } else {
            Err(pod["status"].to_string())
        }
    });
    s.long_id = pod["status"]["containerStatuses"][0]["containerID"]
        .as_str()
        .unwrap()
        .to_string();
    s.long_pid = s.read_pid().expect("long wrote its pid");
    s.check_long_process("before the kills");
    // S14: readiness outlives an agent restart once the container has run 10 s; before, the
    // probe decides again. From then on, long must never flap.
    std::thread::sleep(Duration::from_secs(11).saturating_sub(began.elapsed()));
    let pod = s.pod("long").expect("long exists");
    let (status, since) = ready_condition(&pod).expect("long's Ready condition");
    assert_eq!(status, "True", "{}", pod["status"]);
    s.ready_since.insert("long".into(), since);
    let victim = s.eventually("victim is ready", |s| {
        let pod = s.pod("victim").expect("victim exists");
        match ready_condition(&pod) {
            Some((status, _)) if status == "True" => Ok(pod),
            other => Err(format!("{other:?}")),
        }
    });
    s.victim_uid = victim["metadata"]["uid"].as_str().unwrap().to_string();

    for i in 0..kills {
        match i % 7 {
            0 | 2 => s.kill_during_create(i),
            1 => s.kill_during_probe(i),
            3 => s.kill_during_termination(i),
            4 => s.kill_during_backoff(i),
            5 => {
                *s.kinds.entry("shim killed while serve down").or_default() += 1;
                s.kill_victim_shim(i, true);
            }
            _ => {
                *s.kinds.entry("shim killed while serve up").or_default() += 1;
                s.kill_victim_shim(i, false);
            }
        }
    }
    let killing = began.elapsed();

    s.check_pods();
    s.check_long();
    s.check_crash();
    s.check_processes();
    s.check_victim_events();
    let panics = s.ctx.grep_logs("panicked");
    assert!(panics.is_empty(), "serve panicked: {panics:#?}");
    let warnings = s.ctx.grep_logs("warning");
    if !warnings.is_empty() {
        eprintln!("serve's warnings:\n{}", warnings.join("\n"));
    }

    // Everything goes with the pods: delete them all, then stop serve.
    s.ctx
        .kubectl_ok(&["delete", "pods", "--all", "--wait=false"]);
    s.eventually("every pod is gone", |s| {
        let left = s.pods().len();
        if left == 0 {
            Ok(())
        } else {
            Err(format!("{left} pods left"))
        }
    });
    assert!(!alive(s.long_pid));
    assert_eq!(s.ctx.stop(Duration::from_secs(15)), Some(0));
    s.eventually("no process left", |s| {
        let left: Vec<Proc> = s
            .ctx
            .processes()
            .into_iter()
            .filter(|p| p.state != 'Z')
            .collect();
        if left.is_empty() {
            Ok(())
        } else {
            Err(format!("{left:#?}"))
        }
    });
    let fates: BTreeMap<String, usize> = s.churn.values().fold(BTreeMap::new(), |mut m, f| {
        *m.entry(format!("{f:?}")).or_default() += 1;
        m
    });
    let figures = |mut d: Vec<Duration>| {
        d.sort();
        let pick = |q: f64| {
            let at = ((d.len() as f64 - 1.0) * q).round() as usize;
            d.get(at).map_or(0, Duration::as_millis)
        };
        format!(
            "median {} ms, p95 {} ms, max {} ms",
            pick(0.5),
            pick(0.95),
            pick(1.0)
        )
    };
    eprintln!(
        "restart stress: {kills} kills in {:.1} s, {:.1} s in all; churn pods: {fates:?}; seed {seed:#x}",
        killing.as_secs_f64(),
        began.elapsed().as_secs_f64()
    );
    eprintln!(
        "restart stress summary: kills={kills} kinds={:?} failed_restarts=0 duplicates=0 \
         orphans=0 lasting_zombies=0 lost_pods=0 ready_flaps=0 victim_shim_kills={} \
         crash_restarts={}; serve answered: {}; node settled: {}",
        s.kinds,
        s.victim_kills,
        s.crash_restarts,
        figures(s.answered.clone()),
        figures(s.settled.clone())
    );
}
