//! The gate's sudo, run as its child and ended when the client goes away.
//!
//! Why not `exec`: sshd refuses the client's signal requests for a ForceCommand session
//! (OpenSSH `session.c` `session_signal_req`: "refusing to send signal … to forced-command
//! session"), so a command the gate had replaced itself with could not be stopped from the
//! client: a cancelled or timed-out call went on as root for as long as it liked. So the gate
//! stays as sudo's parent, hands it its own stdin, stdout and stderr (the bytes never pass
//! through the gate), and watches two things at once: sudo's exit (a pidfd), and the far end
//! of its stdout and stderr. When the client closes the channel (a cancel, a timeout, a lost
//! connection), sshd closes its ends of those pipes (`chan_rcvd_oclose` shuts the channel's
//! file descriptors), which `poll` reports as `POLLERR`/`POLLHUP` on ours. Then sudo gets
//! SIGTERM — sudo relays it to the command (sudo(8) "Signal handling"), and a Proxmox tool
//! waiting for its worker passes it on to the worker's process group (pve-common
//! `RESTEnvironment.pm` `$tee_worker`), which ends the task as interrupted — and, after
//! [`GRACE`], SIGKILL. The account may signal its own sudo: sudo keeps the invoking user as
//! its real uid. Stdin's end of file is not a hangup: a command given input gets EOF after it.
//!
//! The exit status is sudo's own: a code is returned as it is, and a signal that ended sudo
//! is raised on the gate, so sshd reports it as it would have reported sudo's.

use std::os::fd::{AsFd, BorrowedFd};
use std::process::{Child, ExitStatus};
use std::time::{Duration, Instant};

use rustix::event::{PollFd, PollFlags, Timespec, poll};
use rustix::process::{Pid, PidfdFlags, Signal, kill_process, pidfd_open};

/// How long sudo gets between SIGTERM and SIGKILL once the client went away.
pub const GRACE: Duration = Duration::from_secs(2);
/// How often the child is looked at where pidfds are missing (Linux before 5.3).
const TICK: Duration = Duration::from_millis(50);

/// What became of the child.
#[derive(Debug)]
pub struct Outcome {
    /// How it ended.
    pub status: ExitStatus,
    /// The client went away first, and the child was signalled.
    pub hung_up: bool,
}

/// Wait for `child`, ending it when `watched` (the gate's stdout and stderr) report that
/// their reader is gone.
pub fn supervise(child: &mut Child, watched: &[BorrowedFd<'_>]) -> std::io::Result<Outcome> {
    let pid = Pid::from_child(child);
    let pidfd = pidfd_open(pid, PidfdFlags::empty()).ok();
    loop {
        let hung_up = wait_once(pidfd.as_ref().map(|f| f.as_fd()), watched, None)?;
        if let Some(status) = child.try_wait()? {
            return Ok(Outcome {
                status,
                hung_up: false,
            });
        }
        if hung_up {
            let _ = kill_process(pid, Signal::TERM);
            let until = Instant::now() + GRACE;
            while Instant::now() < until {
                if let Some(status) = child.try_wait()? {
                    return Ok(Outcome {
                        status,
                        hung_up: true,
                    });
                }
                let left = until.saturating_duration_since(Instant::now());
                wait_once(pidfd.as_ref().map(|f| f.as_fd()), &[], Some(left))?;
            }
            let _ = kill_process(pid, Signal::KILL);
            return Ok(Outcome {
                status: child.wait()?,
                hung_up: true,
            });
        }
    }
}

/// One wait: until the child ends (its pidfd is readable), a watched descriptor reports
/// a hangup, or `limit` passes (a short tick without a pidfd). True on a hangup.
fn wait_once(
    pidfd: Option<BorrowedFd<'_>>,
    watched: &[BorrowedFd<'_>],
    limit: Option<Duration>,
) -> std::io::Result<bool> {
    let limit = match (pidfd, limit) {
        (None, l) => Some(l.map_or(TICK, |l| l.min(TICK))),
        (Some(_), l) => l,
    };
    let mut fds: Vec<PollFd<'_>> = watched
        .iter()
        .map(|fd| PollFd::from_borrowed_fd(*fd, PollFlags::empty()))
        .collect();
    if let Some(fd) = pidfd {
        fds.push(PollFd::from_borrowed_fd(fd, PollFlags::IN));
    }
    let timeout = limit.map(|l| Timespec {
        tv_sec: l.as_secs() as i64,
        tv_nsec: i64::from(l.subsec_nanos()),
    });
    match poll(&mut fds, timeout.as_ref()) {
        Ok(_) => {}
        Err(rustix::io::Errno::INTR) => return Ok(false),
        Err(e) => return Err(e.into()),
    }
    let gone = PollFlags::ERR | PollFlags::HUP;
    Ok(fds[..watched.len()]
        .iter()
        .any(|p| p.revents().intersects(gone)))
}

/// `exit 1` or `signal 15`, for the host's record.
pub fn describe(status: ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(c), _) => format!("exit {c}"),
        (None, Some(s)) => format!("signal {s}"),
        (None, None) => format!("{status}"),
    }
}

/// The gate's exit for sudo's `status`: its code, or — when a signal ended it — the same
/// signal raised on the gate (falling back to 128 + the signal where that does not end it).
pub fn exit_like(status: ExitStatus) -> u8 {
    use std::os::unix::process::ExitStatusExt;
    if let Some(code) = status.code() {
        return code as u8;
    }
    let sig = status.signal().unwrap_or(0);
    if let Some(s) = Signal::from_named_raw(sig) {
        let _ = kill_process(rustix::process::getpid(), s);
    }
    (128 + sig) as u8
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;
    use std::process::{Command, Stdio};

    /// A child whose stdout is a pipe we hold the reading end of.
    fn child(script: &str) -> (Child, std::process::ChildStdout) {
        let mut c = Command::new("/bin/sh")
            .args(["-c", script])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let out = c.stdout.take().unwrap();
        (c, out)
    }

    #[test]
    fn a_child_that_ends_gives_its_status_and_no_hangup() {
        // The watched descriptor is a pipe whose reader stays open: no hangup.
        let (r, w) = std::io::pipe().unwrap();
        let (mut c, _out) = child("exit 3");
        let o = supervise(&mut c, &[w.as_fd()]).unwrap();
        assert_eq!((o.status.code(), o.hung_up), (Some(3), false));
        drop(r);
    }

    #[test]
    fn a_closed_reader_ends_the_child_with_sigterm() {
        let (r, w) = std::io::pipe().unwrap();
        let (mut c, _out) = child("sleep 30");
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(200));
            drop(r);
        });
        let started = Instant::now();
        let o = supervise(&mut c, &[w.as_fd()]).unwrap();
        t.join().unwrap();
        use std::os::unix::process::ExitStatusExt;
        assert!(o.hung_up);
        assert_eq!(o.status.signal(), Some(15), "{:?}", o.status);
        assert!(
            started.elapsed() < GRACE,
            "TERM was enough: {:?}",
            started.elapsed()
        );
    }

    #[test]
    fn a_child_that_ignores_sigterm_is_killed_after_the_grace() {
        let (r, w) = std::io::pipe().unwrap();
        // The shell ignores TERM and says so once it does, then sleeps in a loop.
        let (mut c, mut out) = child("trap '' TERM; echo ready; while :; do sleep 1; done");
        let mut ready = [0u8; 6];
        std::io::Read::read_exact(&mut out, &mut ready).unwrap();
        drop(r);
        let o = supervise(&mut c, &[w.as_fd()]).unwrap();
        use std::os::unix::process::ExitStatusExt;
        assert!(o.hung_up);
        assert_eq!(o.status.signal(), Some(9), "{:?}", o.status);
    }
}
