//! Running the real binary: [`px`] (a builder, just's `Test` and ripgrep's `TestCommand` are
//! the models), the isolated [`Home`] it runs in, and what came back ([`Run`]).
//!
//! The binary is `PXAGENT_BIN` when set (scripts/test.sh points it at the release build it
//! tests), else the one cargo built for this test binary. Every run starts from an empty
//! environment: PATH, HOME, `XDG_CONFIG_HOME` (`HOME/config`) and `XDG_STATE_HOME`
//! (`HOME/state`), the working directory at HOME; no `SSH_AUTH_SOCK`, no `PXAGENT_*` unless the
//! test adds them ([`Px::bed`] adds the bed's five connection variables).

use std::ffi::OsStr;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

use serde_json::Value;

use super::bed::bed;

/// The PATH of every run: the system directories only (sudo, ssh-keygen and the simulator's
/// tools are in the sbin ones).
pub const PATH: &str = "/usr/sbin:/usr/bin:/sbin:/bin";

/// The pxagent binary under test: `PXAGENT_BIN`, else cargo's build of this package.
pub fn bin() -> PathBuf {
    match std::env::var_os("PXAGENT_BIN").filter(|p| !p.is_empty()) {
        Some(p) => {
            let p = PathBuf::from(p);
            assert!(
                p.is_file(),
                "PXAGENT_BIN={} is not a file: build it (`cargo build --release -p pxagent`) or unset PXAGENT_BIN to test cargo's own build",
                p.display()
            );
            p
        }
        None => PathBuf::from(env!("CARGO_BIN_EXE_pxagent")),
    }
}

/// Clear `cmd`'s environment and give it `home` as HOME, XDG config and state base and working
/// directory. Also for programs that start pxagent themselves (`script`, the MCP client).
pub fn isolate<'c>(cmd: &'c mut Command, home: &Path) -> &'c mut Command {
    cmd.env_clear()
        .env("PATH", PATH)
        .env("HOME", home)
        .env("XDG_CONFIG_HOME", home.join("config"))
        .env("XDG_STATE_HOME", home.join("state"))
        .current_dir(home)
}

/// Add the bed's connection variables (`PXAGENT_HOST`, `_PORT`, `_USER`, `_IDENTITY`,
/// `_KNOWN_HOSTS`) to `cmd`; panics with what to run when the bed's environment is missing.
pub fn bed_env(cmd: &mut Command) -> &mut Command {
    let b = bed();
    cmd.env("PXAGENT_HOST", &b.host)
        .env("PXAGENT_PORT", &b.port)
        .env("PXAGENT_USER", &b.user)
        .env("PXAGENT_IDENTITY", &b.identity)
        .env("PXAGENT_KNOWN_HOSTS", &b.known_hosts)
}

/// An isolated home for pxagent runs that share state (audit log, rate-limit counters, a config
/// file): HOME is a temp dir, its `config/` and `state/` the XDG dirs. Removed on drop.
pub struct Home {
    dir: tempfile::TempDir,
}

impl Home {
    /// A fresh, empty home.
    pub fn new() -> Home {
        Home {
            dir: tempfile::tempdir().expect("a temp dir for HOME"),
        }
    }

    /// HOME (also the working directory of every run in it).
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// `XDG_CONFIG_HOME` of runs in this home (pxagent reads `pxagent/config.yaml` under it).
    pub fn config_dir(&self) -> PathBuf {
        self.path().join("config")
    }

    /// `XDG_STATE_HOME` of runs in this home (the audit log and limit counters are under it).
    pub fn state_dir(&self) -> PathBuf {
        self.path().join("state")
    }

    /// The local audit trail of runs in this home (`pxagent/audit.jsonl` in the state dir).
    pub fn audit_log(&self) -> PathBuf {
        self.state_dir().join("pxagent/audit.jsonl")
    }

    /// A run of pxagent in this home.
    pub fn px(&self) -> Px {
        Px::in_home(self.path(), None)
    }

    /// pxagent with `args` against the bed, in this home.
    pub fn on_bed(&self, args: &[&str]) -> Run {
        self.px().bed().args(args).run()
    }

    /// Write a file in the home; returns `name` (a path relative to the working directory).
    pub fn write(&self, name: &str, data: &[u8]) -> String {
        std::fs::write(self.path().join(name), data).unwrap();
        name.to_string()
    }

    /// Read a file of the home.
    pub fn read(&self, name: &str) -> Vec<u8> {
        std::fs::read(self.path().join(name)).unwrap()
    }
}

/// A run of pxagent in a fresh [`Home`] of its own (removed when the run is done).
pub fn px() -> Px {
    let home = Home::new();
    let path = home.path().to_path_buf();
    Px::in_home(&path, Some(home))
}

/// pxagent with `args` against the bed, in a fresh home.
pub fn on_bed(args: &[&str]) -> Run {
    px().bed().args(args).run()
}

/// pxagent with `args` and no host, in a fresh home.
pub fn local(args: &[&str]) -> Run {
    px().args(args).run()
}

/// A pxagent invocation being put together; [`Px::run`] or [`Px::spawn`] starts it.
pub struct Px {
    cmd: Command,
    stdin: Option<Vec<u8>>,
    /// Kept alive until the process is done when the run owns its home.
    home: Option<Home>,
}

impl Px {
    fn in_home(path: &Path, home: Option<Home>) -> Px {
        let mut cmd = Command::new(bin());
        isolate(&mut cmd, path);
        Px {
            cmd,
            stdin: None,
            home,
        }
    }

    /// Connect to the bed through its `PXAGENT_*` variables.
    pub fn bed(mut self) -> Px {
        bed_env(&mut self.cmd);
        self
    }

    /// Connect to the gated bed (`PXAGENT_GATED_*`).
    pub fn gated(mut self) -> Px {
        for (k, v) in super::gated().env {
            self.cmd.env(k, v);
        }
        self
    }

    /// More arguments.
    pub fn args<I, S>(mut self, args: I) -> Px
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.cmd.args(args);
        self
    }

    /// One more argument that is a path.
    pub fn arg_path(mut self, p: &Path) -> Px {
        self.cmd.arg(p);
        self
    }

    /// One more environment variable.
    pub fn env(mut self, k: impl AsRef<OsStr>, v: impl AsRef<OsStr>) -> Px {
        self.cmd.env(k, v);
        self
    }

    /// Bytes on standard input (otherwise it is empty).
    pub fn stdin(mut self, input: impl Into<Vec<u8>>) -> Px {
        self.stdin = Some(input.into());
        self
    }

    /// Run to the end and collect what came back.
    pub fn run(self) -> Run {
        self.spawn().wait()
    }

    /// Start it (stdout and stderr captured) without waiting.
    pub fn spawn(mut self) -> Running {
        let stdin = if self.stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        };
        let mut child = self
            .cmd
            .stdin(stdin)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", bin().display()));
        // A writer thread, so a child that answers before reading all its input cannot
        // deadlock against us.
        let writer = self.stdin.take().map(|input| {
            let mut pipe = child.stdin.take().unwrap();
            std::thread::spawn(move || {
                let _ = pipe.write_all(&input);
            })
        });
        Running {
            child,
            writer,
            _home: self.home,
        }
    }
}

/// A started pxagent process.
pub struct Running {
    child: Child,
    writer: Option<std::thread::JoinHandle<()>>,
    _home: Option<Home>,
}

impl Running {
    /// The process id (to signal it).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Wait for it to exit and collect what came back.
    pub fn wait(self) -> Run {
        let out = self.child.wait_with_output().unwrap();
        if let Some(w) = self.writer {
            let _ = w.join();
        }
        Run::from(out)
    }
}

/// What a run of pxagent returned: its exit code (-1 when killed by a signal) and its output,
/// decoded lossily.
pub struct Run {
    /// The exit code, -1 when a signal ended the process.
    pub code: i32,
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
    utf8: bool,
}

impl From<Output> for Run {
    fn from(out: Output) -> Run {
        Run {
            code: out.status.code().unwrap_or(-1),
            utf8: std::str::from_utf8(&out.stdout).is_ok()
                && std::str::from_utf8(&out.stderr).is_ok(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }
}

impl Run {
    /// Standard output as one JSON document.
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {:?} / {:?}", self.stdout, self.stderr))
    }

    /// The `data` of a successful JSON run (asserts exit 0).
    pub fn data(&self) -> Value {
        assert_eq!(self.code, 0, "{}\n{}", self.stdout, self.stderr);
        self.json()["data"].clone()
    }

    /// Assert that stdout and stderr were valid UTF-8 (not only after lossy decoding).
    pub fn assert_utf8(&self) {
        assert!(
            self.utf8,
            "output is not UTF-8: {:?} / {:?}",
            self.stdout, self.stderr
        );
    }
}
