//! The pod's PID namespace for `shareProcessNamespace`, held without a pause image.
//!
//! Under containerd the pause container is PID 1 of a pod that shares its process namespace:
//! every container joins the namespace, sees the others' processes and, when its own process
//! exits, leaves its orphans to PID 1, which reaps them. A PID namespace cannot be kept alive
//! by a bind mount alone as the network one is: once its PID 1 exits the kernel kills every
//! process in it and refuses new ones. So the shim starts a holder: `podvisor shim
//! --pid-holder`, cloned straight into a new PID namespace (`clone(CLONE_NEWPID)`, then
//! `execve` of the shim's own binary), where it is PID 1 and does what pause does: nothing,
//! except reaping every zombie handed to it, until `SIGTERM`/`SIGINT` or `SIGKILL`.
//! Containers join it through `/proc/<holder>/ns/pid`. The holder is the shim's child (the
//! shim reaps it); the shim kills it when it exits itself, and when the shim dies without a
//! word (SIGKILL) the kernel kills it: the holder asks for `SIGKILL` on its parent's death
//! (`PR_SET_PDEATHSIG`) before it `execve`s, then checks that the parent did not die before
//! that. The "parent" of `PR_SET_PDEATHSIG` is the *thread* that cloned it, so holders are
//! cloned by one thread of the shim that lives as long as the shim ([`spawn`]), never by a
//! connection thread that ends after its request.

use std::ffi::CString;
use std::io;
use std::sync::{Mutex, OnceLock, mpsc};

/// The argument that makes `podvisor shim` the holder.
pub(super) const ARG: &str = "--pid-holder";

/// A request to the holders' thread: where its answer goes.
type Reply = mpsc::Sender<io::Result<u32>>;

/// The thread that clones every holder of this shim, started on first use; it waits for
/// requests for the rest of the shim's life.
static SPAWNER: OnceLock<Mutex<mpsc::Sender<Reply>>> = OnceLock::new();

/// Starts a holder in a new PID namespace and returns its PID (in the shim's namespace).
/// Call with the shim's fork lock held, as for any child: the clone happens on the holders'
/// thread while the caller waits.
///
/// # Errors
/// The holders' thread cannot be started, the shim's binary cannot be named, or `clone`
/// fails.
pub(super) fn spawn() -> io::Result<u32> {
    let requests = match SPAWNER.get() {
        Some(requests) => requests,
        None => {
            let (tx, rx) = mpsc::channel::<Reply>();
            std::thread::Builder::new()
                .name("pid-holder".into())
                .stack_size(super::supervisor::THREAD_STACK)
                .spawn(move || {
                    for reply in rx {
                        let _ = reply.send(clone_holder());
                    }
                })?;
            // Only connection threads holding the fork lock get here: no other thread
            // started one meanwhile.
            SPAWNER.get_or_init(|| Mutex::new(tx))
        }
    };
    let (reply, answer) = mpsc::channel();
    requests
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .send(reply)
        .map_err(|_| io::Error::other("the PID namespace holders' thread is gone"))?;
    answer
        .recv()
        .map_err(|_| io::Error::other("the PID namespace holders' thread is gone"))?
}

/// A pidfd of the calling thread (Linux 6.9's `PIDFD_THREAD`), or of the whole process on an
/// older kernel: readable once it has exited. The holders' thread only ends with the shim,
/// so either tells the shim's death.
fn own_pidfd() -> io::Result<std::os::fd::OwnedFd> {
    use std::os::fd::FromRawFd;
    // SAFETY: plain system calls; a non-negative result is a new descriptor we own.
    #[allow(unsafe_code)]
    unsafe {
        let mut fd = libc::syscall(
            libc::SYS_pidfd_open,
            libc::c_long::from(libc::gettid()),
            libc::c_long::from(libc::O_EXCL),
        );
        if fd < 0 {
            fd = libc::syscall(
                libc::SYS_pidfd_open,
                libc::c_long::from(libc::getpid()),
                0 as libc::c_long,
            );
        }
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        let fd = i32::try_from(fd).map_err(io::Error::other)?;
        Ok(std::os::fd::OwnedFd::from_raw_fd(fd))
    }
}

/// The clone itself, on the holders' thread.
fn clone_holder() -> io::Result<u32> {
    use std::os::fd::AsRawFd;
    let parent = own_pidfd()?;
    let parent_fd = parent.as_raw_fd();
    // Everything the child needs is made before the clone: after it, in a copy of a
    // multi-threaded process, the child may only make async-signal-safe calls.
    // The child's own `/proc/self/exe` is this binary, even one replaced on disk since.
    let exe = CString::new("/proc/self/exe").map_err(io::Error::other)?;
    let args = [
        CString::new("podvisor").map_err(io::Error::other)?,
        CString::new("shim").map_err(io::Error::other)?,
        CString::new(ARG).map_err(io::Error::other)?,
    ];
    let argv: Vec<*const libc::c_char> = args
        .iter()
        .map(|a| a.as_ptr())
        .chain(std::iter::once(std::ptr::null()))
        .collect();
    let envp: [*const libc::c_char; 1] = [std::ptr::null()];
    let flags = libc::CLONE_NEWPID | libc::SIGCHLD;
    // SAFETY: a raw `clone` without a new stack behaves as `fork` (the child continues on a
    // copy of this stack); the child only makes system calls (`prctl`, `poll`, `execve`,
    // `_exit`) with arguments built above.
    #[allow(unsafe_code)]
    let pid = unsafe {
        let pid = libc::syscall(
            libc::SYS_clone,
            libc::c_long::from(flags),
            0 as libc::c_long,
            0 as libc::c_long,
            0 as libc::c_long,
            0 as libc::c_long,
        );
        if pid == 0 {
            // Killed when this thread (and so the shim) dies; kept across `execve`.
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                libc::_exit(126);
            }
            // The parent may have died before the request took hold: then nobody kills
            // the holder later, so it goes now (`getppid` says 0 in a new PID namespace,
            // whether the parent lives or not: the pidfd tells).
            let mut gone = libc::pollfd {
                fd: parent_fd,
                events: libc::POLLIN,
                revents: 0,
            };
            if libc::poll(&raw mut gone, 1, 0) > 0 {
                libc::_exit(0);
            }
            libc::execve(exe.as_ptr(), argv.as_ptr(), envp.as_ptr());
            libc::_exit(127);
        }
        pid
    };
    drop(parent);
    if pid < 0 {
        return Err(io::Error::last_os_error());
    }
    u32::try_from(pid).map_err(io::Error::other)
}

/// The holder's life, as PID 1 of the pod's PID namespace: reap what is handed over until
/// told to stop. Never returns.
pub(super) fn run() -> ! {
    // SAFETY: plain calls on a local signal set; the process is single-threaded (it was just
    // exec'd), so blocking the signals covers every thread.
    #[allow(unsafe_code)]
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&raw mut set);
        for signal in [libc::SIGCHLD, libc::SIGTERM, libc::SIGINT] {
            libc::sigaddset(&raw mut set, signal);
        }
        libc::sigprocmask(libc::SIG_BLOCK, &raw const set, std::ptr::null_mut());
        loop {
            // Zombies already there first: a child may have exited before the mask.
            let mut status = 0;
            while libc::waitpid(-1, &raw mut status, libc::WNOHANG) > 0 {}
            let signal = libc::sigwaitinfo(&raw const set, std::ptr::null_mut());
            if signal == libc::SIGTERM || signal == libc::SIGINT {
                libc::_exit(0);
            }
        }
    }
}

/// The file a container joins the holder's namespace by.
pub(super) fn namespace_path(pid: u32) -> std::path::PathBuf {
    std::path::PathBuf::from(format!("/proc/{pid}/ns/pid"))
}
