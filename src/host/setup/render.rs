//! The `setup render` script and the files it carries: the authorized_keys line, the sshd
//! drop-in, the default host policy and approvers, and the sudoers file (from
//! [`crate::host::sudoers::render`]).

use super::script::Script;
use super::{
    ACCOUNT_COMMENT, CONTROL_DIR, FREEZE_FILE, KEYS_DIR, NONCE_DIR, STATE_BASE, SUDOERS_DIR,
    SetupOptions,
};
use crate::base::error::Result;
use crate::host::sudoers::render as sudoers;

const COMMON: &str = include_str!("common.sh");
const STEPS: &str = include_str!("render.sh");

/// The command both the key's `command="…"` and the drop-in's `ForceCommand` run: the gate,
/// with the host policy and the approvers.
pub fn forced_command(o: &SetupOptions) -> String {
    let mut c = format!(
        "{} gate --host-chain --policy {} --approvers {}",
        o.gate.as_str(),
        o.policy_path.as_str(),
        o.approvers_path.as_str()
    );
    if let Some(s) = &o.log_socket {
        c.push_str(&format!(" --log-socket {}", s.as_str()));
    }
    c
}

/// The account's authorized_keys file: a comment and the one key, with `restrict` (no
/// forwarding, no pty, no ~/.ssh/rc), `from="…"` when given, and the gate as forced command.
pub fn authorized_keys_line(o: &SetupOptions) -> String {
    let mut options = vec!["restrict".to_string()];
    if let Some(from) = &o.from {
        options.push(format!("from=\"{}\"", from.joined()));
    }
    options.push(format!("command=\"{}\"", forced_command(o)));
    format!(
        "# {KEYS_DIR}/{user}: the key of pxagent's agent account {user} (written by pxagent setup render)\n{} {}\n",
        options.join(","),
        o.key.line(),
        user = o.user(),
    )
}

/// The sshd drop-in: a `Match User` block that makes the account key-only, without
/// forwarding, tty or rc files, and forced into the gate whatever its key line says. sshd ends
/// a Match block at the end of an included file (a test proves it with the real sshd), so it
/// applies to this account only.
pub fn sshd_dropin(o: &SetupOptions) -> String {
    let user = o.user();
    format!(
        "# pxagent: account {user} logs in with its key only, and only into the gate.\n\
         # Written by pxagent setup render; pxagent setup revoke removes it. Render again to change it.\n\
         Match User {user}\n\
         \x20   AuthorizedKeysFile {KEYS_DIR}/%u\n\
         \x20   AuthenticationMethods publickey\n\
         \x20   PubkeyAuthentication yes\n\
         \x20   PasswordAuthentication no\n\
         \x20   KbdInteractiveAuthentication no\n\
         \x20   DisableForwarding yes\n\
         \x20   PermitTunnel no\n\
         \x20   PermitTTY no\n\
         \x20   PermitUserRC no\n\
         \x20   ForceCommand {}\n",
        forced_command(o)
    )
}

/// The host policy installed when none is given and none exists: it allows every op (the
/// sudoers profile and fences still decide what can run at all), with the other forms as
/// comments.
pub fn default_policy(o: &SetupOptions) -> String {
    format!(
        r#"# {path}: the host policy `pxagent gate` enforces for the agent accounts of this host.
# Written by pxagent setup render because there was none; it never replaces this file unless
# it is given one (--policy FILE). The gate reads it for every command.
#
# This default allows every operation; what can run at all is still limited by each account's
# sudoers file (its profile and VMID fences). Narrow it, for example:
#
#   ops:
#     "*": allow
#     vm.destroy: deny                              # refused here, whatever the client says
#     vm.stop: {{action: deny, reason: "use vm shutdown"}}
#     "ct.*": confirm                               # needs the confirmation phrase
#     vm.rollback: approve                          # needs a person's signed approval
#                                                   # (pxagent approve; keys in {approvers})
#     vm.exec:
#       limits: [{{counter: vm_exec_rate, window: minute, max: 10}}]
#       commands: [[uname, -a], [systemctl, status, {{regex: '[a-z][a-z0-9@_.-]{{0,63}}'}}]]
#   protect: [100, keep]                            # VMIDs and tags no operation may change
#   read_only: true                                 # reads only
#   download_hosts: [cdimage.debian.org]            # the only hosts downloads may come from
#   nfs_servers: [192.0.2.30]                       # the NFS servers agents may add storages
#                                                   # from (also `setup render --nfs-servers`)
#   iso_max_used: 80                                # how full an ISO upload may leave a storage
#                                                   # (sudoers caps it at --iso-max-used, 90)
{nfs}ops:
  "*": allow
"#,
        path = o.policy_path.as_str(),
        approvers = o.approvers_path.as_str(),
        // The servers this render names for sudo are the gate's too: one list, both layers.
        nfs = if o.sudoers.nfs_servers.is_empty() {
            String::new()
        } else {
            format!("nfs_servers: [{}]\n", o.sudoers.nfs_servers.join(", "))
        },
    )
}

/// The approvers file installed when none is given and none exists: comments only.
fn default_approvers(o: &SetupOptions) -> String {
    format!(
        "# {}: the people whose SSH signatures approve the operations the host policy marks\n\
         # `approve` (pxagent approve). One OpenSSH public key per line, `#` starts a comment.\n\
         # Never list an agent's own key: it could approve its own requests.\n",
        o.approvers_path.as_str()
    )
}

fn header(o: &SetupOptions) -> String {
    let user = o.user();
    let key = &o.key;
    let from = o
        .from
        .as_ref()
        .map(|f| f.joined())
        .unwrap_or_else(|| "anywhere".into());
    let policy = match &o.policy {
        Some(p) => format!(
            "from {} (replaces the installed one, kept as .bak)",
            p.source()
        ),
        None => "an installed one stays; else the default (allows every op)".into(),
    };
    let approvers = match &o.approvers {
        Some(_) => "the given keys (replace the installed file, kept as .bak)".into(),
        None => "an installed file stays; else an empty one".to_string(),
    };
    let s = &o.sudoers;
    let fences = [
        s.vmids.as_ref().map(|r| format!("vmids {}", r.display())),
        s.ctids.as_ref().map(|r| format!("ctids {}", r.display())),
        s.ct_exec
            .as_ref()
            .map(|r| format!("ct-exec {}", r.display())),
        (s.fenced() && s.unfenced_ops).then(|| "unfenced ops".to_string()),
        s.custom_storage_roots()
            .then(|| format!("storage roots {}", s.storage_roots.join(","))),
    ]
    .into_iter()
    .flatten()
    .collect::<Vec<_>>();
    let fences = if fences.is_empty() {
        "no VMID fences".to_string()
    } else {
        fences.join(", ")
    };
    format!(
        "pxagent setup render: agent account {user} on this Proxmox host (pxagent {version})
  key {fp} from {from}; profile {profile}, {fences}
  host policy: {policy}
  approvers: {approvers}

Review it, then run it as root on the host:  bash pxagent-setup-{user}.sh
Idempotent: a second run changes nothing. Each step prints `ok` (already so) or `changed`,
the summary at the end lists every change. It stops at the first failure, and before any
change when a precondition fails.

What it does, in order:
  1. checks: root; the gate {gate} (root's alone, runs --version); sshd -t on
     {sshd_config}; an existing account {user} may be managed (not root, not a person's)
  2. classic sudo >= 1.9.10 (installs the sudo package when missing; refuses sudo-rs)
  3. account {user}: no password, no supplementary groups, shell /bin/sh, no expiry date
  4. {state}/{user}: the gate's state (rate-limit counters, issued statements), {user} only;
     {nonces}: the approvals used on this host, by any account (root, 1777);
     {control}: the approvers' signed freezes, thaws and grants (root, 1777)
  5. {KEYS_DIR}/{user}: the key with restrict,from=,command= (root-owned, 0644)
  6. the host policy {policy_path} and the approvers {approvers_path} (root-owned, 0644)
  7. {sudoers_dir}/{user}: through .new, visudo -cf, mv; then visudo -c
  8. the sshd drop-in {dropin}; sshd -t; reload sshd
  9. verification (sudo -l -U, sshd -T, the account, what {user} can read), then the summary

The kill switch: while {freeze} exists, the gate of every account runs reads only and refuses
each change, confirm and exec operation (exit 3, kind `frozen`, with the file's first line as
the reason). Root freezes with `echo 'REASON' > {freeze}` and lifts it with
`rm {freeze}`. An approver (a key in the approvers file) freezes without root, from their own
machine: `pxagent freeze --key KEY -H {user}@HOST --reason 'REASON'`; that freeze is lifted
by an approver's `pxagent thaw --key KEY -H {user}@HOST`, or by root removing its record in
{control}. `pxagent preflight` and `pxagent status` show a frozen host.",
        version = env!("CARGO_PKG_VERSION"),
        fp = key.fingerprint(),
        profile = s.profile.name(),
        gate = o.gate.as_str(),
        sshd_config = o.sshd.config.as_str(),
        state = STATE_BASE,
        nonces = NONCE_DIR,
        control = CONTROL_DIR,
        freeze = FREEZE_FILE,
        policy_path = o.policy_path.as_str(),
        approvers_path = o.approvers_path.as_str(),
        sudoers_dir = SUDOERS_DIR,
        dropin = o.sshd.dropin(user),
    )
}

/// The whole `setup render` script. Errors (exit 2) when options contradict each other: the
/// agent's key among the approvers, one path given for two files.
pub fn render(o: &SetupOptions) -> Result<String> {
    o.check()?;
    let user = o.user();
    let yes_no = |b: bool| if b { "yes" } else { "no" };
    let mut s = Script::new(&header(o));

    s.section("Values (everything this script installs is derived from these)");
    s.value("U", user, "the agent account");
    s.value("PROFILE", o.sudoers.profile.name(), "the sudoers profile");
    s.value(
        "ACCOUNT_COMMENT",
        ACCOUNT_COMMENT,
        "GECOS of accounts pxagent created",
    );
    s.value("GATE", o.gate.as_str(), "the gate binary (pxagent)");
    s.value("GATE_COMMAND", &forced_command(o), "the forced command");
    s.value(
        "HELPER",
        crate::catalog::pve::HELPER_PATH,
        "pxagent's root-side helper (iso upload, network apply)",
    );
    s.value(
        "HELPER_NEEDED",
        yes_no(
            o.sudoers
                .ops()
                .any(|op| op.tool == crate::catalog::pve::Tool::Helper),
        ),
        "yes: the sudoers file names the helper",
    );
    s.value("KEYS_DIR", KEYS_DIR, "root-owned authorized_keys files");
    s.value(
        "KEYS_FILE",
        &format!("{KEYS_DIR}/{user}"),
        "this account's key",
    );
    s.value("KEY_BLOB", o.key.blob(), "the agent's public key (base64)");
    s.value("KEY_FINGERPRINT", o.key.fingerprint(), "its fingerprint");
    s.value(
        "FROM",
        &o.from.as_ref().map(|f| f.joined()).unwrap_or_default(),
        "from= networks (empty: anywhere)",
    );
    s.value("POLICY", o.policy_path.as_str(), "the host policy");
    s.value(
        "POLICY_GIVEN",
        yes_no(o.policy.is_some()),
        "yes: replace it with data_policy",
    );
    s.value(
        "APPROVERS",
        o.approvers_path.as_str(),
        "the approvers' keys",
    );
    s.value(
        "APPROVERS_GIVEN",
        yes_no(o.approvers.is_some()),
        "yes: replace it with data_approvers",
    );
    s.value("STATE_BASE", STATE_BASE, "parent of the gate's state dirs");
    s.value(
        "NONCE_DIR",
        NONCE_DIR,
        "the host's used approvals, shared by every account",
    );
    s.value(
        "CONTROL_DIR",
        CONTROL_DIR,
        "the approvers' signed freezes and thaws, shared by every account",
    );
    s.value(
        "STATE_DIR",
        &format!("{STATE_BASE}/{user}"),
        "the gate's state",
    );
    s.value(
        "SUDOERS",
        &format!("{SUDOERS_DIR}/{user}"),
        "the sudoers file",
    );
    s.value(
        "SSHD_CONFIG",
        o.sshd.config.as_str(),
        "the config sshd reads",
    );
    s.value("DROPIN", &o.sshd.dropin(user), "the sshd drop-in");
    s.value(
        "SSHD_PID_FILE",
        o.sshd.pid_file.as_ref().map(|p| p.as_str()).unwrap_or(""),
        "empty: reload through systemd",
    );

    s.text("\n");
    s.text(COMMON);
    s.text("\n");
    s.text(STEPS);

    s.section("File contents (printed by these functions, installed by the steps above)");
    s.data(
        "data_authorized_keys",
        "the account's authorized_keys",
        &authorized_keys_line(o),
    );
    s.data("data_sshd_dropin", "the sshd drop-in", &sshd_dropin(o));
    let policy = match &o.policy {
        Some(p) => p.text().to_string(),
        None => default_policy(o),
    };
    s.data("data_policy", "the host policy", &policy);
    let approvers = match &o.approvers {
        Some(a) => a.text().to_string(),
        None => default_approvers(o),
    };
    s.data("data_approvers", "the approvers", &approvers);
    s.data(
        "data_sudoers",
        "the sudoers file (pxagent sudoers render)",
        &sudoers::render(&o.sudoers),
    );
    Ok(s.finish())
}
