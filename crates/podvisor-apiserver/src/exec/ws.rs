//! The WebSocket transport of the remote-command protocol, on `tokio-tungstenite` over the
//! upgraded connection: the handshake (the client's key, the `101` with its accept key), then
//! channel-prefixed binary messages in both directions.

use std::io;

use axum::body::Body;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::Response;
use base64::Engine;
use futures_util::stream::{SplitSink, SplitStream};
use futures_util::{SinkExt, StreamExt};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message as WsMessage;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::{CloseFrame, Role};

use crate::status::{ApiError, ApiResult};

/// The GUID of RFC 6455 section 1.3.
const ACCEPT_GUID: &str = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

/// The client's `Sec-WebSocket-Key` of a version 13 handshake.
pub(crate) fn handshake_key(headers: &HeaderMap) -> ApiResult<&str> {
    headers
        .get(header::SEC_WEBSOCKET_KEY)
        .and_then(|v| v.to_str().ok())
        .filter(|_| {
            headers
                .get(header::SEC_WEBSOCKET_VERSION)
                .is_some_and(|v| v == "13")
        })
        .ok_or_else(|| ApiError::bad_request("unable to upgrade: invalid WebSocket handshake"))
}

/// The `101 Switching Protocols` that accepts the WebSocket handshake of `key`, with the
/// subprotocol chosen, if any.
pub(crate) fn switching_protocols(
    key: &str,
    protocol: Option<&'static str>,
) -> ApiResult<Response> {
    let mut response = Response::builder()
        .status(StatusCode::SWITCHING_PROTOCOLS)
        .header(header::UPGRADE, "websocket")
        .header(header::CONNECTION, "Upgrade")
        .header(header::SEC_WEBSOCKET_ACCEPT, accept_key(key));
    if let Some(protocol) = protocol {
        response = response.header(
            header::SEC_WEBSOCKET_PROTOCOL,
            HeaderValue::from_static(protocol),
        );
    }
    response
        .body(Body::empty())
        .map_err(|e| ApiError::internal(e.to_string()))
}

/// `Sec-WebSocket-Accept` for a `Sec-WebSocket-Key` (SHA-1 from `ring`, already linked for TLS).
fn accept_key(key: &str) -> String {
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

/// The server side of a WebSocket on an upgraded connection, split into its two directions.
pub(crate) async fn server<S>(io: S) -> (MessageWriter<S>, MessageReader<S>)
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let (sink, stream) = WebSocketStream::from_raw_socket(io, Role::Server, None)
        .await
        .split();
    (MessageWriter { sink }, MessageReader { stream })
}

/// Reads client messages.
pub(crate) struct MessageReader<S> {
    stream: SplitStream<WebSocketStream<S>>,
}

impl<S: AsyncRead + AsyncWrite + Unpin> MessageReader<S> {
    /// The next message; `Ok(None)` at end of stream.
    pub(crate) async fn next(&mut self) -> io::Result<Option<Message>> {
        loop {
            let message = match self.stream.next().await {
                None => return Ok(None),
                Some(Err(e)) => return Err(io::Error::other(e)),
                Some(Ok(m)) => m,
            };
            return Ok(Some(match message {
                WsMessage::Binary(data) => Message::Data(data.to_vec()),
                WsMessage::Text(text) => Message::Data(text.as_bytes().to_vec()),
                WsMessage::Ping(payload) => Message::Ping(payload.to_vec()),
                WsMessage::Pong(_) => Message::Pong,
                WsMessage::Close(_) => Message::Close,
                WsMessage::Frame(_) => continue,
            }));
        }
    }
}

/// Writes server messages.
pub(crate) struct MessageWriter<S> {
    sink: SplitSink<WebSocketStream<S>, WsMessage>,
}

impl<S: AsyncRead + AsyncWrite + Unpin> MessageWriter<S> {
    /// Sends `data` on `channel` (the channel number is the message's first byte).
    pub(crate) async fn write_channel(&mut self, channel: u8, data: &[u8]) -> io::Result<()> {
        let mut payload = Vec::with_capacity(data.len() + 1);
        payload.push(channel);
        payload.extend_from_slice(data);
        self.send(WsMessage::Binary(payload.into())).await
    }

    /// Sends `data` as one binary message, as it is.
    pub(crate) async fn write_binary(&mut self, data: Vec<u8>) -> io::Result<()> {
        self.send(WsMessage::Binary(data.into())).await
    }

    /// Answers a ping.
    pub(crate) async fn write_pong(&mut self, payload: &[u8]) -> io::Result<()> {
        self.send(WsMessage::Pong(payload.to_vec().into())).await
    }

    /// Sends a close frame with status 1000, normal closure (without a status, kubectl reports
    /// `close 1005 (no status)` as an error).
    pub(crate) async fn write_close(&mut self) -> io::Result<()> {
        let frame = CloseFrame {
            code: CloseCode::Normal,
            reason: "".into(),
        };
        self.send(WsMessage::Close(Some(frame))).await
    }

    /// Closes the connection.
    pub(crate) async fn shutdown(&mut self) {
        let _ = self.sink.close().await;
    }

    async fn send(&mut self, message: WsMessage) -> io::Result<()> {
        self.sink.send(message).await.map_err(io::Error::other)
    }
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

    #[tokio::test]
    async fn channels_round_trip_between_a_client_and_the_server() {
        let (client_io, server_io) = tokio::io::duplex(64 * 1024);
        let (mut write, mut read) = server(server_io).await;
        let mut client = WebSocketStream::from_raw_socket(client_io, Role::Client, None).await;
        client
            .send(WsMessage::Binary(b"\x00hello".to_vec().into()))
            .await
            .unwrap();
        assert_eq!(
            read.next().await.unwrap(),
            Some(Message::Data(b"\x00hello".to_vec()))
        );
        write.write_channel(1, &[7_u8; 200]).await.unwrap();
        let Some(Ok(WsMessage::Binary(got))) = client.next().await else {
            panic!("a binary message");
        };
        assert_eq!((got[0], got.len()), (1, 201));
        client.send(WsMessage::Close(None)).await.unwrap();
        assert_eq!(read.next().await.unwrap(), Some(Message::Close));
    }
}
