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
//! shim reaps it); the shim kills it when it exits itself.

use std::ffi::CString;
use std::io;

/// The argument that makes `podvisor shim` the holder.
pub(super) const ARG: &str = "--pid-holder";

/// Starts a holder in a new PID namespace and returns its PID (in the shim's namespace).
/// Call with the shim's fork lock held, as for any child.
///
/// # Errors
/// The shim's binary cannot be named, or `clone` fails.
pub(super) fn spawn() -> io::Result<u32> {
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
    // copy of this stack); the child only calls `execve` and `_exit`, both async-signal-safe,
    // with arguments built above.
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
            libc::execve(exe.as_ptr(), argv.as_ptr(), envp.as_ptr());
            libc::_exit(127);
        }
        pid
    };
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
