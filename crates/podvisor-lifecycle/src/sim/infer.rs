//! What a pod's manifest says its containers do, as a [`Script`]: `podvisor simulate` without
//! `--script` (or for what the script does not name) reads each container's `command` + `args`
//! and each exec probe's and hook's command with `shell`, and lists what it inferred
//! and what it assumed (an unknown program runs until stopped; a probe or hook it cannot read
//! succeeds at once).
//!
//! Files: a probe's `cat FILE` / `test -f FILE` is answered from the files the pod's containers
//! create and remove. Two containers see the same file when the path is under a volume both
//! mount, or, for process-runtime containers (no `runtimeClassName: oci`), anywhere else too:
//! podvisor's process runtime gives its containers the host's filesystem outside their mounts.
//! An `oci` container's own files are its own. The file is taken to be absent at the start
//! (the simulator cannot see the host), init containers' files are there when the regular
//! containers start, and regular containers and sidecars are taken to start together. Only
//! each container's first run is modelled for files. A postStart hook's files count from its
//! container's start; a file a preStop hook changes is not known (when it runs is not).

use super::script::{HookScript, Outcome, ResultFrom, Run, Script};
use super::shell::{self, FileOp, Reading};
use k8s_openapi::api::core::v1::{Container, LifecycleHandler, Pod, Probe};
use std::cell::RefCell;
use std::fmt;
use std::time::Duration;

/// How a note came about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoteKind {
    /// Read from the manifest.
    Inferred,
    /// Not readable: the default behaviour.
    Assumed,
    /// Given by `--script`.
    Scripted,
}

impl NoteKind {
    /// `inferred`, `assumed` or `scripted`.
    pub fn as_str(self) -> &'static str {
        match self {
            NoteKind::Inferred => "inferred",
            NoteKind::Assumed => "assumed",
            NoteKind::Scripted => "scripted",
        }
    }
}

/// One line of what the simulation takes each container, probe and hook to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Note {
    /// Inferred, assumed or scripted.
    pub kind: NoteKind,
    /// The container.
    pub container: String,
    /// The sentence after the kind: `app runs 3s then exits 1 (from "sleep 3; exit 1")`.
    pub text: String,
}

impl fmt::Display for Note {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.kind.as_str(), self.text)
    }
}

/// The script the simulation runs (`--script`'s entries over the inferred ones) and the notes.
#[derive(Debug, Clone)]
pub struct Inference {
    /// The merged script.
    pub script: Script,
    /// One note per container, probe and hook.
    pub notes: Vec<Note>,
}

/// A file's changes as a container sees them, or why they are not known.
type Timeline<'a> = dyn Fn(&str) -> Result<Vec<FileOp>, String> + 'a;

/// A container of the pod and where it runs.
struct Member<'a> {
    container: &'a Container,
    /// A non-restartable init container: done before the regular containers start.
    init: bool,
    reading: Result<Reading, String>,
    /// Its exec hooks read (`postStart` first), for the files they change.
    hooks: Vec<(&'static str, Result<Reading, String>)>,
}

/// A container's exec hooks, read.
fn exec_hooks(c: &Container) -> Vec<(&'static str, Result<Reading, String>)> {
    let l = c.lifecycle.as_ref();
    [
        ("postStart", l.and_then(|l| l.post_start.as_ref())),
        ("preStop", l.and_then(|l| l.pre_stop.as_ref())),
    ]
    .into_iter()
    .filter_map(|(kind, h)| Some((kind, h?.exec.as_ref()?.command.as_ref()?)))
    .map(|(kind, cmd)| (kind, shell::read(cmd, &|_| None)))
    .collect()
}

/// Infers what `pod`'s containers do; `script`'s entries win for what they name.
pub fn infer(pod: &Pod, script: &Script) -> Inference {
    let Some(spec) = pod.spec.as_ref() else {
        return Inference {
            script: script.clone(),
            notes: Vec::new(),
        };
    };
    let oci = spec.runtime_class_name.as_deref() == Some("oci");
    let members: Vec<Member<'_>> = spec
        .init_containers
        .iter()
        .flatten()
        .map(|c| (c, c.restart_policy.as_deref() != Some("Always")))
        .chain(spec.containers.iter().map(|c| (c, false)))
        .map(|(container, init)| Member {
            container,
            init,
            reading: shell::read(&argv(container), &|_| None),
            hooks: exec_hooks(container),
        })
        .collect();
    let mut merged = script.clone();
    let mut notes = Vec::new();
    for m in &members {
        let name = &m.container.name;
        let given = script.containers.get(name);
        let mut cs = given.cloned().unwrap_or_default();
        let note = |kind, text: String| Note {
            kind,
            container: name.clone(),
            text,
        };
        if given.is_some_and(|g| !g.runs.is_empty()) {
            notes.push(note(
                NoteKind::Scripted,
                format!("{name} runs as --script says"),
            ));
        } else {
            let shown = shell::shown(&argv(m.container));
            match &m.reading {
                Ok(r) => {
                    cs.runs = vec![Run {
                        exit_after: r.exit.map(|_| r.took),
                        exit_code: r.exit.unwrap_or(0),
                    }];
                    let what = match r.exit {
                        Some(code) => format!("runs {} then exits {code}", secs(r.took)),
                        None => "runs until stopped".to_string(),
                    };
                    notes.push(note(
                        NoteKind::Inferred,
                        format!("{name} {what} (from {shown:?})"),
                    ));
                }
                Err(why) => notes.push(note(
                    NoteKind::Assumed,
                    format!("{name} runs until stopped ({why})"),
                )),
            }
        }
        let timeline = |path: &str| file_timeline(&members, m, path, oci);
        let probes = [
            ("startup", m.container.startup_probe.as_ref()),
            ("liveness", m.container.liveness_probe.as_ref()),
            ("readiness", m.container.readiness_probe.as_ref()),
        ];
        for (kind, probe) in probes {
            let Some(probe) = probe else { continue };
            let slot = match kind {
                "startup" => &mut cs.probes.startup,
                "liveness" => &mut cs.probes.liveness,
                _ => &mut cs.probes.readiness,
            };
            if !slot.is_empty() {
                let text = format!("{name} {kind} probe as --script says");
                notes.push(note(NoteKind::Scripted, text));
                continue;
            }
            let policy = spec.restart_policy.as_deref().unwrap_or("Always");
            match probe_schedule(probe, &timeline).and_then(|(schedule, shown)| {
                // A run that leaves the files otherwise than it found them: a restart would
                // start from that, which the script's per-run schedule cannot say.
                let changed =
                    schedule.first().map(|s| s.result) != schedule.last().map(|s| s.result);
                if changed && restarts(m, policy) {
                    return Err(format!(
                        "{shown}: {name} restarts with the files its run left, which the \
                         simulator does not follow"
                    ));
                }
                Ok((schedule, shown))
            }) {
                Ok((schedule, shown)) => {
                    let text = format!(
                        "{name} {kind} probe {} (from {shown:?})",
                        describe(&schedule)
                    );
                    *slot = schedule;
                    notes.push(note(NoteKind::Inferred, text));
                }
                Err(why) => notes.push(note(
                    NoteKind::Assumed,
                    format!("{name} {kind} probe succeeds ({why})"),
                )),
            }
        }
        let hooks = m.container.lifecycle.as_ref();
        let hooks = [
            ("postStart", hooks.and_then(|l| l.post_start.as_ref())),
            ("preStop", hooks.and_then(|l| l.pre_stop.as_ref())),
        ];
        for (kind, hook) in hooks {
            let Some(hook) = hook else { continue };
            let slot = if kind == "postStart" {
                &mut cs.hooks.post_start
            } else {
                &mut cs.hooks.pre_stop
            };
            if slot.is_some() {
                notes.push(note(
                    NoteKind::Scripted,
                    format!("{name} {kind} hook as --script says"),
                ));
                continue;
            }
            if hook.sleep.is_some() {
                continue; // The simulator takes a sleep action's own seconds.
            }
            match hook_script(hook, &timeline) {
                Ok((h, shown)) => {
                    let result = match h.result {
                        Outcome::Success => "succeeds",
                        Outcome::Failure => "fails",
                    };
                    let text = format!(
                        "{name} {kind} hook takes {} and {result} (from {shown:?})",
                        secs(h.duration)
                    );
                    *slot = Some(h);
                    notes.push(note(NoteKind::Inferred, text));
                }
                Err(why) => notes.push(note(
                    NoteKind::Assumed,
                    format!("{name} {kind} hook succeeds at once ({why})"),
                )),
            }
        }
        merged.containers.insert(name.clone(), cs);
    }
    Inference {
        script: merged,
        notes,
    }
}

/// Whether the container runs again after its (read) run ends.
fn restarts(m: &Member<'_>, pod_policy: &str) -> bool {
    let Ok(Reading {
        exit: Some(code), ..
    }) = &m.reading
    else {
        return false;
    };
    let policy = m.container.restart_policy.as_deref().unwrap_or(pod_policy);
    match policy {
        "Always" => !m.init,
        "OnFailure" => *code != 0,
        _ => false,
    }
}

/// A container's argv: `command` then `args`.
fn argv(c: &Container) -> Vec<String> {
    if c.command.is_none() {
        return Vec::new(); // The image's entrypoint: not known here.
    }
    c.command
        .iter()
        .flatten()
        .chain(c.args.iter().flatten())
        .cloned()
        .collect()
}

/// Where a path lives for a container: a volume, the host (process runtime), or its own.
fn scope(c: &Container, path: &str, oci: bool) -> String {
    let mounted = c.volume_mounts.iter().flatten().find(|m| {
        let dir = m.mount_path.trim_end_matches('/');
        path.strip_prefix(dir)
            .is_some_and(|rest| rest.starts_with('/'))
    });
    match mounted {
        Some(m) => format!("volume {}", m.name),
        None if oci => format!("container {}", c.name),
        None => "host".to_string(),
    }
}

/// Whether `path` exists, as `prober` sees it, at each time a container in its scope changes
/// it: the changes of the others' first runs, in time order from the probed container's start
/// (init containers' at 0). `Err` names a container whose files are not known.
fn file_timeline(
    members: &[Member<'_>],
    prober: &Member<'_>,
    path: &str,
    oci: bool,
) -> Result<Vec<FileOp>, String> {
    let here = scope(prober.container, path, oci);
    let mut ops = Vec::new();
    for m in members {
        if scope(m.container, path, oci) != here {
            continue;
        }
        let reading = m
            .reading
            .as_ref()
            .map_err(|_| format!("{path}: what {} does to it is not known", m.container.name))?;
        for op in reading.files.iter().filter(|op| op.path == path) {
            let at = if m.init && !prober.init {
                Duration::ZERO
            } else {
                op.at
            };
            ops.push(FileOp { at, ..op.clone() });
        }
        // A postStart hook runs from the container's start, beside it; when a preStop hook
        // runs is not known beforehand.
        for (kind, hook) in &m.hooks {
            let name = &m.container.name;
            let hook = hook
                .as_ref()
                .map_err(|_| format!("{path}: what {name}'s {kind} hook does is not known"))?;
            let mut changes = hook.files.iter().filter(|op| op.path == path).peekable();
            if *kind == "preStop" && changes.peek().is_some() {
                return Err(format!("{path}: {name}'s preStop hook changes it"));
            }
            for op in changes {
                let at = if m.init && !prober.init {
                    Duration::ZERO
                } else {
                    op.at
                };
                ops.push(FileOp { at, ..op.clone() });
            }
        }
    }
    ops.sort_by_key(|op| op.at);
    Ok(ops)
}

/// The exec command of a probe or hook, or why there is none to read.
fn exec_of(exec: Option<&Vec<String>>, other: Option<&str>) -> Result<Vec<String>, String> {
    match exec {
        Some(cmd) => Ok(cmd.clone()),
        None => Err(format!(
            "{}: a server the simulator cannot model",
            other.unwrap_or("no exec")
        )),
    }
}

/// Whether `path` exists at `t` after these changes (absent before the first).
fn present_at(ops: &[FileOp], path: &str, t: Duration) -> bool {
    ops.iter()
        .rfind(|op| op.path == path && op.at <= t)
        .is_some_and(|op| op.present)
}

/// A probe's results over the probed container's run: its command read at the start and at
/// every change of a file it tests (`timeline` gives a file's changes, or why they are not
/// known).
fn probe_schedule(
    probe: &Probe,
    timeline: &Timeline<'_>,
) -> Result<(Vec<ResultFrom>, String), String> {
    let other = if probe.http_get.is_some() {
        Some("httpGet")
    } else if probe.tcp_socket.is_some() {
        Some("tcpSocket")
    } else if probe.grpc.is_some() {
        Some("grpc")
    } else {
        None
    };
    let cmd = exec_of(probe.exec.as_ref().and_then(|e| e.command.as_ref()), other)?;
    let shown = shell::shown(&cmd);
    let ops = RefCell::new(Vec::<FileOp>::new());
    let asked = RefCell::new(Vec::<String>::new());
    let why_not = RefCell::new(None::<String>);
    let mut times = vec![Duration::ZERO];
    // A test can depend on files asked only under other answers: read again until the times
    // to look at stop growing (a command tests a handful of files).
    for _ in 0..4 {
        let mut schedule: Vec<ResultFrom> = Vec::new();
        for &t in &times {
            let answer = |path: &str| {
                if !asked.borrow().iter().any(|p| p == path) {
                    asked.borrow_mut().push(path.to_string());
                    match timeline(path) {
                        Ok(more) => ops.borrow_mut().extend(more),
                        Err(why) => *why_not.borrow_mut() = Some(why),
                    }
                }
                if why_not.borrow().is_some() {
                    return None;
                }
                Some(present_at(&ops.borrow(), path, t))
            };
            let r =
                shell::read(&cmd, &answer).map_err(|e| why_not.borrow().clone().unwrap_or(e))?;
            let result = if r.exit == Some(0) {
                Outcome::Success
            } else {
                Outcome::Failure
            };
            if schedule.last().map(|s| s.result) != Some(result) {
                schedule.push(ResultFrom { from: t, result });
            }
        }
        let mut next: Vec<Duration> = std::iter::once(Duration::ZERO)
            .chain(ops.borrow().iter().map(|op| op.at))
            .collect();
        next.sort();
        next.dedup();
        if next == times {
            return Ok((schedule, shown));
        }
        times = next;
    }
    Err(format!("{shown}: too many files to follow"))
}

/// A hook's duration and result.
fn hook_script(
    hook: &LifecycleHandler,
    timeline: &Timeline<'_>,
) -> Result<(HookScript, String), String> {
    let other = if hook.http_get.is_some() {
        Some("httpGet")
    } else if hook.tcp_socket.is_some() {
        Some("tcpSocket")
    } else {
        None
    };
    let cmd = exec_of(hook.exec.as_ref().and_then(|e| e.command.as_ref()), other)?;
    // A hook runs when the container has started (postStart) or is stopping (preStop): what
    // files hold then is not followed; a file test in a hook is read as at the start.
    let at_start = |path: &str| {
        timeline(path)
            .ok()
            .map(|ops| present_at(&ops, path, Duration::ZERO))
    };
    let r = shell::read(&cmd, &at_start)?;
    let Some(code) = r.exit else {
        return Err("it never ends".to_string());
    };
    let result = if code == 0 {
        Outcome::Success
    } else {
        Outcome::Failure
    };
    Ok((
        HookScript {
            duration: r.took,
            result,
        },
        shell::shown(&cmd),
    ))
}

/// `succeeds`, `fails`, `fails until 2s, then succeeds`, ...
fn describe(schedule: &[ResultFrom]) -> String {
    let word = |o: Outcome| match o {
        Outcome::Success => "succeeds",
        Outcome::Failure => "fails",
    };
    match schedule {
        [] => "succeeds".to_string(),
        [one] => word(one.result).to_string(),
        _ => {
            let mut parts = Vec::new();
            for (i, s) in schedule.iter().enumerate() {
                match schedule.get(i + 1) {
                    Some(next) if i == 0 => {
                        parts.push(format!("{} until {}", word(s.result), secs(next.from)));
                    }
                    Some(next) => parts.push(format!(
                        "{} from {} until {}",
                        word(s.result),
                        secs(s.from),
                        secs(next.from)
                    )),
                    None => parts.push(format!("then {}", word(s.result))),
                }
            }
            parts.join(", ")
        }
    }
}

fn secs(d: Duration) -> String {
    crate::duration::human_duration(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(spec: &str) -> Pod {
        let text = format!("apiVersion: v1\nkind: Pod\nmetadata: {{name: p}}\nspec:\n{spec}");
        serde_saphyr::from_str(&text).unwrap()
    }

    fn notes(i: &Inference) -> Vec<String> {
        i.notes.iter().map(ToString::to_string).collect()
    }

    fn schedule(r: &[ResultFrom]) -> Vec<(u64, Outcome)> {
        r.iter().map(|r| (r.from.as_secs(), r.result)).collect()
    }

    #[test]
    fn a_crash_looping_container_runs_then_exits() {
        let p =
            pod("  containers:\n  - {name: app, image: b, command: [sh, -c, 'sleep 3; exit 1']}\n");
        let i = infer(&p, &Script::default());
        let runs = &i.script.containers["app"].runs;
        assert_eq!(runs.len(), 1);
        assert_eq!(runs[0].exit_after, Some(Duration::from_secs(3)));
        assert_eq!(runs[0].exit_code, 1);
        assert_eq!(
            notes(&i),
            ["inferred: app runs 3s then exits 1 (from \"sleep 3; exit 1\")"]
        );
    }

    #[test]
    fn unknown_programs_and_servers_are_assumed() {
        let p = pod(
            "  containers:\n  - name: web\n    image: nginx\n    command: [nginx, -g, 'daemon off;']\n    \
             livenessProbe: {httpGet: {port: 80}}\n  - {name: img, image: b}\n",
        );
        let i = infer(&p, &Script::default());
        assert_eq!(
            notes(&i),
            [
                "assumed: web runs until stopped (nginx: unknown command)",
                "assumed: web liveness probe succeeds (httpGet: a server the simulator cannot model)",
                "assumed: img runs until stopped (no command: the image's entrypoint is not read)",
            ]
        );
        assert!(i.script.containers["web"].runs.is_empty());
        assert!(i.script.containers["web"].probes.liveness.is_empty());
    }

    #[test]
    fn a_readiness_file_the_container_creates_makes_the_probe_pass_from_then() {
        let p = pod("  containers:\n  - name: app\n    image: b\n    \
             command: [sh, -c, 'sleep 2; touch /tmp/ready; sleep 30; rm /tmp/ready; sleep 10']\n    \
             readinessProbe: {exec: {command: [cat, /tmp/ready]}}\n    \
             livenessProbe: {exec: {command: [sh, -c, 'test -f /tmp/ready || exit 1']}}\n");
        let i = infer(&p, &Script::default());
        let probes = &i.script.containers["app"].probes;
        let expect = [
            (0, Outcome::Failure),
            (2, Outcome::Success),
            (32, Outcome::Failure),
        ];
        assert_eq!(schedule(&probes.readiness), expect);
        assert_eq!(schedule(&probes.liveness), expect);
        assert!(
            notes(&i).contains(
                &"inferred: app readiness probe fails until 2s, succeeds from 2s until 32s, \
                  then fails (from \"cat /tmp/ready\")"
                    .to_string()
            ),
            "{:?}",
            notes(&i)
        );
    }

    #[test]
    fn a_file_left_for_the_next_run_is_not_followed() {
        let p = pod("  containers:\n  - name: app\n    image: b\n    \
             command: [sh, -c, 'sleep 2; touch /tmp/ready; sleep 5; exit 1']\n    \
             readinessProbe: {exec: {command: [cat, /tmp/ready]}}\n");
        let i = infer(&p, &Script::default());
        assert!(i.script.containers["app"].probes.readiness.is_empty());
        let why = "assumed: app readiness probe succeeds (cat /tmp/ready: app restarts with \
                   the files its run left, which the simulator does not follow)";
        assert!(notes(&i).contains(&why.to_string()), "{:?}", notes(&i));
        // Under restartPolicy Never there is one run.
        let p = pod(&format!(
            "  restartPolicy: Never\n{}",
            "  containers:\n  - name: app\n    image: b\n    \
             command: [sh, -c, 'sleep 2; touch /tmp/ready; sleep 5; exit 1']\n    \
             readinessProbe: {exec: {command: [cat, /tmp/ready]}}\n"
        ));
        let i = infer(&p, &Script::default());
        assert_eq!(i.script.containers["app"].probes.readiness.len(), 2);
    }

    #[test]
    fn true_and_false_probes_and_a_file_nobody_creates() {
        let p = pod(
            "  containers:\n  - name: app\n    image: b\n    command: [sleep, '60']\n    \
             startupProbe: {exec: {command: ['true']}}\n    \
             livenessProbe: {exec: {command: ['false']}}\n    \
             readinessProbe: {exec: {command: [ls, /tmp/never]}}\n",
        );
        let i = infer(&p, &Script::default());
        let probes = &i.script.containers["app"].probes;
        assert_eq!(schedule(&probes.startup), [(0, Outcome::Success)]);
        assert_eq!(schedule(&probes.liveness), [(0, Outcome::Failure)]);
        assert_eq!(schedule(&probes.readiness), [(0, Outcome::Failure)]);
    }

    #[test]
    fn an_unknown_container_in_the_files_scope_makes_its_files_unknown() {
        let p = pod(
            "  containers:\n  - name: app\n    image: b\n    command: [sleep, '60']\n    \
             readinessProbe: {exec: {command: [cat, /tmp/ready]}}\n  \
             - {name: web, image: b, command: [server]}\n",
        );
        let i = infer(&p, &Script::default());
        assert!(i.script.containers["app"].probes.readiness.is_empty());
        assert!(
            notes(&i).contains(
                &"assumed: app readiness probe succeeds (/tmp/ready: what web does to it is not \
              known)"
                    .to_string()
            )
        );
    }

    #[test]
    fn files_are_shared_through_volumes_and_the_host_but_not_between_oci_containers() {
        let spec = |class: &str, mount: &str| {
            pod(&format!(
                "{class}  volumes: [{{name: shared, emptyDir: {{}}}}]\n  initContainers:\n  \
                 - {{name: setup, image: b, command: [touch, /data/ready]{mount}}}\n  containers:\n  \
                 - name: app\n    image: b\n    command: [sleep, '60']\n{mount2}    \
                 readinessProbe: {{exec: {{command: [test, -f, /data/ready]}}}}\n",
                mount2 = if mount.is_empty() {
                    String::new()
                } else {
                    "    volumeMounts: [{name: shared, mountPath: /data}]\n".to_string()
                }
            ))
        };
        let mount = ", volumeMounts: [{name: shared, mountPath: /data}]";
        let ready = |p: &Pod| {
            schedule(
                &infer(p, &Script::default()).script.containers["app"]
                    .probes
                    .readiness,
            )
        };
        // The init container's file is there when app starts.
        assert_eq!(ready(&spec("", "")), [(0, Outcome::Success)]);
        assert_eq!(
            ready(&spec("  runtimeClassName: oci\n", mount)),
            [(0, Outcome::Success)]
        );
        assert_eq!(
            ready(&spec("  runtimeClassName: oci\n", "")),
            [(0, Outcome::Failure)]
        );
    }

    #[test]
    fn a_post_start_hook_s_file_counts_and_a_pre_stop_s_is_not_known() {
        let spec = |hook: &str| {
            pod(&format!(
                "  containers:\n  - name: app\n    image: b\n    command: [sleep, infinity]\n    \
                 lifecycle:\n      {hook}: {{exec: {{command: [sh, -c, 'sleep 1; touch /tmp/r']}}}}\n    \
                 readinessProbe: {{exec: {{command: [cat, /tmp/r]}}}}\n"
            ))
        };
        let i = infer(&spec("postStart"), &Script::default());
        assert_eq!(
            schedule(&i.script.containers["app"].probes.readiness),
            [(0, Outcome::Failure), (1, Outcome::Success)]
        );
        let i = infer(&spec("preStop"), &Script::default());
        assert!(i.script.containers["app"].probes.readiness.is_empty());
        assert!(
            notes(&i).contains(
                &"assumed: app readiness probe succeeds (/tmp/r: app's preStop hook changes it)"
                    .to_string()
            )
        );
    }

    #[test]
    fn hooks_take_their_sleeps_and_fail_with_their_exit() {
        let p = pod(
            "  containers:\n  - name: app\n    image: b\n    command: [sleep, '60']\n    \
             lifecycle:\n      postStart: {exec: {command: [sh, -c, 'sleep 2; exit 3']}}\n      \
             preStop: {exec: {command: [sleep, '5']}}\n",
        );
        let i = infer(&p, &Script::default());
        let hooks = &i.script.containers["app"].hooks;
        let post = hooks.post_start.as_ref().unwrap();
        assert_eq!(
            (post.duration.as_secs(), post.result),
            (2, Outcome::Failure)
        );
        let pre = hooks.pre_stop.as_ref().unwrap();
        assert_eq!((pre.duration.as_secs(), pre.result), (5, Outcome::Success));
        assert!(
            notes(&i).contains(
                &"inferred: app postStart hook takes 2s and fails (from \"sleep 2; exit 3\")"
                    .to_string()
            )
        );
    }

    #[test]
    fn the_script_wins_for_what_it_names() {
        let p = pod(
            "  containers:\n  - name: app\n    image: b\n    command: [sh, -c, 'sleep 3; exit 1']\n    \
             readinessProbe: {exec: {command: ['false']}}\n    \
             livenessProbe: {exec: {command: ['false']}}\n",
        );
        let script = Script::parse(
            "containers: {app: {runs: [{exitAfter: 9s}], probes: {readiness: [{from: 0s, result: success}]}}}",
        )
        .unwrap();
        let i = infer(&p, &script);
        let app = &i.script.containers["app"];
        assert_eq!(app.runs[0].exit_after, Some(Duration::from_secs(9)));
        assert_eq!(schedule(&app.probes.readiness), [(0, Outcome::Success)]);
        assert_eq!(schedule(&app.probes.liveness), [(0, Outcome::Failure)]);
        assert_eq!(
            notes(&i),
            [
                "scripted: app runs as --script says",
                "inferred: app liveness probe fails (from \"false\")",
                "scripted: app readiness probe as --script says",
            ]
        );
    }
}
