//! SPDY/3.1, the server side of what Kubernetes' streaming uses (`k8s.io/apimachinery`'s
//! `httpstream/spdy` on `moby/spdystream`): framing, header blocks compressed with zlib and
//! the protocol's dictionary (one compression context per direction for the connection's
//! life), and a connection loop that hands each stream the client opens to a handler.
//!
//! What the Go peer does and this side follows: streams are opened by the client
//! (`SYN_STREAM`, odd ids) and answered with `SYN_REPLY` or refused with `RST_STREAM`; a
//! stream's end is an empty `DATA` frame with `FIN`; `PING`s from the client are echoed;
//! `GOAWAY` or the end of the connection ends every stream. spdystream keeps no flow-control
//! windows (it neither sends nor honours `WINDOW_UPDATE`), so neither does this side.
//!
//! The bytes come from an upgraded HTTP/1.1 connection (`Upgrade: SPDY/3.1`, kubectl before
//! 1.31 and its fallback) or from a WebSocket whose binary messages carry the SPDY byte stream
//! (`SPDY/3.1+portforward.k8s.io`, kubectl 1.31+): the reader is any byte stream, frames go out
//! through a [`FrameSink`].

use std::collections::HashMap;
use std::io;
use std::sync::LazyLock;

use flate2::{Compress, Compression, Decompress, FlushCompress, FlushDecompress};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;

/// The protocol version spoken.
const VERSION: u16 = 3;

const TYPE_SYN_STREAM: u16 = 1;
const TYPE_SYN_REPLY: u16 = 2;
const TYPE_RST_STREAM: u16 = 3;
const TYPE_SETTINGS: u16 = 4;
const TYPE_PING: u16 = 6;
const TYPE_GOAWAY: u16 = 7;
const TYPE_HEADERS: u16 = 8;
const TYPE_WINDOW_UPDATE: u16 = 9;

const FLAG_FIN: u8 = 0x01;

/// `RST_STREAM` status `CANCEL`.
pub(crate) const CANCEL: u32 = 5;

/// The largest frame payload accepted (the length field has 24 bits).
const MAX_FRAME: usize = (1 << 24) - 1;
/// The largest data frame this side sends.
pub(crate) const MAX_DATA: usize = 32 * 1024;
/// Data frames queued per stream before the connection's reader waits for its consumer.
const STREAM_BUFFER: usize = 256;

/// The words of the header-compression dictionary of SPDY/3 (section 2.6.10.1), each written
/// with a 4-byte big-endian length before it, then the plain tail.
const DICTIONARY_WORDS: &[&str] = &[
    "options",
    "head",
    "post",
    "put",
    "delete",
    "trace",
    "accept",
    "accept-charset",
    "accept-encoding",
    "accept-language",
    "accept-ranges",
    "age",
    "allow",
    "authorization",
    "cache-control",
    "connection",
    "content-base",
    "content-encoding",
    "content-language",
    "content-length",
    "content-location",
    "content-md5",
    "content-range",
    "content-type",
    "date",
    "etag",
    "expect",
    "expires",
    "from",
    "host",
    "if-match",
    "if-modified-since",
    "if-none-match",
    "if-range",
    "if-unmodified-since",
    "last-modified",
    "location",
    "max-forwards",
    "pragma",
    "proxy-authenticate",
    "proxy-authorization",
    "range",
    "referer",
    "retry-after",
    "server",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "user-agent",
    "vary",
    "via",
    "warning",
    "www-authenticate",
    "method",
    "get",
    "status",
    "200 OK",
    "version",
    "HTTP/1.1",
    "url",
    "public",
    "set-cookie",
    "keep-alive",
    "origin",
];

const DICTIONARY_TAIL: &str = concat!(
    "100101201202205206300302303304305306307402405406407408409410411412413414415416417502504505",
    "203 Non-Authoritative Information204 No Content301 Moved Permanently400 Bad Request",
    "401 Unauthorized403 Forbidden404 Not Found500 Internal Server Error501 Not Implemented",
    "503 Service UnavailableJan Feb Mar Apr May Jun Jul Aug Sept Oct Nov Dec 00:00:00 ",
    "Mon, Tue, Wed, Thu, Fri, Sat, Sun, GMTchunked,text/html,image/png,image/jpg,image/gif,",
    "application/xml,application/xhtml+xml,text/plain,text/javascript,publicprivatemax-age=",
    "gzip,deflate,sdchcharset=utf-8charset=iso-8859-1,utf-,*,enq=0."
);

/// The dictionary both zlib contexts start from.
fn dictionary() -> &'static [u8] {
    static DICTIONARY: LazyLock<Vec<u8>> = LazyLock::new(|| {
        let mut dict = Vec::with_capacity(1423);
        for word in DICTIONARY_WORDS {
            dict.extend_from_slice(&(word.len() as u32).to_be_bytes());
            dict.extend_from_slice(word.as_bytes());
        }
        dict.extend_from_slice(DICTIONARY_TAIL.as_bytes());
        dict
    });
    &DICTIONARY
}

/// A header block: lower-case names, each with its value (several values joined by NUL).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Headers(pub(crate) Vec<(String, String)>);

impl Headers {
    /// The first value of `name` (case-insensitive), as Go's `http.Header.Get`.
    pub(crate) fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.split('\0').next().unwrap_or_default())
    }

    fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend_from_slice(&(self.0.len() as u32).to_be_bytes());
        for (name, value) in &self.0 {
            let name = name.to_ascii_lowercase();
            out.extend_from_slice(&(name.len() as u32).to_be_bytes());
            out.extend_from_slice(name.as_bytes());
            out.extend_from_slice(&(value.len() as u32).to_be_bytes());
            out.extend_from_slice(value.as_bytes());
        }
        out
    }

    fn decode(block: &[u8]) -> io::Result<Headers> {
        let mut rest = block;
        let take_u32 = |rest: &mut &[u8]| -> io::Result<u32> {
            let (head, tail) = rest
                .split_first_chunk::<4>()
                .ok_or_else(|| invalid("a truncated header block"))?;
            *rest = tail;
            Ok(u32::from_be_bytes(*head))
        };
        let count = take_u32(&mut rest)?;
        let mut headers = Vec::with_capacity(count.min(64) as usize);
        for _ in 0..count {
            let string = |rest: &mut &[u8]| -> io::Result<String> {
                let len = take_u32(rest)? as usize;
                if rest.len() < len {
                    return Err(invalid("a truncated header block"));
                }
                let (s, tail) = rest.split_at(len);
                *rest = tail;
                String::from_utf8(s.to_vec()).map_err(|_| invalid("a header that is not UTF-8"))
            };
            let name = string(&mut rest)?;
            let value = string(&mut rest)?;
            headers.push((name, value));
        }
        Ok(Headers(headers))
    }
}

fn invalid(what: impl std::fmt::Display) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("SPDY: {what}"))
}

/// A frame as read.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Frame {
    SynStream {
        id: u32,
        fin: bool,
        headers: Headers,
    },
    SynReply {
        id: u32,
        fin: bool,
    },
    RstStream {
        id: u32,
        status: u32,
    },
    Ping(u32),
    GoAway,
    Headers {
        id: u32,
        fin: bool,
    },
    Data {
        id: u32,
        fin: bool,
        data: Vec<u8>,
    },
    /// `SETTINGS`, `WINDOW_UPDATE`, or a type this side does not know: nothing to do.
    Ignored,
}

/// Reads frames, keeping the inflate context of the peer's header blocks.
pub(crate) struct FrameReader<R> {
    io: R,
    inflate: Decompress,
}

impl<R: AsyncRead + Unpin> FrameReader<R> {
    pub(crate) fn new(io: R) -> Self {
        FrameReader {
            io,
            inflate: Decompress::new(true),
        }
    }

    /// The next frame; `Ok(None)` at a clean end of the byte stream.
    pub(crate) async fn next(&mut self) -> io::Result<Option<Frame>> {
        let mut head = [0_u8; 8];
        match self.io.read_exact(&mut head).await {
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
            Err(e) => return Err(e),
        }
        let flags = head[4];
        let len = u32::from_be_bytes([0, head[5], head[6], head[7]]) as usize;
        if len > MAX_FRAME {
            return Err(invalid("a frame that is too long"));
        }
        let mut payload = vec![0_u8; len];
        self.io.read_exact(&mut payload).await?;
        let fin = flags & FLAG_FIN != 0;
        if head[0] & 0x80 == 0 {
            let id = u32::from_be_bytes([head[0], head[1], head[2], head[3]]);
            return Ok(Some(Frame::Data {
                id,
                fin,
                data: payload,
            }));
        }
        let version = u16::from_be_bytes([head[0] & 0x7f, head[1]]);
        if version != VERSION {
            return Err(invalid(format!("unsupported version {version}")));
        }
        let kind = u16::from_be_bytes([head[2], head[3]]);
        let word = |at: usize| -> io::Result<u32> {
            payload
                .get(at..at + 4)
                .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
                .ok_or_else(|| invalid("a control frame that is too short"))
        };
        Ok(Some(match kind {
            TYPE_SYN_STREAM => {
                let id = word(0)? & 0x7fff_ffff;
                let block = payload
                    .get(10..)
                    .ok_or_else(|| invalid("a SYN_STREAM that is too short"))?;
                let headers = Headers::decode(&self.inflate_block(block)?)?;
                Frame::SynStream { id, fin, headers }
            }
            TYPE_SYN_REPLY | TYPE_HEADERS => {
                let id = word(0)? & 0x7fff_ffff;
                // Decompressed to keep the zlib context in step; nothing here needs them.
                self.inflate_block(&payload[4..])?;
                if kind == TYPE_SYN_REPLY {
                    Frame::SynReply { id, fin }
                } else {
                    Frame::Headers { id, fin }
                }
            }
            TYPE_RST_STREAM => Frame::RstStream {
                id: word(0)? & 0x7fff_ffff,
                status: word(4)?,
            },
            TYPE_PING => Frame::Ping(word(0)?),
            TYPE_GOAWAY => Frame::GoAway,
            TYPE_SETTINGS | TYPE_WINDOW_UPDATE => Frame::Ignored,
            _ => Frame::Ignored,
        }))
    }

    /// Inflates one header block, continuing the connection's zlib stream (the first block
    /// asks for the dictionary).
    fn inflate_block(&mut self, input: &[u8]) -> io::Result<Vec<u8>> {
        let mut out: Vec<u8> = Vec::with_capacity(input.len() * 4 + 64);
        let mut consumed = 0;
        loop {
            if out.capacity() - out.len() < 64 {
                out.reserve(out.capacity().max(256));
            }
            let (before_in, before_out) = (self.inflate.total_in(), self.inflate.total_out());
            let result =
                self.inflate
                    .decompress_vec(&input[consumed..], &mut out, FlushDecompress::Sync);
            consumed += (self.inflate.total_in() - before_in) as usize;
            match result {
                Ok(_) => {}
                Err(e) if e.needs_dictionary().is_some() => {
                    self.inflate
                        .set_dictionary(dictionary())
                        .map_err(|e| invalid(format!("the header dictionary: {e}")))?;
                    continue;
                }
                Err(e) => return Err(invalid(format!("a header block: {e}"))),
            }
            let progress =
                self.inflate.total_in() != before_in || self.inflate.total_out() != before_out;
            if (consumed >= input.len() && out.len() < out.capacity()) || !progress {
                return Ok(out);
            }
        }
    }
}

/// A frame to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Out {
    /// `SYN_REPLY` with no headers: the stream is accepted.
    Reply(u32),
    /// Data on a stream.
    Data(u32, Vec<u8>),
    /// The end of this side's half of a stream (an empty `DATA` frame with `FIN`).
    Fin(u32),
    /// `RST_STREAM` with a status.
    Reset(u32, u32),
    /// `PING` (an echo of the client's).
    Ping(u32),
    /// A `SYN_STREAM` (what a client sends; used by tests to speak to the server).
    #[cfg(test)]
    Syn(u32, Headers),
}

/// Serialises frames, keeping the deflate context of this side's header blocks.
pub(crate) struct FrameWriter {
    deflate: Compress,
    started: bool,
}

impl FrameWriter {
    pub(crate) fn new() -> Self {
        FrameWriter {
            deflate: Compress::new(Compression::default(), true),
            started: false,
        }
    }

    pub(crate) fn encode(&mut self, out: &Out) -> Vec<u8> {
        match out {
            Out::Reply(id) => {
                let block = self.deflate_block(&Headers::default().encode());
                let mut payload = id.to_be_bytes().to_vec();
                payload.extend_from_slice(&block);
                control(TYPE_SYN_REPLY, 0, &payload)
            }
            Out::Data(id, data) => data_frame(*id, 0, data),
            Out::Fin(id) => data_frame(*id, FLAG_FIN, &[]),
            Out::Reset(id, status) => {
                let mut payload = id.to_be_bytes().to_vec();
                payload.extend_from_slice(&status.to_be_bytes());
                control(TYPE_RST_STREAM, 0, &payload)
            }
            Out::Ping(id) => control(TYPE_PING, 0, &id.to_be_bytes()),
            #[cfg(test)]
            Out::Syn(id, headers) => {
                let block = self.deflate_block(&headers.encode());
                let mut payload = id.to_be_bytes().to_vec();
                payload.extend_from_slice(&[0, 0, 0, 0, 0, 0]);
                payload.extend_from_slice(&block);
                control(TYPE_SYN_STREAM, 0, &payload)
            }
        }
    }

    /// Deflates one header block with a sync flush, continuing the connection's zlib stream.
    fn deflate_block(&mut self, input: &[u8]) -> Vec<u8> {
        if !self.started {
            self.started = true;
            // Cannot fail on a fresh stream.
            let _ = self.deflate.set_dictionary(dictionary());
        }
        let mut out: Vec<u8> = Vec::with_capacity(input.len() + 128);
        let mut consumed = 0;
        loop {
            if out.capacity() - out.len() < 64 {
                out.reserve(256);
            }
            let before = self.deflate.total_in();
            if self
                .deflate
                .compress_vec(&input[consumed..], &mut out, FlushCompress::Sync)
                .is_err()
            {
                return out;
            }
            consumed += (self.deflate.total_in() - before) as usize;
            if consumed >= input.len() && out.len() < out.capacity() {
                return out;
            }
        }
    }
}

fn control(kind: u16, flags: u8, payload: &[u8]) -> Vec<u8> {
    let mut frame = Vec::with_capacity(8 + payload.len());
    frame.extend_from_slice(&(0x8000 | VERSION).to_be_bytes());
    frame.extend_from_slice(&kind.to_be_bytes());
    frame.push(flags);
    frame.extend_from_slice(&(payload.len() as u32).to_be_bytes()[1..]);
    frame.extend_from_slice(payload);
    frame
}

fn data_frame(id: u32, flags: u8, data: &[u8]) -> Vec<u8> {
    let mut frame = Vec::with_capacity(8 + data.len());
    frame.extend_from_slice(&(id & 0x7fff_ffff).to_be_bytes());
    frame.push(flags);
    frame.extend_from_slice(&(data.len() as u32).to_be_bytes()[1..]);
    frame.extend_from_slice(data);
    frame
}

/// Where serialised frames go: the raw connection, or one WebSocket message each.
pub(crate) trait FrameSink: Send + 'static {
    fn send(&mut self, frame: Vec<u8>) -> impl Future<Output = io::Result<()>> + Send;
}

/// The write half of an upgraded connection.
pub(crate) struct RawSink<W>(pub(crate) W);

impl<W: AsyncWrite + Unpin + Send + 'static> FrameSink for RawSink<W> {
    async fn send(&mut self, frame: Vec<u8>) -> io::Result<()> {
        self.0.write_all(&frame).await?;
        self.0.flush().await
    }
}

/// Frames queued for the writer before a sender waits (backpressure from a slow client).
const OUT_BUFFER: usize = 64;

/// The connection's outgoing frames, in the order they are queued (a handle per stream task).
#[derive(Clone)]
pub(crate) struct Conn {
    out: mpsc::Sender<Out>,
}

impl Conn {
    /// Queues `out`; `false` once the connection is gone.
    pub(crate) async fn send(&self, out: Out) -> bool {
        self.out.send(out).await.is_ok()
    }

    /// Sends `data` on stream `id` in frames of at most [`MAX_DATA`] bytes.
    pub(crate) async fn data(&self, id: u32, data: &[u8]) -> bool {
        for chunk in data.chunks(MAX_DATA) {
            if !self.send(Out::Data(id, chunk.to_vec())).await {
                return false;
            }
        }
        true
    }
}

/// A stream the client opened: its headers and what it sends (`None` once it sent `FIN` or
/// reset it).
pub(crate) struct InStream {
    pub(crate) id: u32,
    pub(crate) headers: Headers,
    pub(crate) data: mpsc::Receiver<Vec<u8>>,
}

/// What a protocol on SPDY does with the streams a client opens.
pub(crate) trait Handler {
    /// Whether a stream with these headers is accepted (`SYN_REPLY`) or refused
    /// (`RST_STREAM`, as spdystream resets a stream its handler rejects).
    fn accept(&mut self, headers: &Headers) -> bool;
    /// An accepted stream, after its `SYN_REPLY` was queued.
    fn stream(&mut self, stream: InStream, conn: &Conn);
}

/// Serves one SPDY connection until the client ends it or `stop` resolves: each stream the
/// client opens goes to `handler`; pings are echoed. Returns when the byte stream ends, a
/// `GOAWAY` arrives, it breaks, or `stop`; the writer goes on until the last [`Conn`] handle
/// is dropped (the caller stops its stream tasks then) or the sink fails, so what was queued
/// before is written before the connection closes.
pub(crate) async fn serve<R, S, H>(
    reader: R,
    sink: S,
    handler: &mut H,
    stop: impl Future<Output = ()>,
) where
    R: AsyncRead + Unpin,
    S: FrameSink,
    H: Handler,
{
    tokio::pin!(stop);
    let (out_tx, mut out_rx) = mpsc::channel::<Out>(OUT_BUFFER);
    let conn = Conn { out: out_tx };
    tokio::spawn(async move {
        let mut sink = sink;
        let mut frames = FrameWriter::new();
        while let Some(out) = out_rx.recv().await {
            if sink.send(frames.encode(&out)).await.is_err() {
                break;
            }
        }
    });
    let mut reader = FrameReader::new(reader);
    let mut streams: HashMap<u32, mpsc::Sender<Vec<u8>>> = HashMap::new();
    loop {
        let next = tokio::select! {
            next = reader.next() => next,
            () = &mut stop => break,
        };
        let frame = match next {
            Ok(Some(frame)) => frame,
            Ok(None) => break,
            Err(e) => {
                tracing::debug!("spdy: {e}");
                break;
            }
        };
        match frame {
            Frame::SynStream { id, fin, headers } => {
                if !handler.accept(&headers) {
                    conn.send(Out::Reset(id, CANCEL)).await;
                    continue;
                }
                if !conn.send(Out::Reply(id)).await {
                    break;
                }
                let (tx, rx) = mpsc::channel(STREAM_BUFFER);
                if !fin {
                    streams.insert(id, tx);
                }
                let stream = InStream {
                    id,
                    headers,
                    data: rx,
                };
                handler.stream(stream, &conn);
            }
            Frame::Data { id, fin, data } => {
                if !data.is_empty()
                    && let Some(tx) = streams.get(&id)
                    && tx.send(data).await.is_err()
                {
                    streams.remove(&id);
                }
                if fin {
                    streams.remove(&id);
                }
            }
            Frame::RstStream { id, .. } | Frame::Headers { id, fin: true } => {
                streams.remove(&id);
            }
            Frame::Ping(id) => {
                conn.send(Out::Ping(id)).await;
            }
            Frame::GoAway => break,
            Frame::SynReply { .. } | Frame::Headers { .. } | Frame::Ignored => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_dictionary_is_spdy3s() {
        let dict = dictionary();
        assert_eq!(dict.len(), 1423);
        // zlib's Adler-32 of the dictionary, as a peer checks it (FDICT).
        let mut c = Compress::new(Compression::default(), true);
        assert_eq!(c.set_dictionary(dict).unwrap(), 3_821_447_106);
    }

    #[tokio::test]
    async fn frames_and_header_blocks_round_trip_across_one_zlib_stream() {
        let mut writer = FrameWriter::new();
        let mut bytes = Vec::new();
        let first = Headers(vec![
            ("streamType".into(), "error".into()),
            ("port".into(), "8080".into()),
            ("requestID".into(), "0".into()),
        ]);
        let second = Headers(vec![
            ("streamtype".into(), "data".into()),
            ("port".into(), "8080".into()),
            ("requestid".into(), "0".into()),
        ]);
        bytes.extend(writer.encode(&Out::Syn(1, first)));
        bytes.extend(writer.encode(&Out::Syn(3, second.clone())));
        bytes.extend(writer.encode(&Out::Reply(3)));
        bytes.extend(writer.encode(&Out::Data(3, b"hello".to_vec())));
        bytes.extend(writer.encode(&Out::Fin(3)));
        bytes.extend(writer.encode(&Out::Ping(7)));
        bytes.extend(writer.encode(&Out::Reset(1, CANCEL)));
        let mut reader = FrameReader::new(&bytes[..]);
        let Some(Frame::SynStream { id: 1, headers, .. }) = reader.next().await.unwrap() else {
            panic!("a SYN_STREAM");
        };
        assert_eq!(headers.get("streamtype"), Some("error"));
        assert_eq!(headers.get("requestID"), Some("0"));
        assert_eq!(
            reader.next().await.unwrap(),
            Some(Frame::SynStream {
                id: 3,
                fin: false,
                headers: second
            })
        );
        assert_eq!(
            reader.next().await.unwrap(),
            Some(Frame::SynReply { id: 3, fin: false })
        );
        assert_eq!(
            reader.next().await.unwrap(),
            Some(Frame::Data {
                id: 3,
                fin: false,
                data: b"hello".to_vec()
            })
        );
        assert_eq!(
            reader.next().await.unwrap(),
            Some(Frame::Data {
                id: 3,
                fin: true,
                data: vec![]
            })
        );
        assert_eq!(reader.next().await.unwrap(), Some(Frame::Ping(7)));
        assert_eq!(
            reader.next().await.unwrap(),
            Some(Frame::RstStream {
                id: 1,
                status: CANCEL
            })
        );
        assert_eq!(reader.next().await.unwrap(), None);
    }

    #[tokio::test]
    async fn a_frame_of_another_version_is_refused() {
        let mut frame = control(TYPE_PING, 0, &1_u32.to_be_bytes());
        frame[1] = 2;
        let mut reader = FrameReader::new(&frame[..]);
        let err = reader.next().await.unwrap_err();
        assert!(err.to_string().contains("unsupported version 2"), "{err}");
    }
}
