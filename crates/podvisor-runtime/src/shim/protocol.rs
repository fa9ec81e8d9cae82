//! The agent ↔ shim protocol: one JSON object per line over the shim's unix socket.
//!
//! Every connection carries one [`Request`] and one [`Response`], except `Subscribe`, after
//! which the shim streams [`Event`] lines (first the exits not yet acknowledged) until the
//! agent hangs up. Timestamps are RFC 3339 strings with nanoseconds, so the journal
//! (`<pod_dir>/shim/exits.jsonl`) stays readable by people.

use crate::config::ContainerConfig;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// The longest output of an exec that is kept, of stdout and of stderr each.
pub const EXEC_OUTPUT_LIMIT: usize = 10 * 1024;

/// The most descriptors a shim answer carries (`ExecStarted`: stdin, stdout, stderr).
pub const MAX_PASSED_FDS: usize = 3;

/// What the agent asks of the shim.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Request {
    /// Create and start a container instance.
    Start {
        /// The instance id (unique within the pod).
        instance: u64,
        /// What to run and how (boxed: by far the largest request).
        config: Box<ContainerConfig>,
    },
    /// Send `signal` to the instance's process group.
    Signal {
        /// The instance.
        instance: u64,
        /// The signal number.
        signal: i32,
    },
    /// SIGKILL the instance's process group and every process in its cgroup.
    Kill {
        /// The instance.
        instance: u64,
    },
    /// Run a command in the instance's view and wait for it.
    Exec {
        /// The instance.
        instance: u64,
        /// The command.
        argv: Vec<String>,
        /// Kill the command's process group after this many milliseconds.
        timeout_ms: Option<u64>,
    },
    /// Start a command in the instance's view with its streams handed to the agent: the
    /// answer ([`Response::ExecStarted`]) carries the descriptors (`SCM_RIGHTS`: stdin's write
    /// end, stdout's and stderr's read ends, those asked for, in that order; with `tty`, the
    /// terminal's master alone). The connection stays open: [`Response::ExecExited`] follows
    /// when the command exits; hanging up before that kills its process group.
    ExecStream {
        /// The instance.
        instance: u64,
        /// The command.
        argv: Vec<String>,
        /// Hand over a stdin pipe (else `/dev/null`).
        stdin: bool,
        /// Hand over a stdout pipe (else `/dev/null`).
        stdout: bool,
        /// Hand over a stderr pipe (else `/dev/null`; ignored with `tty`).
        stderr: bool,
        /// Run it on a new pseudo-terminal (its controlling terminal).
        tty: bool,
        /// The terminal's size from the start, `(columns, rows)` (with `tty`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        size: Option<(u16, u16)>,
    },
    /// Attach to the instance's own stdio (`kubectl attach`): the answer
    /// ([`Response::ExecStarted`], with the instance's pid) carries the descriptors
    /// (`SCM_RIGHTS`: a pipe into the container's stdin, pipes of its stdout and stderr from
    /// now on, those asked for, in that order; with `tty` and a container on a terminal, a
    /// descriptor of that terminal for resizes, last). The connection stays open:
    /// [`Response::AttachEnded`] follows when the session ends (the container's output ended,
    /// or the input ended without `stdinOnce`); hanging up ends it too.
    Attach {
        /// The instance.
        instance: u64,
        /// Hand over a pipe into the container's stdin (if it has one open).
        stdin: bool,
        /// Hand over its stdout.
        stdout: bool,
        /// Hand over its stderr (a container on a terminal has none).
        stderr: bool,
        /// Hand over a descriptor of its terminal for resizes.
        tty: bool,
    },
    /// CRI `ReopenContainerLog`: the running instance's output goes to a new file at its log
    /// path from now on (the node renamed the old one to rotate it). `Error` when it does not
    /// run any more.
    ReopenContainerLog {
        /// The instance.
        instance: u64,
    },
    /// Every instance the shim knows, running or exited.
    State,
    /// Turn this connection into a stream of [`Event`]s.
    Subscribe,
    /// The agent has handled the exit of `instance`: do not replay it.
    Ack {
        /// The instance.
        instance: u64,
    },
    /// Exit once no container runs (the socket is then removed).
    Shutdown,
}

/// The shim's answer to one request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "result", rename_all = "snake_case")]
pub enum Response {
    /// The instance runs.
    Started {
        /// Host pid of its main process (also its process group id).
        pid: u32,
        /// RFC 3339 start time.
        started_at: String,
        /// Who its process runs as (the container status' `user.linux`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        user: Option<crate::config::ContainerUser>,
    },
    /// The instance could not be started.
    StartFailed {
        /// `CreateContainerError` or `RunContainerError`.
        reason: String,
        /// containerd-style detail.
        message: String,
        /// The container was created (cgroup, mounts) before it failed.
        created: bool,
    },
    /// Done.
    Ok,
    /// The outcome of an exec.
    Exec {
        /// Exit code, 128 + n when killed by signal n.
        exit_code: i32,
        /// Stdout, at most [`EXEC_OUTPUT_LIMIT`] bytes (both streams, interleaved, from a shim
        /// of before `stderr` was reported).
        output: Vec<u8>,
        /// Stderr, at most [`EXEC_OUTPUT_LIMIT`] bytes.
        #[serde(default)]
        stderr: Vec<u8>,
        /// The timeout expired and the command's process group was killed.
        timed_out: bool,
    },
    /// A streaming exec runs (the descriptors travel with this line).
    ExecStarted {
        /// Host pid of the command (also its process group id).
        pid: u32,
        /// How many descriptors come with this line.
        fds: usize,
    },
    /// A streaming exec's command exited.
    ExecExited {
        /// Exit code, 128 + n when killed by signal n.
        exit_code: i32,
    },
    /// An attach session ended.
    AttachEnded,
    /// The shim's instances.
    State {
        /// The shim's pid.
        shim_pid: u32,
        /// Every instance, in id order.
        instances: Vec<InstanceState>,
    },
    /// No such instance.
    NotFound {
        /// The instance asked for.
        instance: u64,
    },
    /// The request failed.
    Error {
        /// What went wrong, lower-case.
        message: String,
    },
}

/// One instance as the shim sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InstanceState {
    /// The instance id.
    pub instance: u64,
    /// The container name.
    pub name: String,
    /// Host pid of the main process.
    pub pid: u32,
    /// RFC 3339 start time.
    pub started_at: String,
    /// How it ended, once it has.
    pub exit: Option<ExitRecord>,
    /// The agent acknowledged the exit.
    pub acked: bool,
    /// The CRI log file it writes to, while it runs (what `ReopenContainerLog` reopens).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_path: Option<PathBuf>,
}

/// How an instance ended, as recorded (fsynced) in the journal before it is reported.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExitRecord {
    /// The instance id.
    pub instance: u64,
    /// The container name.
    pub name: String,
    /// Host pid of the main process.
    pub pid: u32,
    /// Exit code, 128 + n when killed by signal n.
    pub exit_code: i32,
    /// The signal that killed it.
    pub signal: Option<i32>,
    /// The memory cgroup's `oom_kill` counter rose while it ran.
    pub oom_killed: bool,
    /// RFC 3339 start time.
    pub started_at: String,
    /// RFC 3339 exit time (when the shim reaped it).
    pub finished_at: String,
    /// The host file bound at `terminationMessagePath`.
    pub termination_message_host_path: PathBuf,
    /// The instance's CRI log file.
    pub log_path: PathBuf,
}

/// A started instance, as journaled (fsynced) before the start is answered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StartRecord {
    /// The instance id.
    pub instance: u64,
    /// The container name.
    pub name: String,
    /// The attempt (`restartCount`) it was started as, when the agent said.
    #[serde(default)]
    pub restart_count: Option<i32>,
    /// Host pid of the main process.
    pub pid: u32,
    /// RFC 3339 start time.
    pub started_at: String,
    /// The host file bound at `terminationMessagePath`.
    pub termination_message_host_path: PathBuf,
    /// The instance's CRI log file.
    pub log_path: PathBuf,
}

impl StartRecord {
    /// The exit of an instance whose shim died before it recorded one: killed now (137,
    /// SIGKILL), as what the dead shim left is.
    pub fn killed_now(&self) -> ExitRecord {
        ExitRecord {
            instance: self.instance,
            name: self.name.clone(),
            pid: self.pid,
            exit_code: 128 + 9,
            signal: Some(9),
            oom_killed: false,
            started_at: self.started_at.clone(),
            finished_at: jiff::Timestamp::now().to_string(),
            termination_message_host_path: self.termination_message_host_path.clone(),
            log_path: self.log_path.clone(),
        }
    }
}

/// What a `Subscribe` connection streams.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    /// An instance exited.
    Exited(ExitRecord),
}

/// One line of the shim's journal (`<pod_dir>/shim/exits.jsonl`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum JournalEntry {
    /// An instance was started (written before the start is answered): whoever reads the
    /// journal after the shim died knows every instance it ran, and a later shim of the pod
    /// never starts the same attempt again.
    Start(StartRecord),
    /// An instance exited.
    Exit(ExitRecord),
    /// The agent acknowledged an exit.
    Ack {
        /// The instance.
        instance: u64,
    },
}

/// The shim's files inside a pod directory.
pub mod layout {
    use std::path::{Path, PathBuf};

    /// `<pod_dir>/shim`: the shim's own directory.
    pub fn shim_dir(pod_dir: &Path) -> PathBuf {
        pod_dir.join("shim")
    }

    /// The default socket path.
    pub fn socket(pod_dir: &Path) -> PathBuf {
        shim_dir(pod_dir).join("shim.sock")
    }

    /// The exit journal.
    pub fn journal(pod_dir: &Path) -> PathBuf {
        shim_dir(pod_dir).join("exits.jsonl")
    }

    /// The shim's own stdout/stderr.
    pub fn shim_log(pod_dir: &Path) -> PathBuf {
        shim_dir(pod_dir).join("shim.log")
    }

    /// The lock a live shim holds (`flock`) for its whole life.
    pub fn lock(pod_dir: &Path) -> PathBuf {
        shim_dir(pod_dir).join("shim.lock")
    }

    /// The shim's pid file.
    pub fn pid_file(pod_dir: &Path) -> PathBuf {
        shim_dir(pod_dir).join("shim.pid")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_tagged_lines() {
        let line = serde_json::to_string(&Request::Kill { instance: 3 }).unwrap();
        assert_eq!(line, r#"{"op":"kill","instance":3}"#);
        let back: Request = serde_json::from_str(r#"{"op":"state"}"#).unwrap();
        assert!(matches!(back, Request::State));
    }

    #[test]
    fn journal_round_trips() {
        let exit = ExitRecord {
            instance: 1,
            name: "c".into(),
            pid: 42,
            exit_code: 137,
            signal: Some(9),
            oom_killed: true,
            started_at: "2025-01-01T00:00:00.5Z".into(),
            finished_at: "2025-01-01T00:00:01.5Z".into(),
            termination_message_host_path: "/t".into(),
            log_path: "/l".into(),
        };
        let entry = JournalEntry::Exit(exit);
        let line = serde_json::to_string(&entry).unwrap();
        assert!(line.starts_with(r#"{"kind":"exit","instance":1"#));
        assert_eq!(serde_json::from_str::<JournalEntry>(&line).unwrap(), entry);
    }
}
