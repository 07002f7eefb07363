//! Text every layer shows or sends: values echoed in messages ([`printable`]) and records
//! ([`cut`]), the SHA-256 that names a value not kept whole, and the POSIX quoting of the one
//! command line an SSH `exec` carries ([`quote_argv`], bounded by [`MAX_COMMAND_LINE`]).
//!
//! Layer: base. Imports nothing of the crate.

/// The most pxagent echoes back of one value (in CLI and MCP errors and in audit records):
/// 1 KiB, so a 5 MB argument cannot make a 10 MB reply or a 5 MB audit line.
pub const ECHO_MAX: usize = 1024;

/// Render a value for an error message: control characters escaped, and at most
/// [`ECHO_MAX`] bytes of it (see [`cut`]). The one helper for every value pxagent echoes.
pub fn printable(raw: &str) -> String {
    // Escaping at most quadruples a character: escape a bounded prefix only.
    let head = &raw[..floor_char_boundary(raw, ECHO_MAX + 1)];
    let escaped: String = head
        .chars()
        .flat_map(|c| {
            if c.is_control() {
                c.escape_default().collect::<Vec<_>>()
            } else {
                vec![c]
            }
        })
        .collect();
    if escaped.len() <= ECHO_MAX && head.len() == raw.len() {
        return escaped;
    }
    format!(
        "{}… ({} bytes in all)",
        &escaped[..floor_char_boundary(&escaped, ECHO_MAX)],
        raw.len()
    )
}

/// A value as it is recorded (an audit record's argv): unchanged up to [`ECHO_MAX`] bytes;
/// longer, its first bytes, its length and its SHA-256, so the record stays small and still
/// identifies what was sent.
pub fn cut(raw: &str) -> std::borrow::Cow<'_, str> {
    if raw.len() <= ECHO_MAX {
        return std::borrow::Cow::Borrowed(raw);
    }
    let sum = sha256_hex(raw.as_bytes());
    std::borrow::Cow::Owned(format!(
        "{}… ({} bytes in all, sha256 {sum})",
        &raw[..floor_char_boundary(raw, ECHO_MAX)],
        raw.len()
    ))
}

/// The SHA-256 of `bytes` as 64 lowercase hex characters: how records, guest-file checks and
/// the audit chain name a value they do not keep whole.
pub fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The largest char boundary of `s` at or below `at`.
fn floor_char_boundary(s: &str, at: usize) -> usize {
    let mut i = at.min(s.len());
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// POSIX-quote one word for a remote shell (only when needed, for readability).
pub fn quote_word(w: &str) -> String {
    shlex::try_quote(w)
        .map(|c| c.into_owned())
        .unwrap_or_else(|_| format!("{w:?}"))
}

/// POSIX-quote a whole argv into the one string SSH `exec` carries.
pub fn quote_argv(argv: &[String]) -> String {
    argv.iter()
        .map(|w| quote_word(w))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The longest command line a host can run: sshd hands it on as one string — the `-c`
/// argument of the account's shell, or the `SSH_ORIGINAL_COMMAND=…` variable of a forced
/// command such as the gate — and the kernel refuses any single argument or variable over
/// MAX_ARG_STRLEN (32 pages, 131072 bytes with its NUL) before that program starts. The
/// environment variable is the tighter one: 131072 − `SSH_ORIGINAL_COMMAND=` − NUL. A longer
/// line would fail on the host with nothing but sshd's own log to show for it (the gate
/// never starts, so it writes no record), so the client refuses it before sending.
pub const MAX_COMMAND_LINE: usize = 131_072 - "SSH_ORIGINAL_COMMAND=".len() - 1;
