//! libcontainer's error events, kept for the failure's message.
//!
//! libcontainer's processes (the intermediate one and the container's init, clones of the
//! helper) report only a short cause to the helper ("failed to prepare rootfs"); what failed
//! beneath it ("failed to mount cgroup v1: procfs failed", the errno) is only in the
//! `tracing` events they emit on the way. The helper installs a subscriber that appends each
//! error event to the `--log` file as a runc-style `debug` line (never `error`, so the
//! executor still reads the helper's own final line as the failure), from whichever process
//! emits it, through a descriptor opened before any clone; on a failure [`cause`] picks the
//! first, deepest, of them for the message, as runc's own messages carry their cause.

use std::fs::File;
use std::io::Write;
use std::path::Path;
use std::sync::Arc;

/// Appends libcontainer's error events to the `--log` file at `log`; does nothing when it
/// cannot be opened or a subscriber is set already.
pub(super) fn log_errors_to(log: &Path) {
    let Ok(file) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
    else {
        return;
    };
    let _ = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::ERROR)
        .with_ansi(false)
        .without_time()
        .with_target(false)
        .with_level(false)
        .with_writer(Events(Arc::new(file)))
        .try_init();
}

/// The subscriber's writer: one JSON line per event.
struct Events(Arc<File>);

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Events {
    type Writer = EventLine;

    fn make_writer(&'a self) -> EventLine {
        EventLine {
            file: Arc::clone(&self.0),
            text: Vec::new(),
        }
    }
}

/// One event's text, written as a line when the subscriber is done with it.
struct EventLine {
    file: Arc<File>,
    text: Vec<u8>,
}

impl Write for EventLine {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.text.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Drop for EventLine {
    fn drop(&mut self) {
        let text = String::from_utf8_lossy(&self.text);
        let text = text.trim();
        if !text.is_empty() {
            let line = serde_json::json!({"level": "debug", "msg": text});
            // One `write` of the whole line: `O_APPEND` keeps lines of several processes whole.
            let _ = (&*self.file).write_all(format!("{line}\n").as_bytes());
        }
    }
}

/// The cause to add to `message`, from the `--log` file's text: the first error event that
/// `message` does not already say (the event, or what follows one of its `: `, as in
/// "failed to initialize container process: exec: ..." for a message that says "exec: ...").
pub(super) fn cause(log: &str, message: &str) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Line {
        level: String,
        msg: String,
    }
    log.lines()
        .filter_map(|l| serde_json::from_str::<Line>(l).ok())
        .filter(|l| l.level == "debug")
        .map(|l| l.msg)
        .find(|msg| !says(message, msg))
}

/// Whether `message` says `event` already, or what follows one of its `: `.
fn says(message: &str, event: &str) -> bool {
    std::iter::once(event)
        .chain(event.match_indices(": ").map(|(at, _)| &event[at + 2..]))
        .any(|part| message.contains(part))
}

#[cfg(test)]
mod tests {
    use super::cause;

    /// The first event beneath the short cause is the one added; one the message says
    /// already is not.
    #[test]
    fn the_first_event_the_message_does_not_say_is_its_cause() {
        let log = r#"{"level":"debug","msg":"failed to mount cgroup v1: procfs failed"}
{"level":"debug","msg":"failed to prepare rootfs err=Mount(Procfs(NotFound(Some(\"/proc/2\"))))"}
{"level":"error","msg":"earlier"}
"#;
        assert_eq!(
            cause(log, "failed to prepare rootfs").as_deref(),
            Some("failed to mount cgroup v1: procfs failed")
        );
        let said = r#"{"level":"debug","msg":"exec: \"nope\": executable file not found in $PATH"}
{"level":"debug","msg":"failed to initialize container process: exec: \"nope\": executable file not found in $PATH"}"#;
        assert_eq!(
            cause(
                said,
                "runc create failed: unable to start container process: exec: \"nope\": \
                 executable file not found in $PATH"
            ),
            None
        );
        assert_eq!(cause("", "x"), None);
    }
}
