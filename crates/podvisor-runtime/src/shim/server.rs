//! The shim process: `podvisor shim --pod-dir DIR [--socket PATH]`.
//!
//! Started by the agent with `posix_spawn` (stdio to `<pod_dir>/shim/shim.log`), it detaches
//! itself first (new session, inherited descriptors closed), then it is the
//! subreaper and parent of the pod's containers and serves the agent over a unix socket (see
//! [`super::protocol`]). It outlives the agent; a restarted agent reconnects, asks `State` and
//! `Subscribe`s again (unacknowledged exits are replayed). It exits after `Shutdown` once no
//! container runs. No async runtime: std threads only, started after the process has set up
//! its own mount namespace (which must happen while it is single-threaded).

use super::protocol::{Event, Request, Response, layout};
use super::resident::IDLE;
use super::supervisor::{Shim, Subscriber, THREAD_STACK};
use std::collections::BTreeSet;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex, mpsc};
use std::thread;
use std::time::Duration;

/// A connection thread's stack: decoding a start request (an OCI container's carries its pod)
/// takes more than the other threads' small stacks. Reserved, not resident: only the pages a
/// request touches count.
const CONN_STACK: usize = 2 * 1024 * 1024;

/// How long a connection may take to send its request line.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// Entry point of `podvisor shim ARGS...`; returns the exit code.
pub fn main(args: &[String]) -> i32 {
    if args.first().map(String::as_str) == Some(super::pid_holder::ARG) {
        super::pid_holder::run();
    }
    one_malloc_arena();
    let run = if args.first().map(String::as_str) == Some(super::spare::ARG) {
        // First, before the helper it may start ahead holds a descriptor of its own.
        detach();
        let youki_ahead = args.get(1).map(String::as_str) == Some(YOUKI_AHEAD);
        match super::spare::wait(youki_ahead) {
            Ok(Some((args, ahead, listener))) => try_main(args, ahead, Some(listener)),
            // The agent went away without a pod for it.
            Ok(None) => Ok(()),
            Err(e) => Err(e),
        }
    } else {
        parse(args).and_then(|args| {
            detach();
            try_main(args, None, None)
        })
    };
    match run {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("podvisor shim: {e}");
            1
        }
    }
}

/// One malloc arena for the whole shim: its threads (connections, log pumps, exits) allocate
/// little and seldom, and glibc would give each that met another at the lock an arena of its
/// own, pages the shim keeps for its whole life, once per pod.
fn one_malloc_arena() {
    // SAFETY: mallopt only sets an allocator parameter; called before any thread exists.
    #[allow(unsafe_code)]
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 1);
    }
}

#[derive(Debug, PartialEq, Eq)]
pub(super) struct Args {
    pub(super) pod_dir: PathBuf,
    pub(super) socket: PathBuf,
    /// Keep youki's helper started ahead ([`YOUKI_AHEAD`]).
    pub(super) youki_ahead: bool,
}

/// The shim's argument for a pod whose OCI containers youki's helper runs: it keeps one
/// helper started ahead for the next start ([`crate::oci::ahead`]).
pub const YOUKI_AHEAD: &str = "--youki-ahead";

fn parse(args: &[String]) -> io::Result<Args> {
    let usage = |m: &str| io::Error::new(io::ErrorKind::InvalidInput, m.to_owned());
    let (mut pod_dir, mut socket, mut youki_ahead) = (None, None, false);
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let mut value = || {
            it.next()
                .cloned()
                .ok_or_else(|| usage(&format!("{arg} needs a value")))
        };
        match arg.as_str() {
            "--pod-dir" => pod_dir = Some(PathBuf::from(value()?)),
            "--socket" => socket = Some(PathBuf::from(value()?)),
            YOUKI_AHEAD => youki_ahead = true,
            other => return Err(usage(&format!("unknown argument {other}"))),
        }
    }
    let pod_dir = pod_dir.ok_or_else(|| {
        usage("usage: podvisor shim --pod-dir DIR [--socket PATH] [--youki-ahead]")
    })?;
    let socket = socket.unwrap_or_else(|| layout::socket(&pod_dir));
    Ok(Args {
        pod_dir,
        socket,
        youki_ahead,
    })
}

/// The shim, for the pod of `args`; `ahead`: youki's helper a spare started while it waited;
/// `listener`: the pod's socket, listening, as the agent handed it to a spare.
fn try_main(
    args: Args,
    ahead: Option<crate::oci::ahead::Ahead>,
    listener: Option<UnixListener>,
) -> io::Result<()> {
    let shim_dir = layout::shim_dir(&args.pod_dir);
    std::fs::create_dir_all(&shim_dir)?;
    // One shim per pod: held for the shim's whole life, taken before anything is written, so two
    // shims started at once cannot both pass the socket check below.
    let _lock = lock(&layout::lock(&args.pod_dir))?;
    std::fs::write(
        layout::pid_file(&args.pod_dir),
        format!("{}\n", std::process::id()),
    )?;
    // Listening first: the agent's connection, and the pod's first start request after it,
    // wait in the backlog while the shim makes its mount namespace, instead of the agent
    // polling for the socket meanwhile. The socket, the lock and the pid file are in the pod
    // directory, the same directory in both namespaces.
    let listener = match listener {
        Some(listener) => listener,
        None => bind(&args.socket)?,
    };
    // Still single-threaded: the only moment a private mount namespace covers the whole shim.
    let shared_tmpfs = private_mount_namespace();
    if shared_tmpfs {
        // Before anything else reads the mount table: this shim reads it as it starts (cgroup
        // layout, host facts) and the OCI runtime a dozen times per create, each read costing
        // in proportion to its length. Done on a thread beside those reads, one unmount per
        // pod, it took a median of 250 ms per shim with 110 pods started at once; with the pods
        // directory one mount, 3 ms.
        drop_other_pods_mounts(&args.pod_dir)?;
    }
    rustix::process::set_child_subreaper(Some(rustix::process::getpid()))
        .map_err(|e| io::Error::new(e.kind(), format!("becoming a child subreaper: {e}")))?;
    let shim = Arc::new(Shim::new(
        &args.pod_dir,
        args.socket.clone(),
        shared_tmpfs,
        args.youki_ahead,
    )?);
    match ahead {
        // A spare's, started while it waited.
        Some(ahead) => shim.adopt_ahead(ahead),
        // Its exec runs beside the agent's last steps before the pod's first start.
        None => shim.make_ahead(Duration::ZERO),
    }
    {
        let shim = Arc::clone(&shim);
        thread::Builder::new()
            .name("reaper".into())
            .stack_size(THREAD_STACK)
            .spawn(move || shim.reap_forever())?;
    }
    // The start-up pages go once the shim has settled; later, after each burst of work. So
    // does the helper started ahead: the next start may be long in coming.
    {
        let shim = Arc::clone(&shim);
        thread::Builder::new()
            .name("trim".into())
            .stack_size(THREAD_STACK)
            .spawn(move || IDLE.run(|| shim.drop_ahead()))?;
    }
    IDLE.touch();
    let tickets = Arc::new(Tickets::default());
    for conn in listener.incoming() {
        match conn {
            Ok(stream) => {
                let shim = Arc::clone(&shim);
                let ticket = Tickets::issue(&tickets);
                let spawned = thread::Builder::new()
                    .name("conn".into())
                    .stack_size(CONN_STACK)
                    .spawn(move || {
                        if let Err(e) = serve(&shim, stream, ticket) {
                            eprintln!("podvisor shim: connection: {e}");
                        }
                        IDLE.touch();
                    });
                if let Err(e) = spawned {
                    eprintln!("podvisor shim: cannot serve a connection: {e}");
                }
            }
            Err(e) => {
                eprintln!("podvisor shim: accept: {e}");
                thread::sleep(Duration::from_millis(100));
            }
        }
    }
    Ok(())
}

/// Connections in the order they were accepted, until each has read its request and, for a
/// start, started it. A `State` answer waits for every connection accepted before its own:
/// an agent that restarts reads the shim's view only after what the dead agent had already
/// sent (a start it asked a moment before it died, say) was done, so it never asks for the
/// same container again.
#[derive(Default)]
struct Tickets {
    /// The next ticket and the tickets not done.
    state: Mutex<(u64, BTreeSet<u64>)>,
    done: Condvar,
}

/// One connection's place in [`Tickets`]; done when dropped.
struct Ticket {
    tickets: Arc<Tickets>,
    number: u64,
}

impl Tickets {
    fn lock(&self) -> std::sync::MutexGuard<'_, (u64, BTreeSet<u64>)> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn issue(tickets: &Arc<Tickets>) -> Ticket {
        let mut state = tickets.lock();
        let number = state.0;
        state.0 += 1;
        state.1.insert(number);
        Ticket {
            tickets: Arc::clone(tickets),
            number,
        }
    }
}

impl Ticket {
    /// Marks this connection done and waits (at most `REQUEST_TIMEOUT`, the longest a
    /// connection may take to send its request) until every earlier one is.
    fn wait_for_earlier(self) {
        let tickets = Arc::clone(&self.tickets);
        let number = self.number;
        drop(self);
        let state = tickets.lock();
        let _unused = tickets
            .done
            .wait_timeout_while(state, REQUEST_TIMEOUT, |(_, pending)| {
                pending.first().is_some_and(|&first| first < number)
            });
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        self.tickets.lock().1.remove(&self.number);
        self.tickets.done.notify_all();
    }
}

/// Gives the shim its own mount namespace (slave of the host's) when it may: tmpfs volumes
/// mounted there are shared by the pod's containers and vanish with the shim.
fn private_mount_namespace() -> bool {
    if !rustix::process::geteuid().is_root() {
        return false;
    }
    // SAFETY: unshare while the process has a single thread, before any thread is spawned.
    #[allow(unsafe_code)]
    let unshared = unsafe { rustix::thread::unshare_unsafe(rustix::thread::UnshareFlags::NEWNS) };
    if let Err(e) = unshared {
        eprintln!(
            "podvisor shim: no private mount namespace ({e}): tmpfs volumes are per container"
        );
        return false;
    }
    let flags = rustix::mount::MountPropagationFlags::DOWNSTREAM
        | rustix::mount::MountPropagationFlags::REC;
    if let Err(e) = rustix::mount::mount_change("/", flags) {
        eprintln!("podvisor shim: making / a slave mount: {e}");
    }
    true
}

/// The shim's mount namespace is a copy of the agent's, with every other pod's mounts in it:
/// the bind mounts that hold an `oci` pod's namespaces among them, which would keep that pod's
/// network alive (its veth, its address) after the pod is gone, for as long as this shim
/// lives. The same holds for the sandboxes of the agent's warm pool: a pod that takes one
/// later renames its directory, and this copy would follow it and outlive that pod. They are
/// detached here, in this namespace only: all at once where the pods directory is one mount
/// (`sandbox::pods_mount`), else one by one, the outermost of each. That also keeps this
/// namespace's mount table short.
///
/// # Errors
///
/// The pod's own mounts could not be attached again after the pods directory was detached.
fn drop_other_pods_mounts(pod_dir: &std::path::Path) -> io::Result<()> {
    crate::sandbox::pods_mount::keep_only(pod_dir).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("keeping only this pod's mounts in the shim's namespace: {e}"),
        )
    })?;
    // Whatever is left: mounts of pods from before the pods directory became a mount, an
    // older agent's pool.
    let Some(pods) = pod_dir.parent() else {
        return Ok(());
    };
    let pool = pods
        .parent()
        .map(|state| state.join(crate::sandbox::pool::LEGACY_POOL_DIR));
    let Ok(info) = std::fs::read_to_string("/proc/self/mountinfo") else {
        return Ok(());
    };
    let mut others: Vec<PathBuf> = crate::cgroup::parse_mount_table(&info)
        .into_iter()
        .map(|m| m.mount_point)
        .filter(|p| {
            let other_pod = p.starts_with(pods) && !p.starts_with(pod_dir) && p != pods;
            let pooled = pool
                .as_ref()
                .is_some_and(|pool| p.starts_with(pool) && p != pool);
            other_pod || pooled
        })
        .collect();
    for path in outermost(&mut others) {
        // A lazy unmount takes the mounts below it along: one call (and one RCU grace period)
        // per sandbox, not one per namespace file.
        let _ = rustix::mount::unmount(path, rustix::mount::UnmountFlags::DETACH);
    }
    Ok(())
}

/// The mount points of `paths` that are not below another of them, sorted (`paths` is sorted
/// and deduplicated in place).
fn outermost(paths: &mut Vec<PathBuf>) -> Vec<&PathBuf> {
    // Component-wise order: everything below a path comes right after it.
    paths.sort();
    paths.dedup();
    let mut tops: Vec<&PathBuf> = Vec::new();
    for path in paths.iter() {
        if !tops.last().is_some_and(|top| path.starts_with(top)) {
            tops.push(path);
        }
    }
    tops
}

/// Leaves the agent's session, so that neither a terminal's signals nor the agent's exit
/// reach the shim, and closes every descriptor it inherited above 2 (the agent spawns it
/// without a fork hook: a pipe someone waits on for EOF must not stay open for the shim's
/// whole life). First thing: nothing of the shim's own is open yet.
fn detach() {
    // Fails only for a process group leader, which a spawned shim is not.
    if let Err(e) = rustix::process::setsid() {
        eprintln!("podvisor shim: setsid: {e}");
    }
    // SAFETY: close_range only closes descriptors; none above 2 belongs to this process yet.
    #[allow(unsafe_code)]
    let rc = unsafe { libc::syscall(libc::SYS_close_range, 3_u32, u32::MAX, 0_u32) };
    if rc < 0 {
        // Older kernels: at least none reaches a container.
        cloexec_inherited();
    }
}

/// Marks every inherited descriptor above 2 close-on-exec, so none reaches a container.
fn cloexec_inherited() {
    let Ok(dir) = std::fs::read_dir("/proc/self/fd") else {
        return;
    };
    let fds: Vec<i32> = dir
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .filter(|&fd| fd > 2)
        .collect();
    for fd in fds {
        // SAFETY: borrowing a descriptor number only to set its flags; a stale number (the
        // directory's own descriptor) fails harmlessly with EBADF.
        #[allow(unsafe_code)]
        let fd = unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) };
        let _ = rustix::io::fcntl_setfd(fd, rustix::io::FdFlags::CLOEXEC);
    }
}

/// Binds the socket, replacing a stale one; refuses if another shim answers on it.
/// Takes `<shim dir>/shim.lock` exclusively, or fails if another shim of this pod holds it.
fn lock(path: &std::path::Path) -> io::Result<std::fs::File> {
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .map_err(|e| io::Error::new(e.kind(), format!("opening {}: {e}", path.display())))?;
    rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockExclusive).map_err(
        |_| {
            io::Error::new(
                io::ErrorKind::AddrInUse,
                format!("another shim holds {}", path.display()),
            )
        },
    )?;
    Ok(file)
}

/// Makes the pod's socket at `socket`, listening, replacing a stale one; refused when a shim
/// answers there. The agent makes a spare's with it ([`super::spare::hand_over`]).
pub(super) fn bind(socket: &std::path::Path) -> io::Result<UnixListener> {
    if UnixStream::connect(socket).is_ok() {
        return Err(io::Error::new(
            io::ErrorKind::AddrInUse,
            format!("another shim serves {}", socket.display()),
        ));
    }
    let _ = std::fs::remove_file(socket);
    if let Some(dir) = socket.parent() {
        std::fs::create_dir_all(dir)?;
    }
    UnixListener::bind(socket)
        .map_err(|e| io::Error::new(e.kind(), format!("binding {}: {e}", socket.display())))
}

fn write_line(stream: &mut UnixStream, value: &impl serde::Serialize) -> io::Result<()> {
    let mut line = serde_json::to_vec(value).map_err(io::Error::other)?;
    line.push(b'\n');
    stream.write_all(&line)
}

fn serve(shim: &Arc<Shim>, mut stream: UnixStream, ticket: Ticket) -> io::Result<()> {
    stream.set_read_timeout(Some(REQUEST_TIMEOUT))?;
    let mut line = String::new();
    BufReader::new(&stream).read_line(&mut line)?;
    if line.trim().is_empty() {
        return Ok(());
    }
    let request: Request = match serde_json::from_str(&line) {
        Ok(request) => request,
        Err(e) => {
            let message = format!("bad request: {e}");
            return write_line(&mut stream, &Response::Error { message });
        }
    };
    match &request {
        // Done once started (the ticket goes at the end of this function).
        Request::Start { .. } => {}
        Request::State => ticket.wait_for_earlier(),
        _ => drop(ticket),
    }
    if let Request::Subscribe = request {
        return stream_events(shim, stream);
    }
    if let Request::ExecStream {
        instance,
        argv,
        stdin,
        stdout,
        stderr,
        tty,
        size,
    } = request
    {
        let request = super::exec_stream::StreamRequest {
            instance,
            argv,
            stdin,
            stdout,
            stderr,
            tty,
            size,
        };
        return super::exec_stream::serve(shim, stream, &request);
    }
    if let Request::Attach {
        instance,
        stdin,
        stdout,
        stderr,
        tty,
    } = request
    {
        let request = super::attach::AttachRequest {
            instance,
            stdin,
            stdout,
            stderr,
            tty,
        };
        return super::attach::serve(shim, stream, &request);
    }
    shim.busy(true);
    let result = answer(shim, request, &mut stream);
    drop(stream);
    shim.busy(false);
    result
}

fn answer(shim: &Arc<Shim>, request: Request, stream: &mut UnixStream) -> io::Result<()> {
    let response = match request {
        Request::Subscribe | Request::ExecStream { .. } | Request::Attach { .. } => return Ok(()),
        Request::Shutdown => {
            shim.shutdown();
            Response::Ok
        }
        Request::Start { instance, config } => {
            let response = shim.start(instance, *config);
            let written = write_line(stream, &response);
            // The start was journaled unsynced (see `Shim::start`); this connection's ticket
            // holds a later `State` until it is on disk.
            if let Err(e) = shim.sync_journal() {
                eprintln!("podvisor shim: syncing the journal: {e}");
            }
            return written;
        }
        Request::Signal { instance, signal } => shim.signal(instance, signal),
        Request::Kill { instance } => shim.kill(instance),
        Request::Exec {
            instance,
            argv,
            timeout_ms,
        } => super::exec::exec(shim, instance, &argv, timeout_ms.map(Duration::from_millis)),
        Request::ReopenContainerLog { instance } => shim.reopen_log(instance),
        Request::State => shim.snapshot(),
        Request::Ack { instance } => shim.ack(instance),
    };
    write_line(stream, &response)
}

/// Streams exits to a subscriber: first the unacknowledged ones, then each new one, until the
/// agent hangs up. Sleeps in `poll` on the connection and a wake-up pipe between events.
fn stream_events(shim: &Arc<Shim>, mut stream: UnixStream) -> io::Result<()> {
    use rustix::event::{PollFd, PollFlags};
    let (wake_rx, wake_tx) = rustix::pipe::pipe_with(
        rustix::pipe::PipeFlags::CLOEXEC | rustix::pipe::PipeFlags::NONBLOCK,
    )?;
    let (tx, rx) = mpsc::channel();
    for exit in shim.subscribe(Subscriber { tx, wake: wake_tx }) {
        write_line(&mut stream, &Event::Exited(exit))?;
    }
    loop {
        let (hung_up, woken) = {
            let mut fds = [
                PollFd::new(&stream, PollFlags::IN),
                PollFd::new(&wake_rx, PollFlags::IN),
            ];
            match rustix::event::poll(&mut fds, None) {
                Ok(_) | Err(rustix::io::Errno::INTR) => {}
                Err(e) => return Err(e.into()),
            }
            (!fds[0].revents().is_empty(), !fds[1].revents().is_empty())
        };
        if woken {
            let mut buf = [0_u8; 64];
            while matches!(rustix::io::read(&wake_rx, &mut buf), Ok(n) if n > 0) {}
        }
        while let Ok(exit) = rx.try_recv() {
            write_line(&mut stream, &Event::Exited(exit))?;
            IDLE.touch();
        }
        if hung_up && peer_gone(&mut stream)? {
            return Ok(());
        }
    }
}

/// The agent never writes on a subscription: readable means it hung up.
fn peer_gone(stream: &mut UnixStream) -> io::Result<bool> {
    stream.set_nonblocking(true)?;
    let mut byte = [0_u8; 1];
    let gone = match stream.read(&mut byte) {
        Ok(0) => true,
        Ok(_) => false,
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => false,
        Err(_) => true,
    };
    stream.set_nonblocking(false)?;
    Ok(gone)
}

#[cfg(test)]
mod tests {
    use super::outermost;
    use std::path::PathBuf;

    /// Only the outermost of nested mount points is unmounted (a lazy unmount takes the rest),
    /// and a sibling whose name extends another's is not taken for its child.
    #[test]
    fn outermost_mount_points_cover_the_nested_ones() {
        let mut paths: Vec<PathBuf> = [
            "/s/pool/b/ns/net",
            "/s/pool/b/ns",
            "/s/pods/x/sandbox/ns/uts",
            "/s/pool/a-2/ns",
            "/s/pool/a/ns/ipc",
            "/s/pool/a/ns",
            "/s/pods/x/sandbox/ns",
            "/s/pool/a/ns",
            "/s/pods/x/volumes/v",
        ]
        .iter()
        .map(PathBuf::from)
        .collect();
        let tops: Vec<&str> = outermost(&mut paths)
            .into_iter()
            .map(|p| p.to_str().unwrap())
            .collect();
        assert_eq!(
            tops,
            [
                "/s/pods/x/sandbox/ns",
                "/s/pods/x/volumes/v",
                "/s/pool/a/ns",
                "/s/pool/a-2/ns",
                "/s/pool/b/ns"
            ]
        );
    }
}
