//! The programs every simulated guest has that a test machine may lack [sim-only].
//!
//! Guest commands run with the test machine's own programs ([`crate::sandbox`]), so a guest
//! would have `systemctl` only where the machine running the bed has systemd, and a guest
//! command would behave differently on a container or a minimal install. The simulated guests
//! are defined instead: they are Debian 12 systems with the machine's essential tools
//! (coreutils, grep, sed, `uptime`, `df`: what the bed installs) and the programs of
//! [`PROGRAMS`], which the simulator itself answers, as the sandbox account, on every machine
//! alike (a machine's own `systemctl` is never run in a guest).
//!
//! The simulated units are [`UNITS`]: every guest runs `ssh`, `cron` and `nginx`. The texts follow systemd 252 (Debian 12): `systemctl status` prints the
//! unit's block and exits 0 when it is active, 3 when not, 4 with "Unit X.service could not be
//! found." on stderr when there is no such unit (systemctl(1), "EXIT STATUS").

use crate::Output;

/// Guest programs the simulator answers, by name.
pub const PROGRAMS: &[&str] = &["systemctl"];

/// Directories a guest command may name a [`PROGRAMS`] entry in (`/usr/bin/systemctl`).
const DIRS: &[&str] = &["/usr/bin/", "/bin/", "/usr/sbin/", "/sbin/"];

/// One simulated systemd unit.
struct Unit {
    name: &'static str,
    description: &'static str,
    docs: &'static str,
    main: &'static str,
}

/// The units every simulated guest runs.
const UNITS: &[Unit] = &[
    Unit {
        name: "ssh",
        description: "OpenBSD Secure Shell server",
        docs: "man:sshd(8) man:sshd_config(5)",
        main: "\"sshd: /usr/sbin/sshd -D [listener] 0 of 10-100 startups\"",
    },
    Unit {
        name: "cron",
        description: "Regular background program processing daemon",
        docs: "man:cron(8)",
        main: "/usr/sbin/cron -f",
    },
    Unit {
        name: "nginx",
        description: "A high performance web server and a reverse proxy server",
        docs: "man:nginx(8)",
        main: "\"nginx: master process /usr/sbin/nginx -g daemon on; master_process on;\"",
    },
];

/// The [`PROGRAMS`] entry a guest argv's program names, if any: the bare name (found through
/// the guest's `PATH`) or the name in one of the system's binary directories.
pub fn simulated(program: &str) -> Option<&'static str> {
    let name = DIRS
        .iter()
        .find_map(|d| program.strip_prefix(d))
        .unwrap_or(program);
    PROGRAMS.iter().copied().find(|p| *p == name)
}

/// `pve-sim guest-tool NAME ARGS…` (run as the sandbox account): one [`PROGRAMS`] entry
/// inside a guest.
pub fn run(args: &[String]) -> Output {
    match args.first().map(String::as_str) {
        Some("systemctl") => systemctl(&args[1..]),
        _ => Output::err("usage: pve-sim guest-tool systemctl ARGS…", 2),
    }
}

/// The unit a `systemctl` argument names (`nginx`, `nginx.service`).
fn unit(arg: &str) -> Option<&'static Unit> {
    let name = arg.strip_suffix(".service").unwrap_or(arg);
    UNITS.iter().find(|u| u.name == name)
}

fn systemctl(args: &[String]) -> Output {
    let words: Vec<&str> = args
        .iter()
        .map(String::as_str)
        .filter(|a| !matches!(*a, "--no-pager" | "--quiet" | "-q" | "--full" | "-l"))
        .collect();
    let quiet = args.iter().any(|a| a == "--quiet" || a == "-q");
    let Some((&verb, names)) = words.split_first() else {
        return Output::err(
            "pve-sim: this simulated guest's systemctl answers status, is-active and is-enabled",
            1,
        );
    };
    if names.is_empty() && verb != "status" {
        return Output::err("Too few arguments.", 1);
    }
    let missing = |n: &str| {
        format!(
            "Unit {}.service could not be found.\n",
            n.strip_suffix(".service").unwrap_or(n)
        )
    };
    let mut out = Output::default();
    match verb {
        "status" => {
            for (i, n) in names.iter().enumerate() {
                match unit(n) {
                    Some(u) => {
                        if i > 0 {
                            out.stdout.push('\n');
                        }
                        out.stdout.push_str(&status_block(u, 600 + i as u32 * 37));
                    }
                    None => {
                        out.stderr.push_str(&missing(n));
                        out.code = 4;
                    }
                }
            }
        }
        "is-active" | "is-enabled" => {
            for n in names {
                let known = unit(n).is_some();
                if !quiet {
                    let word = match (verb, known) {
                        ("is-active", true) => "active",
                        ("is-active", false) => "inactive",
                        (_, true) => "enabled",
                        (_, false) => "",
                    };
                    if word.is_empty() {
                        out.stderr.push_str(&format!(
                            "Failed to get unit file state for {}.service: No such file or directory\n",
                            n.strip_suffix(".service").unwrap_or(n)
                        ));
                    } else {
                        out.stdout.push_str(word);
                        out.stdout.push('\n');
                    }
                }
                if !known {
                    out.code = if verb == "is-active" { 3 } else { 1 };
                }
            }
        }
        other => {
            return Output::err(
                &format!(
                    "pve-sim: `systemctl {other}` is not simulated: this guest's systemctl answers status, is-active and is-enabled"
                ),
                1,
            );
        }
    }
    out
}

/// `systemctl status UNIT` of an active unit (systemd 252's layout).
fn status_block(u: &Unit, pid: u32) -> String {
    let since = crate::timefmt::now() - 3600;
    format!(
        "\u{25cf} {name}.service - {desc}\n     Loaded: loaded (/lib/systemd/system/{name}.service; enabled; preset: enabled)\n     Active: active (running) since {when}; 1h ago\n       Docs: {docs}\n   Main PID: {pid} ({prog})\n      Tasks: 1 (limit: 2307)\n     Memory: 4.2M\n        CPU: 51ms\n     CGroup: /system.slice/{name}.service\n             \u{2514}\u{2500}{pid} {main}\n",
        name = u.name,
        desc = u.description,
        when = crate::timefmt::iso(since),
        docs = u.docs,
        prog = u
            .main
            .trim_start_matches('"')
            .split([' ', ':'])
            .next()
            .unwrap_or(u.name)
            .rsplit('/')
            .next()
            .unwrap_or(u.name),
        main = u.main,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(words: &[&str]) -> Output {
        run(&words.iter().map(|w| w.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn programs_are_found_by_name_or_in_the_system_directories_only() {
        assert_eq!(simulated("systemctl"), Some("systemctl"));
        assert_eq!(simulated("/usr/bin/systemctl"), Some("systemctl"));
        assert_eq!(simulated("/bin/systemctl"), Some("systemctl"));
        assert_eq!(simulated("/tmp/systemctl"), None);
        assert_eq!(simulated("./systemctl"), None);
        assert_eq!(simulated("sort"), None);
    }

    #[test]
    fn status_of_a_running_unit_and_of_a_missing_one() {
        let o = call(&["systemctl", "status", "nginx"]);
        assert_eq!(o.code, 0, "{}", o.stderr);
        assert!(
            o.stdout
                .starts_with("\u{25cf} nginx.service - A high performance web server")
        );
        assert!(
            o.stdout.contains("Active: active (running) since "),
            "{}",
            o.stdout
        );
        assert!(o.stdout.contains("Main PID: 600 (nginx)"), "{}", o.stdout);
        let o = call(&["systemctl", "status", "nope.service"]);
        assert_eq!(
            (o.code, o.stderr.as_str()),
            (4, "Unit nope.service could not be found.\n")
        );
        assert_eq!(call(&["systemctl", "is-active", "ssh"]).stdout, "active\n");
        assert_eq!(call(&["systemctl", "is-active", "x"]).code, 3);
        assert_eq!(call(&["systemctl", "restart", "ssh"]).code, 1);
        assert_eq!(call(&["reboot"]).code, 2);
    }
}
