//! Exec requests: run a command in a container's view (exec probes and hooks).

use super::child::ChildSetup;
use super::protocol::{EXEC_OUTPUT_LIMIT, Response};
use super::supervisor::{ExecProcesses, Shim, THREAD_STACK, Waiter, decode, exec_error};
use rustix::process::{Pid, Signal};
use std::fs::File;
use std::io::{self, Read};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::thread;
use std::time::Duration;

/// How long output is still collected after the command exited (a background child may hold
/// the pipe open; it is not waited for longer than this).
const OUTPUT_GRACE: Duration = Duration::from_millis(500);

/// Runs `argv` in the instance's cgroup, mount (and user) namespace, env, working directory and
/// user (uid, gid, groups), in its own process group; stdout and stderr are kept up to [`EXEC_OUTPUT_LIMIT`] bytes each.
pub(super) fn exec(
    shim: &Arc<Shim>,
    instance: u64,
    argv: &[String],
    timeout: Option<Duration>,
) -> Response {
    match run(shim, instance, argv, timeout) {
        Ok(response) => response,
        Err(e) => shim.exec_failed(instance, &e),
    }
}

fn run(
    shim: &Arc<Shim>,
    instance: u64,
    argv: &[String],
    timeout: Option<Duration>,
) -> io::Result<Response> {
    let target = match shim.exec_target(instance) {
        Ok(target) => target,
        Err(response) => return Ok(response),
    };
    let Some(program) = argv.first() else {
        return Ok(Response::Error {
            message: "exec: empty command".into(),
        });
    };
    let (read_out, write_out) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)?;
    let (read_err, write_err) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)?;
    // An OCI container's exec is `runc exec` (its namespaces, root, user, capabilities, in
    // its cgroup); a host process's joins the container's view itself, in a cgroup of its own.
    let (mut command, processes, report, spec) = match &target.oci {
        Some(oci) => {
            let (command, spec) = oci.command(shim, argv, None)?;
            (command, None, None, Some(spec))
        }
        None => {
            let (processes, procs) = ExecProcesses::create(&target.cgroup)?;
            let (setup, report) = ChildSetup::for_exec(
                target.pid,
                target.working_dir.as_deref(),
                &target.user,
                procs,
                target.rootless,
            )?;
            let mut command = Command::new(program);
            command
                .args(&argv[1..])
                .env_clear()
                .envs(target.env.iter().map(|(k, v)| (k, v)));
            // SAFETY: `ChildSetup::run` only makes async-signal-safe system calls on data
            // prepared before fork; it does not allocate or take locks.
            #[allow(unsafe_code)]
            unsafe {
                let mut setup = setup;
                command.pre_exec(move || setup.run());
            }
            (command, Some(processes), Some(report), None)
        }
    };
    command
        .stdin(Stdio::null())
        .stdout(Stdio::from(write_out))
        .stderr(Stdio::from(write_err))
        .process_group(0);
    let (tx, rx) = mpsc::channel();
    let spawned = shim.spawn(&mut command, Waiter::Exec(tx));
    // Drops our copies of the pipes' write ends: EOF comes when the command's side closes.
    drop(command);
    let child = match spawned {
        Ok(child) => child,
        Err(e) => {
            let detail = report
                .and_then(|r| r.failed_step(&[]))
                .unwrap_or_else(|| exec_error(program, &e));
            return Ok(Response::Error {
                message: format!(
                    "OCI runtime exec failed: exec failed: unable to start container process: \
                     {detail}: unknown"
                ),
            });
        }
    };
    let pid = child.id();
    // The reaper owns the child's status.
    drop(child);

    let (eof_tx, eof_rx) = mpsc::channel();
    let mut streams = Vec::new();
    for read in [read_out, read_err] {
        let kept = Arc::new(Mutex::new(Vec::new()));
        streams.push(Arc::clone(&kept));
        let eof_tx = eof_tx.clone();
        thread::Builder::new()
            .name(format!("exec-{instance}"))
            .stack_size(THREAD_STACK)
            .spawn(move || {
                collect(File::from(read), &kept);
                let _ = eof_tx.send(());
            })?;
    }
    drop(eof_tx);

    let kill_group = || {
        if let Some(pgid) = i32::try_from(pid).ok().and_then(Pid::from_raw) {
            let _ = rustix::process::kill_process_group(pgid, Signal::KILL);
        }
    };
    let (status, timed_out) = match timeout {
        Some(limit) => match rx.recv_timeout(limit) {
            Ok(status) => (status, false),
            Err(_) => {
                kill_group();
                (rx.recv().map_err(io::Error::other)?, true)
            }
        },
        None => (rx.recv().map_err(io::Error::other)?, false),
    };
    if timed_out {
        // Whatever the group left behind goes too (it may have re-parented to the shim), and
        // the process a killed `runc exec` leaves running.
        kill_group();
        if let Some(spec) = &spec {
            spec.kill_left_behind();
        }
    }
    // The exec is over: whatever it started goes, even what left its process group, and
    // the pipes those held reach EOF.
    drop(processes);
    let grace_ends = std::time::Instant::now() + OUTPUT_GRACE;
    for _ in &streams {
        let left = grace_ends.saturating_duration_since(std::time::Instant::now());
        if eof_rx.recv_timeout(left).is_err() {
            break;
        }
    }
    let [output, stderr] = [0, 1].map(|i| {
        streams[i]
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    });
    let (exit_code, _) = decode(status);
    Ok(Response::Exec {
        exit_code,
        output,
        stderr,
        timed_out,
    })
}

/// Reads the pipe to EOF, keeping the first [`EXEC_OUTPUT_LIMIT`] bytes.
fn collect(mut pipe: File, output: &Mutex<Vec<u8>>) {
    let mut buf = [0_u8; 4096];
    loop {
        match pipe.read(&mut buf) {
            Ok(0) => return,
            Ok(n) => {
                let mut out = output
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                let room = EXEC_OUTPUT_LIMIT.saturating_sub(out.len());
                out.extend_from_slice(&buf[..n.min(room)]);
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return,
        }
    }
}
