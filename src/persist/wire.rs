//! The wire format between a pxagent process and the holder of a persistent connection, over
//! the holder's Unix socket: frames of one type byte, a big-endian u32 length and that many
//! bytes. A connection to the socket carries one request — a [`Frame::Json`] `HolderRequest` — and
//! its answer: for `exec`, the caller's stdin as [`Frame::Stdin`] chunks and
//! [`Frame::StdinEnd`], then the holder's [`Frame::Stdout`] chunks as they arrive, then
//! [`Frame::Stderr`] and one [`Frame::Json`] `Done` (or `Failed`). Both sides are pxagent of the
//! same version (the hello says which), so nothing here is negotiated.

use serde::{Deserialize, Serialize};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use crate::base::error::{Error, Result};

/// The wire version; the hello carries it and a mismatch is a stale holder.
pub const VERSION: u32 = 1;

/// The largest frame either side accepts (a guest map memo is at most 4 MiB, in base64).
pub const MAX_FRAME: usize = 8 * 1024 * 1024;

/// How much stdin or stdout one frame carries at most.
pub const CHUNK: usize = 64 * 1024;

/// One frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    /// A request or an answer, as JSON.
    Json(Vec<u8>),
    /// A chunk of the command's stdout.
    Stdout(Vec<u8>),
    /// The command's stderr (all of it, once).
    Stderr(Vec<u8>),
    /// A chunk of the command's stdin.
    Stdin(Vec<u8>),
    /// The end of the command's stdin.
    StdinEnd,
}

impl Frame {
    fn tag(&self) -> u8 {
        match self {
            Frame::Json(_) => 1,
            Frame::Stdout(_) => 2,
            Frame::Stderr(_) => 3,
            Frame::Stdin(_) => 4,
            Frame::StdinEnd => 5,
        }
    }

    fn body(&self) -> &[u8] {
        match self {
            Frame::Json(b) | Frame::Stdout(b) | Frame::Stderr(b) | Frame::Stdin(b) => b,
            Frame::StdinEnd => &[],
        }
    }

    /// A JSON frame of `value`.
    pub fn json(value: &impl Serialize) -> Frame {
        Frame::Json(serde_json::to_vec(value).unwrap_or_default())
    }
}

/// What a caller asks the holder.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "req", rename_all = "snake_case", deny_unknown_fields)]
pub enum HolderRequest {
    /// Who the holder is and what its connection learnt.
    Hello,
    /// Run one command (`sudo -n …`) on its own channel.
    Exec {
        /// The argv.
        argv: Vec<String>,
        /// The caller's `--timeout`, in milliseconds.
        timeout_ms: Option<u64>,
        /// Whether stdin frames follow.
        stdin: bool,
    },
    /// A memo of the layer above ([`crate::remote::Transport::memo_get`]).
    MemoGet {
        /// Its name.
        key: String,
    },
    /// Keep a memo (empty: forget it).
    MemoPut {
        /// Its name.
        key: String,
        /// The value, base64.
        value: String,
        /// How old it already is, in milliseconds.
        age_ms: u64,
    },
    /// End the holder now.
    Stop,
}

/// The holder's hello (also its status).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Hello {
    /// [`VERSION`].
    pub wire: u32,
    /// The holder's pxagent version.
    pub pxagent: String,
    /// The account it logged in as.
    pub user: String,
    /// The host it connected to.
    pub host: String,
    /// The port.
    pub port: u16,
    /// `user@host:port`.
    pub target: String,
    /// The host key, `ssh-ed25519 key SHA256:…`.
    pub host_key: String,
    /// The host key in OpenSSH form.
    pub host_key_line: String,
    /// The fingerprint of the key that logged in.
    pub auth_key: Option<String>,
    /// The methods the server offered.
    pub auth_methods: Option<Vec<String>>,
    /// The holder's pid.
    pub pid: u32,
    /// How long it stays after the last call, in seconds.
    pub idle_secs: u64,
    /// Seconds since the last call ended.
    pub idle_for_secs: u64,
    /// Seconds since it connected.
    pub up_secs: u64,
    /// Commands it ran.
    pub commands: u64,
}

/// The end of an exec.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "answer", rename_all = "snake_case", deny_unknown_fields)]
pub enum Answer {
    /// The command ran and exited with this status (stdout and stderr came before).
    Done {
        /// The exit status.
        exit_status: u32,
    },
    /// It could not run, or the connection was lost: the error's exit code and message.
    Failed {
        /// [`Error::exit_code`].
        code: u8,
        /// The message.
        message: String,
    },
    /// A memo: its value (base64) and age, or nothing.
    Memo {
        /// The value, base64; `None` when there is none.
        value: Option<String>,
        /// Its age in milliseconds.
        age_ms: u64,
    },
    /// Done (memo kept, stop accepted).
    Ok,
}

/// Write one frame.
pub async fn write(w: &mut (impl AsyncWrite + Unpin), frame: &Frame) -> std::io::Result<()> {
    let body = frame.body();
    let mut head = [0u8; 5];
    head[0] = frame.tag();
    head[1..].copy_from_slice(&(body.len() as u32).to_be_bytes());
    w.write_all(&head).await?;
    w.write_all(body).await?;
    w.flush().await
}

/// Read one frame; `None` at a clean end of the stream.
pub async fn read(r: &mut (impl AsyncRead + Unpin)) -> std::io::Result<Option<Frame>> {
    let mut head = [0u8; 5];
    match r.read_exact(&mut head).await {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e),
    }
    let len = u32::from_be_bytes([head[1], head[2], head[3], head[4]]) as usize;
    if len > MAX_FRAME {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("a frame of {len} bytes (at most {MAX_FRAME})"),
        ));
    }
    let mut body = vec![0u8; len];
    r.read_exact(&mut body).await?;
    Ok(Some(match head[0] {
        1 => Frame::Json(body),
        2 => Frame::Stdout(body),
        3 => Frame::Stderr(body),
        4 => Frame::Stdin(body),
        5 => Frame::StdinEnd,
        t => {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("unknown frame type {t}"),
            ));
        }
    }))
}

/// Parse a JSON frame's body as `T`.
pub fn parse<T: for<'de> Deserialize<'de>>(body: &[u8]) -> Result<T> {
    serde_json::from_slice(body)
        .map_err(|e| Error::Connection(format!("the persistent connection answered garbage: {e}")))
}

/// base64 (standard, padded) of `bytes`.
pub fn b64(bytes: &[u8]) -> String {
    use base64ct::Encoding;
    base64ct::Base64::encode_string(bytes)
}

/// The bytes of standard base64 `text`.
pub fn unb64(text: &str) -> Option<Vec<u8>> {
    use base64ct::Encoding;
    base64ct::Base64::decode_vec(text).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn frames_round_trip_and_bounds_hold() {
        let (mut a, mut b) = tokio::io::duplex(1 << 16);
        let frames = [
            Frame::json(&HolderRequest::Exec {
                argv: vec!["sudo".into(), "-n".into()],
                timeout_ms: Some(5),
                stdin: true,
            }),
            Frame::Stdin(b"data".to_vec()),
            Frame::StdinEnd,
            Frame::Stdout(vec![0, 1, 2]),
            Frame::Stderr(Vec::new()),
        ];
        for f in &frames {
            write(&mut a, f).await.unwrap();
        }
        drop(a);
        for f in &frames {
            assert_eq!(read(&mut b).await.unwrap().as_ref(), Some(f));
        }
        assert_eq!(read(&mut b).await.unwrap(), None);
        let Frame::Json(body) = &frames[0] else {
            unreachable!()
        };
        assert!(matches!(
            parse::<HolderRequest>(body).unwrap(),
            HolderRequest::Exec { stdin: true, .. }
        ));
        assert!(parse::<HolderRequest>(br#"{"req":"exec","argv":[],"shell":"sh"}"#).is_err());
        // A length above the bound is refused before anything is allocated.
        let (mut a, mut b) = tokio::io::duplex(64);
        a.write_all(&[2, 0xff, 0xff, 0xff, 0xff]).await.unwrap();
        assert!(read(&mut b).await.is_err());
        assert_eq!(unb64(&b64(b"\x00memo")).unwrap(), b"\x00memo");
    }
}
