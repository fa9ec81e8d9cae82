//! The kubectl harness of `conformance_kubectl.rs`: one `podvisor serve`, watches, pods
//! driven through kubectl, and readers of the pod object.

use crate::conformance_support::{EvLog, manifest, pod_name, remove_dir, scratch_dir, secs};
use serde_json::Value;
use std::ffi::OsString;
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

pub(crate) static KUBECTL: std::sync::LazyLock<std::path::PathBuf> =
    std::sync::LazyLock::new(podvisor_testkit::kubectl);

/// A scenario: runs against the shared server, panics on a failed check.
pub(crate) type ScenarioFn = fn(&Server);

/// How the run's `serve` runs pods (`--runtime`): the same scenarios pass with both.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Runtime {
    /// Host processes on the host's network (the default runtime).
    Process,
    /// runc containers from the `busybox` image, each pod with its own network namespace and
    /// pod IP on the CNI bridge. See [`crate::oci_run`] for how section 0's conventions map.
    Oci,
}

// ----------------------------------------------------------------------------------------------
// The server

/// The one `podvisor serve` of this file, its directory and kubectl.
pub(crate) struct Server {
    pub(crate) dir: PathBuf,
    pub(crate) serve: Mutex<Option<Child>>,
    pub(crate) runtime: Runtime,
    /// The oci run's registry, the `docker.io` mirror (stopped with the server).
    pub(crate) registry: Option<podvisor_testkit::registry::Registry>,
}

impl Server {
    /// Starts `podvisor serve --runtime <runtime>` on a free port with a fresh state
    /// directory; returns once the kubeconfig is written (the API answers).
    pub(crate) fn start(runtime: Runtime) -> Server {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .subsec_nanos();
        // Short: shim sockets live deep under the state directory.
        let tag = match runtime {
            Runtime::Process => "pvkc",
            Runtime::Oci => "pvko",
        };
        let dir = std::env::temp_dir().join(format!("{tag}-{}-{nanos:x}", std::process::id()));
        std::fs::create_dir_all(dir.join("state")).unwrap();
        let log = std::fs::File::create(dir.join("serve.log")).unwrap();
        let mut serve = Command::new(env!("CARGO_BIN_EXE_podvisor"));
        serve
            .arg("serve")
            .arg("--state-dir")
            .arg(dir.join("state"))
            .args(["--listen", "127.0.0.1:0", "--drain-on-exit"])
            // The host's own disk level must not evict the scenarios' pods.
            .arg("--eviction-hard=");
        let registry = match runtime {
            Runtime::Process => None,
            Runtime::Oci => {
                let (registry, config) = crate::oci_run::busybox_mirror(&dir);
                crate::oci_run::pre_pull(&dir.join("state"), &config);
                serve
                    .args(["--runtime", "oci", "--registry-config"])
                    .arg(config);
                Some(registry)
            }
        };
        let child = serve
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("podvisor serve starts");
        let srv = Server {
            dir,
            serve: Mutex::new(Some(child)),
            runtime,
            registry,
        };
        let started = Instant::now();
        while !srv.kubeconfig().exists() {
            if let Some(status) = srv
                .serve
                .lock()
                .unwrap()
                .as_mut()
                .unwrap()
                .try_wait()
                .unwrap()
            {
                panic!("serve exited with {status}:\n{}", srv.serve_log());
            }
            assert!(
                started.elapsed() < secs(30),
                "no kubeconfig after 30 s:\n{}",
                srv.serve_log()
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        eprintln!(
            "podvisor serve --runtime {runtime:?} answered after {} ms ({})",
            started.elapsed().as_millis(),
            srv.dir.display()
        );
        srv
    }

    pub(crate) fn state(&self) -> PathBuf {
        self.dir.join("state")
    }

    pub(crate) fn kubeconfig(&self) -> PathBuf {
        self.state().join("kubeconfig")
    }

    pub(crate) fn serve_log(&self) -> String {
        std::fs::read_to_string(self.dir.join("serve.log")).unwrap_or_default()
    }

    /// `kubectl --kubeconfig ... --cache-dir ...`.
    pub(crate) fn kubectl_base(&self) -> Vec<OsString> {
        vec![
            "--kubeconfig".into(),
            self.kubeconfig().into(),
            "--cache-dir".into(),
            self.dir.join("kube-cache").into(),
        ]
    }

    /// Runs kubectl with `args` (and `stdin`).
    pub(crate) fn kubectl(&self, args: &[&str], stdin: Option<&str>) -> Output {
        let mut child = Command::new(&*KUBECTL)
            .args(self.kubectl_base())
            .args(args)
            .stdin(if stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("kubectl runs");
        if let Some(text) = stdin {
            let mut pipe = child.stdin.take().unwrap();
            pipe.write_all(text.as_bytes()).unwrap();
        }
        child.wait_with_output().expect("kubectl runs")
    }

    /// kubectl's stdout, asserting success.
    pub(crate) fn kubectl_ok(&self, args: &[&str], stdin: Option<&str>) -> String {
        let out = self.kubectl(args, stdin);
        assert!(
            out.status.success(),
            "kubectl {args:?} failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// `LIST(labelSelector)`: the pods' names.
    pub(crate) fn list(&self, selector: &str) -> Vec<String> {
        let text = self.kubectl_ok(&["get", "pods", "-l", selector, "-o", "json"], None);
        let list: Value = serde_json::from_str(&text).expect("a PodList");
        list["items"]
            .as_array()
            .expect("items")
            .iter()
            .map(|p| p["metadata"]["name"].as_str().unwrap_or("?").to_string())
            .collect()
    }

    /// `CREATE` of scenario `id`'s own manifest `<id>.yaml`, with its scratch directory
    /// `/tmp/kpl/<id>` emptied first and removed with the pod.
    pub(crate) fn create_scenario(&self, id: &str) -> Pod<'_> {
        self.create_scenario_file(id, &format!("{id}.yaml"))
    }

    /// As [`Server::create_scenario`], with the manifest `file` (a variant of the scenario).
    pub(crate) fn create_scenario_file(&self, id: &str, file: &str) -> Pod<'_> {
        // Under oci the emptyDir's mount point is inside the container's root, never on the
        // host: `/tmp/kpl` there is the process run's (removing a directory another mount
        // namespace mounts on would detach that mount).
        let scratch = (self.runtime == Runtime::Process).then(|| Scratch::new(id));
        let mut pod = self.create(id, &manifest(file));
        pod.scratch = scratch;
        pod
    }

    /// `CREATE(manifest)` of scenario `id`, watched by name.
    pub(crate) fn create(&self, id: &str, manifest: &str) -> Pod<'_> {
        let name = pod_name(manifest);
        let selector = [
            "--field-selector".to_string(),
            format!("metadata.name={name}"),
        ];
        self.create_watched(id, manifest, &selector)
    }

    /// `CREATE(manifest)`, watched with the kubectl selector arguments `selector` (which must
    /// select this pod only).
    pub(crate) fn create_watched(&self, id: &str, manifest: &str, selector: &[String]) -> Pod<'_> {
        self.create_with_peer(id, manifest, selector, None)
    }

    /// `CREATE(manifest)` of a pod whose hooks call `peer` (the pod IP of the observer under
    /// oci, see [`crate::oci_run::adapt`]).
    pub(crate) fn create_with_peer(
        &self,
        id: &str,
        manifest: &str,
        selector: &[String],
        peer: Option<&str>,
    ) -> Pod<'_> {
        let name = pod_name(manifest);
        let adapted;
        let manifest = match self.runtime {
            Runtime::Process => manifest,
            Runtime::Oci => {
                adapted = crate::oci_run::adapt(manifest, peer);
                &adapted
            }
        };
        let watch = Watch::start(self, &name, selector);
        let created = Instant::now();
        let out = self.kubectl(&["create", "-f", "-"], Some(manifest));
        assert!(
            out.status.success() && String::from_utf8_lossy(&out.stdout).contains(&name),
            "CREATE {name}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let uid = self.kubectl_ok(
            &["get", "pod", &name, "-o", "jsonpath={.metadata.uid}"],
            None,
        );
        assert!(!uid.is_empty(), "{name}: no uid");
        let mut pod = Pod {
            srv: self,
            id: id.to_string(),
            name,
            uid,
            created,
            deleted: None,
            graceful: false,
            gone: false,
            watch,
            ev_copy: Arc::new(Mutex::new(None)),
            linker: None,
            link_stop: Arc::new(AtomicBool::new(false)),
            scratch: None,
        };
        if manifest.contains("ev.log") {
            pod.start_linker();
        }
        pod
    }

    /// Stops serve (SIGTERM: it drains, then exits), then kills every process whose command
    /// line names the directory (shims, containers, kubectl) with their descendants.
    pub(crate) fn stop(&self) {
        if let Some(mut child) = self.serve.lock().unwrap().take() {
            podvisor_testkit::terminate(&mut child, secs(30));
        }
        podvisor_testkit::signal_marked(
            &self.dir.display().to_string(),
            podvisor_testkit::MarkerIn::Cmdline,
            podvisor_testkit::Signal::KILL,
        );
    }

    /// Processes (pid, command line) that carry the directory, but serve itself and the
    /// registry.
    pub(crate) fn leftovers(&self) -> Vec<(i32, String)> {
        let marker = self.dir.display().to_string();
        let serve = self
            .serve
            .lock()
            .unwrap()
            .as_ref()
            .map(|c| i32::try_from(c.id()).unwrap());
        let registry = self
            .registry
            .as_ref()
            .map(|r| i32::try_from(r.pid()).unwrap());
        podvisor_testkit::all_processes()
            .into_iter()
            .filter(|p| {
                p.cmdline.contains(&marker) && Some(p.pid) != serve && Some(p.pid) != registry
            })
            .map(|p| (p.pid, p.cmdline))
            .collect()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
        if std::thread::panicking() {
            eprintln!("--- serve log:\n{}", self.serve_log());
        }
        remove_dir(&self.dir);
    }
}

// ----------------------------------------------------------------------------------------------
// Watches: every observed update of a pod

/// One observed version of the pod object.
#[derive(Debug, Clone)]
pub(crate) struct Obs {
    /// `ADDED`, `MODIFIED` or `DELETED`.
    pub(crate) kind: String,
    /// The Pod object.
    pub(crate) pod: Value,
    /// When the harness read it.
    pub(crate) seen: Instant,
}

#[derive(Default)]
pub(crate) struct WatchState {
    pub(crate) obs: Vec<Obs>,
    /// Restarts, errors, kubectl's own messages.
    pub(crate) notes: Vec<String>,
    pub(crate) established: bool,
    pub(crate) stopped: bool,
    pub(crate) child: Option<Child>,
}

/// `kubectl get pods SELECTOR -w -o json --output-watch-events`, restarted if it ends early.
pub(crate) struct Watch {
    pub(crate) st: Mutex<WatchState>,
    pub(crate) changed: Condvar,
    pub(crate) thread: Mutex<Option<JoinHandle<()>>>,
}

impl Watch {
    /// Starts the watch and waits (up to 15 s) until kubectl's watch request was answered, so
    /// that every later write of the object is observed.
    pub(crate) fn start(srv: &Server, name: &str, selector: &[String]) -> Arc<Watch> {
        let w = Arc::new(Watch {
            st: Mutex::new(WatchState::default()),
            changed: Condvar::new(),
            thread: Mutex::new(None),
        });
        let mut args = srv.kubectl_base();
        args.extend(["get".into(), "pods".into()]);
        args.extend(selector.iter().map(OsString::from));
        args.extend(
            ["-w", "-o", "json", "--output-watch-events", "-v=6"]
                .iter()
                .map(OsString::from),
        );
        let thread = {
            let w = Arc::clone(&w);
            std::thread::Builder::new()
                .name(format!("watch-{name}"))
                .spawn(move || watch_loop(&args, &w))
                .unwrap()
        };
        *w.thread.lock().unwrap() = Some(thread);
        let deadline = Instant::now() + secs(15);
        let mut st = w.st.lock().unwrap();
        while !st.established && Instant::now() < deadline {
            st = w
                .changed
                .wait_timeout(st, Duration::from_millis(100))
                .unwrap()
                .0;
        }
        if !st.established {
            st.notes
                .push("the watch was not established within 15 s".to_string());
        }
        drop(st);
        w
    }

    pub(crate) fn stop(&self) {
        {
            let mut st = self.st.lock().unwrap();
            st.stopped = true;
            if let Some(c) = st.child.as_mut() {
                let _ = c.kill();
            }
        }
        if let Some(t) = self.thread.lock().unwrap().take() {
            let _ = t.join();
        }
    }
}

pub(crate) fn watch_loop(args: &[OsString], w: &Watch) {
    let mut round = 0;
    loop {
        round += 1;
        let (stdout, stderr) = {
            let mut st = w.st.lock().unwrap();
            if st.stopped {
                return;
            }
            let mut child = Command::new(&*KUBECTL)
                .args(args)
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("kubectl runs");
            let io = (child.stdout.take().unwrap(), child.stderr.take().unwrap());
            st.child = Some(child);
            io
        };
        let errors = std::thread::scope(|s| {
            let errors = s.spawn(|| {
                let mut kept = Vec::new();
                for line in BufReader::new(stderr).lines() {
                    let Ok(line) = line else { break };
                    if line.contains("watch=true") && line.contains(" 200 OK") {
                        w.st.lock().unwrap().established = true;
                        w.changed.notify_all();
                    } else if !line.contains("round_trippers.go") && !line.contains("loader.go") {
                        kept.push(line);
                    }
                }
                kept
            });
            let stream =
                serde_json::Deserializer::from_reader(BufReader::new(stdout)).into_iter::<Value>();
            for v in stream {
                let seen = Instant::now();
                match v {
                    Ok(v) => {
                        let mut st = w.st.lock().unwrap();
                        st.obs.push(Obs {
                            kind: v["type"].as_str().unwrap_or("?").to_string(),
                            pod: v["object"].clone(),
                            seen,
                        });
                        w.changed.notify_all();
                    }
                    Err(e) => {
                        w.st.lock()
                            .unwrap()
                            .notes
                            .push(format!("watch output: {e}"));
                        break;
                    }
                }
            }
            errors.join().unwrap_or_default()
        });
        let mut st = w.st.lock().unwrap();
        let status = st.child.take().map(|mut c| {
            let _ = c.kill();
            c.wait()
        });
        if st.stopped {
            return;
        }
        st.established = false;
        st.notes.push(format!(
            "watch {round} ended ({status:?}): {}; restarting",
            errors.join(" | ")
        ));
        drop(st);
        std::thread::sleep(Duration::from_millis(200));
    }
}

// ----------------------------------------------------------------------------------------------
// Pods

/// A pod created through kubectl, with its observed updates.
pub(crate) struct Pod<'a> {
    pub(crate) srv: &'a Server,
    pub(crate) id: String,
    pub(crate) name: String,
    pub(crate) uid: String,
    /// `CREATE` (just before kubectl was started).
    pub(crate) created: Instant,
    /// `DELETE` (just before kubectl was started).
    pub(crate) deleted: Option<Instant>,
    /// The delete was graceful, of a pod that was not terminal.
    pub(crate) graceful: bool,
    pub(crate) gone: bool,
    pub(crate) watch: Arc<Watch>,
    /// `ev.log` of the pod's emptyDir, held open: readable after the emptyDir is removed.
    pub(crate) ev_copy: Arc<Mutex<Option<std::fs::File>>>,
    pub(crate) linker: Option<JoinHandle<()>>,
    pub(crate) link_stop: Arc<AtomicBool>,
    /// The scenario's scratch directory when the pod owns it (removed after the pod).
    pub(crate) scratch: Option<Scratch>,
}

impl Pod<'_> {
    /// Opens `<state>/pods/<uid>/volumes/scratch/ev.log` as soon as it exists and holds it
    /// open, so it can be read after the emptyDir is removed with the pod. (Not a hard link
    /// out of the state directory: `<state>/pods` is a mount of its own under the `oci`
    /// runtime, and links do not cross mounts.)
    pub(crate) fn start_linker(&mut self) {
        let src = self
            .srv
            .state()
            .join("pods")
            .join(&self.uid)
            .join("volumes/scratch/ev.log");
        let copy = Arc::clone(&self.ev_copy);
        let stop = Arc::clone(&self.link_stop);
        self.linker = Some(std::thread::spawn(move || {
            while !stop.load(Ordering::SeqCst) {
                if let Ok(file) = std::fs::File::open(&src) {
                    *copy.lock().unwrap() = Some(file);
                    return;
                }
                std::thread::sleep(Duration::from_millis(5));
            }
        }));
    }

    /// Every observed update so far.
    pub(crate) fn observations(&self) -> Vec<Obs> {
        self.watch.st.lock().unwrap().obs.clone()
    }

    /// The latest observed update.
    pub(crate) fn last(&self) -> Obs {
        self.observations()
            .pop()
            .unwrap_or_else(|| panic!("{}: nothing observed{}", self.name, self.diag()))
    }

    /// Seconds from `CREATE` to `o`.
    pub(crate) fn t(&self, o: &Obs) -> f64 {
        o.seen.duration_since(self.created).as_secs_f64()
    }

    /// Waits up to `within` after `CREATE` for an observed update satisfying `pred`; its index
    /// and the update. Panics with the timeline when the time is up or the pod is deleted.
    pub(crate) fn wait(
        &self,
        what: &str,
        within: Duration,
        pred: impl Fn(&Value) -> bool,
    ) -> (usize, Obs) {
        self.wait_since(0, self.created, what, within, pred)
    }

    /// [`Pod::wait`] for `phase <want>`.
    pub(crate) fn wait_phase(&self, want: &str, within: Duration) -> (usize, Obs) {
        self.wait(&format!("phase {want}"), within, |p| phase(p) == want)
    }

    /// [`Pod::wait`] for a terminal phase (Succeeded or Failed).
    pub(crate) fn wait_terminal(&self, within: Duration) -> (usize, Obs) {
        self.wait("pod terminal", within, terminal)
    }

    /// [`Pod::wait`] (60 s) for phase Running with every container of `names` running.
    pub(crate) fn wait_all_running(&self, names: &[&str]) -> (usize, Obs) {
        self.wait("Running with every container running", secs(60), |p| {
            phase(p) == "Running" && names.iter().all(|n| state_kind(cstatus(p, n)) == "running")
        })
    }

    /// As [`Pod::wait`], among the updates from index `from` on, up to `within` after `anchor`.
    pub(crate) fn wait_since(
        &self,
        from: usize,
        anchor: Instant,
        what: &str,
        within: Duration,
        pred: impl Fn(&Value) -> bool,
    ) -> (usize, Obs) {
        let deadline = anchor + within;
        let mut st = self.watch.st.lock().unwrap();
        loop {
            if let Some((i, o)) = st
                .obs
                .iter()
                .enumerate()
                .skip(from)
                .find(|(_, o)| pred(&o.pod))
            {
                let o = o.clone();
                drop(st);
                assert!(
                    o.seen <= deadline,
                    "{}: {what}: only {:?} after the anchor, not within {within:?}{}",
                    self.name,
                    o.seen - anchor,
                    self.diag()
                );
                return (i, o);
            }
            let deleted = st.obs.iter().skip(from).any(|o| o.kind == "DELETED");
            let now = Instant::now();
            if deleted || now >= deadline {
                drop(st);
                panic!(
                    "{}: {what}: not within {within:?} ({}){}",
                    self.name,
                    if deleted {
                        "the pod was deleted"
                    } else {
                        "time is up"
                    },
                    self.diag()
                );
            }
            st = self
                .watch
                .changed
                .wait_timeout(st, deadline - now)
                .unwrap()
                .0;
        }
    }

    /// `GET(pod)`: None when not found.
    pub(crate) fn get(&self) -> Option<Value> {
        let out = self
            .srv
            .kubectl(&["get", "pod", &self.name, "-o", "json"], None);
        if out.status.success() {
            return Some(serde_json::from_slice(&out.stdout).expect("a Pod"));
        }
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("NotFound"), "GET {}: {err}", self.name);
        None
    }

    /// `DELETE(pod[, gracePeriodSeconds])`.
    pub(crate) fn delete(&mut self, grace: Option<i64>) {
        self.graceful = grace != Some(0)
            && self
                .observations()
                .last()
                .is_some_and(|o| !terminal(&o.pod));
        self.deleted = Some(Instant::now());
        let grace_arg = grace.map(|g| format!("--grace-period={g}"));
        let mut args = vec!["delete", "pod", &self.name, "--wait=false"];
        if let Some(g) = &grace_arg {
            args.push(g);
        }
        if grace == Some(0) {
            args.push("--force");
        }
        let out = self.srv.kubectl(&args, None);
        assert!(
            out.status.success(),
            "DELETE {}: {}{}",
            self.name,
            String::from_utf8_lossy(&out.stderr),
            self.diag()
        );
    }

    /// Waits until the pod is gone (the watch reported `DELETED` and `GET` is not found), at
    /// most `within` after `DELETE` (or `CREATE`); how long that took from the same anchor
    /// and the final status (section 0.8: the last update observed).
    pub(crate) fn wait_gone(&mut self, within: Duration) -> (Duration, Obs) {
        let anchor = self.deleted.unwrap_or(self.created);
        let deadline = anchor + within;
        let mut last_get = Instant::now();
        loop {
            let deleted = self
                .observations()
                .iter()
                .any(|o| o.kind == "DELETED" && o.pod["metadata"]["uid"] == self.uid.as_str());
            if (deleted || last_get.elapsed() >= secs(1)) && self.get().is_none() {
                let took = anchor.elapsed();
                if !deleted {
                    // The GET can see the removal before kubectl's watch prints it (two
                    // processes, a loaded machine): the watch gets a few seconds to deliver
                    // its DELETED before the end is judged.
                    self.wait_for_deleted(secs(5));
                }
                self.gone = true;
                let last = self.last();
                if self.graceful {
                    self.check_graceful_end(&last);
                }
                return (took, last);
            }
            if deleted {
                last_get = Instant::now();
            }
            assert!(
                Instant::now() < deadline,
                "{}: still there {within:?} after {}{}",
                self.name,
                if self.deleted.is_some() {
                    "DELETE"
                } else {
                    "CREATE"
                },
                self.diag()
            );
            let st = self.watch.st.lock().unwrap();
            drop(
                self.watch
                    .changed
                    .wait_timeout(st, Duration::from_millis(250))
                    .unwrap(),
            );
        }
    }

    /// Waits up to `within` for the watch to report this pod's `DELETED`.
    fn wait_for_deleted(&self, within: Duration) {
        let deadline = Instant::now() + within;
        let mut st = self.watch.st.lock().unwrap();
        while !st
            .obs
            .iter()
            .any(|o| o.kind == "DELETED" && o.pod["metadata"]["uid"] == self.uid.as_str())
            && Instant::now() < deadline
        {
            st = self
                .watch
                .changed
                .wait_timeout(st, Duration::from_millis(100))
                .unwrap()
                .0;
        }
    }

    /// Section 0.1, T8 and T9: after a graceful delete the object shows its deletion until
    /// every container has stopped, then disappears with its final status written: a terminal
    /// phase (Succeeded exactly when every regular container's last instance exited 0) and no
    /// container running.
    pub(crate) fn check_graceful_end(&self, last: &Obs) {
        let p = &last.pod;
        let running: Vec<&str> = ["containerStatuses", "initContainerStatuses"]
            .iter()
            .filter_map(|k| p["status"][k].as_array())
            .flatten()
            .filter(|c| state_kind(c) == "running")
            .map(|c| c["name"].as_str().unwrap_or("?"))
            .collect();
        let all_zero = p["status"]["containerStatuses"]
            .as_array()
            .into_iter()
            .flatten()
            .all(|c| c["state"]["terminated"]["exitCode"] == 0);
        let want = if all_zero { "Succeeded" } else { "Failed" };
        assert!(
            last.kind == "DELETED"
                && p["metadata"]["deletionTimestamp"].is_string()
                && running.is_empty()
                && phase(p) == want,
            "{}: after the graceful DELETE the object disappeared with {} (want DELETED with \
             deletionTimestamp, phase {want}, no container running; running: {running:?}){}",
            self.name,
            summarize(p),
            self.diag()
        );
    }

    /// `DELETE(pod)` with the pod's own grace period, then waits until it is gone.
    pub(crate) fn delete_and_wait_gone(&mut self, within: Duration) -> (Duration, Obs) {
        self.delete(None);
        self.wait_gone(within)
    }

    /// `DELETE(pod, grace)`, then waits until it is gone.
    pub(crate) fn delete_with_grace(&mut self, grace: i64, within: Duration) -> (Duration, Obs) {
        self.delete(Some(grace));
        self.wait_gone(within)
    }

    /// `kubectl get pod NAME --no-headers`: NAME, READY, STATUS, RESTARTS (which may read
    /// `1 (5s ago)`), AGE.
    pub(crate) fn kubectl_cols(&self) -> Vec<String> {
        let out = self
            .srv
            .kubectl_ok(&["get", "pod", &self.name, "--no-headers"], None);
        let words: Vec<&str> = out.split_whitespace().collect();
        let mut cols: Vec<String> = words.iter().take(3).map(|w| (*w).to_string()).collect();
        cols.resize(3, String::new());
        let rest = words.get(3..words.len().saturating_sub(1)).unwrap_or(&[]);
        cols.push(rest.join(" "));
        cols.push(words.last().copied().unwrap_or("").to_string());
        cols
    }

    /// `LOGS(pod, container[, previous])`: stdout, or `Err` with kubectl's message.
    pub(crate) fn logs(&self, container: &str, previous: bool) -> Result<String, String> {
        let mut args = vec!["logs", self.name.as_str(), "-c", container];
        if previous {
            args.push("--previous");
        }
        let out = self.srv.kubectl(&args, None);
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            Err(String::from_utf8_lossy(&out.stderr).into_owned())
        }
    }

    /// `EVENTS(pod)`: the Event objects.
    pub(crate) fn events(&self) -> Vec<Value> {
        let out = self.srv.kubectl(
            &[
                "get",
                "events",
                "--field-selector",
                &format!("involvedObject.name={}", self.name),
                "-o",
                "json",
            ],
            None,
        );
        serde_json::from_slice::<Value>(&out.stdout)
            .ok()
            .and_then(|v| v["items"].as_array().cloned())
            .unwrap_or_default()
    }

    /// `UPDATE(pod, field)` of the spec: a merge patch; kubectl's output.
    pub(crate) fn patch(&self, patch: &str) -> Output {
        self.srv.kubectl(
            &["patch", "pod", &self.name, "--type=merge", "-p", patch],
            None,
        )
    }

    /// `UPDATE` of status conditions (readiness gates): a strategic patch of `pods/status`.
    pub(crate) fn patch_status(&self, patch: &str) {
        self.srv.kubectl_ok(
            &[
                "patch",
                "pod",
                &self.name,
                "--subresource=status",
                "--type=strategic",
                "-p",
                patch,
            ],
            None,
        );
    }

    /// The event log `/tmp/kpl/<id>/ev.log` as it is now.
    pub(crate) fn ev_log(&self) -> EvLog {
        let host = scratch_dir(&self.id).join("ev.log");
        let text = (self.srv.runtime == Runtime::Process)
            .then(|| std::fs::read_to_string(host).ok())
            .flatten()
            .filter(|t| !t.is_empty())
            .or_else(|| {
                use std::os::fd::AsRawFd;
                let held = self.ev_copy.lock().unwrap();
                // A new open of the same file, from its start.
                let fd = held.as_ref()?.as_raw_fd();
                std::fs::read_to_string(format!("/proc/self/fd/{fd}")).ok()
            })
            .unwrap_or_default();
        EvLog::parse(&text)
    }

    /// `status.podIP` (waits up to 30 s for it).
    pub(crate) fn ip(&self) -> String {
        let (_, o) = self.wait("a pod IP", secs(30), |p| p["status"]["podIP"].is_string());
        o.pod["status"]["podIP"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    }

    /// The address a probe or hook of this pod without `host` dials, as its Go error text
    /// shows it: 127.0.0.1 where the manifest names it (process run), else the pod IP.
    pub(crate) fn probe_host(&self) -> String {
        match self.srv.runtime {
            Runtime::Process => "127.0.0.1".to_string(),
            Runtime::Oci => self.ip(),
        }
    }

    /// What to print when a check fails: the observed updates, events, event log, notes.
    pub(crate) fn diag(&self) -> String {
        use std::fmt::Write;
        let mut s = format!("\n--- {} (uid {}) observed updates:\n", self.name, self.uid);
        let (obs, notes) = {
            let st = self.watch.st.lock().unwrap();
            (st.obs.clone(), st.notes.clone())
        };
        let mut delete_marker = self.deleted;
        for o in &obs {
            if let Some(d) = delete_marker.filter(|d| *d <= o.seen) {
                let _ = writeln!(s, "{:8.3} DELETE", (d - self.created).as_secs_f64());
                delete_marker = None;
            }
            let _ = writeln!(s, "{:8.3} {:8} {}", self.t(o), o.kind, summarize(&o.pod));
        }
        if let Some(d) = delete_marker {
            let _ = writeln!(s, "{:8.3} DELETE", (d - self.created).as_secs_f64());
        }
        let _ = writeln!(s, "--- events:");
        for e in self.events() {
            let _ = writeln!(
                s,
                "{} {} {} [{}] {} (x{})",
                e["lastTimestamp"].as_str().unwrap_or("?"),
                e["type"].as_str().unwrap_or("?"),
                e["reason"].as_str().unwrap_or("?"),
                e["involvedObject"]["fieldPath"].as_str().unwrap_or(""),
                e["message"].as_str().unwrap_or(""),
                e["count"]
            );
        }
        let ev = self.ev_log();
        if !ev.lines.is_empty() {
            s.push_str("--- event log:\n");
            for e in &ev.lines {
                let _ = writeln!(s, "{:.6} {} {}", e.ts, e.actor, e.word);
            }
        }
        if !notes.is_empty() {
            let _ = writeln!(s, "--- watch notes:\n{}", notes.join("\n"));
        }
        let log = self.srv.serve_log();
        let mine: Vec<&str> = log
            .lines()
            .filter(|l| l.contains(&self.name) || l.contains(&self.uid))
            .collect();
        if !mine.is_empty() {
            let from = mine.len().saturating_sub(20);
            let _ = writeln!(s, "--- serve log (this pod):\n{}", mine[from..].join("\n"));
        }
        s
    }
}

impl Drop for Pod<'_> {
    /// Leaves no pod behind (a forced delete when the scenario did not remove it).
    fn drop(&mut self) {
        if !self.gone {
            let _ = self.srv.kubectl(
                &[
                    "delete",
                    "pod",
                    &self.name,
                    "--grace-period=0",
                    "--force",
                    "--wait=false",
                ],
                None,
            );
        }
        self.watch.stop();
        self.link_stop.store(true, Ordering::SeqCst);
        if let Some(l) = self.linker.take() {
            let _ = l.join();
        }
    }
}

/// OBS(`port`) of scenario `id` from `file`, once it accepts connections.
pub(crate) fn start_observer<'a>(srv: &'a Server, id: &str, file: &str, port: u16) -> Pod<'a> {
    let obs = srv.create(id, &manifest(file));
    obs.wait_phase("Running", secs(60));
    let host = obs.probe_host();
    let deadline = Instant::now() + secs(30);
    while let Err(e) = std::net::TcpStream::connect((host.as_str(), port)) {
        assert!(
            Instant::now() < deadline,
            "observer not listening on {host}:{port} ({e}){}",
            obs.diag()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    obs
}

/// OBS(`port`) of scenario `id` (`<id>-observer.yaml`), then the hook pod `<id>.yaml` that
/// calls it, once Running: (observer, hook pod, the update that showed it Running).
pub(crate) fn observed_hook_pod<'a>(
    srv: &'a Server,
    id: &str,
    port: u16,
) -> (Pod<'a>, Pod<'a>, Obs) {
    let obs = start_observer(srv, id, &format!("{id}-observer.yaml"), port);
    let text = manifest(&format!("{id}.yaml"));
    let selector = [
        "--field-selector".to_string(),
        format!("metadata.name={}", pod_name(&text)),
    ];
    let peer = obs.probe_host();
    let hook = srv.create_with_peer(id, &text, &selector, Some(&peer));
    let (_, running) = hook.wait("hook pod Running", secs(60), |p| phase(p) == "Running");
    (obs, hook, running)
}

/// Polls `LOGS(observer)` for `line` until `deadline`; when it was seen.
pub(crate) fn wait_observed(obs: &Pod, line: &str, deadline: Instant) -> Option<Instant> {
    loop {
        if obs
            .logs("observer", false)
            .is_ok_and(|l| l.lines().any(|l| l == line))
        {
            return Some(Instant::now());
        }
        if Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// Polls the event log until `pred` holds (at most `within`); the log at that moment.
pub(crate) fn wait_ev(
    pod: &Pod,
    what: &str,
    within: Duration,
    pred: impl Fn(&EvLog) -> bool,
) -> EvLog {
    let deadline = Instant::now() + within;
    loop {
        let ev = pod.ev_log();
        if pred(&ev) {
            return ev;
        }
        assert!(
            Instant::now() < deadline,
            "{}: {what}: not within {within:?}{}",
            pod.name,
            pod.diag()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The scratch directory of a scenario, removed before and after.
pub(crate) struct Scratch(String);

impl Scratch {
    pub(crate) fn new(id: &str) -> Scratch {
        remove_dir(&scratch_dir(id));
        Scratch(id.to_string())
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        remove_dir(&scratch_dir(&self.0));
    }
}

// ----------------------------------------------------------------------------------------------
// Reading Pod objects

pub(crate) fn phase(p: &Value) -> &str {
    p["status"]["phase"].as_str().unwrap_or("")
}

pub(crate) fn terminal(p: &Value) -> bool {
    matches!(phase(p), "Succeeded" | "Failed")
}

/// The condition of type `t` (Null when absent).
pub(crate) fn cond<'a>(p: &'a Value, t: &str) -> &'a Value {
    p["status"]["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == t))
        .unwrap_or(&Value::Null)
}

/// The status of condition `t` ("" when absent).
pub(crate) fn cond_status<'a>(p: &'a Value, t: &str) -> &'a str {
    cond(p, t)["status"].as_str().unwrap_or("")
}

/// The status of (init) container `name` (Null when absent).
pub(crate) fn cstatus<'a>(p: &'a Value, name: &str) -> &'a Value {
    ["containerStatuses", "initContainerStatuses"]
        .iter()
        .filter_map(|k| p["status"][k].as_array())
        .flatten()
        .find(|c| c["name"] == name)
        .unwrap_or(&Value::Null)
}

/// The kind of a container status's state (`waiting`, `running`, `terminated` or "").
pub(crate) fn state_kind(cs: &Value) -> &str {
    ["waiting", "running", "terminated"]
        .into_iter()
        .find(|k| cs["state"][*k].is_object())
        .unwrap_or("")
}

/// `state.<kind>` of a container status.
pub(crate) fn state(cs: &Value) -> &Value {
    &cs["state"][state_kind(cs)]
}

pub(crate) fn restart_count(cs: &Value) -> u64 {
    cs["restartCount"].as_u64().unwrap_or(0)
}

/// `state.running.startedAt` of container `name` in `p`, in seconds since the epoch.
pub(crate) fn started_at(p: &Value, name: &str) -> Option<f64> {
    ts(&cstatus(p, name)["state"]["running"]["startedAt"])
}

/// Whether container status `cs` is terminated with `code` and `reason`.
pub(crate) fn terminated_with(cs: &Value, code: i64, reason: &str) -> bool {
    let t = &cs["state"]["terminated"];
    t["exitCode"] == code && t["reason"] == reason
}

/// Container `name` of `p` in a few words, for a failed check.
pub(crate) fn show(p: &Value, name: &str) -> String {
    let cs = cstatus(p, name);
    format!(
        "{name} is {} {} (exit {}, rc {})",
        state_kind(cs),
        state(cs)["reason"],
        state(cs)["exitCode"],
        restart_count(cs)
    )
}

/// Wall-clock seconds since the epoch now.
pub(crate) fn now_wall() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

/// Wall-clock seconds since the epoch at which the harness observed `o`.
pub(crate) fn wall(o: &Obs) -> f64 {
    now_wall() - o.seen.elapsed().as_secs_f64()
}

/// Seconds since the epoch of an RFC 3339 timestamp.
pub(crate) fn ts(v: &Value) -> Option<f64> {
    let t: jiff::Timestamp = v.as_str()?.parse().ok()?;
    Some(t.as_millisecond() as f64 / 1000.0)
}

/// One line per observed update for diagnostics.
pub(crate) fn summarize(p: &Value) -> String {
    let conds: Vec<String> = p["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| {
            let t = c["type"].as_str().unwrap_or("?");
            let short: String = t.chars().filter(|c| c.is_ascii_uppercase()).collect();
            format!(
                "{}={}",
                if short.is_empty() { t } else { &short },
                c["status"]
                    .as_str()
                    .unwrap_or("?")
                    .chars()
                    .next()
                    .unwrap_or('?')
            )
        })
        .collect();
    let cs: Vec<String> = ["initContainerStatuses", "containerStatuses"]
        .iter()
        .filter_map(|k| p["status"][k].as_array())
        .flatten()
        .map(|c| {
            let st = state(c);
            format!(
                "{}={}{}{} rc={}{}{}",
                c["name"].as_str().unwrap_or("?"),
                state_kind(c),
                st["reason"]
                    .as_str()
                    .map(|r| format!("/{r}"))
                    .unwrap_or_default(),
                st["exitCode"]
                    .as_i64()
                    .map(|e| format!("({e})"))
                    .unwrap_or_default(),
                restart_count(c),
                if c["ready"] == true { " ready" } else { "" },
                if c["started"] == true { " started" } else { "" },
            )
        })
        .collect();
    format!(
        "rv={} {}{}{} [{}] [{}]",
        p["metadata"]["resourceVersion"].as_str().unwrap_or("?"),
        phase(p),
        p["status"]["reason"]
            .as_str()
            .map(|r| format!("/{r}"))
            .unwrap_or_default(),
        if p["metadata"]["deletionTimestamp"].is_string() {
            " deleting"
        } else {
            ""
        },
        conds.join(" "),
        cs.join(", ")
    )
}
