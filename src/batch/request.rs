//! One request line of `pxagent batch` and what comes back for it: parsing a line into a
//! [`BatchRequest`] (exactly the keys `id`, `op`, `args`; `op` a catalog op id; `args` the op's MCP
//! tool arguments, validated by [`crate::mcp::invocation`], the MCP server's own parser) and
//! the result line's JSON. Uses the catalog, the MCP argument parser and the error type.

use serde_json::{Map, Value, json};

use crate::base::error::{Error, Result};
use crate::catalog::invocation::Invocation;
use crate::catalog::{self, Op};
use crate::policy::Policy;

/// The longest request line read (longer ones are an error result; the batch goes on).
pub const MAX_LINE: usize = 1024 * 1024;

/// One parsed request line.
#[derive(Debug)]
pub struct BatchRequest {
    /// 1-based line number in the input.
    pub line: usize,
    /// The caller's `id`, echoed in the result (`null` when absent).
    pub id: Value,
    /// The catalog op.
    pub op: &'static Op,
    /// The validated invocation.
    pub inv: Invocation,
    /// The `confirm` phrase of the line, if any.
    pub confirm: Option<String>,
}

/// A line that did not become a request: its number, the `id` if one could be read, the op
/// if it named a known one, and why.
#[derive(Debug)]
pub struct Invalid {
    /// 1-based line number.
    pub line: usize,
    /// The `id`, when the line was a JSON object carrying one.
    pub id: Value,
    /// The op, when the line named a known one (its arguments were wrong).
    pub op: Option<&'static Op>,
    /// What was wrong (always [`Error::Usage`]; boxed: an `Err` stays small).
    pub error: Box<Error>,
}

/// Parse line `line` (1-based) of the input. `policy` decides whether the op takes `confirm`
/// (the catalog's confirm ops, and those a local `confirm` rule names), as for MCP tools.
pub fn parse(
    line: usize,
    text: &str,
    policy: &Policy,
) -> std::result::Result<BatchRequest, Invalid> {
    let invalid = |id: Value, op: Option<&'static Op>, msg: String| Invalid {
        line,
        id,
        op,
        error: Box::new(Error::Usage(format!("line {line}: {msg}"))),
    };
    let value: Value = serde_json::from_str(text).map_err(|e| {
        invalid(
            Value::Null,
            None,
            format!("not a JSON request ({e}); expected {{\"id\": …, \"op\": \"vm.status\", \"args\": {{…}}}}"),
        )
    })?;
    let Value::Object(mut obj) = value else {
        return Err(invalid(
            Value::Null,
            None,
            "a request is a JSON object with `op` and `args` (and an optional `id`)".into(),
        ));
    };
    let id = obj.remove("id").unwrap_or(Value::Null);
    let op_name = obj.remove("op");
    let args = obj.remove("args");
    if let Some(extra) = obj.keys().next() {
        return Err(invalid(
            id,
            None,
            format!(
                "unknown key '{}' (a request has `id`, `op` and `args`)",
                crate::base::text::printable(extra)
            ),
        ));
    }
    let op = match &op_name {
        Some(Value::String(name)) => catalog::find(name).filter(|op| !op.is_step()).ok_or_else(
            || {
                invalid(
                    id.clone(),
                    None,
                    format!(
                        "unknown op '{}' (the ids are listed by `pxagent catalog`, e.g. vm.status)",
                        crate::base::text::printable(name)
                    ),
                )
            },
        )?,
        Some(_) => {
            return Err(invalid(
                id,
                None,
                "`op` must be a string such as \"vm.status\"".into(),
            ));
        }
        None => {
            return Err(invalid(
                id,
                None,
                "no `op` (e.g. \"op\": \"vm.status\")".into(),
            ));
        }
    };
    let args = match args {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(m)) => m,
        Some(_) => {
            return Err(invalid(
                id,
                Some(op),
                "`args` must be an object of the op's arguments".into(),
            ));
        }
    };
    let (inv, confirm) = crate::mcp::invocation(op, &args, crate::mcp::takes_confirm(policy, op))
        .map_err(|e| invalid(id.clone(), Some(op), e.to_string()))?;
    Ok(BatchRequest {
        line,
        id,
        op,
        inv,
        confirm,
    })
}

/// The result line of a request that succeeded.
pub fn success(id: &Value, op: &Op, data: Value, warnings: &[String]) -> Value {
    let mut doc = json!({"id": id, "ok": true, "op": op.id, "data": data});
    if !warnings.is_empty() {
        doc["warnings"] = json!(warnings);
    }
    doc
}

/// The result line of a request that failed, or of a line that was no request: the CLI's
/// error object, with the line number.
pub fn failure(id: &Value, op: Option<&Op>, line: usize, err: &Error) -> Value {
    json!({"id": id, "ok": false, "op": op.map(|o| o.id), "line": line, "error": err.to_json()})
}

/// Whether `err` is a line the batch could not read as a request (exit 2 for the batch).
pub fn is_invalid(err: &Error) -> bool {
    err.exit_code() == 2
}

/// The exit code of a whole batch: [`crate::base::error::overall_exit_code`] of its failures (2
/// when any line was invalid; 3, 4, 8 — or 6, 7, 9 — when every failure was of that class;
/// else 1).
pub fn exit_code(failures: &[u8]) -> u8 {
    crate::base::error::overall_exit_code(failures)
}

/// Read one line of at most [`MAX_LINE`] bytes from `input` (without its newline); `None` at
/// the end. A longer line is consumed to its end and returned as `Err` with its length.
pub fn read_line(input: &mut impl std::io::BufRead) -> Option<std::io::Result<Result<String>>> {
    let mut buf = Vec::new();
    let mut taken = 0usize;
    loop {
        let chunk = match input.fill_buf() {
            Ok(c) => c,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Some(Err(e)),
        };
        if chunk.is_empty() {
            if taken == 0 {
                return None;
            }
            break;
        }
        let (part, done) = match chunk.iter().position(|b| *b == b'\n') {
            Some(i) => (&chunk[..i], Some(i + 1)),
            None => (chunk, None),
        };
        if buf.len() + part.len() <= MAX_LINE {
            buf.extend_from_slice(part);
        }
        taken += part.len();
        let used = done.unwrap_or(part.len());
        input.consume(used);
        if done.is_some() {
            break;
        }
    }
    if taken > MAX_LINE {
        return Some(Ok(Err(Error::usage(format!(
            "the line is {taken} bytes long; a request line may have at most {MAX_LINE}"
        )))));
    }
    Some(Ok(
        String::from_utf8(buf).map_err(|_| Error::usage("the line is not UTF-8"))
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> Policy {
        Policy::default()
    }

    #[test]
    fn a_request_is_an_op_id_and_its_mcp_arguments() {
        let r = parse(
            1,
            r#"{"id": "a", "op": "vm.status", "args": {"vmid": 101}}"#,
            &policy(),
        )
        .unwrap();
        assert_eq!(r.op.id, "vm.status");
        assert_eq!(r.inv.values["vmid"], "101");
        assert_eq!(r.id, "a");
        // `confirm` only where a phrase can be needed; `args` may be left out for no arguments.
        let r = parse(
            2,
            r#"{"id":7,"op":"vm.destroy","args":{"vmid":150,"confirm":"yes destroy 150"}}"#,
            &policy(),
        )
        .unwrap();
        assert_eq!(r.confirm.as_deref(), Some("yes destroy 150"));
        assert!(parse(3, r#"{"op":"vm.list"}"#, &policy()).is_ok());
    }

    #[test]
    fn bad_lines_keep_their_number_and_id() {
        for (text, id, needle) in [
            ("garbage", Value::Null, "not a JSON request"),
            ("[1,2]", Value::Null, "JSON object"),
            (
                r#"{"id":5,"op":"vm.explode"}"#,
                json!(5),
                "unknown op 'vm.explode'",
            ),
            (
                r#"{"id":5,"op":"vm.file-write","args":{}}"#,
                json!(5),
                "unknown op",
            ),
            (
                r#"{"id":"x","op":"vm.status","args":{"vmid":99}}"#,
                json!("x"),
                "VMID",
            ),
            (
                r#"{"id":1,"op":"vm.status","args":{"vmid":101},"sudo":true}"#,
                json!(1),
                "unknown key 'sudo'",
            ),
            (
                r#"{"op":"vm.status","args":[101]}"#,
                Value::Null,
                "`args` must be an object",
            ),
            (
                r#"{"op":"vm.status","args":{"vmid":101,"confirm":"x"}}"#,
                Value::Null,
                "confirm",
            ),
            (r#"{"op":1}"#, Value::Null, "`op` must be a string"),
        ] {
            let e = parse(9, text, &policy()).unwrap_err();
            assert_eq!(e.line, 9);
            assert_eq!(e.id, id, "{text}");
            assert_eq!(e.error.exit_code(), 2, "{text}");
            let msg = e.error.to_string();
            assert!(
                msg.starts_with("line 9: ") && msg.contains(needle),
                "{text}: {msg}"
            );
        }
    }

    #[test]
    fn the_batch_exit_code() {
        assert_eq!(exit_code(&[]), 0);
        assert_eq!(exit_code(&[1, 4]), 1);
        assert_eq!(exit_code(&[4, 4]), 4);
        assert_eq!(exit_code(&[3]), 3);
        assert_eq!(exit_code(&[8, 8, 8]), 8);
        assert_eq!(exit_code(&[7, 7]), 7);
        assert_eq!(exit_code(&[3, 8]), 1);
        assert_eq!(exit_code(&[1, 2, 4]), 2);
    }

    #[test]
    fn lines_are_bounded() {
        let long = "x".repeat(MAX_LINE + 10);
        let text = format!("{{\"op\":\"vm.list\"}}\n{long}\nlast");
        let mut input = std::io::BufReader::with_capacity(4096, text.as_bytes());
        assert_eq!(
            read_line(&mut input).unwrap().unwrap().unwrap(),
            "{\"op\":\"vm.list\"}"
        );
        let e = read_line(&mut input).unwrap().unwrap().unwrap_err();
        assert!(e.to_string().contains("at most"), "{e}");
        assert_eq!(read_line(&mut input).unwrap().unwrap().unwrap(), "last");
        assert!(read_line(&mut input).is_none());
    }
}
