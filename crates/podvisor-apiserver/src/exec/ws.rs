//! The server side of RFC 6455 WebSockets, as much as the remote-command protocol needs:
//! the handshake's accept key, reading (masked, possibly fragmented) client messages with
//! control frames between fragments, and writing unmasked single-frame messages.
//!
//! Written here rather than taken from a WebSocket crate: the protocol's server side is
//! small, and SHA-1 comes from `ring`, already linked for TLS.

use std::io;

use base64::Engine;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// The GUID of RFC 6455 section 1.3.
const ACCEPT_GUID: &str = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

/// The largest message accepted from a client (kubectl's are at most its 32 KiB buffer).
const MAX_MESSAGE: usize = 16 * 1024 * 1024;

const OP_CONTINUATION: u8 = 0x0;
const OP_TEXT: u8 = 0x1;
const OP_BINARY: u8 = 0x2;
const OP_CLOSE: u8 = 0x8;
const OP_PING: u8 = 0x9;
const OP_PONG: u8 = 0xA;

/// `Sec-WebSocket-Accept` for a `Sec-WebSocket-Key`.
pub(crate) fn accept_key(key: &str) -> String {
    let mut input = key.trim().as_bytes().to_vec();
    input.extend_from_slice(ACCEPT_GUID.as_bytes());
    let digest = ring::digest::digest(&ring::digest::SHA1_FOR_LEGACY_USE_ONLY, &input);
    base64::engine::general_purpose::STANDARD.encode(digest.as_ref())
}

/// One message from the client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Message {
    /// A data message (text messages are passed on as bytes too).
    Data(Vec<u8>),
    /// A ping, to be answered with a pong carrying the same payload.
    Ping(Vec<u8>),
    /// A pong (ignored).
    Pong,
    /// The client closes the connection.
    Close,
}

fn protocol_error(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("websocket: {what}"))
}

/// Reads client messages, keeping a fragmented message's first parts across the control
/// frames that may come between them.
pub(crate) struct MessageReader<R> {
    inner: R,
    partial: Option<Vec<u8>>,
}

impl<R: AsyncRead + Unpin> MessageReader<R> {
    pub(crate) fn new(inner: R) -> Self {
        MessageReader {
            inner,
            partial: None,
        }
    }

    /// The next message; `Ok(None)` at end of stream.
    pub(crate) async fn next(&mut self) -> io::Result<Option<Message>> {
        let reader = &mut self.inner;
        loop {
            let mut head = [0_u8; 2];
            match reader.read_exact(&mut head).await {
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
                Err(e) => return Err(e),
            }
            let fin = head[0] & 0x80 != 0;
            let opcode = head[0] & 0x0F;
            let masked = head[1] & 0x80 != 0;
            let len = match head[1] & 0x7F {
                126 => u64::from(reader.read_u16().await?),
                127 => reader.read_u64().await?,
                n => u64::from(n),
            };
            let len = usize::try_from(len)
                .ok()
                .filter(|&n| n <= MAX_MESSAGE)
                .ok_or_else(|| protocol_error("frame too large"))?;
            let mut mask = [0_u8; 4];
            if masked {
                reader.read_exact(&mut mask).await?;
            }
            let mut payload = vec![0_u8; len];
            reader.read_exact(&mut payload).await?;
            if masked {
                for (i, byte) in payload.iter_mut().enumerate() {
                    *byte ^= mask[i % 4];
                }
            }
            match opcode {
                OP_CLOSE => return Ok(Some(Message::Close)),
                OP_PING => return Ok(Some(Message::Ping(payload))),
                OP_PONG => return Ok(Some(Message::Pong)),
                OP_TEXT | OP_BINARY if self.partial.is_none() => self.partial = Some(payload),
                OP_CONTINUATION => match &mut self.partial {
                    Some(buf) if buf.len() + payload.len() <= MAX_MESSAGE => {
                        buf.extend_from_slice(&payload);
                    }
                    Some(_) => return Err(protocol_error("message too large")),
                    None => return Err(protocol_error("continuation without a message")),
                },
                _ => return Err(protocol_error("unexpected opcode")),
            }
            if fin {
                return Ok(self.partial.take().map(Message::Data));
            }
        }
    }
}

fn frame(opcode: u8, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(payload.len() + 10);
    out.push(0x80 | opcode);
    match payload.len() {
        n if n < 126 => out.push(u8::try_from(n).unwrap_or(0)),
        n if n <= usize::from(u16::MAX) => {
            out.push(126);
            out.extend_from_slice(&u16::try_from(n).unwrap_or(0).to_be_bytes());
        }
        n => {
            out.push(127);
            out.extend_from_slice(&(n as u64).to_be_bytes());
        }
    }
    out.extend_from_slice(payload);
    out
}

/// Writes a binary message: the channel byte, then `data`.
pub(crate) async fn write_channel<W: AsyncWrite + Unpin>(
    writer: &mut W,
    channel: u8,
    data: &[u8],
) -> io::Result<()> {
    let mut payload = Vec::with_capacity(data.len() + 1);
    payload.push(channel);
    payload.extend_from_slice(data);
    writer.write_all(&frame(OP_BINARY, &payload)).await?;
    writer.flush().await
}

/// Answers a ping.
pub(crate) async fn write_pong<W: AsyncWrite + Unpin>(
    writer: &mut W,
    payload: &[u8],
) -> io::Result<()> {
    writer.write_all(&frame(OP_PONG, payload)).await?;
    writer.flush().await
}

/// Sends a close frame with status 1000 (normal closure).
pub(crate) async fn write_close<W: AsyncWrite + Unpin>(writer: &mut W) -> io::Result<()> {
    writer
        .write_all(&frame(OP_CLOSE, &1000_u16.to_be_bytes()))
        .await?;
    writer.flush().await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accept_key_of_rfc_6455() {
        assert_eq!(
            accept_key("dGhlIHNhbXBsZSBub25jZQ=="),
            "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="
        );
    }

    fn masked(opcode: u8, fin: bool, payload: &[u8]) -> Vec<u8> {
        let mask = [1_u8, 2, 3, 4];
        let mut out = vec![if fin { 0x80 } else { 0 } | opcode];
        assert!(payload.len() < 126);
        out.push(0x80 | u8::try_from(payload.len()).unwrap());
        out.extend_from_slice(&mask);
        out.extend(payload.iter().enumerate().map(|(i, b)| b ^ mask[i % 4]));
        out
    }

    #[tokio::test]
    async fn reads_whole_and_fragmented_messages_with_control_frames_between() {
        let mut wire = masked(OP_BINARY, true, b"\x00hi");
        wire.extend(masked(OP_BINARY, false, b"\x00he"));
        wire.extend(masked(OP_PING, true, b"p"));
        wire.extend(masked(OP_CONTINUATION, true, b"llo"));
        wire.extend(masked(OP_CLOSE, true, b""));
        let mut reader = MessageReader::new(&wire[..]);
        let mut got = Vec::new();
        while let Some(m) = reader.next().await.unwrap() {
            got.push(m);
        }
        assert_eq!(
            got,
            [
                Message::Data(b"\x00hi".to_vec()),
                Message::Ping(b"p".to_vec()),
                Message::Data(b"\x00hello".to_vec()),
                Message::Close,
            ]
        );
    }

    #[tokio::test]
    async fn writes_unmasked_frames_with_extended_lengths() {
        let mut out = Vec::new();
        write_channel(&mut out, 1, &[7_u8; 200]).await.unwrap();
        assert_eq!(&out[..4], &[0x82, 126, 0, 201]);
        assert_eq!(out[4], 1);
        assert_eq!(out.len(), 4 + 201);
    }
}
