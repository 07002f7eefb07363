//! The stdio line layer under rmcp: reads JSON-RPC lines from stdin, answers what is not a
//! valid MCP message itself, and hands the rest to rmcp's service loop; writes rmcp's
//! messages to stdout, one line each.
//!
//! Why not rmcp's own stdio transport: it ignores unparsable lines (a client waiting for its
//! answer waits forever), drops an over-long line without a word, answers a malformed
//! request with an id-less `-32600`, and parses `tools/call` with non-object `arguments` as
//! an unknown method (`-32601`). JSON-RPC 2.0 and MCP 2025-11-25 ask for more, so here:
//!
//! - a line that is not JSON gets `-32700` with `id: null`;
//! - a line longer than [`MAX_LINE_BYTES`] (4 MiB) is skipped without being kept in memory
//!   and answered with `-32600`, under the request's id when the line's first or last bytes
//!   name it (the Python SDK writes `{"jsonrpc":"2.0","id":…` first, the TypeScript SDK
//!   `…,"jsonrpc":"2.0","id":…}` last), else `id: null`;
//! - JSON that is not a JSON-RPC 2.0 message (a batch, a non-object, a bad `jsonrpc` or
//!   `id`, no `method`) gets `-32600`;
//! - a request of an MCP method whose params do not fit (`tools/call` with `arguments: [100]`)
//!   gets `-32602` under its id.
//!
//! Notifications are never answered (JSON-RPC forbids it); unknown ones are dropped as rmcp
//! drops them. The layer also notes every `notifications/cancelled` it passes on, so the
//! server can tell a client's cancellation from the end of the session ([`Cancels`]).

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use rmcp::RoleServer;
use rmcp::model::{ClientJsonRpcMessage, ClientRequest, JsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::Transport;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};

/// The longest request line read (4 MiB); a longer one is skipped unread and answered with
/// `-32600`. A tool call's arguments are far smaller (a guest command's stdin is at most
/// 64 KiB).
pub const MAX_LINE_BYTES: usize = 4 * 1024 * 1024;

/// How many bytes of an over-long line's start and end are kept to find its id.
const ID_WINDOW: usize = 512;

/// The MCP methods rmcp parses into typed requests: a request of one of these that rmcp can
/// only read as a custom request has params that do not fit (`-32602`, not `-32601`).
const TYPED_METHODS: &[&str] = &[
    "initialize",
    "ping",
    "completion/complete",
    "logging/setLevel",
    "prompts/get",
    "prompts/list",
    "resources/list",
    "resources/templates/list",
    "resources/read",
    "resources/subscribe",
    "resources/unsubscribe",
    "tools/call",
    "tools/list",
];

/// The request ids the client cancelled (`notifications/cancelled`), as JSON text (`5` and
/// `"5"` are different ids).
#[derive(Debug, Default)]
pub struct Cancels(Mutex<HashSet<String>>);

impl Cancels {
    fn note(&self, id: &Value) {
        self.0
            .lock()
            .expect("cancel set lock")
            .insert(id.to_string());
    }

    /// Whether the client cancelled the request with this id (and forget it).
    pub fn take(&self, id: &impl serde::Serialize) -> bool {
        let key = serde_json::to_string(id).unwrap_or_default();
        self.0.lock().expect("cancel set lock").remove(&key)
    }
}

/// What to do with one line.
#[derive(Debug)]
pub(super) enum Verdict {
    /// A valid MCP message for rmcp, and the request id it cancels when it is a
    /// `notifications/cancelled`.
    Pass(Box<ClientJsonRpcMessage>, Option<Value>),
    /// Not for rmcp: answer with this error object (`code`, `message`) under this id
    /// (`Value::Null` when the id is unknown).
    Reply(Value, Value),
    /// Drop it silently (a notification nobody handles, or a stray response).
    Ignore,
}

fn error(id: Value, code: i64, message: impl Into<String>) -> Verdict {
    Verdict::Reply(id, json!({"code": code, "message": message.into()}))
}

/// A JSON-RPC id as the spec allows it: a string or an integer.
fn valid_id(v: &Value) -> bool {
    v.is_string() || v.as_i64().is_some()
}

/// Read one line (without its newline) as an MCP message, or say how to answer it.
pub(super) fn classify(line: &[u8]) -> Verdict {
    let value: Value = match serde_json::from_slice(line) {
        Ok(v) => v,
        Err(e) => return error(Value::Null, -32700, format!("Parse error: {e}")),
    };
    let Value::Object(obj) = &value else {
        let what = if value.is_array() {
            "a batch (MCP has no JSON-RPC batches since 2025-06-18): send one message per line"
        } else {
            "not a JSON-RPC message (expected an object)"
        };
        return error(Value::Null, -32600, format!("Invalid request: {what}"));
    };
    let id = obj.get("id").filter(|v| valid_id(v)).cloned();
    let reply_id = id.clone().unwrap_or(Value::Null);
    if obj.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return error(
            reply_id,
            -32600,
            "Invalid request: `jsonrpc` must be \"2.0\"",
        );
    }
    if obj.get("id").is_some() && id.is_none() {
        return error(
            Value::Null,
            -32600,
            "Invalid request: `id` must be a string or an integer",
        );
    }
    let Some(method) = obj.get("method") else {
        if id.is_some() && (obj.contains_key("result") || obj.contains_key("error")) {
            // A response to a request of ours (the server sends none it waits for).
            return match serde_json::from_value::<ClientJsonRpcMessage>(value) {
                Ok(m) => Verdict::Pass(Box::new(m), None),
                Err(_) => Verdict::Ignore,
            };
        }
        return error(reply_id, -32600, "Invalid request: no `method`");
    };
    let Some(method) = method.as_str().map(str::to_string) else {
        return error(
            reply_id,
            -32600,
            "Invalid request: `method` must be a string",
        );
    };
    let method = method.as_str();
    let is_request = id.is_some();
    if is_request && method == "tools/call" {
        let params = obj.get("params");
        let bad = match params {
            Some(Value::Object(p)) => match (p.get("name"), p.get("arguments")) {
                (Some(Value::String(_)), None | Some(Value::Null | Value::Object(_))) => None,
                (Some(Value::String(_)), Some(_)) => {
                    Some("`arguments` must be an object of named arguments (e.g. {\"vmid\": 100})")
                }
                _ => Some("`name` must be the tool's name, a string"),
            },
            _ => Some("`params` must be an object with the tool's `name` and `arguments`"),
        };
        if let Some(why) = bad {
            return error(reply_id, -32602, format!("Invalid params: {why}"));
        }
    }
    let cancelled = (method == "notifications/cancelled")
        .then(|| obj.get("params").and_then(|p| p.get("requestId")).cloned())
        .flatten();
    match serde_json::from_value::<ClientJsonRpcMessage>(value) {
        Ok(JsonRpcMessage::Request(r))
            if matches!(r.request, ClientRequest::CustomRequest(_))
                && TYPED_METHODS.contains(&method) =>
        {
            error(reply_id, -32602, format!("Invalid params for {method}"))
        }
        Ok(m) => Verdict::Pass(Box::new(m), cancelled),
        Err(e) if is_request => {
            let code = if TYPED_METHODS.contains(&method) {
                -32602
            } else {
                -32600
            };
            error(
                reply_id,
                code,
                format!(
                    "Invalid {} for {method}: {}",
                    if code == -32602 { "params" } else { "request" },
                    crate::base::text::printable(&e.to_string())
                ),
            )
        }
        // A notification that does not parse is dropped: it cannot be answered.
        Err(_) => Verdict::Ignore,
    }
}

/// The id an over-long line names at its very start (`{"jsonrpc":"2.0","id":7,…`) or very
/// end (`…,"jsonrpc":"2.0","id":7}`): where it can only be the top-level id.
pub(super) fn id_of_long_line(head: &[u8], tail: &[u8]) -> Value {
    let id = r#"("id"\s*:\s*(-?[0-9]{1,18}|"[^"\\]{0,200}"))"#;
    let version = r#""jsonrpc"\s*:\s*"2\.0""#;
    let starts = regex::bytes::Regex::new(&format!(r"^\s*\{{\s*(?:{version}\s*,\s*)?{id}"))
        .expect("static regex");
    let ends = regex::bytes::Regex::new(&format!(r"[,{{]\s*{id}\s*\}}\s*$")).expect("static regex");
    let found = starts
        .captures(head)
        .or_else(|| ends.captures(tail))
        .and_then(|c| c.get(2))
        .and_then(|m| serde_json::from_slice::<Value>(m.as_bytes()).ok());
    found.filter(valid_id).unwrap_or(Value::Null)
}

/// Outcome of one bounded line read.
enum Read {
    Line,
    TooLong { head: Vec<u8>, tail: Vec<u8> },
    Eof,
    Failed(std::io::Error),
}

/// The transport: stdin lines in, stdout lines out (see the module doc).
pub struct LineTransport<R, W> {
    read: BufReader<R>,
    line: Vec<u8>,
    /// Skipping the rest of an over-long line; its first and last bytes so far.
    skipping: Option<(Vec<u8>, Vec<u8>)>,
    write: Arc<tokio::sync::Mutex<W>>,
    cancels: Arc<Cancels>,
}

impl<R, W> LineTransport<R, W>
where
    R: AsyncRead + Unpin + Send,
    W: AsyncWrite + Unpin + Send + 'static,
{
    /// A transport over these streams; cancellations are noted in `cancels`.
    pub fn new(read: R, write: W, cancels: Arc<Cancels>) -> Self {
        LineTransport {
            read: BufReader::new(read),
            line: Vec::new(),
            skipping: None,
            write: Arc::new(tokio::sync::Mutex::new(write)),
            cancels,
        }
    }

    /// Read up to the next newline without ever holding more than [`MAX_LINE_BYTES`].
    /// Cancel-safe: a partial line stays in `self.line` (or `self.skipping`) for the next
    /// call, because rmcp polls `receive` inside a `select!`.
    async fn read_line(&mut self) -> Read {
        loop {
            let (used, done) = {
                let chunk = match self.read.fill_buf().await {
                    Ok(c) => c,
                    Err(e) => return Read::Failed(e),
                };
                if chunk.is_empty() {
                    return Read::Eof;
                }
                let newline = chunk.iter().position(|b| *b == b'\n');
                let take = newline.map_or(chunk.len(), |i| i + 1);
                let part = &chunk[..take];
                if let Some((_, tail)) = &mut self.skipping {
                    tail.extend_from_slice(part);
                    let cut = tail.len().saturating_sub(ID_WINDOW);
                    tail.drain(..cut);
                } else if self.line.len() + take > MAX_LINE_BYTES {
                    let head: Vec<u8> = self.line.iter().take(ID_WINDOW).copied().collect();
                    let mut tail = std::mem::take(&mut self.line);
                    tail.extend_from_slice(part);
                    let cut = tail.len().saturating_sub(ID_WINDOW);
                    tail.drain(..cut);
                    tail.shrink_to(ID_WINDOW);
                    self.skipping = Some((head, tail));
                } else {
                    self.line.extend_from_slice(part);
                }
                (take, newline.is_some())
            };
            self.read.consume(used);
            if done {
                return match self.skipping.take() {
                    Some((head, tail)) => Read::TooLong { head, tail },
                    None => Read::Line,
                };
            }
        }
    }
}

/// Write one error answer; false when stdout is gone.
async fn reply<W: AsyncWrite + Unpin>(
    write: &tokio::sync::Mutex<W>,
    id: Value,
    error: Value,
) -> bool {
    let msg = json!({"jsonrpc": "2.0", "id": id, "error": error});
    let mut out = msg.to_string().into_bytes();
    out.push(b'\n');
    let mut w = write.lock().await;
    w.write_all(&out).await.is_ok() && w.flush().await.is_ok()
}

impl<R, W> Transport<RoleServer> for LineTransport<R, W>
where
    R: AsyncRead + Unpin + Send,
    W: AsyncWrite + Unpin + Send + 'static,
{
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: ServerJsonRpcMessage,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let write = self.write.clone();
        async move {
            let mut out = serde_json::to_vec(&item).map_err(std::io::Error::other)?;
            out.push(b'\n');
            let mut w = write.lock().await;
            w.write_all(&out).await?;
            w.flush().await
        }
    }

    async fn receive(&mut self) -> Option<ClientJsonRpcMessage> {
        loop {
            match self.read_line().await {
                Read::Line => {}
                Read::TooLong { head, tail } => {
                    let id = id_of_long_line(&head, &tail);
                    tracing::warn!(target: "pxagent::mcp", "dropped a request line longer than {MAX_LINE_BYTES} bytes");
                    let err = json!({"code": -32600, "message": format!(
                        "Invalid request: the line is longer than {MAX_LINE_BYTES} bytes (pxagent mcp's limit), so it was skipped unread"
                    )});
                    if !reply(&self.write, id, err).await {
                        return None;
                    }
                    continue;
                }
                Read::Eof => return None,
                Read::Failed(e) => {
                    tracing::warn!(target: "pxagent::mcp", "reading stdin failed: {e}");
                    return None;
                }
            }
            let mut text = std::mem::take(&mut self.line);
            while text.last().is_some_and(|b| *b == b'\n' || *b == b'\r') {
                text.pop();
            }
            let body = text.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(&text);
            if body.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            let verdict = classify(body);
            // Keep the buffer's capacity for the next line, but not a huge one.
            text.clear();
            if text.capacity() <= 64 * 1024 {
                self.line = text;
            }
            match verdict {
                Verdict::Pass(m, cancelled) => {
                    // Noted before rmcp sees it, so the call's handler knows why its token
                    // fired (rmcp cancels the same token when the session ends).
                    if let Some(id) = cancelled {
                        self.cancels.note(&id);
                    }
                    return Some(*m);
                }
                Verdict::Reply(id, err) => {
                    tracing::debug!(target: "pxagent::mcp", "answered an invalid message: {err}");
                    if !reply(&self.write, id, err).await {
                        return None;
                    }
                }
                Verdict::Ignore => {}
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.write.lock().await.flush().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(line: &str) -> (Value, i64) {
        match classify(line.as_bytes()) {
            Verdict::Reply(id, e) => (id, e["code"].as_i64().unwrap()),
            other => panic!("{line}: {other:?}"),
        }
    }

    #[test]
    fn what_is_not_an_mcp_message_gets_its_json_rpc_error() {
        assert_eq!(
            reply("{\"jsonrpc\":\"2.0\",\"id\":1,"),
            (Value::Null, -32700)
        );
        assert_eq!(reply("hello"), (Value::Null, -32700));
        assert_eq!(reply("[{\"jsonrpc\":\"2.0\"}]"), (Value::Null, -32600));
        assert_eq!(reply("42"), (Value::Null, -32600));
        assert_eq!(
            reply(r#"{"jsonrpc":"1.0","id":4,"method":"ping"}"#),
            (json!(4), -32600)
        );
        assert_eq!(reply(r#"{"jsonrpc":"2.0","id":5}"#), (json!(5), -32600));
        assert_eq!(
            reply(r#"{"jsonrpc":"2.0","id":1.5,"method":"ping"}"#),
            (Value::Null, -32600)
        );
        assert_eq!(
            reply(r#"{"jsonrpc":"2.0","id":"a","method":7}"#),
            (json!("a"), -32600)
        );
        // Non-object arguments are invalid params, not an unknown method.
        for args in ["[100]", "100", "\"vmid\"", "true"] {
            let line = format!(
                r#"{{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{{"name":"vm_status","arguments":{args}}}}}"#
            );
            assert_eq!(reply(&line), (json!(3), -32602), "{args}");
        }
        assert_eq!(
            reply(r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":5}}"#),
            (json!(3), -32602)
        );
        assert_eq!(
            reply(r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":[1]}"#),
            (json!(3), -32602)
        );
        assert_eq!(
            reply(
                r#"{"jsonrpc":"2.0","id":3,"method":"initialize","params":{"protocolVersion":5}}"#
            ),
            (json!(3), -32602)
        );
    }

    #[test]
    fn valid_messages_pass_and_cancellations_are_noted() {
        for line in [
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"vm_list","arguments":{}}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"vm_list"}}"#,
            r#"{"jsonrpc":"2.0","id":"x","method":"ping"}"#,
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
            r#"{"jsonrpc":"2.0","id":9,"method":"vendor/thing","params":{}}"#,
        ] {
            assert!(
                matches!(classify(line.as_bytes()), Verdict::Pass(_, None)),
                "{line}"
            );
        }
        let Verdict::Pass(_, Some(id)) = classify(
            br#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7,"reason":"user"}}"#,
        ) else {
            panic!("not passed with its id");
        };
        let cancels = Cancels::default();
        cancels.note(&id);
        assert!(!cancels.take(&rmcp::model::NumberOrString::String("7".into())));
        assert!(cancels.take(&rmcp::model::NumberOrString::Number(7)));
        assert!(
            !cancels.take(&rmcp::model::NumberOrString::Number(7)),
            "taken once"
        );
    }

    #[test]
    fn the_id_of_a_long_line_is_found_only_where_it_is_the_top_level_one() {
        let pad = "x".repeat(100);
        // The Python SDK's order, and the TypeScript SDK's.
        let py =
            format!(r#"{{"jsonrpc":"2.0","id":12,"method":"tools/call","params":{{"a":"{pad}"#);
        assert_eq!(id_of_long_line(py.as_bytes(), b"\"}}}"), json!(12));
        let ts = format!(r#"{pad}"}}}},"jsonrpc":"2.0","id":"abc"}}"#);
        assert_eq!(
            id_of_long_line(b"{\"method\":\"tools/call\"", ts.as_bytes()),
            json!("abc")
        );
        // A nested id is not the request's.
        assert_eq!(
            id_of_long_line(b"{\"method\":\"x\"", br#"{"id":5}}"#),
            Value::Null
        );
        assert_eq!(id_of_long_line(b"garbage", b"garbage"), Value::Null);
    }

    #[tokio::test]
    async fn an_over_long_line_is_answered_and_skipped_without_being_kept() {
        use tokio::io::AsyncReadExt;
        let (client, server) = tokio::io::duplex(1 << 16);
        let (server_read, server_write) = tokio::io::split(server);
        let (mut client_read, mut client_write) = tokio::io::split(client);
        let cancels = Arc::new(Cancels::default());
        let mut t = LineTransport::new(server_read, server_write, cancels);
        let writer = tokio::spawn(async move {
            let big = "y".repeat(MAX_LINE_BYTES + 1000);
            let line = format!(
                "{{\"jsonrpc\":\"2.0\",\"id\":77,\"method\":\"tools/call\",\"params\":{{\"name\":\"vm_status\",\"arguments\":{{\"node\":\"{big}\"}}}}}}\n"
            );
            client_write.write_all(line.as_bytes()).await.unwrap();
            client_write
                .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":78,\"method\":\"ping\"}\n")
                .await
                .unwrap();
            client_write
        });
        let next = t.receive().await.expect("the ping after the long line");
        assert!(
            matches!(next, JsonRpcMessage::Request(ref r) if r.id == rmcp::model::NumberOrString::Number(78))
        );
        assert!(
            t.line.capacity() <= MAX_LINE_BYTES,
            "the long line was not buffered whole"
        );
        let mut got = vec![0u8; 4096];
        let n = client_read.read(&mut got).await.unwrap();
        let answer: Value = serde_json::from_slice(&got[..n]).unwrap();
        assert_eq!(answer["id"], 77);
        assert_eq!(answer["error"]["code"], -32600);
        assert!(n < 1024);
        drop(writer.await.unwrap());
    }
}
