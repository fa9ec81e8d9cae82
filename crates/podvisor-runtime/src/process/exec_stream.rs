//! The agent's side of a streaming exec: the descriptors the shim passed become async
//! streams, the shim connection becomes the exit future.

use crate::shim::client::StreamingExec;
use crate::{ExecReader, ExecRequest, ExecResize, ExecSession, ExecWriter, RuntimeError, TermSize};
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use tokio::io::unix::AsyncFd;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// A pipe end or a terminal master, non-blocking, driven by tokio's reactor.
struct FdStream {
    fd: AsyncFd<OwnedFd>,
    /// A terminal master: `EIO` once the terminal's last user closed it is end-of-file.
    terminal: bool,
}

impl FdStream {
    fn new(fd: OwnedFd, terminal: bool) -> io::Result<Self> {
        let flags = rustix::fs::fcntl_getfl(&fd)?;
        rustix::fs::fcntl_setfl(&fd, flags | rustix::fs::OFlags::NONBLOCK)?;
        // SAFETY: the `OwnedFd` is valid, owned by the `AsyncFd` and never replaced or closed
        // while registered.
        #[allow(unsafe_code)]
        let fd = unsafe { AsyncFd::register(fd)? };
        Ok(FdStream { fd, terminal })
    }
}

impl AsyncRead for FdStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        loop {
            let mut guard = ready!(self.fd.poll_read_ready(cx))?;
            let unfilled = buf.initialize_unfilled();
            match guard.try_io(|fd| Ok(rustix::io::read(fd.get_ref(), &mut *unfilled)?)) {
                Ok(Ok(n)) => {
                    buf.advance(n);
                    return Poll::Ready(Ok(()));
                }
                Ok(Err(e)) if self.terminal && e.raw_os_error() == Some(libc::EIO) => {
                    return Poll::Ready(Ok(()));
                }
                Ok(Err(e)) => return Poll::Ready(Err(e)),
                Err(_would_block) => {}
            }
        }
    }
}

impl AsyncWrite for FdStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        loop {
            let mut guard = ready!(self.fd.poll_write_ready(cx))?;
            match guard.try_io(|fd| Ok(rustix::io::write(fd.get_ref(), data)?)) {
                Ok(result) => return Poll::Ready(result),
                Err(_would_block) => {}
            }
        }
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        // End-of-file is the descriptor's close, when the stream is dropped.
        Poll::Ready(Ok(()))
    }
}

fn io_err(what: &str) -> impl FnOnce(io::Error) -> RuntimeError + '_ {
    move |source| RuntimeError::Io {
        what: what.to_owned(),
        source,
    }
}

/// Builds the session from what the shim handed over (descriptors in
/// [`crate::shim::protocol::Request::ExecStream`] order).
pub(super) fn session(
    request: &ExecRequest,
    started: StreamingExec,
) -> Result<ExecSession, RuntimeError> {
    let StreamingExec {
        fds, connection, ..
    } = started;
    let mut fds = fds.into_iter();
    let mut next = || {
        fds.next()
            .ok_or_else(|| RuntimeError::Shim("the shim passed too few descriptors".into()))
    };
    let exit = Box::pin(connection.exit());
    if request.tty {
        let master = next()?;
        let resize_fd = master
            .try_clone()
            .map_err(io_err("duplicating the terminal"))?;
        let input = master
            .try_clone()
            .map_err(io_err("duplicating the terminal"))?;
        let stdin: Option<ExecWriter> = if request.stdin {
            Some(Box::pin(
                FdStream::new(input, true).map_err(io_err("registering the terminal"))?,
            ))
        } else {
            None
        };
        let stdout: ExecReader =
            Box::pin(FdStream::new(master, true).map_err(io_err("registering the terminal"))?);
        let resize = terminal_resize(resize_fd);
        return Ok(ExecSession {
            stdin,
            stdout: Some(stdout),
            stderr: None,
            resize: Some(resize),
            exit,
        });
    }
    let mut stream = |wanted: bool| -> Result<Option<FdStream>, RuntimeError> {
        if !wanted {
            return Ok(None);
        }
        let fd = next()?;
        FdStream::new(fd, false)
            .map(Some)
            .map_err(io_err("registering an exec pipe"))
    };
    let stdin = stream(request.stdin)?.map(|s| Box::pin(s) as ExecWriter);
    let stdout = stream(request.stdout)?.map(|s| Box::pin(s) as ExecReader);
    let stderr = stream(request.stderr)?.map(|s| Box::pin(s) as ExecReader);
    Ok(ExecSession {
        stdin,
        stdout,
        stderr,
        resize: None,
        exit,
    })
}

/// Builds an attach session from what the shim handed over (descriptors in
/// [`crate::shim::protocol::Request::Attach`] order: stdin, stdout, stderr, those asked for,
/// then the terminal for resizes).
pub(super) fn attach_session(
    request: &ExecRequest,
    started: StreamingExec,
) -> Result<ExecSession, RuntimeError> {
    let StreamingExec {
        fds, connection, ..
    } = started;
    let exit = Box::pin(connection.exit());
    let mut fds = fds.into_iter();
    let mut stream = |wanted: bool| -> Result<Option<FdStream>, RuntimeError> {
        if !wanted {
            return Ok(None);
        }
        let fd = fds
            .next()
            .ok_or_else(|| RuntimeError::Shim("the shim passed too few descriptors".into()))?;
        FdStream::new(fd, false)
            .map(Some)
            .map_err(io_err("registering an attach pipe"))
    };
    let stdin = stream(request.stdin)?.map(|s| Box::pin(s) as ExecWriter);
    let stdout = stream(request.stdout)?.map(|s| Box::pin(s) as ExecReader);
    let stderr = stream(request.stderr && !request.tty)?.map(|s| Box::pin(s) as ExecReader);
    let resize = match fds.next() {
        Some(terminal) if request.tty => Some(terminal_resize(terminal)),
        _ => None,
    };
    Ok(ExecSession {
        stdin,
        stdout,
        stderr,
        resize,
        exit,
    })
}

/// Sets the size of the terminal `fd` is a descriptor of (`TIOCSWINSZ`).
fn terminal_resize(fd: OwnedFd) -> ExecResize {
    Box::new(move |size: TermSize| {
        let winsize = rustix::termios::Winsize {
            ws_row: size.height,
            ws_col: size.width,
            ws_xpixel: 0,
            ws_ypixel: 0,
        };
        rustix::termios::tcsetwinsize(fd.as_fd(), winsize)
            .map_err(|e| io_err("resizing the terminal")(e.into()))
    })
}
