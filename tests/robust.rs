//! Robustness on the bed: explicit connection values beat implicit ones, the spinner never covers
//! the confirmation prompt, container output stays bounded, and `--pull` never writes through a
//! symlink.

use std::time::Duration;

use crate::support::*;

#[test]
fn the_parts_of_dash_h_beat_pxagent_port_and_user() {
    let _g = lock();
    let b = bed();
    // PXAGENT_PORT=1 PXAGENT_USER=x pxagent -H USER@HOST:PORT … connects as USER to PORT.
    let r = px()
        .bed()
        .env("PXAGENT_PORT", "1")
        .env("PXAGENT_USER", "x")
        .args([
            "-H",
            &format!("{}@{}:{}", b.user, b.host, b.port),
            "-o",
            "json",
            "vm",
            "list",
        ])
        .run();
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert_eq!(
        r.json()["host"],
        format!("{}@{}:{}", b.user, b.host, b.port).as_str()
    );
    // -p typed on the command line beats PXAGENT_PORT as well.
    let r = px()
        .bed()
        .env("PXAGENT_PORT", "1")
        .args(["-p", &b.port, "vm", "list"])
        .run();
    assert_eq!(r.code, 0, "{}", r.stderr);
    // Two different ports on the command line are refused before connecting.
    let r = px()
        .bed()
        .args([
            "-p",
            "1",
            "-H",
            &format!("{}:{}", b.host, b.port),
            "vm",
            "list",
        ])
        .run();
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("given twice"), "{}", r.stderr);
}

#[test]
fn the_help_of_push_and_stdin_says_where_the_data_goes() {
    let r = local(&["vm", "exec", "--help"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let help: String = r.stdout.split_whitespace().collect::<Vec<_>>().join(" ");
    for flag in ["--push", "--stdin"] {
        let at = help
            .find(&format!("{flag} <"))
            .unwrap_or_else(|| panic!("{help}"));
        let text = &help[at..(at + 400).min(help.len())];
        assert!(
            text.contains("command argument on the host") && text.contains("process list"),
            "{flag}: {text}"
        );
    }
}

#[test]
fn the_spinner_starts_after_the_confirmation_prompt() {
    let _g = lock();
    let home = Home::new();
    if status_of(100) != "running" {
        assert_eq!(home.on_bed(&["vm", "start", "100"]).code, 0);
    }
    // Hold the stop for a moment so the spinner has time to show once it is sent.
    clear_faults();
    fault(r#"{"match":"qemu/100/status/stop","action":"hang","seconds":2,"times":1}"#);
    let mut c = std::process::Command::new("script");
    isolate(&mut c, home.path()).env("TERM", "xterm");
    bed_env(&mut c).args([
        "-qefc",
        &format!("{} vm stop 100", bin().display()),
        "/dev/null",
    ]);
    let mut child = c
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    use std::io::Write;
    child
        .stdin
        .as_mut()
        .unwrap()
        .write_all(b"yes stop 100\n")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    clear_faults();
    let screen = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(out.status.code(), Some(0), "{screen}");
    let prompt = screen
        .find("Type `yes stop 100` to proceed")
        .unwrap_or_else(|| panic!("no prompt: {screen}"));
    let spinner = screen
        .find("waiting for the Proxmox task")
        .unwrap_or_else(|| panic!("the spinner never showed: {screen}"));
    assert!(
        prompt < spinner,
        "the spinner drew before the prompt: {screen}"
    );
    assert_eq!(status_of(100), "stopped");
    assert_eq!(home.on_bed(&["vm", "start", "100"]).code, 0);
}

#[test]
fn container_output_is_kept_to_16_mib_per_stream() {
    let _s = ct_exec_bed();
    let e = Home::new();
    const MAX: usize = 16 * 1024 * 1024;
    // 17 MB on stdout, a little on stderr; the command lingers so sudo's I/O log keeps
    // relaying until everything was read.
    let d = e
        .on_bed(&[
            "-o",
            "json",
            "ct",
            "exec",
            "200",
            "--",
            "sh",
            "-c",
            "head -c 17000000 /dev/zero | tr '\\0' y; echo small >&2; sleep 1",
        ])
        .data();
    assert_eq!(d["exitcode"], 0);
    assert_eq!(d["out_truncated"], true);
    assert_eq!(d["err_truncated"], false);
    assert_eq!(d["stdout"].as_str().unwrap().len(), MAX);
    assert_eq!(d["stderr"], "small\n");
    // A pull larger than that is refused and writes nothing.
    let r = e.on_bed(&[
        "-o",
        "json",
        "ct",
        "exec",
        "200",
        "--pull",
        "/tmp/big.bin:big.bin",
        "--",
        "truncate",
        "-s",
        "17000000",
        "/tmp/big.bin",
    ]);
    assert_eq!(r.code, 1, "{}", r.stdout);
    assert!(r.stdout.contains("larger than"), "{}", r.stdout);
    assert!(!e.path().join("big.bin").exists());
}

#[test]
fn a_pull_never_writes_through_a_symlink_at_its_target() {
    let _g = lock();
    let e = Home::new();
    let victim = e.path().join("victim");
    std::fs::write(&victim, b"precious").unwrap();
    std::os::unix::fs::symlink(&victim, e.path().join("out.txt")).unwrap();
    e.write("in.txt", b"hello\n");
    let args = |force: bool| {
        let mut a = vec![
            "-o",
            "json",
            "vm",
            "exec",
            "100",
            "--push",
            "in.txt:/tmp/pulled.txt",
            "--pull",
            "/tmp/pulled.txt:out.txt",
        ];
        if force {
            a.push("--force");
        }
        a.extend(["--", "true"]);
        a
    };
    let r = e.on_bed(&args(false));
    assert_eq!(r.code, 2, "{}", r.stdout);
    assert!(r.stdout.contains("--force"), "{}", r.stdout);
    let r = e.on_bed(&args(true));
    assert_eq!(r.code, 0, "{}", r.stdout);
    assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
    let meta = std::fs::symlink_metadata(e.path().join("out.txt")).unwrap();
    assert!(meta.file_type().is_file());
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    assert_eq!(e.read("out.txt"), b"hello\n");
}
