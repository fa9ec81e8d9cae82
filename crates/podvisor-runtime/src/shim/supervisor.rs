//! The shim's state: instances, the reaper, exit recording and subscribers.
//!
//! Threads: the reaper (one `waitid` loop for every child and re-parented descendant), two log
//! pumps per instance, one short-lived thread per exit (kill leftovers, wait for the pumps,
//! journal, notify), and one thread per agent connection (in `server`).
//!
//! Lock order: `start_lock` before `fork_lock` before `state`; `journal` is taken alone (and
//! `first_sync` only under it); `ahead` last, never held while another is taken.
//!
//! Starts are one at a time (`start_lock`, as the kubelet starts one container of a pod at a
//! time) and each is journaled before it is answered: the shim starts an instance id, and an
//! attempt (container name + `restartCount`) once, whatever an agent asks, even a new agent
//! re-asking what a dead one asked, and even a later shim of the same pod (it reads the
//! journal). The start's line is written before the answer and synced to disk just after it,
//! before a later `State` is answered (what a restarted agent asks first). The answer does
//! not wait for the disk: a shim that dies in between leaves its line in the page cache for
//! the next one; only a crash of the machine, which ends the containers too, could lose it.

use super::attach::ContainerIo;
use super::child::ChildSetup;
use super::protocol::{ExitRecord, InstanceState, JournalEntry, Response, StartRecord};
use crate::cgroup::{CgroupMode, ContainerCgroup};
use crate::config::ContainerConfig;
use crate::logs::{SharedLogWriter, Stream};
use rustix::io::Errno;
use rustix::process::{Pid, Signal, WaitId, WaitIdOptions, WaitOptions, WaitStatus};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs::{File, OpenOptions};
use std::io::{self, BufRead, Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, mpsc};
use std::thread;
use std::time::{Duration, Instant};

/// How long an exit waits for its log pumps to drain after the cgroup is emptied.
const PUMP_DRAIN: Duration = Duration::from_secs(2);
/// Small stacks: the shim should stay a few MiB.
pub(super) const THREAD_STACK: usize = 128 * 1024;
/// The stack of the short-lived thread that prepares an OCI bundle.
const BUNDLE_STACK: usize = 4 * 1024 * 1024;

/// An OCI container's bundle in the making: its thread mounts the root filesystem and builds
/// the spec ([`crate::oci::launch::draft`]), then waits to be told to finish it (the cgroup
/// view, `config.json`, the termination-message file's owner) or to remove it.
struct Bundle {
    thread: Option<thread::JoinHandle<BundleResult>>,
    go: mpsc::Sender<bool>,
    /// When the thread began.
    begun: Instant,
}

type BundleResult = Result<crate::oci::launch::Prepared, crate::oci::launch::LaunchError>;

impl Bundle {
    /// Lets its thread finish it once drafted (the container's cgroup and termination-message
    /// file exist now).
    fn go(&self) {
        let _ = self.go.send(true);
    }

    /// Finishes it and waits for that.
    fn finish(mut self) -> io::Result<BundleResult> {
        self.go();
        self.thread
            .take()
            .map_or(Err(io::Error::other("the bundle's thread is gone")), |t| {
                t.join()
                    .map_err(|_| io::Error::other("preparing the bundle panicked"))
            })
    }
}

impl Drop for Bundle {
    fn drop(&mut self) {
        if let Some(thread) = self.thread.take() {
            // Unless told to go on already, the thread removes what it drafted; what it
            // finished goes here.
            let _ = self.go.send(false);
            if let Ok(Ok(prepared)) = thread.join()
                && let Err(e) = crate::oci::launch::abandon(&prepared.bundle)
            {
                eprintln!("podvisor shim: removing an unused root filesystem: {e}");
            }
        }
    }
}

/// Who waits for a reaped pid.
pub(super) enum Waiter {
    /// The main process of an instance.
    Container(u64),
    /// An exec: the status goes back to the requesting connection.
    Exec(mpsc::Sender<WaitStatus>),
    /// A streaming exec: the status goes down the channel, then a byte on `wake` wakes the
    /// connection's thread (asleep in `poll` on the connection and this pipe).
    Stream {
        /// Where the status goes.
        tx: mpsc::Sender<WaitStatus>,
        /// The write end of the wake-up pipe.
        wake: OwnedFd,
    },
}

/// One container instance.
struct Instance {
    name: String,
    /// The attempt it was started as (`None`: an agent that did not say, or an old journal).
    restart_count: Option<i32>,
    /// `None` for instances loaded from the journal of an earlier shim.
    config: Option<ContainerConfig>,
    pid: u32,
    started_at: String,
    cgroup: Option<Arc<ContainerCgroup>>,
    oom_baseline: u64,
    /// Receives one message per log pump that finished, and how many there are.
    pumps: Option<(mpsc::Receiver<()>, usize)>,
    /// Its own stdio, for attaches (`None` once it exited, and for instances of the journal).
    io: Option<Arc<ContainerIo>>,
    /// Its CRI log's writer, for `ReopenContainerLog` (`None` for instances of the journal).
    log: Option<SharedLogWriter>,
    /// An OCI container: what its execs start from (`None` for a host process).
    oci: Option<Arc<OciExec>>,
    /// The main process has been reaped (its pid may be reused: never signal it again).
    reaped: bool,
    exit: Option<ExitRecord>,
    acked: bool,
}

#[derive(Default)]
struct State {
    instances: BTreeMap<u64, Instance>,
    waiters: HashMap<i32, Waiter>,
    subscribers: Vec<Subscriber>,
    shutdown: bool,
    /// Bumped after every fork, so the reaper does not sleep through a new child.
    forks: u64,
    tmpfs_mounted: HashSet<PathBuf>,
    /// The holder of the pod's PID namespace ([`super::pid_holder`]), once a container
    /// asked for it.
    pid_holder: Option<u32>,
}

/// A subscription to exits: each goes down the channel, then a byte on the pipe wakes the
/// thread that streams them (it sleeps in `poll` on the pipe and the agent's connection, so
/// an idle shim runs no code at all).
pub(super) struct Subscriber {
    pub(super) tx: mpsc::Sender<ExitRecord>,
    pub(super) wake: OwnedFd,
}

impl Subscriber {
    /// Sends an exit; false once the subscription is gone.
    fn send(&self, record: ExitRecord) -> bool {
        if self.tx.send(record).is_err() {
            return false;
        }
        // A full pipe already holds a wake-up.
        let _ = rustix::io::write(&self.wake, &[1]);
        true
    }
}

/// The shim.
pub(super) struct Shim {
    pub(super) socket: PathBuf,
    /// The pod's UID (its directory's name) and the registry of the paths its containers
    /// create on the host (see [`crate::host_paths`]).
    uid: String,
    host_paths: Option<crate::host_paths::HostPaths>,
    cgroups: CgroupMode,
    rootless: bool,
    /// The shim runs in its own mount namespace: tmpfs volumes are mounted once at their
    /// source there and bind-mounted into each container, so containers share them.
    shared_tmpfs: bool,
    /// Held across `fork`+`exec` (std reaps a child whose exec failed inside `spawn`) and
    /// across each reaping round, so the reaper never steals that status.
    fork_lock: Mutex<()>,
    /// Held across a whole start, from the duplicate check to the journaled start; an exit
    /// takes it before it is journaled, so a start always precedes its exit in the journal.
    start_lock: Mutex<()>,
    state: Mutex<State>,
    forked: Condvar,
    journal: Mutex<File>,
    /// A new journal's first sync (its directory entry, the file), running on a thread of its
    /// own from the shim's start and waited for by the first append: a directory's fsync is
    /// a file-system commit (~2 ms here), which a new pod's first answer need not wait for,
    /// since nothing is reported from the journal before something is appended to it.
    first_sync: Mutex<Option<thread::JoinHandle<io::Result<()>>>>,
    /// Requests being answered: the shim does not exit in the middle of one.
    busy: std::sync::atomic::AtomicUsize,
    /// The shim of a pod whose OCI containers youki's helper runs keeps one helper started
    /// ahead ([`crate::oci::ahead`]) for the next start: made when the shim starts (or by the
    /// spare it was) and after a call when another container follows ([`more_to_start`]),
    /// let go once the shim is quiet. Taken last
    /// (after `fork_lock` or `state`), never held while taking another.
    ahead: Mutex<Option<crate::oci::ahead::Ahead>>,
    /// The shim's mount namespace, which a helper started ahead joins when called (a spare's
    /// was started before the shim made it); `None`: no helper is kept ahead.
    mount_ns: Option<OwnedFd>,
    /// Whether the OCI start under way is likely followed by another of the pod's containers
    /// ([`more_to_start`]), so that a new helper is started ahead once it is done: set by each
    /// start, under `start_lock`.
    ahead_again: std::sync::atomic::AtomicBool,
}

/// `(exit code, signal)` of a wait status: 128 + n when killed by signal n.
pub(super) fn decode(status: WaitStatus) -> (i32, Option<i32>) {
    if let Some(sig) = status.terminating_signal() {
        (128 + sig, Some(sig))
    } else {
        (status.exit_status().unwrap_or(255), None)
    }
}

fn now() -> String {
    jiff::Timestamp::now().to_string()
}

fn pid_of(pid: u32) -> Option<Pid> {
    Pid::from_raw(i32::try_from(pid).ok()?)
}

fn signal_of(signal: i32) -> Option<Signal> {
    Signal::from_named_raw(signal)
}

impl Shim {
    /// Opens the journal (replaying exits of an earlier shim) and detects cgroups.
    pub(super) fn new(
        pod_dir: &Path,
        socket: PathBuf,
        shared_tmpfs: bool,
        keeps_ahead: bool,
    ) -> io::Result<Self> {
        let mount_ns = if keeps_ahead {
            match File::open("/proc/self/ns/mnt") {
                Ok(ns) => Some(OwnedFd::from(ns)),
                Err(e) => {
                    eprintln!("podvisor shim: no helper started ahead ({e})");
                    None
                }
            }
        } else {
            None
        };
        let journal_path = super::protocol::layout::journal(pod_dir);
        let mut state = State::default();
        let (starts, exits, acked) = read_journal(&journal_path)?;
        // Started by an earlier shim of the pod that died before it saw the exit: what that
        // shim left was killed (whoever noticed its death kills the pod's cgroups), so the
        // instance ended, and the agent hears it.
        let lost: Vec<ExitRecord> = starts
            .values()
            .filter(|s| !exits.contains_key(&s.instance))
            .map(StartRecord::killed_now)
            .collect();
        for exit in exits.into_values().chain(lost.iter().cloned()) {
            let start = starts.get(&exit.instance);
            state.instances.insert(
                exit.instance,
                Instance {
                    name: exit.name.clone(),
                    restart_count: start.and_then(|s| s.restart_count),
                    config: None,
                    pid: exit.pid,
                    started_at: exit.started_at.clone(),
                    cgroup: None,
                    oom_baseline: 0,
                    pumps: None,
                    io: None,
                    log: None,
                    oci: None,
                    reaped: true,
                    acked: acked.contains(&exit.instance),
                    exit: Some(exit),
                },
            );
        }
        let journal = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&journal_path)?;
        // The journal's directory entry must survive a crash too.
        let sync = {
            let (dir, file) = (
                journal_path.parent().map(Path::to_owned),
                journal.try_clone()?,
            );
            move || -> io::Result<()> {
                if let Some(dir) = dir {
                    File::open(dir)?.sync_all()?;
                }
                file.sync_data()
            }
        };
        let mut first_sync = None;
        if lost.is_empty() {
            first_sync = Some(
                thread::Builder::new()
                    .name("journal-sync".into())
                    .stack_size(THREAD_STACK)
                    .spawn(sync)?,
            );
        } else {
            // Lost instances' exits are reported as soon as an agent subscribes: durable first.
            for exit in lost {
                let mut line =
                    serde_json::to_vec(&JournalEntry::Exit(exit)).map_err(io::Error::other)?;
                line.push(b'\n');
                (&journal).write_all(&line)?;
            }
            sync()?;
        }
        Ok(Shim {
            socket,
            uid: pod_dir
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
            host_paths: crate::host_paths::HostPaths::of_pod_dir(pod_dir),
            cgroups: crate::cgroup::detect(),
            rootless: !rustix::process::geteuid().is_root(),
            shared_tmpfs,
            fork_lock: Mutex::new(()),
            start_lock: Mutex::new(()),
            state: Mutex::new(state),
            forked: Condvar::new(),
            journal: Mutex::new(journal),
            first_sync: Mutex::new(first_sync),
            busy: std::sync::atomic::AtomicUsize::new(0),
            ahead: Mutex::new(None),
            ahead_again: std::sync::atomic::AtomicBool::new(false),
            mount_ns,
        })
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Appends `entry` to the journal and syncs it to disk.
    fn journal_append(&self, entry: &JournalEntry) -> io::Result<()> {
        self.journal_write(entry)?;
        self.sync_journal()
    }

    /// Appends `entry` to the journal without waiting for the disk: a later shim of the pod
    /// reads it all the same (it is in the page cache), only a crash of the machine could
    /// lose it before [`Shim::sync_journal`].
    fn journal_write(&self, entry: &JournalEntry) -> io::Result<()> {
        let mut line = serde_json::to_vec(entry).map_err(io::Error::other)?;
        line.push(b'\n');
        let file = self
            .journal
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        (&*file).write_all(&line)
    }

    /// Syncs what the journal has to disk (its directory entry too, the first time).
    pub(super) fn sync_journal(&self) -> io::Result<()> {
        let file = self
            .journal
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let first_sync = self
            .first_sync
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        if let Some(sync) = first_sync {
            sync.join()
                .map_err(|_| io::Error::other("the journal's first sync panicked"))??;
        }
        file.sync_data()
    }

    /// Forks `command` with the fork lock held and registers its pid before the reaper can
    /// see it exit.
    pub(super) fn spawn(
        &self,
        command: &mut Command,
        waiter: Waiter,
    ) -> io::Result<std::process::Child> {
        self.spawn_registered(command, waiter, |_, _| {})
    }

    /// [`Shim::spawn`], also running `register` under the state lock before the reaper can
    /// look at the child.
    fn spawn_registered(
        &self,
        command: &mut Command,
        waiter: Waiter,
        register: impl FnOnce(&mut State, u32),
    ) -> io::Result<std::process::Child> {
        let _fork = self
            .fork_lock
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let child = command.spawn()?;
        let mut state = self.state();
        state.waiters.insert(child.id().cast_signed(), waiter);
        register(&mut state, child.id());
        state.forks += 1;
        self.forked.notify_all();
        Ok(child)
    }

    /// The reaper: reaps every child and re-parented descendant (the shim is a subreaper),
    /// hands main-process exits to exit handlers and exec statuses to their callers.
    pub(super) fn reap_forever(self: &Arc<Self>) -> ! {
        loop {
            let forks = self.state().forks;
            // Wait (without reaping) until some child is a zombie.
            match rustix::process::waitid(
                WaitId::All,
                WaitIdOptions::EXITED | WaitIdOptions::NOWAIT,
            ) {
                Ok(_) => {}
                Err(Errno::CHILD) => {
                    let state = self.state();
                    if state.forks == forks {
                        drop(self.forked.wait_timeout(state, Duration::from_secs(1)));
                    }
                    continue;
                }
                Err(Errno::INTR) => continue,
                Err(e) => {
                    eprintln!("podvisor shim: waitid: {e}");
                    thread::sleep(Duration::from_millis(100));
                    continue;
                }
            }
            let _fork = self
                .fork_lock
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            while let Ok(Some((pid, status))) = rustix::process::wait(WaitOptions::NOHANG) {
                self.reaped(pid.as_raw_pid(), status);
            }
        }
    }

    fn reaped(self: &Arc<Self>, pid: i32, status: WaitStatus) {
        let finished_at = now();
        let mut state = self.state();
        match state.waiters.remove(&pid) {
            Some(Waiter::Container(instance)) => {
                if let Some(i) = state.instances.get_mut(&instance) {
                    i.reaped = true;
                }
                drop(state);
                let shim = Arc::clone(self);
                let spawned = thread::Builder::new()
                    .name(format!("exit-{instance}"))
                    .stack_size(THREAD_STACK)
                    .spawn(move || shim.record_exit(instance, status, finished_at));
                if let Err(e) = spawned {
                    eprintln!("podvisor shim: cannot handle exit of {instance}: {e}");
                }
            }
            Some(Waiter::Exec(tx)) => drop(tx.send(status)),
            Some(Waiter::Stream { tx, wake }) => {
                let _ = tx.send(status);
                let _ = rustix::io::write(&wake, &[1]);
            }
            // The PID namespace's holder died (killed from outside): a later container gets a
            // new one.
            None if state.pid_holder == Some(pid.cast_unsigned()) => state.pid_holder = None,
            // A re-parented descendant: reaping it is all there is to do.
            None => {}
        }
    }

    /// Kills what is left of the instance, waits for its logs, journals the exit (fsync), only
    /// then tells subscribers, and last removes the instance's OCI container and cgroup.
    fn record_exit(self: Arc<Self>, instance: u64, status: WaitStatus, finished_at: String) {
        let (cgroup, pumps, pid) = {
            let mut state = self.state();
            let Some(i) = state.instances.get_mut(&instance) else {
                return;
            };
            (i.cgroup.clone(), i.pumps.take(), i.pid)
        };
        // The container is over once its main process is: no process may outlive it.
        if let Some(pgid) = pid_of(pid) {
            let _ = rustix::process::kill_process_group(pgid, Signal::KILL);
        }
        let mut oom_killed = false;
        if let Some(cg) = &cgroup
            && let Err(e) = cg.kill_all()
        {
            eprintln!("podvisor shim: killing the rest of instance {instance}: {e}");
        }
        if let Some((pumps, count)) = pumps {
            let deadline = Instant::now() + PUMP_DRAIN;
            for _ in 0..count {
                let left = deadline.saturating_duration_since(Instant::now());
                if pumps.recv_timeout(left).is_err() {
                    break;
                }
            }
        }
        let (exit_code, signal) = decode(status);
        let record = {
            let state = self.state();
            let Some(i) = state.instances.get(&instance) else {
                return;
            };
            if let Some(cg) = &cgroup {
                oom_killed = cg.oom_kill_count() > i.oom_baseline;
            }
            let config = i.config.as_ref();
            ExitRecord {
                instance,
                name: i.name.clone(),
                pid,
                exit_code,
                signal,
                oom_killed,
                started_at: i.started_at.clone(),
                finished_at,
                termination_message_host_path: config
                    .map(|c| c.termination_message_host_path.clone())
                    .unwrap_or_default(),
                log_path: config.map(|c| c.log_path.clone()).unwrap_or_default(),
            }
        };
        {
            // The start's own line goes first (an instance can exit before its start is
            // journaled).
            let _start = self
                .start_lock
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if let Err(e) = self.journal_append(&JournalEntry::Exit(record.clone())) {
                eprintln!("podvisor shim: journaling exit of {instance}: {e}");
            }
        }
        // Subscribers hear of the exit before what is left of the instance (its OCI
        // container's state, root filesystem and cgroup) is removed: the agent starts the
        // next container (an init container's successor) meanwhile. The shim counts as busy until the removal is done, so a
        // shut-down shim does not exit in the middle of it.
        self.busy(true);
        let oci = {
            let mut state = self.state();
            let oci = state.instances.get_mut(&instance).and_then(|i| {
                i.exit = Some(record.clone());
                i.cgroup = None;
                i.io = None;
                // An OCI instance always has its config (both are set at its start).
                Some((i.oci.clone()?, cgroups_path(i.config.as_ref()?, instance)))
            });
            state.subscribers.retain(|s| s.send(record.clone()));
            oci
        };
        if let Some((oci, cgroups_path)) = oci
            && let Err(e) = crate::oci::launch::cleanup_exited(
                &oci.launch,
                &cgroups_path,
                ShimRunner(Arc::clone(&self)),
            )
        {
            eprintln!("podvisor shim: removing OCI container of instance {instance}: {e}");
        }
        if let Some(cg) = &cgroup
            && let Err(e) = cg.remove()
        {
            eprintln!("podvisor shim: removing cgroup of instance {instance}: {e}");
        }
        self.busy(false);
    }

    /// Counts a request in (`true`) or out (`false`, then exits if that was the last thing
    /// keeping a shut-down shim alive).
    pub(super) fn busy(&self, start: bool) {
        use std::sync::atomic::Ordering;
        if start {
            self.busy.fetch_add(1, Ordering::SeqCst);
        } else {
            self.busy.fetch_sub(1, Ordering::SeqCst);
            self.exit_if_done();
        }
    }

    /// After `Shutdown`: exits the process once no container runs and no request is being
    /// answered.
    pub(super) fn exit_if_done(&self) {
        let state = self.state();
        let idle = self.busy.load(std::sync::atomic::Ordering::SeqCst) == 0;
        if idle && state.shutdown && state.instances.values().all(|i| i.exit.is_some()) {
            let _ = std::fs::remove_file(&self.socket);
            if let Some(pid) = state.pid_holder.and_then(pid_of) {
                // Killed and reaped here: orphaned, it would be a zombie of the node's init.
                let _ = rustix::process::kill_process(pid, Signal::KILL);
                let _ = rustix::process::waitpid(Some(pid), WaitOptions::empty());
            }
            if let Some(mut ahead) = self.take_ahead() {
                // The same.
                ahead.kill();
                let _ = ahead.wait();
            }
            std::process::exit(0);
        }
    }

    /// Starts youki's helper ahead on a thread of its own, after `delay`, if this shim keeps
    /// one and has none.
    pub(super) fn make_ahead(self: &Arc<Self>, delay: Duration) {
        if self.mount_ns.is_none() {
            return;
        }
        let shim = Arc::clone(self);
        let spawned = thread::Builder::new()
            .name("ahead".into())
            .stack_size(THREAD_STACK)
            .spawn(move || {
                thread::sleep(delay);
                let _fork = shim
                    .fork_lock
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                if shim.state().shutdown {
                    return;
                }
                let mut slot = shim.ahead_slot();
                if slot.is_some() {
                    return;
                }
                match crate::oci::ahead::Ahead::spawn(
                    Path::new(crate::oci::executor::SELF_EXE),
                    crate::config::DEFAULT_PATH,
                ) {
                    Ok(ahead) => *slot = Some(ahead),
                    Err(e) => eprintln!("podvisor shim: starting youki's helper ahead: {e}"),
                }
            });
        if let Err(e) = spawned {
            eprintln!("podvisor shim: starting youki's helper ahead: {e}");
        }
    }

    fn ahead_slot(&self) -> MutexGuard<'_, Option<crate::oci::ahead::Ahead>> {
        self.ahead
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The helper started ahead, for a call (under the fork lock).
    fn take_ahead(&self) -> Option<crate::oci::ahead::Ahead> {
        self.ahead_slot().take()
    }

    /// Keeps `ahead`, started by this process as a spare, as its helper started ahead (or
    /// lets it go if the shim keeps none).
    pub(super) fn adopt_ahead(&self, ahead: crate::oci::ahead::Ahead) {
        if self.mount_ns.is_some() {
            *self.ahead_slot() = Some(ahead);
        }
    }

    /// Lets the helper started ahead go: the end of its socket makes it exit, and the reaper
    /// takes it.
    pub(super) fn drop_ahead(&self) {
        drop(self.take_ahead());
    }

    /// Marks the shim for shutdown.
    pub(super) fn shutdown(&self) {
        self.state().shutdown = true;
    }

    /// Starts an instance (see [`super::protocol::Request::Start`]), unless this instance id or
    /// this attempt of the container was started before (by this shim or an earlier one).
    pub(super) fn start(self: &Arc<Self>, instance: u64, config: ContainerConfig) -> Response {
        let _start = self
            .start_lock
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        {
            let state = self.state();
            if state.instances.contains_key(&instance) {
                return Response::Error {
                    message: format!("instance {instance} already exists"),
                };
            }
            let attempt = config.restart_count;
            let earlier = state.instances.iter().find(|(_, i)| {
                attempt.is_some() && i.restart_count == attempt && i.name == config.name
            });
            if let (Some((earlier, _)), Some(attempt)) = (earlier, attempt) {
                return Response::StartFailed {
                    reason: "CreateContainerError".into(),
                    message: format!(
                        "container {:?} attempt {attempt} was already started (instance {earlier})",
                        config.name
                    ),
                    created: false,
                };
            }
        }
        let mut record = StartRecord {
            instance,
            name: config.name.clone(),
            restart_count: config.restart_count,
            pid: 0,
            started_at: String::new(),
            termination_message_host_path: config.termination_message_host_path.clone(),
            log_path: config.log_path.clone(),
        };
        let response = match self.prepare_and_spawn(instance, config) {
            Ok(response) => response,
            Err(e) => Response::StartFailed {
                reason: "CreateContainerError".into(),
                message: e.to_string(),
                created: false,
            },
        };
        if let Response::Started {
            pid, started_at, ..
        } = &response
        {
            record.pid = *pid;
            started_at.clone_into(&mut record.started_at);
            // Synced once the answer is out (`server::answer`): the start costs no disk wait,
            // and anything asked after it finds it on disk.
            if let Err(e) = self.journal_write(&JournalEntry::Start(record)) {
                eprintln!("podvisor shim: journaling the start of {instance}: {e}");
            }
        }
        response
    }

    fn prepare_and_spawn(
        self: &Arc<Self>,
        instance: u64,
        mut config: ContainerConfig,
    ) -> io::Result<Response> {
        // The host's passwd stands in for the image's (execs get the same environment).
        let passwd = std::fs::read_to_string("/etc/passwd").ok();
        config.set_default_home(passwd.as_deref());
        // An OCI container's root filesystem and spec are made on a thread of their own while
        // its termination-message file, log and cgroup are made here: neither needs the other
        // until the bundle is finished (`Bundle::finish`).
        let bundle = if config.oci.is_some() {
            match self.begin_bundle(instance, &config)? {
                Ok(bundle) => Some(bundle),
                Err(refused) => return Ok(refused),
            }
        } else {
            None
        };
        // On error the bundle, dropped, is removed.
        let (writer, cgroup) = self.container_files(instance, &config)?;
        let cgroup = Arc::new(cgroup);
        let result = match bundle {
            Some(bundle) => self.spawn_oci(instance, config, &cgroup, writer, bundle),
            None => self.spawn_container(instance, config, &cgroup, writer),
        };
        if !matches!(result, Ok(Response::Started { .. })) {
            let _ = cgroup.kill_all();
            let _ = cgroup.remove();
        }
        result
    }

    /// A container's termination-message file, log file and cgroup.
    fn container_files(
        &self,
        instance: u64,
        config: &ContainerConfig,
    ) -> io::Result<(SharedLogWriter, ContainerCgroup)> {
        let ctx =
            |what: String| move |e: io::Error| io::Error::new(e.kind(), format!("{what}: {e}"));
        let tm = &config.termination_message_host_path;
        create_termination_message_file(tm, &config.user, self.rootless)
            .map_err(ctx(format!("creating {}", tm.display())))?;
        if let Some(dir) = config.log_path.parent() {
            std::fs::create_dir_all(dir).map_err(ctx(format!("creating {}", dir.display())))?;
        }
        let writer = SharedLogWriter::create(&config.log_path).map_err(ctx(format!(
            "creating log file {}",
            config.log_path.display()
        )))?;
        let cgroup_name = cgroup_name(config, instance);
        let cgroup = ContainerCgroup::create(
            &self.cgroups,
            &config.cgroup_parent,
            &cgroup_name,
            config.memory_limit,
        )
        .map_err(ctx(format!(
            "creating cgroup {}/{cgroup_name}",
            config.cgroup_parent
        )))?;
        if let Some(limit) = config.pod_memory_limit {
            let limited =
                crate::cgroup::limit_pod_memory(&self.cgroups, &config.cgroup_parent, limit);
            if let Err(e) = limited {
                let _ = cgroup.remove();
                return Err(io::Error::new(
                    e.kind(),
                    format!(
                        "setting the pod's memory limit on {}: {e}",
                        config.cgroup_parent
                    ),
                ));
            }
        }
        if config.oci.is_some() && matches!(self.cgroups, crate::cgroup::CgroupMode::Hybrid { .. })
        {
            // Not needed for correctness (the OCI runtime would make it), only for speed.
            if let Err(e) = crate::cgroup::prepare_v1_cpuset(&config.cgroup_parent, &cgroup_name) {
                eprintln!("podvisor shim: preparing the cpuset cgroup of {cgroup_name}: {e}");
            }
        }
        Ok((writer, cgroup))
    }

    /// Starts making an OCI container's bundle ([`Bundle`]); `Err` is the start's refusal
    /// (the PID namespace it asks for cannot be had).
    fn begin_bundle(
        &self,
        instance: u64,
        config: &ContainerConfig,
    ) -> io::Result<Result<Bundle, Response>> {
        let Some(launch) = config.oci.clone() else {
            return Err(io::Error::other("not an OCI container"));
        };
        if self.shared_tmpfs {
            self.mount_shared_tmpfs(config)?;
        }
        let pid_namespace = match self.pid_namespace(&launch.pid) {
            Ok(ns) => ns,
            Err(message) => {
                return Ok(Err(Response::StartFailed {
                    reason: "CreateContainerError".into(),
                    message,
                    created: false,
                }));
            }
        };
        let cgroups_path = cgroups_path(config, instance);
        let begun = Instant::now();
        let (go, wait) = mpsc::channel();
        let config = config.clone();
        // On a thread with a full-size stack: building and serialising a runtime spec takes
        // far more than a connection thread's.
        let thread = thread::Builder::new()
            .name(format!("bundle-{instance}"))
            .stack_size(BUNDLE_STACK)
            .spawn(move || {
                use crate::oci::launch;
                let draft = launch::draft(&launch, &config, &cgroups_path, pid_namespace)?;
                if wait.recv() == Ok(true) {
                    launch::finish(&launch, &config, draft)
                } else {
                    if let Err(e) = launch::abandon(&launch.dir) {
                        eprintln!("podvisor shim: removing an unused root filesystem: {e}");
                    }
                    Err(launch::LaunchError::create("abandoned"))
                }
            })?;
        Ok(Ok(Bundle {
            thread: Some(thread),
            go,
            begun,
        }))
    }

    fn spawn_container(
        self: &Arc<Self>,
        instance: u64,
        config: ContainerConfig,
        cgroup: &Arc<ContainerCgroup>,
        writer: SharedLogWriter,
    ) -> io::Result<Response> {
        let user = config.user.clone();
        if self.shared_tmpfs {
            self.mount_shared_tmpfs(&config)?;
        }
        let procs = open_procs(cgroup)?;
        let run_failed = |detail: String| Response::StartFailed {
            reason: "RunContainerError".into(),
            message: format!(
                "failed to create containerd task: failed to create shim task: OCI runtime \
                 create failed: runc create failed: unable to start container process: \
                 {detail}: unknown"
            ),
            created: true,
        };
        let (setup, mut report, mounts) =
            match ChildSetup::for_container(&config, procs, self.rootless, self.shared_tmpfs) {
                Ok(prepared) => prepared,
                Err(e) => return Ok(run_failed(format!("error during container init: {e}"))),
            };
        let Some(program) = config.argv.first() else {
            return Ok(run_failed(
                "exec: \"\": executable file not found in $PATH".into(),
            ));
        };
        let (io, fds, outputs) = ContainerIo::create(config.stdio)?;
        let [stdin, stdout, stderr] = super::attach::as_stdio(fds);
        let mut command = Command::new(program);
        command
            .args(&config.argv[1..])
            .env_clear()
            .envs(config.env.iter().map(|(k, v)| (k, v)))
            .stdin(stdin)
            .stdout(stdout)
            .stderr(stderr);
        // On a terminal it leads a session of its own (and so its process group).
        let setup = if io.tty() {
            setup.with_controlling_tty()
        } else {
            command.process_group(0);
            setup
        };
        // SAFETY: `ChildSetup::run` only makes async-signal-safe system calls on data prepared
        // before fork; it does not allocate or take locks.
        #[allow(unsafe_code)]
        unsafe {
            let mut setup = setup;
            command.pre_exec(move || setup.run());
        }
        let oom_baseline = cgroup.oom_kill_count();
        let (done_tx, done_rx) = mpsc::channel();
        let started_at = now();
        let instance_state = Instance {
            name: config.name.clone(),
            restart_count: config.restart_count,
            config: Some(config.clone()),
            pid: 0,
            started_at: started_at.clone(),
            cgroup: Some(Arc::clone(cgroup)),
            oom_baseline,
            pumps: Some((done_rx, outputs.len())),
            io: Some(Arc::clone(&io)),
            log: Some(writer.clone()),
            oci: None,
            reaped: false,
            exit: None,
            acked: false,
        };
        let register = |state: &mut State, pid: u32| {
            let mut i = instance_state;
            i.pid = pid;
            state.instances.insert(instance, i);
        };
        // Held from before the child creates paths until they are recorded, so that no pod's
        // removal takes a path another pod is about to use.
        let locked = match &self.host_paths {
            Some(registry) => Some(registry.lock().map_err(|e| {
                io::Error::new(e.kind(), format!("locking the host-paths registry: {e}"))
            })?),
            None => None,
        };
        let spawned = self.spawn_registered(&mut command, Waiter::Container(instance), register);
        if let Some(locked) = &locked {
            let created = report.created_paths();
            let mut targets: Vec<&Path> =
                config.mounts.iter().map(|m| m.target.as_path()).collect();
            targets.push(Path::new(&config.termination_message_path));
            if let Some(dir) = &config.working_dir {
                targets.push(Path::new(dir));
            }
            if let Err(e) = locked.record(&self.uid, &created, &targets) {
                eprintln!("podvisor shim: recording the paths made on the host: {e}");
            }
        }
        drop(locked);
        let child = match spawned {
            Ok(child) => child,
            Err(e) => {
                let detail = match report.failed_step(&mounts) {
                    Some(step) => format!("error during container init: {step}"),
                    None => exec_error(program, &e),
                };
                return Ok(run_failed(detail));
            }
        };
        drop(command);
        let pid = child.id();
        // The reaper owns the child's status: never call `wait` on it.
        drop(child);
        for (fd, stream) in outputs {
            let (writer, done, io) = (writer.clone(), done_tx.clone(), Arc::clone(&io));
            thread::Builder::new()
                .name(format!("log-{instance}"))
                .stack_size(THREAD_STACK)
                .spawn(move || pump(File::from(fd), stream, &writer, &done, &io))?;
        }
        Ok(Response::Started {
            pid,
            started_at,
            user: Some(user),
        })
    }

    /// Starts an OCI container (`config.oci`): its bundle prepared here, in the shim's mount
    /// namespace, then `runc create` (the init process becomes the shim's child and is
    /// registered with the reaper while it waits on runc's exec FIFO), the log pumps, and
    /// `runc start`.
    fn spawn_oci(
        self: &Arc<Self>,
        instance: u64,
        config: ContainerConfig,
        cgroup: &Arc<ContainerCgroup>,
        writer: SharedLogWriter,
        bundle: Bundle,
    ) -> io::Result<Response> {
        use crate::oci::executor::{ProcessIo, RunAfterError};
        let Some(launch) = config.oci.clone() else {
            return Err(io::Error::other("not an OCI container"));
        };
        let begun = bundle.begun;
        // Its last steps overlap the helper's spawn.
        bundle.go();
        let (io, [stdin, stdout, stderr], outputs) = ContainerIo::create(config.stdio)?;
        let runc = launch.runc(ShimRunner(Arc::clone(self)));
        self.ahead_again.store(
            more_to_start(&launch.pod, &config.name),
            std::sync::atomic::Ordering::Relaxed,
        );
        let oom_baseline = cgroup.oom_kill_count();
        // The bundle is finished while the executor's helper starts (`Runc::run_after`).
        let prepared = std::cell::OnceCell::new();
        let bundled = std::cell::Cell::new(Duration::ZERO);
        let finish = || -> Result<(), crate::oci::launch::LaunchError> {
            let done = bundle
                .finish()
                .unwrap_or_else(|e| Err(crate::oci::launch::LaunchError::create(e.to_string())))?;
            bundled.set(begun.elapsed());
            let _ = prepared.set(done);
            Ok(())
        };
        let (done_tx, done_rx) = mpsc::channel();
        let pumps = outputs.len();
        let mut done_rx = Some(done_rx);
        let mut registered = None;
        // Called by the executor once the init process exists, before the reaper can see it
        // exit (runc's exec FIFO holds it, or the reaper is held off).
        let mut register = |pid: u32| {
            let started_at = now();
            let oci = prepared.get().map(|p: &crate::oci::launch::Prepared| {
                Arc::new(OciExec {
                    launch: (*launch).clone(),
                    process: p.process.clone(),
                })
            });
            let mut state = self.state();
            state
                .waiters
                .insert(pid.cast_signed(), Waiter::Container(instance));
            state.instances.insert(
                instance,
                Instance {
                    name: config.name.clone(),
                    restart_count: config.restart_count,
                    config: Some(config.clone()),
                    pid,
                    started_at: started_at.clone(),
                    cgroup: Some(Arc::clone(cgroup)),
                    oom_baseline,
                    pumps: done_rx.take().map(|rx| (rx, pumps)),
                    io: Some(Arc::clone(&io)),
                    log: Some(writer.clone()),
                    oci,
                    reaped: false,
                    exit: None,
                    acked: false,
                },
            );
            registered = Some((pid, started_at, begun.elapsed()));
        };
        let ran = runc.run_after(
            &launch.dir,
            &launch.id,
            &launch.pid_file(),
            ProcessIo::Fds {
                stdin,
                stdout,
                stderr,
            },
            finish,
            &mut register,
        );
        let ran = match ran {
            Err(RunAfterError::Finish(e)) => {
                return Ok(Response::StartFailed {
                    reason: e.reason.into(),
                    message: e.message,
                    created: false,
                });
            }
            Err(RunAfterError::Run(e)) => Err(e),
            Ok(pid) => Ok(pid),
        };
        let bundled = bundled.get();
        let Some((pid, started_at, created)) = registered else {
            // Nothing of the container runs: what the pipes got is runc's own error,
            // dropped with them.
            drop(outputs);
            if let Err(e) = crate::oci::launch::cleanup(&launch, ShimRunner(Arc::clone(self))) {
                eprintln!("podvisor shim: cleaning up after a failed create: {e}");
            }
            let message = match ran {
                Err(e) => e.kubelet_message(""),
                Ok(_) => "the OCI runtime started no process".to_owned(),
            };
            return Ok(Response::StartFailed {
                reason: "RunContainerError".into(),
                message,
                created: true,
            });
        };
        for (fd, stream) in outputs {
            let (writer, done, io) = (writer.clone(), done_tx.clone(), Arc::clone(&io));
            thread::Builder::new()
                .name(format!("log-{instance}"))
                .stack_size(THREAD_STACK)
                .spawn(move || pump(File::from(fd), stream, &writer, &done, &io))?;
        }
        if let Err(e) = ran {
            // Created but not started: its exit (killed now) is recorded as any other.
            if let Some(pid) = pid_of(pid) {
                let _ = rustix::process::kill_process(pid, Signal::KILL);
            }
            return Ok(Response::StartFailed {
                reason: "RunContainerError".into(),
                message: e.kubelet_message(""),
                created: true,
            });
        }
        // Where a start's time goes (bundle: rootfs mount + spec; then the runtime's create,
        // or `run` in one go, and start), one line per container in shim.log.
        eprintln!(
            "podvisor shim: started {} (instance {instance}, {:?}): bundle {:.1} ms, \
             create {:.1} ms, start {:.1} ms",
            config.name,
            launch.executor,
            bundled.as_secs_f64() * 1e3,
            created.saturating_sub(bundled).as_secs_f64() * 1e3,
            (begun.elapsed() - created).as_secs_f64() * 1e3,
        );
        Ok(Response::Started {
            pid,
            started_at,
            // Registered only after the bundle was finished.
            user: prepared.get().map(|p| p.user.clone()),
        })
    }

    /// The PID namespace an OCI container asks for, as a spec namespace: the pod's is the
    /// holder's (started on first use), a target's that of the named container's running
    /// instance.
    fn pid_namespace(
        &self,
        wanted: &crate::oci::launch::PidNamespace,
    ) -> Result<crate::oci::spec::Namespace, String> {
        use crate::oci::launch::PidNamespace;
        use crate::oci::spec::Namespace;
        match wanted {
            PidNamespace::Container => Ok(Namespace::Private),
            PidNamespace::Node => Ok(Namespace::Host),
            PidNamespace::Pod => {
                let _fork = self
                    .fork_lock
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                let mut state = self.state();
                let pid = match state.pid_holder {
                    Some(pid) => pid,
                    None => {
                        let pid = super::pid_holder::spawn().map_err(|e| {
                            format!("failed to create the pod's PID namespace: {e}")
                        })?;
                        state.pid_holder = Some(pid);
                        state.forks += 1;
                        pid
                    }
                };
                drop(state);
                self.forked.notify_all();
                Ok(Namespace::Join(super::pid_holder::namespace_path(pid)))
            }
            PidNamespace::Target(name) => {
                let state = self.state();
                state
                    .instances
                    .values()
                    .rev()
                    .find(|i| &i.name == name && !i.reaped && i.oci.is_some())
                    .map(|i| Namespace::Join(super::pid_holder::namespace_path(i.pid)))
                    .ok_or_else(|| format!("the target container {name:?} is not running"))
            }
        }
    }

    fn mount_shared_tmpfs(&self, config: &ContainerConfig) -> io::Result<()> {
        for m in &config.mounts {
            let crate::config::MountKind::Tmpfs { size } = m.kind else {
                continue;
            };
            let mut state = self.state();
            if state.tmpfs_mounted.contains(&m.source) {
                continue;
            }
            std::fs::create_dir_all(&m.source)?;
            let data = size.map(|s| format!("size={s}")).unwrap_or_default();
            let flags = rustix::mount::MountFlags::NOSUID | rustix::mount::MountFlags::NODEV;
            let data = std::ffi::CString::new(data).map_err(io::Error::other)?;
            rustix::mount::mount("tmpfs", &m.source, "tmpfs", flags, Some(data.as_c_str()))
                .map_err(|e| {
                    io::Error::other(format!("mounting tmpfs at {}: {e}", m.source.display()))
                })?;
            state.tmpfs_mounted.insert(m.source.clone());
        }
        Ok(())
    }

    /// Sends `signal` to the instance's process group.
    pub(super) fn signal(&self, instance: u64, signal: i32) -> Response {
        let state = self.state();
        let Some(i) = state.instances.get(&instance) else {
            return Response::NotFound { instance };
        };
        if i.reaped {
            return Response::Ok;
        }
        let (Some(pgid), Some(sig)) = (pid_of(i.pid), signal_of(signal)) else {
            return Response::Error {
                message: format!("cannot send signal {signal} to instance {instance}"),
            };
        };
        match rustix::process::kill_process_group(pgid, sig) {
            Ok(()) | Err(Errno::SRCH) => Response::Ok,
            Err(e) => Response::Error {
                message: format!("sending signal {signal} to instance {instance}: {e}"),
            },
        }
    }

    /// SIGKILLs the instance's process group and every process in its cgroup.
    pub(super) fn kill(&self, instance: u64) -> Response {
        let (cgroup, pgid) = {
            let state = self.state();
            let Some(i) = state.instances.get(&instance) else {
                return Response::NotFound { instance };
            };
            (
                i.cgroup.clone(),
                if i.reaped { None } else { pid_of(i.pid) },
            )
        };
        if let Some(pgid) = pgid {
            let _ = rustix::process::kill_process_group(pgid, Signal::KILL);
        }
        if let Some(cg) = cgroup
            && let Err(e) = cg.kill_all()
        {
            return Response::Error {
                message: format!("killing the cgroup of instance {instance}: {e}"),
            };
        }
        Response::Ok
    }

    /// What an exec needs of a running instance: pid, cgroup, env and working directory.
    pub(super) fn exec_target(&self, instance: u64) -> Result<ExecTarget, Response> {
        let state = self.state();
        let Some(i) = state.instances.get(&instance) else {
            return Err(Response::NotFound { instance });
        };
        match (&i.config, &i.cgroup, i.reaped) {
            (Some(config), Some(cgroup), false) => Ok(ExecTarget {
                pid: i.pid,
                cgroup: Arc::clone(cgroup),
                env: config.env.clone(),
                working_dir: config.working_dir.clone(),
                user: config.user.clone(),
                rootless: self.rootless,
                oci: i.oci.clone(),
            }),
            _ => Err(Response::Error {
                // containerd's wording; event messages never name container ids (10.6).
                message: "failed to exec in container: container is in CONTAINER_EXITED state"
                    .to_string(),
            }),
        }
    }

    /// What an attach needs of a running instance: its pid and its stdio.
    pub(super) fn attach_target(&self, instance: u64) -> Result<(u32, Arc<ContainerIo>), Response> {
        let state = self.state();
        let Some(i) = state.instances.get(&instance) else {
            return Err(Response::NotFound { instance });
        };
        match (&i.io, i.reaped) {
            (Some(io), false) => Ok((i.pid, Arc::clone(io))),
            _ => Err(Response::Error {
                message: "container is in CONTAINER_EXITED state".to_string(),
            }),
        }
    }

    /// The answer to an exec whose set-up failed with `error`: the container may have exited
    /// since [`Shim::exec_target`] found it running (its cgroup and `/proc` entries gone), and
    /// then it is that, in containerd's words.
    pub(super) fn exec_failed(&self, instance: u64, error: &io::Error) -> Response {
        match self.exec_target(instance) {
            Err(exited) => exited,
            Ok(_) => Response::Error {
                message: format!("exec in instance {instance}: {error}"),
            },
        }
    }

    /// Every instance (a start in progress is waited for).
    pub(super) fn snapshot(&self) -> Response {
        let _start = self
            .start_lock
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let state = self.state();
        Response::State {
            shim_pid: std::process::id(),
            instances: state
                .instances
                .iter()
                .map(|(&instance, i)| InstanceState {
                    instance,
                    name: i.name.clone(),
                    pid: i.pid,
                    started_at: i.started_at.clone(),
                    exit: i.exit.clone(),
                    acked: i.acked,
                    log_path: i
                        .log
                        .as_ref()
                        .filter(|_| !i.reaped && i.exit.is_none())
                        .map(SharedLogWriter::path),
                })
                .collect(),
        }
    }

    /// CRI `ReopenContainerLog` for a running instance: its log pumps write to a new file at
    /// its log path from now on.
    pub(super) fn reopen_log(&self, instance: u64) -> Response {
        let writer = {
            let state = self.state();
            let Some(i) = state.instances.get(&instance) else {
                return Response::NotFound { instance };
            };
            if i.reaped || i.exit.is_some() {
                return Response::Error {
                    message: format!("container instance {instance} is not running"),
                };
            }
            i.log.clone()
        };
        let Some(writer) = writer else {
            return Response::Error {
                message: format!("container instance {instance} has no log of this shim"),
            };
        };
        match writer.reopen() {
            Ok(()) => Response::Ok,
            Err(e) => Response::Error {
                message: format!("reopening the log of container instance {instance}: {e}"),
            },
        }
    }

    /// Records that the agent handled an exit.
    pub(super) fn ack(&self, instance: u64) -> Response {
        {
            let mut state = self.state();
            let Some(i) = state.instances.get_mut(&instance) else {
                return Response::NotFound { instance };
            };
            if i.acked {
                return Response::Ok;
            }
            i.acked = true;
        }
        match self.journal_append(&JournalEntry::Ack { instance }) {
            Ok(()) => Response::Ok,
            Err(e) => Response::Error {
                message: format!("journaling ack of instance {instance}: {e}"),
            },
        }
    }

    /// Registers a subscriber; returns the exits it must be sent first (not acknowledged).
    pub(super) fn subscribe(&self, tx: Subscriber) -> Vec<ExitRecord> {
        let mut state = self.state();
        let pending = state
            .instances
            .values()
            .filter(|i| !i.acked)
            .filter_map(|i| i.exit.clone())
            .collect();
        state.subscribers.push(tx);
        pending
    }
}

/// What [`Shim::exec_target`] returns.
pub(super) struct ExecTarget {
    pub(super) pid: u32,
    pub(super) cgroup: Arc<ContainerCgroup>,
    pub(super) env: Vec<(String, String)>,
    pub(super) working_dir: Option<String>,
    pub(super) user: crate::config::ContainerUser,
    pub(super) rootless: bool,
    /// An OCI container: execs go through `runc exec`.
    pub(super) oci: Option<Arc<OciExec>>,
}

/// What execs in an OCI container start from.
pub(super) struct OciExec {
    pub(super) launch: crate::oci::launch::OciLaunch,
    /// The container's process spec (user, env, working directory, capabilities).
    pub(super) process: oci_spec::runtime::Process,
}

impl OciExec {
    /// A foreground `runc exec` of `argv` (with a terminal through `console_socket`), for the
    /// caller to spawn in a process group of its own. The process spec is written to a file
    /// that lives as long as the returned guard.
    pub(super) fn command(
        &self,
        shim: &Arc<Shim>,
        argv: &[String],
        console_socket: Option<&Path>,
    ) -> io::Result<(Command, ExecSpecFile)> {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = self.launch.exec_dir();
        std::fs::create_dir_all(&dir)?;
        let path = dir.join(format!("{n}.json"));
        let process =
            crate::oci::spec::exec_process(&self.process, argv.to_vec(), console_socket.is_some());
        let json = serde_json::to_vec(&process).map_err(io::Error::other)?;
        std::fs::write(&path, json)?;
        let pid_file = dir.join(format!("{n}.pid"));
        let command = self.launch.runc(ShimRunner(Arc::clone(shim))).exec_command(
            &self.launch.id,
            &path,
            console_socket,
            Some(&pid_file),
        );
        Ok((
            command,
            ExecSpecFile {
                spec: path,
                pid_file,
            },
        ))
    }
}

/// An exec's process spec file and the pid file its runtime writes, removed when dropped.
pub(super) struct ExecSpecFile {
    spec: PathBuf,
    pid_file: PathBuf,
}

impl ExecSpecFile {
    /// Kills the exec's process if its runtime left it behind: `runc exec` killed (a timeout)
    /// leaves the process it started running, re-parented to the shim. Only a process that is
    /// the shim's own child is signalled, through a pidfd, so a reused pid never is.
    pub(super) fn kill_left_behind(&self) {
        let Some(pid) = std::fs::read_to_string(&self.pid_file)
            .ok()
            .and_then(|text| text.trim().parse::<i32>().ok())
            .and_then(rustix::process::Pid::from_raw)
        else {
            return;
        };
        let Ok(pidfd) = rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty())
        else {
            return;
        };
        let parent = std::fs::read_to_string(format!("/proc/{}/status", pid.as_raw_nonzero()))
            .ok()
            .and_then(|status| {
                status
                    .lines()
                    .find_map(|l| l.strip_prefix("PPid:").map(|v| v.trim().parse::<u32>()))
            })
            .and_then(Result::ok);
        if parent == Some(std::process::id()) {
            let _ = rustix::process::pidfd_send_signal(&pidfd, rustix::process::Signal::KILL);
        }
    }
}

impl Drop for ExecSpecFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.spec);
        let _ = std::fs::remove_file(&self.pid_file);
    }
}

/// The name of instance `instance`'s cgroup below the pod's (`config.cgroup_parent`).
fn cgroup_name(config: &ContainerConfig, instance: u64) -> String {
    format!("{}-{instance}", config.name)
}

/// The same cgroup as the OCI runtime's `linux.cgroupsPath`: the shim's own
/// (`ContainerCgroup`) and the runtime's are one.
fn cgroups_path(config: &ContainerConfig, instance: u64) -> String {
    format!(
        "/{}/{}",
        config.cgroup_parent,
        cgroup_name(config, instance)
    )
}

/// Whether a start of container `name` is likely followed soon by a start of another of the
/// pod's containers: it is not the last of its init and app containers, in the order the
/// kubelet starts them. (A restart comes after a back-off of 10 s at least, which a helper
/// started ahead, let go after a quiet second, would not live to see.)
fn more_to_start(pod: &k8s_openapi::api::core::v1::Pod, name: &str) -> bool {
    let Some(spec) = &pod.spec else {
        return false;
    };
    let order: Vec<&str> = spec
        .init_containers
        .iter()
        .flatten()
        .chain(&spec.containers)
        .map(|c| c.name.as_str())
        .collect();
    order
        .iter()
        .position(|n| *n == name)
        .is_some_and(|i| i + 1 < order.len())
}

/// How long after a call the next helper is started ahead: the agent reports the start
/// meanwhile (its status write and the watches' events take a millisecond or two).
const AHEAD_AGAIN: Duration = Duration::from_millis(5);

/// Runs runc's commands as the shim's children: spawned under the fork lock and waited for
/// through the reaper, which would otherwise take their status.
pub(super) struct ShimRunner(pub(super) Arc<Shim>);

impl crate::oci::executor::CommandRunner for ShimRunner {
    fn run(&self, command: &mut Command) -> io::Result<std::process::ExitStatus> {
        use std::os::unix::process::ExitStatusExt;
        let (tx, rx) = mpsc::channel();
        let child = self.0.spawn(command, Waiter::Exec(tx))?;
        drop(child);
        let status = rx.recv().map_err(io::Error::other)?;
        Ok(std::process::ExitStatus::from_raw(status.as_raw()))
    }

    /// Holds the fork lock from the spawn until `then` has run: the reaper reaps only under
    /// it, so the command is waited for here, and what it left behind (`runc run
    /// --detach`'s container, re-parented to the shim when runc exits, perhaps exited
    /// already) cannot be reaped before `then` has registered it.
    fn run_then(
        &self,
        command: &mut Command,
        gate: &mut dyn FnMut() -> bool,
        then: &mut dyn FnMut(&std::process::ExitStatus),
    ) -> io::Result<std::process::ExitStatus> {
        let _fork = self
            .0
            .fork_lock
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut child = command.spawn()?;
        if !gate() {
            let _ = child.kill();
        }
        let status = child.wait()?;
        then(&status);
        // The reaper may be waiting for a first child to appear.
        self.0.state().forks += 1;
        self.0.forked.notify_all();
        Ok(status)
    }

    /// As [`ShimRunner::run_then`], with the shim's helper started ahead called instead of
    /// the command spawned; the next one is started once this one is done, if another of
    /// the pod's containers follows.
    fn run_ahead_then(
        &self,
        args: &[std::ffi::OsString],
        stdio: [OwnedFd; 3],
        gate: &mut dyn FnMut() -> bool,
        then: &mut dyn FnMut(&std::process::ExitStatus),
    ) -> Result<io::Result<std::process::ExitStatus>, [OwnedFd; 3]> {
        let fork = self
            .0
            .fork_lock
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let (Some(mount_ns), Some(mut ahead)) = (&self.0.mount_ns, self.0.take_ahead()) else {
            return Err(stdio);
        };
        let called = ahead.call(args, crate::oci::ahead::borrowed(&stdio), mount_ns.as_fd());
        if let Err(e) = called {
            // It died (its end is closed): the reaper takes it, the caller spawns one.
            eprintln!("podvisor shim: the helper started ahead is gone ({e})");
            return Err(stdio);
        }
        // The helper holds its own copies; the pipes' ends must not stay open here.
        drop(stdio);
        if !gate() {
            ahead.kill();
        }
        let status = ahead.wait();
        if let Ok(status) = &status {
            then(status);
        }
        self.0.state().forks += 1;
        self.0.forked.notify_all();
        drop(fork);
        if self
            .0
            .ahead_again
            .load(std::sync::atomic::Ordering::Relaxed)
        {
            // Not beside the agent's report of this start.
            self.0.make_ahead(AHEAD_AGAIN);
        }
        Ok(status)
    }
}

/// One exec's cgroup, killed and removed when dropped: when the exec ends, every process it
/// started goes, those that left its process group included.
pub(super) struct ExecProcesses(Option<crate::cgroup::ExecCgroup>);

impl ExecProcesses {
    /// None: the exec's processes are someone else's to end (runc's, in an OCI container).
    pub(super) fn none() -> Self {
        ExecProcesses(None)
    }

    /// The exec's cgroup below the container's, and the `cgroup.procs` files to join (opened
    /// close-on-exec).
    pub(super) fn create(container: &ContainerCgroup) -> io::Result<(Self, Vec<OwnedFd>)> {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let (procs, cgroup) = container.exec_cgroup(&format!("exec-{n}"));
        let guard = ExecProcesses(cgroup);
        let procs = open_procs_paths(&procs)?;
        Ok((guard, procs))
    }
}

impl Drop for ExecProcesses {
    fn drop(&mut self) {
        if let Some(cgroup) = &self.0
            && let Err(e) = cgroup.kill_and_remove()
        {
            eprintln!("podvisor shim: ending an exec: {e}");
        }
    }
}

/// A fresh, empty termination-message file for one instance, in a directory only root can
/// enter, belonging to the container's user and writable by it alone (0600). The kubelet
/// makes it 0666, which lets any other container that reaches it write another's message;
/// the container gets it bind-mounted by the shim, so it needs no access to the directory.
/// Rootless, every file is the shim's user's already.
fn create_termination_message_file(
    path: &Path,
    user: &crate::config::ContainerUser,
    rootless: bool,
) -> io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
    if let Some(dir) = path.parent() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)?;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
    }
    let file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)?;
    if !rootless {
        std::os::unix::fs::fchown(&file, Some(user.uid), Some(user.gid))?;
    }
    file.set_permissions(std::fs::Permissions::from_mode(0o600))
}

/// Opens each `cgroup.procs` of the cgroup (close-on-exec) for the child to write "0" to.
pub(super) fn open_procs_paths(paths: &[PathBuf]) -> io::Result<Vec<OwnedFd>> {
    paths
        .iter()
        .map(|p| {
            OpenOptions::new()
                .write(true)
                .open(p)
                .map(OwnedFd::from)
                .map_err(|e| io::Error::new(e.kind(), format!("opening {}: {e}", p.display())))
        })
        .collect()
}

fn open_procs(cgroup: &ContainerCgroup) -> io::Result<Vec<OwnedFd>> {
    open_procs_paths(&cgroup.procs_paths())
}

/// containerd's words for a failed exec of the container's program.
pub(super) fn exec_error(program: &str, err: &io::Error) -> String {
    match err.kind() {
        io::ErrorKind::NotFound if program.contains('/') => {
            format!("exec: \"{program}\": stat {program}: no such file or directory")
        }
        io::ErrorKind::NotFound => {
            format!("exec: \"{program}\": executable file not found in $PATH")
        }
        io::ErrorKind::PermissionDenied => format!("exec: \"{program}\": permission denied"),
        _ => {
            let text = err.to_string();
            let text = text
                .split(" (os error")
                .next()
                .unwrap_or(&text)
                .to_lowercase();
            format!("exec: \"{program}\": {text}")
        }
    }
}

/// Copies one output stream of a container into its CRI log, and to the sessions attached to
/// it, until EOF (a terminal's `EIO` once the container and its children closed it).
fn pump(
    mut pipe: File,
    stream: Stream,
    writer: &SharedLogWriter,
    done: &mpsc::Sender<()>,
    io: &ContainerIo,
) {
    let mut buf = vec![0_u8; 16 * 1024];
    loop {
        match pipe.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                if let Err(e) = writer.write(stream, &buf[..n]) {
                    eprintln!("podvisor shim: writing log: {e}");
                }
                io.broadcast(stream, &buf[..n]);
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    if let Err(e) = writer.finish(stream) {
        eprintln!("podvisor shim: finishing log: {e}");
    }
    io.output_ended();
    let _ = done.send(());
}

/// The journal's starts and exits by instance, and the instances acknowledged (a torn last
/// line, from a crash while appending, is skipped).
type Journal = (
    BTreeMap<u64, StartRecord>,
    BTreeMap<u64, ExitRecord>,
    HashSet<u64>,
);

fn read_journal(path: &Path) -> io::Result<Journal> {
    let (mut starts, mut exits, mut acked) = (BTreeMap::new(), BTreeMap::new(), HashSet::new());
    let file = match File::open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok((starts, exits, acked)),
        Err(e) => return Err(e),
    };
    for line in io::BufReader::new(file).lines() {
        match serde_json::from_str::<JournalEntry>(&line?) {
            Ok(JournalEntry::Start(start)) => {
                starts.insert(start.instance, start);
            }
            Ok(JournalEntry::Exit(exit)) => {
                exits.insert(exit.instance, exit);
            }
            Ok(JournalEntry::Ack { instance }) => {
                acked.insert(instance);
            }
            Err(_) => {}
        }
    }
    Ok((starts, exits, acked))
}

#[cfg(test)]
mod tests {
    use super::more_to_start;

    /// A helper is started ahead again after every container but the pod's last, init
    /// containers first; a container the pod does not name (an ephemeral one) is no reason.
    #[test]
    fn another_start_follows_every_container_but_the_last() {
        let pod: k8s_openapi::api::core::v1::Pod = serde_json::from_value(serde_json::json!({
            "spec": {
                "initContainers": [{"name": "i1"}, {"name": "i2"}],
                "containers": [{"name": "a"}, {"name": "b"}],
            }
        }))
        .unwrap();
        let follows: Vec<bool> = ["i1", "i2", "a", "b", "debugger"]
            .iter()
            .map(|n| more_to_start(&pod, n))
            .collect();
        assert_eq!(follows, [true, true, true, false, false]);
        let one: k8s_openapi::api::core::v1::Pod =
            serde_json::from_value(serde_json::json!({"spec": {"containers": [{"name": "a"}]}}))
                .unwrap();
        assert!(!more_to_start(&one, "a"));
    }
}
