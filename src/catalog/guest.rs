//! What a guest command may carry: the guest agent's and pxagent's size limits on files,
//! stdin and output, and the guest programs of the file sync. The catalog checks guest
//! arguments against these; the engine's guest flow, the connection holder and the host gate
//! use the same numbers and paths.
//!
//! Layer: catalog. Imports nothing of the crate.

/// The guest agent's file-write limit: `content` maxLength 60 KiB of base64.
pub const FILE_WRITE_MAX_BASE64: usize = 60 * 1024;
/// The largest file a VM push can carry (60 KiB of base64 = 46080 bytes).
pub const VM_PUSH_MAX: usize = FILE_WRITE_MAX_BASE64 / 4 * 3;
/// The guest agent's file-read limit ($MAX_READ_SIZE in PVE's Agent.pm).
pub const VM_PULL_MAX: usize = 16 * 1024 * 1024;
/// The guest agent's `input-data` limit (64 KiB).
pub const VM_STDIN_MAX: usize = 64 * 1024;
/// What pxagent sends to or takes from a container in one file or stdin.
pub const CT_FILE_MAX: usize = 64 * 1024 * 1024;
/// What pxagent keeps of each output stream of a container command (stdout, stderr, a
/// pulled file): 16 MiB, as the guest agent's file-read limit for VMs; the rest is dropped as
/// it arrives (`out_truncated`/`err_truncated`), and a pull that is larger is refused.
pub const CT_STREAM_MAX: usize = 16 * 1024 * 1024;

/// Guest programs of the file sync (absolute: they do not depend on the guest's PATH).
/// `tee` in a guest: a container push writes stdin to the path (the gate reads it back too).
pub const TEE: &str = "/usr/bin/tee";
/// `cat` in a guest: a container pull.
pub const CAT: &str = "/bin/cat";
/// `mkdir -p` in a guest: a push's directory, made first when asked (`--mkdir`). It runs as
/// an ordinary guest command, so a command allowlist must admit it.
pub const MKDIR: &str = "/bin/mkdir";
/// The checksum that proves a transfer.
pub const SHA256SUM: &str = "/usr/bin/sha256sum";
