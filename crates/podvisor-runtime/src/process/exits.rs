//! Forwarding a sandbox's exits to the agent, and noticing when its shim dies.
//!
//! The forwarder reads the shim's exit subscription. When the subscription ends while the
//! sandbox is still wanted (not after `remove_sandbox` began, not while the agent is going
//! away), it checks that the shim is really gone — a shim that still answers is subscribed
//! to again; one that lives but no longer answers is killed — and then cleans up after it:
//! every process left in the pod's container cgroups is killed (they were re-parented to the
//! agent, a child subreaper, which reaps them), the instances that had not reported an exit get
//! the exit the shim journaled before it died, or else 137 (SIGKILL) finished now, the journal
//! is completed so that the pod's next shim replays nothing, and the agent is sent
//! [`RuntimeEvent::SandboxLost`]. The next `create_sandbox` starts a fresh shim (the dead one's
//! lock went with it; its stale socket is replaced).

use super::{cgroup_roots, container_exit, process_alive, read_tail};
use crate::cgroup::{CgroupMode, ContainerCgroup};
use crate::shim::client::ShimClient;
use crate::shim::protocol::{
    ExitRecord, InstanceState, JournalEntry, Request, StartRecord, layout,
};
use crate::{ContainerExit, InstanceId, PodPaths, RuntimeEvent};
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tokio::sync::mpsc;

/// How often a shim whose subscription ended is asked again before it counts as gone.
const RESUBSCRIBE_TRIES: u32 = 5;
/// The pause between those attempts (and before each new subscription).
const RESUBSCRIBE_PAUSE: Duration = Duration::from_millis(100);

/// What the forwarder knows of one sandbox.
#[derive(Debug)]
pub(super) struct Watch {
    paths: PodPaths,
    shim_pid: u32,
    /// `remove_sandbox` began: the shim's exit is expected.
    removing: AtomicBool,
    /// The shim died on its own: nothing may be sent to the socket path any more (the pod's
    /// next shim will listen there).
    lost: AtomicBool,
    /// Instances started or re-adopted whose exit has not been forwarded, by id.
    live: Mutex<BTreeMap<InstanceId, Live>>,
}

/// An instance whose exit is still to come.
#[derive(Debug, Clone)]
pub(super) struct Live {
    pub(super) name: String,
    /// 0 until the shim answered the start.
    pub(super) pid: u32,
    /// RFC 3339; empty until the shim answered the start.
    pub(super) started_at: String,
    pub(super) termination_message_host_path: PathBuf,
    pub(super) log_path: PathBuf,
}

impl Watch {
    /// The watch of a sandbox served by `shim_pid`, knowing the instances the shim runs now
    /// (a re-adopted shim's; exits it has not had acknowledged are replayed by the
    /// subscription).
    pub(super) fn new(paths: PodPaths, shim_pid: u32, instances: &[InstanceState]) -> Watch {
        let live = instances
            .iter()
            .filter(|i| i.exit.is_none())
            .map(|i| {
                let live = Live {
                    name: i.name.clone(),
                    pid: i.pid,
                    started_at: i.started_at.clone(),
                    termination_message_host_path: paths
                        .pod_dir
                        .join("containers")
                        .join(&i.name)
                        .join(i.instance.to_string())
                        .join("termination-log"),
                    log_path: newest_log(&paths.log_dir.join(&i.name)),
                };
                (i.instance, live)
            })
            .collect();
        Watch {
            paths,
            shim_pid,
            removing: AtomicBool::new(false),
            lost: AtomicBool::new(false),
            live: Mutex::new(live),
        }
    }

    fn live(&self) -> std::sync::MutexGuard<'_, BTreeMap<InstanceId, Live>> {
        self.live
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A start is about to be asked of the shim.
    pub(super) fn starting(&self, instance: InstanceId, live: Live) {
        self.live().insert(instance, live);
    }

    /// The shim answered a start: `Some((pid, started_at))` when it runs, `None` when it failed.
    pub(super) fn started(&self, instance: InstanceId, running: Option<(u32, &str)>) {
        let mut live = self.live();
        match running {
            // Its exit may already have been forwarded: then it stays forgotten.
            Some((pid, started_at)) => {
                if let Some(l) = live.get_mut(&instance) {
                    l.pid = pid;
                    started_at.clone_into(&mut l.started_at);
                }
            }
            None => {
                live.remove(&instance);
            }
        }
    }

    /// `remove_sandbox` began.
    pub(super) fn removing(&self) {
        self.removing.store(true, Ordering::SeqCst);
    }

    /// The shim died on its own.
    pub(super) fn is_lost(&self) -> bool {
        self.lost.load(Ordering::SeqCst)
    }

    /// A shim that lives but no longer answers is killed, so that it cannot outlive the clean-up
    /// (only if `/proc` shows it is this pod's shim, never a recycled pid).
    fn kill_deaf_shim(&self) {
        let cmdline = std::fs::read(format!("/proc/{}/cmdline", self.shim_pid)).unwrap_or_default();
        let ours = String::from_utf8_lossy(&cmdline)
            .split('\0')
            .any(|arg| Path::new(arg) == self.paths.pod_dir);
        if ours
            && let Some(pid) = i32::try_from(self.shim_pid)
                .ok()
                .and_then(rustix::process::Pid::from_raw)
        {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
        }
    }

    /// After the shim died: kills what is left, settles every live instance's exit and
    /// completes the journal. Blocking.
    fn clean_up(&self) -> Vec<(InstanceId, ContainerExit)> {
        let live = std::mem::take(&mut *self.live());
        let wanted: BTreeSet<InstanceId> = live.keys().copied().collect();
        settle_lost(&self.paths, live)
            .into_iter()
            .filter(|i| wanted.contains(&i.instance))
            .filter_map(|i| Some((i.instance, container_exit(i.exit.as_ref()?))))
            .collect()
    }
}

/// After a pod's shim died (while the agent watched it, or while no agent ran): kills every
/// process it left in the pod's cgroups, gives each instance that was started (journaled, or in
/// `live`, the agent's view) and has no journaled exit the exit 137 (SIGKILL) finished now, and
/// completes the journal so that every exit counts as handed over (the pod's next shim replays
/// none). Returns every instance, in id order, each with its exit; `acked` says whether the
/// agent had acknowledged it before. Blocking.
pub(super) fn settle_lost(
    paths: &PodPaths,
    live: BTreeMap<InstanceId, Live>,
) -> Vec<InstanceState> {
    let journal = layout::journal(&paths.pod_dir);
    let (starts, recorded, acked) = read_journal(&journal);
    let mut pids: Vec<u32> = live.values().map(|l| l.pid).collect();
    pids.extend(starts.values().map(|s| s.pid));
    kill_leftovers(paths, &pids);
    let now = jiff::Timestamp::now().to_string();
    let live_ids: BTreeSet<InstanceId> = live.keys().copied().collect();
    let mut append = Vec::new();
    let mut instances: BTreeMap<InstanceId, InstanceState> = BTreeMap::new();
    let mut settle = |instance: InstanceId, exit: Option<&ExitRecord>, lost: ExitRecord| {
        let exit = exit.cloned().unwrap_or_else(|| {
            append.push(JournalEntry::Exit(lost.clone()));
            lost
        });
        instances.insert(
            instance,
            InstanceState {
                instance,
                name: exit.name.clone(),
                pid: exit.pid,
                started_at: exit.started_at.clone(),
                acked: acked.contains(&instance),
                exit: Some(exit),
                log_path: None,
            },
        );
    };
    for (&instance, start) in &starts {
        settle(instance, recorded.get(&instance), start.killed_now());
    }
    for (instance, l) in live {
        if starts.contains_key(&instance) {
            continue;
        }
        let lost = ExitRecord {
            instance,
            name: l.name,
            pid: l.pid,
            exit_code: 128 + libc::SIGKILL,
            signal: Some(libc::SIGKILL),
            oom_killed: false,
            started_at: if l.started_at.is_empty() {
                now.clone()
            } else {
                l.started_at
            },
            finished_at: now.clone(),
            termination_message_host_path: l.termination_message_host_path,
            log_path: l.log_path,
        };
        settle(instance, recorded.get(&instance), lost);
    }
    // Exits journaled without a start line (a shim of before start lines).
    for (&instance, exit) in &recorded {
        if !starts.contains_key(&instance) && !live_ids.contains(&instance) {
            settle(instance, Some(exit), exit.clone());
        }
    }
    append.extend(
        instances
            .keys()
            .filter(|i| !acked.contains(i))
            .map(|&instance| JournalEntry::Ack { instance }),
    );
    if let Err(e) = append_journal(&journal, &append) {
        eprintln!(
            "podvisor: completing the journal {} of a dead shim: {e}",
            journal.display()
        );
    }
    instances.into_values().collect()
}

/// The newest `<n>.log` in a container's log directory (an adopted instance's, most likely).
fn newest_log(dir: &Path) -> PathBuf {
    let newest = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .filter_map(|e| {
            let name = e.ok()?.file_name();
            name.to_str()?.strip_suffix(".log")?.parse::<u64>().ok()
        })
        .max();
    newest.map_or_else(PathBuf::new, |n| dir.join(format!("{n}.log")))
}

/// The journal's starts and exits by instance, and the instances acknowledged.
type Journal = (
    BTreeMap<InstanceId, StartRecord>,
    BTreeMap<InstanceId, ExitRecord>,
    HashSet<InstanceId>,
);

fn read_journal(path: &Path) -> Journal {
    let mut starts = BTreeMap::new();
    let mut exits = BTreeMap::new();
    let mut acked = HashSet::new();
    let Ok(file) = std::fs::File::open(path) else {
        return (starts, exits, acked);
    };
    for line in std::io::BufReader::new(file).lines() {
        let Ok(line) = line else { break };
        match serde_json::from_str::<JournalEntry>(&line) {
            Ok(JournalEntry::Start(s)) => {
                starts.insert(s.instance, s);
            }
            Ok(JournalEntry::Exit(e)) => {
                exits.insert(e.instance, e);
            }
            Ok(JournalEntry::Ack { instance }) => {
                acked.insert(instance);
            }
            // A torn last line: the shim died while appending it.
            Err(_) => {}
        }
    }
    (starts, exits, acked)
}

fn append_journal(path: &Path, entries: &[JournalEntry]) -> std::io::Result<()> {
    if entries.is_empty() {
        return Ok(());
    }
    let mut text = Vec::new();
    for entry in entries {
        serde_json::to_writer(&mut text, entry).map_err(std::io::Error::other)?;
        text.push(b'\n');
    }
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)?;
    // A torn line of the dead shim would swallow the first entry.
    if std::fs::metadata(path)?.len() > 0 && !ends_with_newline(path) {
        file.write_all(b"\n")?;
    }
    file.write_all(&text)?;
    file.sync_data()
}

fn ends_with_newline(path: &Path) -> bool {
    read_tail(path, 1).is_some_and(|s| s.ends_with('\n'))
}

/// Kills every process left in the pod's container cgroups (and removes those), or, without
/// cgroups, the process group each of `pids` leads.
fn kill_leftovers(paths: &PodPaths, pids: &[u32]) {
    let Some(uid) = paths.pod_dir.file_name().and_then(|s| s.to_str()) else {
        return;
    };
    let parent = format!("podvisor/{uid}");
    let mode = crate::cgroup::detect();
    if mode == CgroupMode::None {
        for &pid in pids.iter().filter(|&&pid| pid != 0) {
            kill_group_of(pid);
        }
        return;
    }
    let names: BTreeSet<String> = cgroup_roots(&mode)
        .iter()
        .filter_map(|root| std::fs::read_dir(root.join(&parent)).ok())
        .flatten()
        .filter_map(|e| {
            let e = e.ok()?;
            e.file_type().ok()?.is_dir().then_some(())?;
            e.file_name().into_string().ok()
        })
        .collect();
    for name in names {
        let Ok(cgroup) = ContainerCgroup::open(&mode, &parent, &name) else {
            continue;
        };
        if let Err(e) = cgroup.kill_all() {
            eprintln!("podvisor: killing what the dead shim of pod {uid} left in {name}: {e}");
        }
        // Best effort: a process not reaped yet may keep it busy; the sandbox's removal
        // takes the pod's cgroups later anyway.
        let _ = cgroup.remove();
    }
}

/// SIGKILLs the process group `pid` leads, if `pid` still leads one.
fn kill_group_of(pid: u32) {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let pgrp = stat
        .rfind(')')
        .and_then(|i| stat[i + 1..].split_whitespace().nth(2))
        .and_then(|s| s.parse::<u32>().ok());
    if pgrp == Some(pid)
        && let Some(pid) = i32::try_from(pid)
            .ok()
            .and_then(rustix::process::Pid::from_raw)
    {
        let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
    }
}

/// After the subscription ended unasked: a new one while the shim still serves, `None` once
/// it is gone (a shim that lives but keeps refusing is killed first).
async fn resubscribe(
    client: &ShimClient,
    watch: &Watch,
) -> Option<mpsc::UnboundedReceiver<ExitRecord>> {
    for _ in 0..RESUBSCRIBE_TRIES {
        if !process_alive(watch.shim_pid) {
            return None;
        }
        tokio::time::sleep(RESUBSCRIBE_PAUSE).await;
        if let Ok(exits) = client.subscribe().await {
            return Some(exits);
        }
    }
    watch.kill_deaf_shim();
    None
}

/// Forwards the shim's exits to the agent, acknowledging each once handed over; reports the
/// sandbox lost if the shim dies (see the module docs). Without `exits` (a new shim's), it
/// subscribes first.
pub(super) async fn forward_exits(
    client: ShimClient,
    exits: Option<mpsc::UnboundedReceiver<ExitRecord>>,
    events: mpsc::UnboundedSender<RuntimeEvent>,
    watch: std::sync::Arc<Watch>,
) {
    let mut exits = match exits {
        Some(exits) => Some(exits),
        None => client.subscribe().await.ok(),
    };
    loop {
        // No subscription (a new shim's failed): as one that ended.
        let mut stream = exits.take();
        while let Some(record) = match stream.as_mut() {
            Some(stream) => stream.recv().await,
            None => None,
        } {
            let instance = record.instance;
            let exit = tokio::task::spawn_blocking(move || container_exit(&record))
                .await
                .ok();
            let Some(exit) = exit else { return };
            watch.live().remove(&instance);
            if events
                .send(RuntimeEvent::Exited { instance, exit })
                .is_err()
            {
                return;
            }
            let _ = client.expect_ok(&Request::Ack { instance }).await;
        }
        // The subscription ended: expected while the sandbox is removed or nobody listens.
        if watch.removing.load(Ordering::SeqCst) || events.is_closed() {
            return;
        }
        match resubscribe(&client, &watch).await {
            Some(again) => exits = Some(again),
            None => break,
        }
    }
    watch.lost.store(true, Ordering::SeqCst);
    let cleaning = std::sync::Arc::clone(&watch);
    let Ok(exits) = tokio::task::spawn_blocking(move || cleaning.clean_up()).await else {
        return;
    };
    let _ = events.send(RuntimeEvent::SandboxLost { exits });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(instance: u64) -> ExitRecord {
        ExitRecord {
            instance,
            name: "c".into(),
            pid: 7,
            exit_code: 3,
            signal: None,
            oom_killed: false,
            started_at: "2025-01-01T00:00:00Z".into(),
            finished_at: "2025-01-01T00:00:01Z".into(),
            termination_message_host_path: "/nonexistent/t".into(),
            log_path: "/nonexistent/l".into(),
        }
    }

    #[test]
    fn journal_read_and_completed_after_a_torn_line() {
        let dir = std::env::temp_dir().join(format!("podvisor-exits-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("exits.jsonl");
        let first = serde_json::to_string(&JournalEntry::Exit(record(1))).unwrap();
        std::fs::write(&path, format!("{first}\n{{\"kind\":\"ack\",\"inst")).unwrap();
        let (_, exits, acked) = read_journal(&path);
        assert_eq!(exits.keys().copied().collect::<Vec<_>>(), [1]);
        assert!(acked.is_empty());
        append_journal(&path, &[JournalEntry::Ack { instance: 1 }]).unwrap();
        let (_, exits, acked) = read_journal(&path);
        assert_eq!(exits[&1], record(1));
        assert!(acked.contains(&1), "the torn line does not swallow the ack");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn newest_log_is_the_highest_restart_count() {
        let dir = std::env::temp_dir().join(format!("podvisor-logs-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for n in ["0.log", "2.log", "10.log", "x.log"] {
            std::fs::write(dir.join(n), "").unwrap();
        }
        assert_eq!(newest_log(&dir), dir.join("10.log"));
        assert_eq!(newest_log(&dir.join("none")), PathBuf::new());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
