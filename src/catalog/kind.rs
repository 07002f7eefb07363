//! Parameter kinds: each owns both its client-side validation and its sudoers regex.
//!
//! The two must agree, or the client builds command lines the host refuses (or, worse,
//! the host allows lines the client never builds). So the client validates with the very
//! regex that goes into sudoers, compiled with Rust's `regex` and anchored, plus a few
//! extra checks that POSIX ERE cannot express (reserved names, total length). Those extra
//! checks only ever narrow what the client accepts; sudoers may allow a little more, never
//! anything dangerous.
//!
//! Regexes here use only the ERE subset on which Rust `regex` and POSIX `regcomp` agree:
//! bracket classes without escapes (and without `[`, `]`, `\`, or a leading `^`), `{m,n}`,
//! groups, `|`, `?`. What sudoers' lexer allows inside a regex argument (sudo 1.9.10–1.9.16,
//! `toke.l` state GOTREGEX: the argument runs from `^` to the first unescaped `$`, every other
//! character is passed to `regcomp` as it is, `#` and a line break are errors): never `$`
//! before the end, `#`, `\` or a line break. And what sudo's own pre-check of a pattern
//! (`check_pattern` in `lib/util/regex.c`, which does not know brackets) refuses: `?`, `*` or
//! `+` right after one of `?*+{`, a `{`…`}` that reads as a bound over 255, and a pattern over
//! 1024 bytes. Tests check every kind and every rendered rule against these.

use std::collections::HashMap;
use std::sync::{LazyLock, Mutex};

use crate::base::error::{Error, Result};
use crate::base::text::printable;

/// `kind`'s regex for a whole value (`^(?:…)$`), compiled once per process: a batch, an MCP
/// session or `catalog` parses hundreds of values, and compiling is what costs.
fn whole(kind: &Kind, what: &str) -> Result<regex::Regex> {
    static COMPILED: LazyLock<Mutex<HashMap<String, regex::Regex>>> =
        LazyLock::new(|| Mutex::new(HashMap::new()));
    let pattern = format!("^(?:{})$", kind.regex());
    let mut compiled = COMPILED.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(re) = compiled.get(&pattern) {
        return Ok(re.clone());
    }
    let re = regex::Regex::new(&pattern)
        .map_err(|e| Error::Internal(format!("kind regex for {what}: {e}")))?;
    compiled.insert(pattern, re.clone());
    Ok(re)
}

/// Largest VMID Proxmox accepts.
pub const VMID_MAX: u64 = 999_999_999;
/// Smallest VMID Proxmox accepts.
pub const VMID_MIN: u64 = 100;

/// One word of free text (the characters people type in a snapshot
/// description): letters, digits and the ASCII punctuation `_ . @ / , ' " ! % & ( ) ; : < >
/// ? ^ ` | } { ~ + -`, but not `-` first. Left out: `#`, `$` and `\` (sudoers' regex lexer,
/// see the module doc), `[` and `]` (bracket syntax that POSIX and Rust read differently), and
/// `*` and `=` (literal inside brackets, but `sudoers lint` rightly distrusts a rule whose
/// word can hold `*` or both `-` and `=`, so pxagent's own render stays lint-clean). sudo joins the argv with spaces before it
/// matches, so a word that could start with `-` could inject an option (`… --description x
/// --vmstate 1`); spaces are the only separator, so no other character can do that. On the
/// host nothing is a shell: pxagent quotes every word for the SSH command line (the gate
/// checks that quoting), and sudo executes pvesh with the argv as is. The order inside the
/// brackets keeps sudo's `check_pattern` quiet: no `?*+` after `?*+{`, `{` not before a digit.
const FREE_WORD: &str = concat!(
    "[A-Za-z0-9_.@/,'\"!%&();:<>?^`|}{~+]",
    "[A-Za-z0-9_.@/,'\"!%&();:<>?^`|}{~+-]{0,63}"
);

/// Checksum algorithms Proxmox's download-url accepts.
const CHECKSUM_ALGOS: &str = "(md5|sha1|sha224|sha256|sha384|sha512)";
/// A hex digest.
const CHECKSUM_HEX: &str = "[0-9a-fA-F]{32,128}";
/// The file name of an ISO volume: PVE's `ISO_EXT_RE_0` (`.iso` or `.img`), narrowed to
/// letters, digits, `_`, `.`, `-`, a letter or digit first, at most 200 characters (what the
/// root-side helper writes; PVE itself names no bound but the file system's 255).
const ISO_FILE: &str = "[A-Za-z0-9][A-Za-z0-9_.-]{0,195}[.](iso|img)";
/// The file name of a container template volume.
const TEMPLATE_FILE: &str = "[A-Za-z0-9][A-Za-z0-9_.-]{0,250}[.]tar[.](gz|xz|zst)";
/// A disk image file on `import` content.
const IMAGE_FILE: &str = "[A-Za-z0-9][A-Za-z0-9_.-]{0,240}[.](qcow2|raw|vmdk)";
/// An IPv4 address's shape (the client checks each part exactly: a small rule beats an
/// exact one that sudo's and Rust's regex size limits would refuse inside a long rule).
const IPV4: &str = "[0-9]{1,3}([.][0-9]{1,3}){3}";
/// An IPv4 or IPv6 address (IPv6 loosely; the client checks it exactly).
const IP_ANY: &str = "([0-9.]{7,15}|[0-9a-fA-F:]{2,39})";
/// One PVE tag (`$PVE_TAG_RE`, pve-common JSONSchema.pm), lower case, at most 64 characters.
const TAG: &str = "[a-z0-9_][a-z0-9_+.-]{0,63}";
/// One segment of a storage path (a directory storage's path, an NFS export): never `.` or
/// `..` (the first character is no dot) and never empty, at most 64 characters.
const PATH_SEGMENT: &str = "/[A-Za-z0-9_-][A-Za-z0-9._-]{0,63}";
/// The content types pxagent lets a storage hold. Never `snippets`: hook scripts live there,
/// and a hook script runs as root on the host.
pub const STORAGE_CONTENT_TYPES: &[&str] =
    &["iso", "vztmpl", "backup", "images", "rootdir", "import"];
/// The directories a directory storage may live below unless the sudoers render names others
/// (`sudoers render --storage-roots`).
pub const STORAGE_ROOTS_DEFAULT: &[&str] = &["/mnt", "/srv"];
/// Top-level directories that hold the host's system, its configuration, or kernel and device
/// files: no storage path and no storage root may be at or below them (nor `/` itself), whatever
/// roots a render names. `lib` stands for every `lib*` (`lib32`, `lib64`, `libx32`).
pub const SYSTEM_DIRS: &[&str] = &[
    "etc", "root", "usr", "var", "boot", "proc", "sys", "dev", "bin", "sbin", "lib", "run", "tmp",
];

/// The keys of a backup retention ([`Kind::Retention`], PVE's `prune-backups`), in the
/// order PVE prints them.
pub const RETENTION_KEYS: [&str; 6] = [
    "keep-last",
    "keep-hourly",
    "keep-daily",
    "keep-weekly",
    "keep-monthly",
    "keep-yearly",
];

/// The kind of a parameter value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A guest id, 100–999999999.
    Vmid,
    /// A cluster node name.
    Node,
    /// A snapshot name (PVE `pve-configid`), 2–40 characters, not `current`/`pending`.
    SnapName,
    /// A storage id.
    StorageId,
    /// A Proxmox task id.
    Upid,
    /// Free text (e.g. a snapshot description): words of safe characters, single spaces,
    /// no word starting with `-`.
    Text,
    /// Whole seconds, 0–9999.
    Seconds,
    /// A count, 1–99999.
    Count,
    /// A boolean switch: present or absent; on the wire it becomes `1`.
    Flag,
    /// A backup archive volume id: `local:backup/vzdump-qemu-100-2026_11_01-02_00_00.vma.zst`.
    Archive,
    /// An ISO volume id: `local:iso/debian-13.2.0-amd64-netinst.iso`.
    IsoVolume,
    /// A container template volume id: `local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst`.
    TemplateVolume,
    /// A template name from the appliance index: `debian-12-standard_12.7-1_amd64.tar.zst`.
    TemplateName,
    /// A file name for a download: letters, digits, `._-`, no slash.
    FileName,
    /// An http(s) URL without credentials, query or fragment.
    Url,
    /// `ALGO:HEX` (`sha256:…`); parts `{name:0}` and `{name:1}` in templates.
    Checksum,
    /// A guest configuration's `digest` as PVE reports it (SHA-1: 40 lower-case hex digits).
    Digest,
    /// A guest name or container host name (PVE `dns-name`).
    GuestName,
    /// Memory in MiB, 16–4194304.
    Mebibytes,
    /// CPU cores, 1–512.
    Cores,
    /// Disk size in GiB, 1–65536.
    Gibibytes,
    /// A Linux bridge: `vmbr0`.
    Bridge,
    /// One of a fixed set of values.
    Choice(&'static [Choice]),
    /// A command to run inside a guest: the program, then its arguments, as a JSON array of
    /// strings on the wire (`["uname","-a"]`). Expanded one argv word per element by
    /// [`super::Arg::List`]. Any characters but NUL: the guest receives an argv, no shell.
    GuestArgv,
    /// An absolute path inside a guest: no NUL or other control characters, no `..`.
    GuestPath,
    /// Data handed to a guest (stdin for the guest agent, a file's base64): any characters
    /// but NUL, at most 64 KiB (the guest agent's own limits are checked by the exec flow).
    GuestData,
    /// A process id inside a guest (as the guest agent reports it).
    Pid,
    /// Memory in MiB that may also be 0 (off): a VM's balloon target, a container's swap.
    MebibytesOrOff,
    /// PVE tags (`pve-tag`, lower case here) joined by `;`: `web;prod`, at most 16.
    Tags,
    /// A VM disk that can be resized: `scsi0`…`scsi30`, `virtio0`…`virtio15`, `sata0`…`sata5`,
    /// `ide0`…`ide3` (qemu-server `valid_drive_names` minus EFI, TPM and unused slots).
    VmDisk,
    /// A container volume: `rootfs`, `mp0`…`mp255` (pve-container `valid_volume_keys`).
    CtDisk,
    /// How much to add to a disk: `+` then a whole number and a unit `K`, `M`, `G` or `T`.
    /// Proxmox takes a size without `+` as the new absolute size and cannot shrink a disk;
    /// pxagent only ever grows one.
    GrowSize,
    /// A disk image's file name on a storage's `import` content: `NAME.qcow2`, `.raw` or
    /// `.vmdk` (what PVE's download-url stores there).
    ImageFile,
    /// A disk image on a storage's `import` content: `local:import/debian-13.qcow2`. The only
    /// source `import-from` ever gets: never a host path.
    ImportVolume,
    /// A cloud-init user name: `[a-z_][a-z0-9_-]{0,31}`.
    CiUser,
    /// OpenSSH public keys, one per line; URL-encoded on the wire ([`super::cloud`]).
    SshKeys,
    /// A VM's IPv4 configuration for cloud-init: `dhcp`, `CIDR`, `CIDR,gw=ADDR`; on the wire
    /// `ip=…` ([`super::cloud::parse_ipconfig`]).
    IpConfig,
    /// One to three DNS servers joined by `,`.
    Nameservers,
    /// A whole disk of the host by its device path: `/dev/sdX`, `/dev/vdX` or
    /// `/dev/nvmeNnM` (strictly inside PVE's `^/dev/[a-zA-Z0-9\/]+$`: no partition, no
    /// `/dev/disk/by-…` link, no other device).
    BlockDevice,
    /// A point in time for the host's journal: Unix seconds on the wire; the client also
    /// takes an RFC 3339 time or a date (midnight UTC) and sends its seconds.
    Epoch,
    /// A directory storage's path: absolute, at least two segments, each of letters, digits,
    /// `_`, `-` and `.` but never `.`, `..` or empty, and never at or below a [`SYSTEM_DIRS`]
    /// directory. The host's sudoers admits only paths below its storage roots (by default
    /// [`STORAGE_ROOTS_DEFAULT`]; see [`storage_path_regex`]).
    StoragePath,
    /// An NFS export on the server: an absolute path with the segments of
    /// [`Kind::StoragePath`] (it names a directory of another machine, so no roots apply).
    ExportPath,
    /// An NFS server: an IPv4 address or a DNS name (PVE `pve-storage-server`).
    Server,
    /// An LVM volume group or thin pool name (PVE `pve-storage-vgname`, lvm(8)): letters,
    /// digits, `_`, `.`, `+`, `-`, not `-` or `.` first, 2-127 characters.
    VgName,
    /// A ZFS pool or dataset: `tank`, `rpool/data`; letters, digits, `_`, `.`, `-` per
    /// component, at most 8 components.
    ZfsPool,
    /// Storage content types joined by `,` (`iso,backup`), each one of
    /// [`STORAGE_CONTENT_TYPES`], none twice. Never `snippets`.
    ContentList,
    /// A file on the machine pxagent runs on (`iso upload FILE`): read by the client, never
    /// part of a command line.
    LocalFile,
    /// An ISO image's file name on a storage ([`ISO_FILE`]): `NAME.iso` or `NAME.img`.
    IsoName,
    /// An exact size in bytes, 1 B to 1 TiB (what the helper takes).
    ByteSize,
    /// A SHA-256 digest: 64 lower-case hex digits.
    Sha256,
    /// How full a file system may be after a write, in percent: 1-99.
    FillPercent,
    /// A bridge pxagent may add or remove: `vmbr1` to `vmbr9999`, never `vmbr0` (the bridge
    /// a PVE install puts the host's own address on).
    NewBridge,
    /// A new bridge's ports joined by `,`: one to eight NICs, bonds or their VLANs (`eno2`,
    /// `bond0`, `enp3s0.20`); never another bridge.
    BridgePorts,
    /// An IPv4 address with its prefix length for a bridge: `10.10.0.1/24` (a host address:
    /// neither the network's nor its broadcast address).
    Cidr4,
    /// How long the host waits for pxagent to reach it again after a network apply before it
    /// puts the old configuration back: 30-600 seconds.
    RevertWindow,
    /// The token pxagent's helper printed for an armed network change: 32 lower-case hex
    /// digits.
    NetToken,
    /// The ports of a firewall rule: numbers 1-65535 and ranges `LOW:HIGH` joined by `,`, at
    /// most 15 ports with a range counting as two (`22`, `80,443`, `8000:8080`). Never a service name: pxagent must know which
    /// ports a rule names ([`crate::catalog::firewall`]).
    FwPorts,
    /// A firewall rule's source or destination: IPv4 or IPv6 addresses and networks
    /// (`10.0.0.0/24`), up to 16 of one family joined by `,`, or one IP set `+NAME`.
    FwAddr,
    /// An IP set's name (PVE `ipset-name`): a letter, then letters, digits, `_` or `-`, 2-64
    /// characters.
    IpsetName,
    /// One IPv4 or IPv6 address (an IP set's entry). No network: pvesh takes an entry's
    /// removal from its path, which a `/` would split.
    IpAddr,
    /// A firewall rule's position in its list: 0-9999.
    RulePos,
    /// An id in PVE's `pve-configid` form (an HA rule's, a backup job's): a letter, then
    /// letters, digits, `_` or `-`, 2-50 characters (a job's path takes at most 50).
    ConfigId,
    /// HA resources of a rule: `vm:ID` or `ct:ID` joined by `,`, 1-16 of them, none twice.
    HaSids,
    /// The nodes of an HA node-affinity rule, each with an optional priority 0-9999:
    /// `pve1:2,pve2`, 1-16 of them, none twice.
    HaNodes,
    /// How many times the HA manager retries a guest: 0-99.
    Tries,
    /// A PVE calendar event (`daily`, `sat 02:00`, `mon..fri 21:30`, `0/30`), without `*`
    /// (`0/15` says what `*/15` does): 1-3 words ([`crate::catalog::calendar`]).
    Calendar,
    /// VMIDs joined by `,`: 1-64 of them, none twice.
    VmidList,
    /// A resource pool's id (PVE `pve-poolid`): letters, digits, `_`, `-`, 1-64 characters.
    PoolId,
    /// Backup retention: `keep-last|hourly|daily|weekly|monthly|yearly=N` joined by `,`, each
    /// key once, N 1-9999.
    Retention,
}

/// The largest [`Kind::ByteSize`]: 1 TiB.
pub const BYTE_SIZE_MAX: u64 = 1 << 40;

/// The ERE of a directory storage's path below one of the roots in `roots_group`, an ERE
/// group of absolute paths (`(/mnt|/srv)`, see [`storage_roots_group`]): [`Kind::StoragePath`]'s
/// sudoers regex. A render with other roots (`--storage-roots`) puts its own group here.
pub fn storage_path_regex(roots_group: &str) -> String {
    format!("{roots_group}({PATH_SEGMENT}){{0,14}}")
}

/// Where Proxmox mounts its network storages (NFS, CIFS, CephFS, …: `/mnt/pve/STORAGE`). A
/// directory storage there would lie over the admin's mounts or inside a share whose files the
/// share's server writes, so no storage path and no storage root is at or below it.
pub const PVE_MOUNTS: &str = "/mnt/pve";

/// A [`PATH_SEGMENT`] that is not `/pve`: the first segment below `/mnt` ([`PVE_MOUNTS`]).
/// ERE has no negation, so it spells out every way a segment can differ from `pve`.
const SEGMENT_NOT_PVE: &str = "(/[A-Za-oq-z0-9_-][A-Za-z0-9._-]{0,63}|/p|/p[A-Za-uw-z0-9._-][A-Za-z0-9._-]{0,62}|/pv|/pv[A-Za-df-z0-9._-][A-Za-z0-9._-]{0,61}|/pve[A-Za-z0-9._-]{1,61})";

/// The ERE group of these storage roots, each with the first segment below it:
/// `(/mnt(SEGMENT_NOT_PVE)|/srv(SEGMENT))`, each `.` of a root in a bracket so that it is literal.
/// Below the parent of [`PVE_MOUNTS`] that first segment is never `pve`. The roots are checked
/// first ([`storage_root_problem`]).
pub fn storage_roots_group<S: AsRef<str>>(roots: &[S]) -> String {
    let alts: Vec<String> = roots
        .iter()
        .map(|r| {
            let r = r.as_ref();
            let first = if PVE_MOUNTS.rsplit_once('/').map(|(parent, _)| parent) == Some(r) {
                SEGMENT_NOT_PVE.to_string()
            } else {
                format!("({PATH_SEGMENT})")
            };
            format!("{}{first}", r.replace('.', "[.]"))
        })
        .collect();
    format!("({})", alts.join("|"))
}

/// The ERE group of the NFS servers an admin named (`sudoers render --nfs-servers`):
/// `(192[.]0[.]2[.]30|nas)`, each `.` in a bracket so that it is literal. Each server is a
/// [`Kind::Server`], checked first.
pub fn nfs_servers_group<S: AsRef<str>>(servers: &[S]) -> String {
    let alts: Vec<String> = servers
        .iter()
        .map(|s| s.as_ref().replace('.', "[.]"))
        .collect();
    format!("({})", alts.join("|"))
}

/// The two forms the first segment below a storage root takes in [`storage_roots_group`]: any
/// segment, or (below the parent of [`PVE_MOUNTS`]) any but `pve`. The preflight recognises a
/// render with any roots by them.
pub fn storage_root_segment_forms() -> [String; 2] {
    [format!("({PATH_SEGMENT})"), SEGMENT_NOT_PVE.to_string()]
}

/// Directories whose files someone other than root writes: the agent account's own places
/// (homes, temporary and runtime directories, pxagent's state) and Proxmox's network mounts. No
/// storage path or root may be at or below one ([`SYSTEM_DIRS`] and [`reach_problem`] refuse
/// them all, a unit test says so), and the preflight fails a sudo rule that admits one.
pub const UNTRUSTED_DIRS: &[&str] = &[
    "/home",
    "/tmp",
    "/var/tmp",
    "/dev/shm",
    "/run",
    PVE_MOUNTS,
    "/root",
    "/var/lib/pxagent",
];

/// Why `path` (absolute, checked segments) is a place the agent account can reach, or where
/// another party's files live, if it is: home directories (the agent's own among them) and
/// [`PVE_MOUNTS`]. Directories the account could write elsewhere (`/tmp`, `/var/tmp`,
/// `/dev/shm`, `/run`) are [`SYSTEM_DIRS`] already.
fn reach_problem(path: &str) -> Option<String> {
    let under = |dir: &str| path == dir || path.starts_with(&format!("{dir}/"));
    if under("/home") {
        return Some(
            "/home holds accounts' own directories (the agent's among them): a storage there holds what an account can write, and root-run Proxmox code trusts a storage's files".into(),
        );
    }
    if under(PVE_MOUNTS) {
        return Some(format!(
            "{PVE_MOUNTS} is where Proxmox mounts network storages: a directory storage there would lie over the admin's mounts or inside a share whose server writes its files"
        ));
    }
    None
}

/// Why `path` may not be a storage root, if it may not: it must be absolute, of one to eight
/// segments of [`Kind::StoragePath`]'s characters (no `.`, `..`, empty segment or trailing
/// `/`), and neither `/` nor at or below one of the [`SYSTEM_DIRS`].
pub fn storage_root_problem(path: &str) -> Option<String> {
    let re = regex::Regex::new(&format!("^({PATH_SEGMENT}){{1,8}}$")).expect("static regex");
    if path == "/" {
        return Some("`/` is the whole host".into());
    }
    if !re.is_match(path) {
        return Some(
            "a root is an absolute path of 1-8 segments of letters, digits, '_', '-' and '.' (never '.', '..', '//' or a trailing '/')".into(),
        );
    }
    system_dir_problem(path).or_else(|| reach_problem(path))
}

/// Why `path` (absolute, checked segments) is at or below a system directory, if it is.
fn system_dir_problem(path: &str) -> Option<String> {
    let first = path.trim_start_matches('/').split('/').next().unwrap_or("");
    SYSTEM_DIRS
        .iter()
        .any(|d| first == *d || (*d == "lib" && first.starts_with("lib")))
        .then(|| format!("/{first} holds the host's system; no storage may live there"))
}

/// Most words a guest command may have.
pub const GUEST_ARGV_MAX_WORDS: usize = 256;
/// Most bytes a guest command may have, all words together.
pub const GUEST_ARGV_MAX_BYTES: usize = 32 * 1024;
/// Most bytes of [`Kind::GuestData`] (PVE's `input-data` maxLength, 64 KiB).
pub const GUEST_DATA_MAX_BYTES: usize = 64 * 1024;

/// The ERE of a backup archive volume id of these guest types (`(qemu|lxc)`, `qemu`, `lxc`)
/// whose guest VMID (`vzdump-qemu-<VMID>-…`) matches `vmid`: [`Kind::Archive`]'s own regex,
/// or, in a fenced sudoers rule, the fence (restoring, removing or pruning the
/// backups of a guest outside the fence is refused by sudo).
pub fn archive_regex(types: &str, vmid: &str) -> String {
    format!(
        "[a-z][a-z0-9_.-]{{0,62}}[a-z0-9]:backup/vzdump-{types}-{vmid}\
         -[0-9]{{4}}_[0-9]{{2}}_[0-9]{{2}}-[0-9]{{2}}_[0-9]{{2}}_[0-9]{{2}}\
         [.](vma|tar)([.](zst|gz|lzo))?"
    )
}

/// Parse a [`Kind::GuestArgv`] wire value back into its words.
pub fn guest_argv(wire: &str) -> Vec<String> {
    serde_json::from_str(wire).unwrap_or_default()
}

/// One value of a [`Kind::Choice`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Choice {
    /// What the user types.
    pub cli: &'static str,
    /// What is sent to Proxmox.
    pub wire: &'static str,
    /// Keep only result entries whose `type` is this (e.g. `ct` asks Proxmox for `vm`,
    /// which means QEMU and LXC guests, and keeps the `lxc` ones).
    pub keep_type: Option<&'static str>,
}

impl Kind {
    /// The ERE for one `:`-separated part of a value (`{checksum:0}` in a template).
    pub fn part_regex(self, idx: usize) -> String {
        match (self, idx) {
            (Kind::Checksum, 0) => CHECKSUM_ALGOS.into(),
            (Kind::Checksum, 1) => CHECKSUM_HEX.into(),
            // `STORAGE:iso/NAME.iso`: the storage (for the `/storage/{id}` path segment), then
            // the volume name.
            (Kind::IsoVolume | Kind::TemplateVolume | Kind::ImportVolume, 0) => {
                Kind::StorageId.regex()
            }
            (Kind::ImportVolume, 1) => format!("import/{IMAGE_FILE}"),
            (Kind::IsoVolume, 1) => format!("iso/{ISO_FILE}"),
            (Kind::TemplateVolume, 1) => format!("vztmpl/{TEMPLATE_FILE}"),
            _ => panic!("{self:?} has no part {idx}"),
        }
    }

    /// The ERE (unanchored) of what a caller gives for this kind (the command line, an MCP
    /// argument), or `None` where no one expression says it and only [`Kind::parse`] can: the
    /// pattern of an MCP tool's input schema. Most kinds are given as they travel; the ones
    /// whose given form differs from their wire form ([`Kind::regex`]) say so here, so a
    /// schema never demands the wire form (`ip=…`, URL-encoded keys, Unix seconds). The
    /// tests hold every kind's example and other given forms to this pattern.
    pub fn input_regex(self) -> Option<String> {
        match self {
            // Plain OpenSSH keys, one per line; the client URL-encodes them.
            Kind::SshKeys => None,
            // Seconds, an RFC 3339 time or a date: the client turns them into seconds.
            Kind::Epoch => None,
            // The client adds `ip=`, and takes it given.
            Kind::IpConfig => Some(format!(
                "(ip=)?(dhcp|{IPV4}/([89]|[12][0-9]|3[0-2])(,gw={IPV4})?)"
            )),
            // Any path of the form; the client and the host's rules check where it lies.
            Kind::StoragePath => Some(format!("({PATH_SEGMENT}){{2,16}}")),
            Kind::GuestArgv | Kind::GuestData | Kind::Flag | Kind::Choice(_) => None,
            _ => match self.regex() {
                r if r == ".*" => None,
                r => Some(r),
            },
        }
    }

    /// The POSIX ERE (unanchored) that matches every wire value of this kind.
    pub fn regex(self) -> String {
        match self {
            Kind::Vmid => "[1-9][0-9]{2,8}".into(),
            Kind::Node => "[a-zA-Z0-9]([a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?".into(),
            Kind::SnapName => "[a-zA-Z][a-zA-Z0-9_-]{1,39}".into(),
            Kind::StorageId => "[a-z][a-z0-9_.-]{0,62}[a-z0-9]".into(),
            // UPID:node:pid:pstart(8-9 hex):starttime:type:id:user: as PVE decodes it
            // (pve-common f665029eac78 src/PVE/UPID.pm `decode`: type, id and user are
            // `[^:\s/]+`, `[^:\s/]*`, `[^:\s/]+`; id may be empty, user may be a token
            // `root@pam!api`). Here those fields are printable ASCII but `:`, `/` and `=` —
            // `!-.`, `0-9`, `;<`, `>-~` — so no space, control or non-ASCII byte reaches a path
            // or sudoers, no word can read as `--option=value` (`sudoers lint`'s rule), and the
            // bounds stay within what sudo's regex check accepts (255).
            Kind::Upid => concat!(
                "UPID:[a-zA-Z0-9]([a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?",
                ":[0-9A-Fa-f]{8}:[0-9A-Fa-f]{8,9}:[0-9A-Fa-f]{8}",
                ":[!-.0-9;<>-~]{1,64}:[!-.0-9;<>-~]{0,255}:[!-.0-9;<>-~]{1,128}:"
            )
            .into(),
            Kind::Text => format!("{FREE_WORD}( {FREE_WORD}){{0,31}}"),
            Kind::Seconds => "[0-9]{1,4}".into(),
            Kind::Count => "[1-9][0-9]{0,4}".into(),
            Kind::Flag => "1".into(),
            Kind::Archive => archive_regex("(qemu|lxc)", "[1-9][0-9]{2,8}"),
            Kind::IsoVolume => format!("{}:iso/{ISO_FILE}", Kind::StorageId.regex()),
            Kind::TemplateVolume => format!("{}:vztmpl/{TEMPLATE_FILE}", Kind::StorageId.regex()),
            Kind::TemplateName => "[A-Za-z0-9][A-Za-z0-9_.-]{0,250}[.]tar[.](gz|xz|zst)".into(),
            Kind::FileName => "[A-Za-z0-9][A-Za-z0-9_.-]{0,250}".into(),
            // An optional query of unreserved characters, `%`, `+`, `&` and `=`.
            // Inside a regex argument sudoers' lexer takes every character but `#`, `\`,
            // `$` and a newline verbatim up to the closing `$` (plugins/sudoers/toke.l,
            // GOTREGEX), so `=` and `&` need no escape, and none of them can end the word.
            Kind::Url => "https?://[A-Za-z0-9.-]{1,253}(:[0-9]{1,5})?(/[A-Za-z0-9._~%+-]{0,255}){0,32}([?][A-Za-z0-9._~%+&=-]{0,255})?".into(),
            Kind::Checksum => format!("{}:{}", CHECKSUM_ALGOS, CHECKSUM_HEX),
            Kind::Digest => "[0-9a-f]{40}".into(),
            Kind::GuestName => "[a-zA-Z0-9]([a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?([.][a-zA-Z0-9]([a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?){0,8}".into(),
            Kind::Mebibytes => "[1-9][0-9]{1,6}".into(),
            Kind::Cores => "[1-9][0-9]{0,2}".into(),
            Kind::Gibibytes => "[1-9][0-9]{0,4}".into(),
            Kind::Bridge => "vmbr[0-9]{1,4}".into(),
            // Guest commands and data are the capability itself (root in that guest): after the
            // op's fixed, anchored prefix, sudoers admits any words here. `.*` is the only
            // form sudo can take (its regex checker refuses bounds above 255, and glibc's
            // regcomp would expand a nested bound into tens of thousands of states).
            Kind::GuestArgv | Kind::GuestData => ".*".into(),
            Kind::GuestPath => "/.*".into(),
            Kind::Pid => "[1-9][0-9]{0,9}".into(),
            Kind::MebibytesOrOff => "(0|[1-9][0-9]{1,6})".into(),
            Kind::Tags => format!("{TAG}(;{TAG}){{0,15}}"),
            Kind::VmDisk => {
                "(scsi([0-9]|[12][0-9]|30)|virtio([0-9]|1[0-5])|sata[0-5]|ide[0-3])".into()
            }
            Kind::CtDisk => {
                "(rootfs|mp([0-9]|[1-9][0-9]|1[0-9]{2}|2[0-4][0-9]|25[0-5]))".into()
            }
            Kind::GrowSize => "[+][1-9][0-9]{0,5}[KMGT]".into(),
            Kind::ImageFile => IMAGE_FILE.into(),
            Kind::ImportVolume => format!("{}:import/{IMAGE_FILE}", Kind::StorageId.regex()),
            Kind::CiUser => "[a-z_][a-z0-9_-]{0,31}".into(),
            // URL-encoded keys: letters, digits, `-_.` and `%XX` (cloud.rs checks each key).
            // What `cloud::parse_sshkeys` sends: lines joined by `%0A`, each starting with a key
            // type, then only the characters of a key's base64 and of the comments the client
            // admits (`%20 %2B %2F %3A %3D %40`). No line can open with authorized_keys options
            // (they come before the type), `command="…"` needs `%22` and an option list `%2C`,
            // and no `%0D`, empty line or other control character passes.
            Kind::SshKeys => {
                let line = "(ssh-|ecdsa-|sk-)([A-Za-z0-9._-]|%(2[0BF]|3[AD]|40))+";
                format!(
                    "{line}(%0A{line}){{0,{}}}",
                    super::cloud::MAX_KEYS - 1
                )
            }
            // `=` and `,` in brackets: outside them sudoers' lexer would read them as syntax.
            Kind::IpConfig => format!(
                "ip[=](dhcp|{IPV4}/([89]|[12][0-9]|3[0-2])([,]gw[=]{IPV4})?)"
            ),
            Kind::Nameservers => format!("{IP_ANY}([,]{IP_ANY}){{0,2}}"),
            Kind::BlockDevice => {
                "/dev/(sd[a-z]{1,3}|vd[a-z]{1,3}|nvme[0-9]{1,3}n[0-9]{1,3})".into()
            }
            Kind::Epoch => "(0|[1-9][0-9]{0,10})".into(),
            Kind::StoragePath => {
                storage_path_regex(&storage_roots_group(STORAGE_ROOTS_DEFAULT))
            }
            Kind::ExportPath => format!("({PATH_SEGMENT}){{1,16}}"),
            // Never on a command line: any text ([`Kind::parse`] refuses control characters).
            Kind::LocalFile => ".+".into(),
            Kind::IsoName => ISO_FILE.into(),
            Kind::ByteSize => "[1-9][0-9]{0,12}".into(),
            Kind::Sha256 => "[0-9a-f]{64}".into(),
            Kind::FillPercent => "([1-9]|[1-9][0-9])".into(),
            Kind::NewBridge => "vmbr[1-9][0-9]{0,3}".into(),
            Kind::BridgePorts => {
                let port = "(en|eth|bond)[a-z0-9]{1,13}([.][1-9][0-9]{0,3})?";
                format!("{port}([,]{port}){{0,7}}")
            }
            Kind::Cidr4 => "[0-9]{1,3}([.][0-9]{1,3}){3}/[0-9]{1,2}".into(),
            Kind::RevertWindow => "([3-9][0-9]|[1-5][0-9][0-9]|600)".into(),
            Kind::NetToken => "[0-9a-f]{32}".into(),
            Kind::FwPorts => {
                let one = "[1-9][0-9]{0,4}([:][1-9][0-9]{0,4})?";
                format!("{one}([,]{one}){{0,14}}")
            }
            Kind::FwAddr => {
                let one = format!("{IP_ANY}(/[0-9]{{1,3}})?");
                format!("([+][A-Za-z][A-Za-z0-9_-]{{1,63}}|{one}([,]{one}){{0,15}})")
            }
            Kind::IpsetName => "[A-Za-z][A-Za-z0-9_-]{1,63}".into(),
            Kind::IpAddr => IP_ANY.into(),
            Kind::RulePos => "(0|[1-9][0-9]{0,3})".into(),
            Kind::ConfigId => "[A-Za-z][A-Za-z0-9_-]{1,49}".into(),
            Kind::HaSids => {
                let one = "(vm|ct):[1-9][0-9]{2,8}";
                format!("{one}([,]{one}){{0,15}}")
            }
            Kind::HaNodes => {
                let one = format!("{}([:](0|[1-9][0-9]{{0,3}}))?", Kind::Node.regex());
                format!("{one}([,]{one}){{0,15}}")
            }
            Kind::Tries => "(0|[1-9][0-9]?)".into(),
            Kind::Calendar => {
                let word = "[a-z0-9][a-z0-9.,:/-]{0,39}";
                format!("{word}( {word}){{0,2}}")
            }
            Kind::VmidList => "[1-9][0-9]{2,8}([,][1-9][0-9]{2,8}){0,63}".into(),
            Kind::PoolId => "[A-Za-z0-9_][A-Za-z0-9_-]{0,63}".into(),
            Kind::Retention => {
                let keys: Vec<&str> = RETENTION_KEYS
                    .iter()
                    .map(|k| k.trim_start_matches("keep-"))
                    .collect();
                let one = format!("keep-({})[=][1-9][0-9]{{0,3}}", keys.join("|"));
                format!("{one}([,]{one}){{0,5}}")
            }
            Kind::Server => Kind::GuestName.regex(),
            Kind::VgName => "[a-zA-Z0-9_+][a-zA-Z0-9_.+-]{1,126}".into(),
            Kind::ZfsPool => {
                "[a-zA-Z0-9_][a-zA-Z0-9_.-]{0,63}(/[a-zA-Z0-9_][a-zA-Z0-9_.-]{0,63}){0,7}".into()
            }
            Kind::ContentList => {
                let one = format!("({})", STORAGE_CONTENT_TYPES.join("|"));
                format!("{one}([,]{one}){{0,{}}}", STORAGE_CONTENT_TYPES.len() - 1)
            }
            Kind::Choice(choices) => {
                let mut wires: Vec<&str> = Vec::new();
                for c in choices {
                    if !wires.contains(&c.wire) {
                        wires.push(c.wire);
                    }
                }
                format!("({})", wires.join("|"))
            }
        }
    }

    /// A short human name for messages and help ("a VMID (100-999999999)").
    pub fn describe(self) -> String {
        match self {
            Kind::Vmid => "a VMID (100-999999999)".into(),
            Kind::Node => "a node name (letters, digits, inner '-')".into(),
            Kind::SnapName => {
                "a snapshot name (2-40 characters: a letter, then letters, digits, '_' or '-')".into()
            }
            Kind::StorageId => "a storage id (lower-case letters, digits, '-', '_', '.')".into(),
            Kind::Upid => "a task id (UPID:node:…:user:)".into(),
            Kind::Text => "text of ASCII letters, digits and punctuation except # $ \\ [ ] * =, in words separated by single spaces, no word starting with '-', at most 200 characters".into(),
            Kind::Seconds => "whole seconds (0-9999)".into(),
            Kind::Count => "a count (1-99999)".into(),
            Kind::Flag => "a switch".into(),
            Kind::Archive => "a backup volume (STORAGE:backup/vzdump-qemu|lxc-VMID-DATE.vma|tar[.zst|.gz|.lzo])".into(),
            Kind::IsoVolume => "an ISO volume (STORAGE:iso/NAME.iso)".into(),
            Kind::TemplateVolume => "a container template volume (STORAGE:vztmpl/NAME.tar.zst)".into(),
            Kind::TemplateName => "a template name from `pxagent template list`".into(),
            Kind::FileName => "a file name (letters, digits, '.', '_', '-')".into(),
            Kind::Url => "an http or https URL without user:password or fragment (a query may hold letters, digits and . _ ~ % + & = -)".into(),
            Kind::Checksum => "ALGO:HEX with ALGO one of md5, sha1, sha224, sha256, sha384, sha512".into(),
            Kind::Digest => "the config's digest from `vm config`/`ct config` (40 lower-case hex digits)".into(),
            Kind::GuestName => "a DNS-style name (letters, digits, inner '-', dots between labels)".into(),
            Kind::Mebibytes => "MiB (16-4194304)".into(),
            Kind::Cores => "cores (1-512)".into(),
            Kind::Gibibytes => "GiB (1-65536)".into(),
            Kind::Bridge => "a bridge such as vmbr0".into(),
            Kind::Choice(choices) => {
                let names: Vec<&str> = choices.iter().map(|c| c.cli).collect();
                format!("one of {}", names.join(", "))
            }
            Kind::GuestArgv => "a program and its arguments (no NUL bytes)".into(),
            Kind::GuestPath => {
                "an absolute guest path without control characters or '..'".into()
            }
            Kind::GuestData => "data without NUL bytes, at most 64 KiB".into(),
            Kind::Pid => "a process id".into(),
            Kind::MebibytesOrOff => "MiB (0 = off, or 16-4194304)".into(),
            Kind::Tags => "tags joined by ';' (each: lower-case letters, digits, '_', '+', '.', '-'; at most 16)".into(),
            Kind::VmDisk => "a VM disk: scsi0-30, virtio0-15, sata0-5 or ide0-3".into(),
            Kind::CtDisk => "a container volume: rootfs or mp0-255".into(),
            Kind::GrowSize => "the size to add: '+', a whole number and K, M, G or T, e.g. +1G (disks only grow)".into(),
            Kind::ImageFile => "an image file name ending in .qcow2, .raw or .vmdk (letters, digits, '.', '_', '-')".into(),
            Kind::ImportVolume => "a disk image on import content (STORAGE:import/NAME.qcow2|raw|vmdk, see `pxagent image list`)".into(),
            Kind::CiUser => "a user name (lower-case letters, digits, '_', '-'; at most 32)".into(),
            Kind::SshKeys => "OpenSSH public keys, one per line (no authorized_keys options)".into(),
            Kind::IpConfig => "dhcp, or an IPv4 address with its prefix (10.0.0.5/24), optionally ,gw=GATEWAY".into(),
            Kind::Nameservers => "one to three DNS server addresses joined by ','".into(),
            Kind::BlockDevice => "a whole disk: /dev/sdX, /dev/vdX or /dev/nvmeNnM (see `pxagent node disks`)".into(),
            Kind::Epoch => "Unix seconds, an RFC 3339 time (2026-01-02T03:04:05Z) or a date (2026-01-02, midnight UTC)".into(),
            Kind::StoragePath => format!(
                "a directory below the host's storage roots (by default {}): an absolute path whose segments are letters, digits, '_', '-' and '.', never '.', '..' or empty, and never below a system directory (/etc, /root, /usr, /var, …)",
                STORAGE_ROOTS_DEFAULT.join(" and ")
            ),
            Kind::ExportPath => "an absolute export path whose segments are letters, digits, '_', '-' and '.', never '.', '..' or empty".into(),
            Kind::Server => "an IPv4 address or a DNS name".into(),
            Kind::VgName => "an LVM name (letters, digits, '_', '.', '+', '-'; 2-127 characters, not '-' or '.' first)".into(),
            Kind::ZfsPool => "a ZFS pool or dataset such as rpool/data (letters, digits, '_', '.', '-' per component)".into(),
            Kind::ContentList => format!(
                "content types joined by ',', each one of {} (never snippets), none twice",
                STORAGE_CONTENT_TYPES.join(", ")
            ),
            Kind::LocalFile => "a file on this machine".into(),
            Kind::IsoName => "an ISO file name ending in .iso or .img (letters, digits, '.', '_', '-'; a letter or digit first; at most 200 characters; no '..')".into(),
            Kind::ByteSize => "a size in bytes (1 to 1 TiB)".into(),
            Kind::Sha256 => "a SHA-256 digest (64 lower-case hex digits)".into(),
            Kind::FillPercent => "a percentage, 1-99".into(),
            Kind::NewBridge => "a bridge vmbr1 to vmbr9999 (never vmbr0)".into(),
            Kind::BridgePorts => "one to eight NICs, bonds or VLANs joined by ',' (eno2, bond0, enp3s0.20)".into(),
            Kind::Cidr4 => "an IPv4 host address with its prefix length (10.10.0.1/24)".into(),
            Kind::RevertWindow => "seconds, 30-600".into(),
            Kind::NetToken => "the token of an armed network change (32 hex digits)".into(),
            Kind::FwPorts => "ports 1-65535 or ranges LOW:HIGH joined by ',', at most 15 ports with a range as two (22, 80,443, 8000:8080)".into(),
            Kind::FwAddr => "addresses or networks (as their first address) of one family, up to 16 joined by ',' (10.0.0.0/24, 192.0.2.7), or an IP set +NAME".into(),
            Kind::IpsetName => "an IP set name (a letter, then letters, digits, '_', '-'; 2-64 characters)".into(),
            Kind::IpAddr => "an IPv4 or IPv6 address".into(),
            Kind::RulePos => "a rule's position (0-9999, see the rules list)".into(),
            Kind::ConfigId => "an id (a letter, then letters, digits, '_', '-'; 2-50 characters)".into(),
            Kind::HaSids => "HA resources vm:ID or ct:ID joined by ',', at most 16, none twice (vm:100,ct:200)".into(),
            Kind::HaNodes => "nodes with an optional priority 0-9999 joined by ',', at most 16, none twice (pve1:2,pve2)".into(),
            Kind::Tries => "a number of tries (0-99)".into(),
            Kind::Calendar => "a PVE calendar event without '*' (daily, sat 02:00, mon..fri 21:30, 0/30 for every 30 minutes)".into(),
            Kind::VmidList => "VMIDs joined by ',', at most 64, none twice (100,101)".into(),
            Kind::PoolId => "a pool id (letters, digits, '_', '-')".into(),
            Kind::Retention => "keep-last, keep-hourly, keep-daily, keep-weekly, keep-monthly, keep-yearly =N (1-9999) joined by ',', each once (keep-last=3,keep-daily=7)".into(),
        }
    }

    /// A representative valid value (used by `catalog` examples and the sudo proof tests).
    pub fn example(self) -> &'static str {
        match self {
            Kind::Vmid => "100",
            Kind::Node => "pve1",
            Kind::SnapName => "pre-upgrade",
            Kind::StorageId => "local",
            Kind::Upid => "UPID:pve1:0000A1B2:00C0FFEE:6752F0A1:qmstart:100:root@pam:",
            Kind::Text => "before the kernel upgrade",
            Kind::Seconds => "120",
            Kind::Count => "50",
            Kind::Flag => "1",
            Kind::Archive => "local:backup/vzdump-qemu-100-2026_11_01-02_00_00.vma.zst",
            Kind::IsoVolume => "local:iso/debian-13.2.0-amd64-netinst.iso",
            Kind::TemplateVolume => "local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst",
            Kind::TemplateName => "debian-12-standard_12.7-1_amd64.tar.zst",
            Kind::FileName => "debian-13.2.0-amd64-netinst.iso",
            Kind::Url => {
                "https://cdimage.debian.org/debian-cd/current/amd64/iso-cd/debian-13.2.0-amd64-netinst.iso"
            }
            Kind::Checksum => {
                "sha256:0e2c6b1c3ad7c4d1b3f3c1f0a2b5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7"
            }
            Kind::Digest => "3c6e0b8a9c15224a8228b9a98ca1531d7d3f2e1b",
            Kind::GuestName => "web01",
            Kind::Mebibytes => "2048",
            Kind::Cores => "2",
            Kind::Gibibytes => "32",
            Kind::Bridge => "vmbr0",
            Kind::Choice(choices) => choices[0].cli,
            Kind::GuestArgv => r#"["uname","-a"]"#,
            Kind::GuestPath => "/tmp/pxagent-example.txt",
            Kind::GuestData => "aGVsbG8K",
            Kind::Pid => "4242",
            Kind::MebibytesOrOff => "1024",
            Kind::Tags => "web;prod",
            Kind::VmDisk => "scsi0",
            Kind::CtDisk => "rootfs",
            Kind::GrowSize => "+1G",
            Kind::ImageFile => "debian-13-genericcloud-amd64.qcow2",
            Kind::ImportVolume => "local:import/debian-13-genericcloud-amd64.qcow2",
            Kind::CiUser => "debian",
            Kind::SshKeys => {
                "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBRQPGL2CEQuW0392R+C9lGvfVuz1GCljUYKWbWiGOiw alice@laptop"
            }
            Kind::IpConfig => "10.0.0.5/24,gw=10.0.0.1",
            Kind::Nameservers => "10.0.0.1",
            Kind::BlockDevice => "/dev/sda",
            Kind::Epoch => "1767225600",
            Kind::StoragePath => "/mnt/store1",
            Kind::ExportPath => "/export/pve",
            Kind::Server => "192.0.2.10",
            Kind::VgName => "pve",
            Kind::ZfsPool => "rpool/data",
            Kind::ContentList => "iso,backup",
            Kind::LocalFile => "./debian-13.2.0-amd64-netinst.iso",
            Kind::IsoName => "debian-13.2.0-amd64-netinst.iso",
            Kind::ByteSize => "702545920",
            Kind::Sha256 => "677c4d57aa034dc192b5191870141057574c1b05df2b9569c0ee08aa4e32125d",
            Kind::FillPercent => "90",
            Kind::NewBridge => "vmbr1",
            Kind::BridgePorts => "eno2",
            Kind::Cidr4 => "10.10.0.1/24",
            Kind::RevertWindow => "60",
            Kind::NetToken => "0123456789abcdef0123456789abcdef",
            Kind::FwPorts => "443",
            Kind::FwAddr => "192.0.2.0/24",
            Kind::IpsetName => "admins",
            Kind::IpAddr => "192.0.2.7",
            Kind::RulePos => "0",
            Kind::ConfigId => "keep-apart",
            Kind::HaSids => "vm:100,vm:101",
            Kind::HaNodes => "pve1:2,pve2",
            Kind::Tries => "1",
            Kind::Calendar => "sat 02:00",
            Kind::VmidList => "100,200",
            Kind::PoolId => "prod",
            Kind::Retention => "keep-last=3,keep-daily=7",
        }
    }

    /// Validate a value as it appears on the wire (in a remote command line) and return it:
    /// the host gate's check of what a client sent. A choice must be one of the wire values, a
    /// switch is `1`; everything else passes exactly the checks of [`Kind::parse`] and must
    /// come back unchanged.
    pub fn from_wire(self, what: &str, wire: &str) -> Result<String> {
        let bad =
            |why: String| Error::usage(format!("invalid {what} '{}': {why}", printable(wire)));
        match self {
            Kind::Choice(choices) if choices.iter().any(|c| c.wire == wire) => Ok(wire.to_string()),
            Kind::Choice(_) => Err(bad(format!("expected {}", self.regex()))),
            Kind::Flag if wire == "1" => Ok(wire.to_string()),
            Kind::Flag => Err(bad("a switch is sent as 1".into())),
            _ => {
                let v = self.parse(what, wire)?;
                if v != wire {
                    return Err(bad("not in its canonical form".into()));
                }
                Ok(v)
            }
        }
    }

    /// Validate a value given on the command line (or by an agent) and return its wire form.
    ///
    /// `what` names the parameter in the error message.
    pub fn parse(self, what: &str, raw: &str) -> Result<String> {
        let bad = |why: String| Error::usage(format!("invalid {what} '{}': {why}", printable(raw)));
        if let Kind::Choice(choices) = self {
            return choices
                .iter()
                .find(|c| c.cli == raw)
                .map(|c| c.wire.to_string())
                .ok_or_else(|| bad(format!("expected {}", self.describe())));
        }
        if let Kind::Flag = self {
            return Ok("1".into());
        }
        match self {
            Kind::GuestArgv => return parse_guest_argv(raw).map_err(bad),
            Kind::GuestPath => return parse_guest_path(raw).map_err(bad),
            // Checked by their own parsers, then their wire form by the regex sudoers has.
            Kind::SshKeys | Kind::IpConfig | Kind::Nameservers => {
                let wire = match self {
                    Kind::SshKeys => super::cloud::parse_sshkeys(raw),
                    Kind::IpConfig => super::cloud::parse_ipconfig(raw),
                    _ => super::cloud::parse_nameservers(raw),
                }
                .map_err(bad)?;
                let re = whole(&self, what)?;
                if !re.is_match(&wire) {
                    return Err(bad(format!("expected {}", self.describe())));
                }
                return Ok(wire);
            }
            Kind::StoragePath => return parse_storage_path(raw).map_err(bad),
            Kind::Epoch if !raw.is_empty() && !raw.bytes().all(|b| b.is_ascii_digit()) => {
                let t = crate::base::time::parse_time(raw)
                    .ok_or_else(|| bad(format!("expected {}", self.describe())))?;
                let secs = t
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_err(|_| bad("before 1970".into()))?
                    .as_secs();
                return Ok(secs.to_string());
            }
            Kind::GuestData => {
                if raw.contains('\0') {
                    return Err(bad("NUL bytes cannot travel in a command line".into()));
                }
                if raw.len() > GUEST_DATA_MAX_BYTES {
                    return Err(bad(format!(
                        "{} bytes, more than the {GUEST_DATA_MAX_BYTES} allowed",
                        raw.len()
                    )));
                }
                return Ok(raw.to_string());
            }
            _ => {}
        }
        if self == Kind::GrowSize && !raw.starts_with('+') {
            return Err(bad(
                "pxagent only grows disks: give the size to add with a leading '+', e.g. +1G (without '+' Proxmox takes it as the new total size, and it cannot shrink a disk)".into(),
            ));
        }
        let re = whole(&self, what)?;
        if !re.is_match(raw) {
            return Err(bad(format!("expected {}", self.describe())));
        }
        match self {
            Kind::Vmid => {
                // The regex already bounds it to 100..=999999999; parse to be sure.
                let n: u64 = raw.parse().map_err(|_| bad("not a number".into()))?;
                if !(VMID_MIN..=VMID_MAX).contains(&n) {
                    return Err(bad(format!("expected {}", self.describe())));
                }
            }
            Kind::SnapName => {
                let lower = raw.to_ascii_lowercase();
                if lower == "current" || lower == "pending" || lower == "vzdump" {
                    return Err(bad("that name is reserved by Proxmox".into()));
                }
            }
            Kind::Text if raw.len() > 200 => {
                return Err(bad("longer than 200 characters".into()));
            }
            Kind::Mebibytes if !(16..=4_194_304).contains(&raw.parse::<u64>().unwrap_or(0)) => {
                return Err(bad(format!("expected {}", self.describe())));
            }
            Kind::Cores if !(1..=512).contains(&raw.parse::<u64>().unwrap_or(0)) => {
                return Err(bad(format!("expected {}", self.describe())));
            }
            Kind::Gibibytes if !(1..=65_536).contains(&raw.parse::<u64>().unwrap_or(0)) => {
                return Err(bad(format!("expected {}", self.describe())));
            }
            Kind::MebibytesOrOff
                if raw != "0" && !(16..=4_194_304).contains(&raw.parse::<u64>().unwrap_or(0)) =>
            {
                return Err(bad(format!("expected {}", self.describe())));
            }
            Kind::GuestName if raw.len() > 253 => {
                return Err(bad("longer than 253 characters".into()));
            }
            Kind::FileName
            | Kind::TemplateName
            | Kind::ImageFile
            | Kind::ImportVolume
            | Kind::IsoName
            | Kind::IsoVolume
                if raw.contains("..") =>
            {
                return Err(bad("'..' is not allowed".into()));
            }
            Kind::LocalFile if raw.len() > 4096 => {
                return Err(bad("longer than 4096 bytes".into()));
            }
            Kind::LocalFile if raw.chars().any(char::is_control) => {
                return Err(bad("a control character in a file name".into()));
            }
            Kind::ByteSize if raw.parse::<u64>().map_or(true, |n| n > BYTE_SIZE_MAX) => {
                return Err(bad(format!("expected {}", self.describe())));
            }
            Kind::Cidr4 => {
                if let Some(why) = cidr4_problem(raw) {
                    return Err(bad(why));
                }
            }
            Kind::FwPorts => {
                if let Some(why) = super::firewall::ports_problem(raw) {
                    return Err(bad(why));
                }
            }
            Kind::FwAddr => {
                if let Some(why) = super::firewall::addr_problem(raw) {
                    return Err(bad(why));
                }
            }
            Kind::IpAddr
                if raw
                    .parse::<std::net::IpAddr>()
                    .map(|a| a.to_string())
                    .as_deref()
                    != Ok(raw) =>
            {
                return Err(bad(format!(
                    "expected {} in its usual form",
                    self.describe()
                )));
            }
            Kind::Calendar => {
                if let Some(why) = super::calendar::problem(raw) {
                    return Err(bad(why));
                }
            }
            Kind::HaSids | Kind::HaNodes | Kind::VmidList | Kind::Retention => {
                let mut seen: Vec<&str> = Vec::new();
                for p in raw.split(',') {
                    let name = match self {
                        Kind::HaNodes => p.split(':').next().unwrap_or(p),
                        Kind::Retention => p.split('=').next().unwrap_or(p),
                        _ => p,
                    };
                    if seen.contains(&name) {
                        return Err(bad(format!("'{name}' is given twice")));
                    }
                    seen.push(name);
                }
            }
            Kind::BridgePorts => {
                let mut seen: Vec<&str> = Vec::new();
                for p in raw.split(',') {
                    if seen.contains(&p) {
                        return Err(bad(format!("'{p}' is given twice")));
                    }
                    seen.push(p);
                }
            }
            Kind::Server if raw.len() > 253 => {
                return Err(bad("longer than 253 characters".into()));
            }
            Kind::ContentList => {
                let mut seen: Vec<&str> = Vec::new();
                for c in raw.split(',') {
                    if seen.contains(&c) {
                        return Err(bad(format!("'{c}' is given twice")));
                    }
                    seen.push(c);
                }
            }
            _ => {}
        }
        Ok(raw.to_string())
    }
}

/// Why `raw` (`A.B.C.D/N`, already of [`Kind::Cidr4`]'s characters) is no IPv4 host address
/// with a prefix length, if it is not: each octet 0-255 without leading zeros, a prefix of 1
/// to 32, and (below /31) neither the network's nor its broadcast address, as PVE's
/// `check_ipv4_settings` refuses them.
fn cidr4_problem(raw: &str) -> Option<String> {
    let Some((addr, len)) = raw.split_once('/') else {
        return Some("expected ADDRESS/PREFIX".into());
    };
    let canon = |s: &str| s == "0" || !s.starts_with('0');
    let mut ip: u32 = 0;
    for o in addr.split('.') {
        match o.parse::<u32>() {
            Ok(n) if n <= 255 && canon(o) => ip = (ip << 8) | n,
            _ => return Some(format!("'{o}' is not an octet 0-255")),
        }
    }
    let len: u32 = match len.parse() {
        Ok(n @ 1..=32) if canon(len) => n,
        _ => return Some("the prefix length is 1 to 32".into()),
    };
    if len < 31 {
        let host = !0u32 >> len;
        if ip & host == 0 || ip & host == host {
            return Some(format!(
                "{addr} is the network's or its broadcast address in /{len}, not a host address"
            ));
        }
    }
    None
}

/// Validate a guest command given as a JSON array of strings; returns it re-serialized.
fn parse_guest_argv(raw: &str) -> std::result::Result<String, String> {
    let words: Vec<String> = serde_json::from_str(raw)
        .map_err(|_| "expected a JSON array of strings: program, then arguments".to_string())?;
    guest_argv_checked(&words)?;
    serde_json::to_string(&words).map_err(|e| e.to_string())
}

/// The rules every guest command obeys, whatever front end built it.
pub fn guest_argv_checked(words: &[String]) -> std::result::Result<(), String> {
    match words.first() {
        None => return Err("no program given".into()),
        Some(p) if p.is_empty() => return Err("the program is empty".into()),
        _ => {}
    }
    if words.len() > GUEST_ARGV_MAX_WORDS {
        return Err(format!(
            "{} words, more than the {GUEST_ARGV_MAX_WORDS} allowed",
            words.len()
        ));
    }
    let total: usize = words.iter().map(|w| w.len() + 1).sum();
    if total > GUEST_ARGV_MAX_BYTES {
        return Err(format!(
            "{total} bytes, more than the {GUEST_ARGV_MAX_BYTES} allowed"
        ));
    }
    if let Some(i) = words.iter().position(|w| w.contains('\0')) {
        return Err(format!(
            "word {i} contains a NUL byte, which no command line can carry"
        ));
    }
    Ok(())
}

/// Why a guest path cannot be judged by a glob, if it cannot: a `.` or `..` segment, an
/// empty segment (`//`, or a trailing `/`), a NUL, or a path that is not absolute. Such a path
/// could name a file outside every glob it seems to fit (`/srv/../etc/shadow` fits `/srv/**`
/// as text), so every transfer that carries one is refused before any glob is tried.
pub fn guest_path_problem(path: &str) -> Option<&'static str> {
    if path.contains('\0') {
        return Some("it holds a NUL byte");
    }
    let Some(rest) = path.strip_prefix('/') else {
        return Some("it is not absolute");
    };
    for seg in rest.split('/') {
        match seg {
            "" => return Some("it holds an empty segment (`//` or a trailing `/`)"),
            "." | ".." => return Some("it holds a `.` or `..` segment"),
            _ => {}
        }
    }
    None
}

/// Validate a directory storage's path ([`Kind::StoragePath`]): absolute, 2-16 segments of
/// [`PATH_SEGMENT`], not at or below a system directory. Which roots the host admits is the
/// host's sudoers' business: the client cannot know them, so it checks only what holds for
/// every render.
fn parse_storage_path(raw: &str) -> std::result::Result<String, String> {
    let re = regex::Regex::new(&format!("^({PATH_SEGMENT}){{2,16}}$")).expect("static regex");
    if raw == "/" {
        return Err("`/` is the whole host".into());
    }
    if !re.is_match(raw) {
        if raw.split('/').skip(1).any(|s| s == "." || s == "..") {
            return Err("'.' and '..' segments are not allowed".into());
        }
        return Err(format!("expected {}", Kind::StoragePath.describe()));
    }
    if let Some(why) = system_dir_problem(raw).or_else(|| reach_problem(raw)) {
        return Err(why);
    }
    Ok(raw.to_string())
}

/// The storage whose path a new directory storage at `path` would lie inside, at, or above,
/// if there is one, as `(storage id, its path)`: `config` is `GET /storage`'s answer
/// ([`super::ops::STORAGE_CONFIG`]), whose entries carry `path` for every file-based type
/// (a directory, an NFS or CIFS mount at `/mnt/pve/ID`, CephFS, BTRFS). Paths compare by whole
/// segments, lexically normalised (`/srv/a//b/` and `/srv/x/../a/b` are `/srv/a/b`), so `/srv/ab` is apart from
/// `/srv/a`. An entry without a string `path` has no directory to overlap. The host's symlinks
/// are not followed: the storage roots hold none the account could have made (they are not
/// its to write).
pub fn overlapping_storage(path: &str, config: &serde_json::Value) -> Option<(String, String)> {
    let segments = |p: &str| -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for s in p.split('/') {
            match s {
                "" | "." => {}
                ".." => {
                    out.pop();
                }
                s => out.push(s.to_string()),
            }
        }
        out
    };
    let new = segments(path);
    config.as_array()?.iter().find_map(|entry| {
        let other = entry.get("path")?.as_str()?;
        let theirs = segments(other);
        let n = new.len().min(theirs.len());
        (new[..n] == theirs[..n]).then(|| {
            let id = entry.get("storage").and_then(|s| s.as_str()).unwrap_or("?");
            (id.to_string(), other.to_string())
        })
    })
}

/// Why a directory storage at `path` is refused when [`overlapping_storage`] found storage
/// `id` at `theirs`: the same words from the client and the gate.
pub fn overlap_message(path: &str, id: &str, theirs: &str) -> String {
    format!(
        "{path} overlaps storage {id} (path {theirs}): a directory storage lies neither inside nor above another storage's path, where one storage's files would be read as another's; pick a directory apart from every storage's"
    )
}

/// Validate an absolute guest path (what [`guest_path_problem`] refuses, and more).
fn parse_guest_path(raw: &str) -> std::result::Result<String, String> {
    if !raw.starts_with('/') {
        return Err("a guest path must be absolute (start with '/')".into());
    }
    if raw.chars().any(char::is_control) {
        return Err("control characters (NUL, newline …) are not allowed in a guest path".into());
    }
    if raw.split('/').any(|c| c == "..") {
        return Err("'..' is not allowed in a guest path".into());
    }
    if raw.split('/').skip(1).any(|c| c == ".") || raw.contains("//") {
        return Err("'.' segments and '//' are not allowed in a guest path".into());
    }
    if raw.len() > 4096 || raw == "/" || raw.ends_with('/') {
        return Err("expected a file path (not a directory), at most 4096 bytes".into());
    }
    Ok(raw.to_string())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::base::text::{ECHO_MAX, cut};

    const ALL: [Kind; 64] = [
        Kind::Vmid,
        Kind::Node,
        Kind::SnapName,
        Kind::StorageId,
        Kind::Upid,
        Kind::Text,
        Kind::Seconds,
        Kind::Count,
        Kind::Flag,
        Kind::Archive,
        Kind::IsoVolume,
        Kind::TemplateVolume,
        Kind::TemplateName,
        Kind::FileName,
        Kind::Url,
        Kind::Checksum,
        Kind::Digest,
        Kind::GuestName,
        Kind::Mebibytes,
        Kind::Cores,
        Kind::Gibibytes,
        Kind::Bridge,
        Kind::MebibytesOrOff,
        Kind::Tags,
        Kind::VmDisk,
        Kind::CtDisk,
        Kind::GrowSize,
        Kind::ImageFile,
        Kind::ImportVolume,
        Kind::CiUser,
        Kind::SshKeys,
        Kind::IpConfig,
        Kind::Nameservers,
        Kind::BlockDevice,
        Kind::Epoch,
        Kind::StoragePath,
        Kind::ExportPath,
        Kind::Server,
        Kind::VgName,
        Kind::ZfsPool,
        Kind::ContentList,
        Kind::LocalFile,
        Kind::IsoName,
        Kind::ByteSize,
        Kind::Sha256,
        Kind::FillPercent,
        Kind::NewBridge,
        Kind::BridgePorts,
        Kind::Cidr4,
        Kind::RevertWindow,
        Kind::NetToken,
        Kind::FwPorts,
        Kind::FwAddr,
        Kind::IpsetName,
        Kind::IpAddr,
        Kind::RulePos,
        Kind::ConfigId,
        Kind::HaSids,
        Kind::HaNodes,
        Kind::Tries,
        Kind::Calendar,
        Kind::VmidList,
        Kind::PoolId,
        Kind::Retention,
    ];

    #[test]
    fn examples_are_valid() {
        for k in ALL {
            assert!(k.parse("x", k.example()).is_ok(), "{k:?}");
        }
    }

    /// sudo's `check_pattern` (lib/util/regex.c, 1.9.10–1.9.16), which runs before
    /// `regcomp` and does not know bracket expressions: a pattern it refuses never matches.
    pub(crate) fn sudo_check_pattern(pattern: &str) -> Result<(), String> {
        if pattern.len() > 1024 {
            return Err("regular expression too large".into());
        }
        let b = pattern.as_bytes();
        let parse_num = |mut i: usize| -> (i64, usize) {
            let mut n: i64 = 0;
            while i < b.len() && b[i].is_ascii_digit() {
                n = n * 10 + i64::from(b[i] - b'0');
                i += 1;
            }
            (n, i)
        };
        let (mut i, mut prev) = (0, 0u8);
        while i < b.len() {
            let ch = b[i];
            i += 1;
            match ch {
                b'\\' if i < b.len() => {
                    i += 1;
                    prev = 0;
                    continue;
                }
                b'?' | b'*' | b'+' if matches!(prev, b'?' | b'*' | b'+' | b'{') => {
                    return Err(format!("invalid repetition at byte {i}"));
                }
                b'{' => {
                    let (b1, mut ep) = parse_num(i);
                    let mut b2 = 0;
                    if ep < b.len() && b[ep] == b',' {
                        (b2, ep) = parse_num(ep + 1);
                    }
                    i = ep;
                    if i < b.len() && b[i] == b'}' {
                        if !(0..=255).contains(&b1) || !(0..=255).contains(&b2) {
                            return Err(format!("invalid bound at byte {i}"));
                        }
                        if matches!(prev, b'?' | b'*' | b'+' | b'{') {
                            return Err(format!("invalid repetition at byte {i}"));
                        }
                        i += 1;
                        prev = b'{';
                        continue;
                    }
                    prev = 0;
                    continue;
                }
                _ => {}
            }
            prev = ch;
        }
        Ok(())
    }

    #[test]
    fn regexes_pass_sudoers_lexer_and_sudos_pattern_check() {
        for k in ALL {
            let re = k.regex();
            for bad in ['#', '$', '\\', '\n', '\r', '['] {
                // A bracket expression opens with `[`; none may be nested or escaped.
                if bad == '[' {
                    assert!(!re.contains("[["), "{k:?}: {re}");
                    continue;
                }
                assert!(!re.contains(bad), "{k:?} regex has {bad:?}: {re}");
            }
            sudo_check_pattern(&format!("^{re}$")).unwrap_or_else(|e| panic!("{k:?}: {e}: {re}"));
        }
    }

    #[test]
    fn upload_values() {
        for ok in ["1", "702545920", "1099511627776"] {
            assert!(Kind::ByteSize.parse("size", ok).is_ok(), "{ok}");
        }
        for bad in [
            "0",
            "01",
            "1099511627777",
            "1e9",
            "-1",
            "1 ",
            "99999999999999",
        ] {
            assert!(Kind::ByteSize.parse("size", bad).is_err(), "{bad}");
        }
        for ok in ["debian.iso", "a.img", "Win11_23H2.x64.iso"] {
            assert!(Kind::IsoName.parse("name", ok).is_ok(), "{ok}");
        }
        let long = format!("{}.iso", "a".repeat(197));
        for bad in [
            "../x.iso",
            "a/b.iso",
            "a..b.iso",
            ".x.iso",
            "x.iso.tmp",
            "x.qcow2",
            "x.ISO",
            "x iso",
            "-x.iso",
            ".iso",
            &long,
        ] {
            assert!(Kind::IsoName.parse("name", bad).is_err(), "{bad}");
        }
        assert!(Kind::Sha256.parse("sha256", &"a".repeat(64)).is_ok());
        for bad in ["A".repeat(64), "a".repeat(63), "g".repeat(64)] {
            assert!(Kind::Sha256.parse("sha256", &bad).is_err(), "{bad}");
        }
        assert!(Kind::LocalFile.parse("file", "./a b/ü.iso").is_ok());
    }

    #[test]
    fn bridge_kinds_admit_new_bridges_and_host_addresses_only() {
        for ok in ["vmbr1", "vmbr9", "vmbr10", "vmbr9999"] {
            assert!(Kind::NewBridge.parse("bridge", ok).is_ok(), "{ok}");
        }
        for bad in [
            "vmbr0",
            "vmbr01",
            "vmbr10000",
            "vmbr",
            "eno1",
            "vmbr1 ",
            "vmbr1.5",
            "VMBR1",
        ] {
            assert!(Kind::NewBridge.parse("bridge", bad).is_err(), "{bad}");
        }
        for ok in [
            "eno2",
            "eno1,eno2",
            "bond0",
            "enp3s0.20",
            "eth1",
            "enx0894ef13049a",
        ] {
            assert!(Kind::BridgePorts.parse("ports", ok).is_ok(), "{ok}");
        }
        for bad in [
            "vmbr0",
            "eno2,eno2",
            "eno2 eno3",
            "eno2;eno3",
            "lo",
            "eno2.0",
            "eno2.10000",
            "",
            "eno1,vmbr0",
            "eno2,",
            "tap100i0",
            "fwbr100i0",
        ] {
            assert!(Kind::BridgePorts.parse("ports", bad).is_err(), "{bad}");
        }
        for ok in [
            "10.10.0.1/24",
            "192.168.1.254/24",
            "10.0.0.1/8",
            "10.0.0.0/31",
            "10.1.2.3/32",
        ] {
            assert!(Kind::Cidr4.parse("cidr", ok).is_ok(), "{ok}");
        }
        for bad in [
            "10.10.0.0/24",
            "10.10.0.255/24",
            "256.1.1.1/24",
            "10.1.1.1/33",
            "10.1.1.1/0",
            "10.1.1.1",
            "010.1.1.1/24",
            "10.1.1.1/024",
            "a.b.c.d/24",
            "10.1.1/24",
        ] {
            assert!(Kind::Cidr4.parse("cidr", bad).is_err(), "{bad}");
        }
        for ok in ["30", "59", "60", "99", "100", "599", "600"] {
            assert!(Kind::RevertWindow.parse("window", ok).is_ok(), "{ok}");
        }
        for bad in ["29", "0", "601", "700", "060", "1000"] {
            assert!(Kind::RevertWindow.parse("window", bad).is_err(), "{bad}");
        }
        assert!(Kind::LocalFile.parse("file", "a\nb.iso").is_err());
        assert!(Kind::LocalFile.parse("file", "a\u{1b}[2J.iso").is_err());
    }

    #[test]
    fn vmid_bounds() {
        for ok in ["100", "999", "1000", "999999999"] {
            assert!(Kind::Vmid.parse("VMID", ok).is_ok(), "{ok}");
        }
        for bad in ["99", "0", "0100", "1000000000", "-100", "100 ", "1e3", ""] {
            assert!(Kind::Vmid.parse("VMID", bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn snapshot_names() {
        for ok in ["ab", "pre-upgrade", "Snap_1", &"a".repeat(40)] {
            assert!(Kind::SnapName.parse("snapshot", ok).is_ok(), "{ok}");
        }
        for bad in [
            "a",
            "1abc",
            "current",
            "Pending",
            "; rm -rf /",
            "a b",
            "-x",
            &"a".repeat(41),
        ] {
            assert!(Kind::SnapName.parse("snapshot", bad).is_err(), "{bad}");
        }
    }

    /// The descriptions people type, and what free text must never
    /// carry: an option, a control character, or one of sudoers' regex terminators.
    pub(crate) const DESCRIPTIONS_OK: &[&str] = &[
        "before upgrade to 9.1",
        "it's the \"good\" one, finally!",
        "pre-upgrade: kernel 6.8 (test) & apt; 50% done?",
        "a+b <x> {y} | ~z ^w `q` x-y /etc/x.conf",
        "C:/Users/bob @ 10:30",
    ];

    #[test]
    fn free_text_takes_what_people_type_but_no_options_or_metacharacters() {
        for ok in DESCRIPTIONS_OK {
            assert!(Kind::Text.parse("d", ok).is_ok(), "{ok:?}");
        }
        for bad in [
            "x --vmstate 1",
            "-x",
            "a -b",
            "a  b",
            " a",
            "a ",
            "a\nb",
            "a\tb",
            "$(id)",
            "a$",
            "#comment",
            "a\\b",
            "[x]",
            "a=b",
            "*.conf",
            "caf\u{e9}",
            "\u{1b}[31m",
        ] {
            assert!(Kind::Text.parse("d", bad).is_err(), "{bad:?}");
        }
        assert!(Kind::Text.parse("d", &"word ".repeat(41)).is_err());
    }

    #[test]
    fn upids_from_the_fixtures_parse() {
        // FORMATS.md §1.4: real UPIDs, an empty id, a token user, a 9-digit pstart.
        for ok in [
            "UPID:vh8:0030FB2D:330ECAE5:65665EEA:qmstart:352:root@pam:",
            "UPID:example-node:0000C346:165A0CE4:68D7279C:aptupdate::root@pam:",
            "UPID:pve1:0000C346:1165A0CE4:68D7279C:vzdump:100:u@pam!some-token:",
            "UPID:pve1:0000C346:165A0CE4:68D7279C:download:debian-12-standard_12.7-1_amd64.tar.zst:root@pam:",
            // PVE's decoding takes any character but `:`, whitespace and
            // `/` in type, id and user: token users, ids with `+`, `,`, `~` …
            "UPID:pve1:0000C346:165A0CE4:68D7279C:qmstart:100:root@pam!api:",
            "UPID:pve1:0000C346:165A0CE4:68D7279C:vncproxy:100:admin@pve!ci-2025.01:",
            "UPID:pve1:0000C346:165A0CE4:68D7279C:imgcopy:vm-100-disk-0+snap,b~c:root@pam:",
            "UPID:pve1:0000C346:165A0CE4:68D7279C:srvreload:networking:j.doe+ops@ldap-corp:",
        ] {
            assert!(Kind::Upid.parse("UPID", ok).is_ok(), "{ok}");
        }
        for bad in [
            "UPID:pve1:0000C346:165A0CE4:68D7279C:qmstart:100:root@pam",
            "UPID:pve1:0000C346:165A0CE4:68D7279C:qmstart:100:root@pam: --x",
            "UPID:pve/1:0000C346:165A0CE4:68D7279C:qmstart:100:root@pam:",
            // Never a `/` (a UPID goes into an API path), whitespace or control character
            // (it goes into a sudoers-matched command line), nor a character PVE refuses.
            "UPID:pve1:0000C346:165A0CE4:68D7279C:qmstart:../../x:root@pam:",
            "UPID:pve1:0000C346:165A0CE4:68D7279C:qm start:100:root@pam:",
            "UPID:pve1:0000C346:165A0CE4:68D7279C:qmstart:100:root@pam\t:",
            "UPID:pve1:0000C346:165A0CE4:68D7279C:qmstart:1\n0:root@pam:",
            "UPID:pve1:0000C346:165A0CE4:68D7279C:qmstart:100:jörg@pve:",
            "UPID:pve1:0000C346:165A0CE4:68D7279C::100:root@pam:",
            "UPID:pve1:0000C346:165A0CE4:68D7279C:qmstart:100::",
            "UPID:pve1:0000C346:165A0CE4:68D7279C:qmstart:1:0:root@pam:",
            // `=` neither (PVE would take it; no word may look like `--option=value`).
            "UPID:pve1:0000C346:165A0CE4:68D7279C:qmstart:--x=1:root@pam:",
        ] {
            assert!(Kind::Upid.parse("UPID", bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn urls_are_plain_http_or_https() {
        assert!(Kind::Url.parse("url", Kind::Url.example()).is_ok());
        for good in [
            "https://host/x.iso?a=b",
            "https://dl.example.com/get?file=debian.iso&token=a1%2Fb2-c.d_e~f+g",
            "http://host:8080?x=1",
            "https://host/x.iso?",
        ] {
            assert_eq!(Kind::Url.parse("url", good).unwrap(), good);
        }
        for bad in [
            "ftp://x/y.iso",
            "https://user:pw@host/x.iso",
            "https://host/x.iso#f",
            "https://host/x.iso?a=b#f",
            "file:///etc/shadow",
            "https://host/a b.iso",
            "https://host/$(id)",
            "https://host/x.iso?a=b --content vztmpl",
            "https://host/x.iso?a=$(id)",
            "https://host/x.iso?a=b;c",
            "https://host/x.iso?a=b?c",
            "https://host/x.iso?a=b\\c",
            "https://host/x.iso?a=b'c",
            "https://host/x.iso?a=b,c",
        ] {
            assert!(Kind::Url.parse("url", bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn volumes_and_sizes() {
        assert!(
            Kind::Archive
                .parse(
                    "a",
                    "local:backup/vzdump-lxc-200-2026_11_01-02_00_00.tar.gz"
                )
                .is_ok()
        );
        assert!(
            Kind::Archive
                .parse("a", "local:backup/../../etc/shadow")
                .is_err()
        );
        assert!(
            Kind::Archive
                .parse("a", "local:images/vm-100-disk-0")
                .is_err()
        );
        assert!(Kind::IsoVolume.parse("i", "local:iso/../x.iso").is_err());
        assert!(Kind::FileName.parse("f", "../x.iso").is_err());
        assert!(Kind::FileName.parse("f", "a/b.iso").is_err());
        assert!(Kind::Mebibytes.parse("m", "8").is_err());
        assert!(Kind::Mebibytes.parse("m", "4096").is_ok());
        assert!(Kind::Cores.parse("c", "513").is_err());
        assert!(Kind::Gibibytes.parse("g", "0").is_err());
        assert!(Kind::Checksum.parse("c", "sha256:zz").is_err());
        assert!(
            Kind::Checksum
                .parse("c", "crc32:00000000000000000000000000000000")
                .is_err()
        );
    }

    #[test]
    fn guest_kinds() {
        for k in [Kind::GuestArgv, Kind::GuestPath, Kind::GuestData, Kind::Pid] {
            assert!(k.parse("x", k.example()).is_ok(), "{k:?}");
        }
        let argv = Kind::GuestArgv
            .parse("command", r#"["sh","-c","a; $(b)\nc","-la",""]"#)
            .unwrap();
        assert_eq!(guest_argv(&argv), ["sh", "-c", "a; $(b)\nc", "-la", ""]);
        for bad in [
            r#"[]"#,
            r#"[""]"#,
            r#""uname""#,
            r#"["a\u0000b"]"#,
            "not json",
        ] {
            assert_eq!(
                Kind::GuestArgv
                    .parse("command", bad)
                    .unwrap_err()
                    .exit_code(),
                2,
                "{bad}"
            );
        }
        let many = serde_json::to_string(&vec!["x"; GUEST_ARGV_MAX_WORDS + 1]).unwrap();
        assert!(Kind::GuestArgv.parse("command", &many).is_err());
        for ok in ["/tmp/in.txt", "/tmp/a b/c:d", "/x..y"] {
            assert!(Kind::GuestPath.parse("p", ok).is_ok(), "{ok}");
        }
        for bad in [
            "tmp/x",
            "/tmp/../etc/shadow",
            "/..",
            "/a\nb",
            "/a\u{0}b",
            "/",
            "/tmp/",
        ] {
            assert!(Kind::GuestPath.parse("p", bad).is_err(), "{bad:?}");
        }
        assert!(Kind::GuestData.parse("d", "a\0b").is_err());
        assert!(
            Kind::GuestData
                .parse("d", &"a".repeat(GUEST_DATA_MAX_BYTES + 1))
                .is_err()
        );
        assert!(Kind::Pid.parse("pid", "0").is_err());
        assert!(Kind::Pid.parse("pid", "--1").is_err());
    }

    #[test]
    fn settings_disks_and_sizes() {
        for ok in ["0", "16", "4194304"] {
            assert!(Kind::MebibytesOrOff.parse("balloon", ok).is_ok(), "{ok}");
        }
        for bad in ["8", "4194305", "-1", "01", ""] {
            assert!(Kind::MebibytesOrOff.parse("balloon", bad).is_err(), "{bad}");
        }
        for ok in ["web", "web;prod", "a_b+c.d-e", "0"] {
            assert!(Kind::Tags.parse("tags", ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "Web",
            "a,b",
            "a b",
            "a;",
            ";a",
            "-a",
            "a;;b",
            "a=b",
            &"t;".repeat(17),
        ] {
            assert!(Kind::Tags.parse("tags", bad).is_err(), "{bad}");
        }
        for ok in ["scsi0", "scsi30", "virtio15", "sata5", "ide3"] {
            assert!(Kind::VmDisk.parse("disk", ok).is_ok(), "{ok}");
        }
        for bad in [
            "scsi31",
            "virtio16",
            "efidisk0",
            "tpmstate0",
            "unused0",
            "ide4",
            "scsi00",
        ] {
            assert!(Kind::VmDisk.parse("disk", bad).is_err(), "{bad}");
        }
        for ok in ["rootfs", "mp0", "mp99", "mp255"] {
            assert!(Kind::CtDisk.parse("disk", ok).is_ok(), "{ok}");
        }
        for bad in ["mp256", "mp01", "unused0", "scsi0"] {
            assert!(Kind::CtDisk.parse("disk", bad).is_err(), "{bad}");
        }
        for ok in ["+1G", "+512M", "+100K", "+2T", "+999999G"] {
            assert!(Kind::GrowSize.parse("size", ok).is_ok(), "{ok}");
        }
        // A size without '+' would be an absolute size (and could mean shrinking): exit 2
        // with the reason.
        let e = Kind::GrowSize.parse("size", "1G").unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert!(e.to_string().contains("only grows"), "{e}");
        for bad in ["+0G", "+1", "+1.5G", "+1g", "-1G", "+1G ", "++1G", "+1P"] {
            assert!(Kind::GrowSize.parse("size", bad).is_err(), "{bad}");
        }
        // The two parts of a volume id rebuild it, and each part is a closed regex.
        for (k, part1) in [(Kind::IsoVolume, "iso/"), (Kind::TemplateVolume, "vztmpl/")] {
            assert_eq!(k.part_regex(0), Kind::StorageId.regex());
            assert!(k.part_regex(1).starts_with(part1));
            let whole =
                regex::Regex::new(&format!("^{}:{}$", k.part_regex(0), k.part_regex(1))).unwrap();
            assert!(whole.is_match(k.example()), "{k:?}");
        }
    }

    #[test]
    fn host_observation_and_storage_kinds() {
        for ok in [
            "/dev/sda",
            "/dev/sdab",
            "/dev/vdc",
            "/dev/nvme0n1",
            "/dev/nvme12n3",
        ] {
            assert!(Kind::BlockDevice.parse("disk", ok).is_ok(), "{ok}");
        }
        for bad in [
            "/dev/sda1",
            "/dev/nvme0n1p1",
            "/dev/disk/by-id/x",
            "/dev/../etc/shadow",
            "/dev/mapper/pve-root",
            "sda",
            "/dev/sda --healthonly 1",
        ] {
            assert!(Kind::BlockDevice.parse("disk", bad).is_err(), "{bad}");
        }
        assert_eq!(
            Kind::Epoch.parse("since", "1767225600").unwrap(),
            "1767225600"
        );
        assert_eq!(
            Kind::Epoch.parse("since", "2026-01-01").unwrap(),
            "1767225600"
        );
        assert_eq!(
            Kind::Epoch
                .parse("since", "2026-01-01T01:00:00+01:00")
                .unwrap(),
            "1767225600"
        );
        for bad in ["-1", "01", "yesterday", "1969-12-31", "", "1 2"] {
            assert!(Kind::Epoch.parse("since", bad).is_err(), "{bad}");
        }
        // A gate takes only the seconds a client sends.
        assert!(Kind::Epoch.from_wire("since", "2026-01-01").is_err());
        for ok in [
            "/mnt/a",
            "/srv/iso-store",
            "/data/pools/x.y",
            "/mnt/-x",
            "/opt/pve",
            "/mnt/pvex",
            "/mnt/pv",
            "/srv/pve/x",
        ] {
            assert!(Kind::StoragePath.parse("path", ok).is_ok(), "{ok}");
        }
        for bad in [
            "/",
            "/mnt",
            "/etc/pve",
            "/root/x",
            "/usr/local/x",
            "/var/lib/vz",
            "/lib64/x",
            "/proc/1",
            "/dev/shm/x",
            "/tmp/x",
            "/mnt/../etc",
            "/mnt/./x",
            "/mnt/.hidden",
            "/mnt//x",
            "/mnt/x/",
            "mnt/x",
            "/mnt/a b",
            "/mnt/x\ny",
            "/mnt/pve",
            "/mnt/pve/nfs1",
            "/mnt/pve/nfs1/images",
            "/home/zen-agent/x",
            "/home/x",
        ] {
            assert!(Kind::StoragePath.parse("path", bad).is_err(), "{bad:?}");
        }
        for dir in UNTRUSTED_DIRS {
            assert!(storage_root_problem(dir).is_some(), "{dir}");
            assert!(
                Kind::StoragePath
                    .parse("path", &format!("{dir}/x"))
                    .is_err(),
                "{dir}"
            );
        }
        // The sudoers regex agrees: below /mnt, any first segment but `pve`.
        let re = regex::Regex::new(&format!("^{}$", Kind::StoragePath.regex())).unwrap();
        for ok in [
            "/mnt/a",
            "/mnt/p",
            "/mnt/pv",
            "/mnt/pvx",
            "/mnt/pvex",
            "/mnt/pve-x",
            "/mnt/PVE",
            "/mnt/x/pve",
            "/srv/pve",
            "/mnt/_",
            "/mnt/qve",
        ] {
            assert!(re.is_match(ok), "{ok}");
        }
        for bad in [
            "/mnt/pve",
            "/mnt/pve/x",
            "/mnt/pve/x/y",
            "/mnt",
            "/mnt/",
            "/mnt/.x",
        ] {
            assert!(!re.is_match(bad), "{bad}");
        }
        assert!(
            Kind::StoragePath
                .parse("path", "/mnt/../etc")
                .unwrap_err()
                .to_string()
                .contains("'..'")
        );
        for ok in ["/export/pve", "/srv/nfs/a.b"] {
            assert!(Kind::ExportPath.parse("export", ok).is_ok(), "{ok}");
        }
        for bad in ["/", "export", "/a/../b", "/a/", "/a --options vers=3"] {
            assert!(Kind::ExportPath.parse("export", bad).is_err(), "{bad}");
        }
        for ok in ["192.0.2.10", "nas", "nas.example.org"] {
            assert!(Kind::Server.parse("server", ok).is_ok(), "{ok}");
        }
        for bad in ["-nas", "nas..x", "a b", "[::1]", "nas:2049", "user@nas"] {
            assert!(Kind::Server.parse("server", bad).is_err(), "{bad}");
        }
        for ok in ["pve", "data_vg", "vg-1.x", "+vg"] {
            assert!(Kind::VgName.parse("vgname", ok).is_ok(), "{ok}");
        }
        for bad in ["v", "-vg", ".vg", "vg/x", "vg x"] {
            assert!(Kind::VgName.parse("vgname", bad).is_err(), "{bad}");
        }
        for ok in ["tank", "rpool/data", "tank/pve/vm-disks"] {
            assert!(Kind::ZfsPool.parse("pool", ok).is_ok(), "{ok}");
        }
        for bad in ["/tank", "tank/", "tank//x", "-tank", "tank x", "tank/../x"] {
            assert!(Kind::ZfsPool.parse("pool", bad).is_err(), "{bad}");
        }
        for ok in [
            "iso",
            "iso,backup",
            "images,rootdir",
            "iso,vztmpl,backup,images,rootdir,import",
        ] {
            assert!(Kind::ContentList.parse("content", ok).is_ok(), "{ok}");
        }
        for bad in [
            "snippets",
            "iso,snippets",
            "iso,iso",
            "iso,",
            ",iso",
            "iso;backup",
            "iso backup",
            "",
        ] {
            assert!(Kind::ContentList.parse("content", bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn choices_map_to_wire_values() {
        let k = Kind::Choice(&[
            Choice {
                cli: "vm",
                wire: "vm",
                keep_type: Some("qemu"),
            },
            Choice {
                cli: "ct",
                wire: "vm",
                keep_type: Some("lxc"),
            },
            Choice {
                cli: "node",
                wire: "node",
                keep_type: None,
            },
        ]);
        assert_eq!(k.parse("type", "ct").unwrap(), "vm");
        assert!(k.parse("type", "lxc").is_err());
        assert_eq!(k.regex(), "(vm|node)");
    }

    #[test]
    fn echoed_values_are_escaped_and_at_most_a_kibibyte() {
        assert_eq!(printable("a\nb"), "a\\nb");
        assert_eq!(printable("short"), "short");
        let big = "x".repeat(5_000_000);
        let p = printable(&big);
        assert!(p.len() < ECHO_MAX + 64, "{}", p.len());
        assert!(
            p.ends_with("… (5000000 bytes in all)"),
            "{}",
            &p[p.len() - 40..]
        );
        // Escapes count against the limit, and multi-byte characters are never split.
        let ctl = "\u{1}".repeat(2000);
        assert!(printable(&ctl).len() < ECHO_MAX + 64);
        let wide = "é".repeat(2000);
        assert!(printable(&wide).starts_with("éé"));
        assert_eq!(cut("short"), "short");
        let c = cut(&big);
        assert!(c.len() < ECHO_MAX + 128 && c.contains("sha256 "), "{c}");
        // A parse error of a huge value echoes at most the limit.
        let e = Kind::Vmid.parse("VMID", &big).unwrap_err().to_string();
        assert!(e.len() < ECHO_MAX + 200, "{}", e.len());
    }

    /// Sudo alone holds for cloud-init keys: the rule admits the keys the client sends and no
    /// line that adds authorized_keys options, a carriage return or an empty line.
    #[test]
    fn the_sshkeys_rule_admits_keys_and_no_options() {
        let re = regex::Regex::new(&format!("^{}$", Kind::SshKeys.regex())).unwrap();
        let one = Kind::SshKeys.example();
        let wire = Kind::SshKeys.parse("sshkeys", one).unwrap();
        assert!(re.is_match(&wire), "{wire}");
        let two = format!(
            "{one}\n{}",
            one.replace(" alice@laptop", " b+o=b:x/y_z-1.2@h")
        );
        let wire2 = Kind::SshKeys.parse("sshkeys", &two).unwrap();
        assert!(re.is_match(&wire2), "{wire2}");
        let nocomment = Kind::SshKeys
            .parse("sshkeys", one.trim_end_matches(" alice@laptop"))
            .unwrap();
        assert!(re.is_match(&nocomment), "{nocomment}");
        for bad in [
            format!("{wire}%0Acommand%3D%22id%22%20{wire}"),
            format!("{wire}%0A%0A{wire}"),
            format!("{wire}%0A"),
            format!("{wire}%0D"),
            format!("{wire}%0D%0A{wire}"),
            format!("{wire}%0Aenvironment%3D%22A%3Db%22%20{wire}"),
            format!("{wire}%0Ano-pty%2C{wire}"),
            wire.replace("%20AAAA", "%2Ccommand%3D%22id%22%20AAAA"),
            format!("{wire}%22"),
            format!("{wire}%00"),
            format!("{wire}%7F"),
            "-ssh-ed25519%20AAAA".to_string(),
        ] {
            assert!(!re.is_match(&bad), "{bad}");
        }
    }

    #[test]
    fn a_storage_path_inside_at_or_above_another_is_found_and_a_sibling_is_not() {
        let config = serde_json::json!([
            {"storage": "local", "type": "dir", "path": "/var/lib/vz", "content": "iso"},
            {"storage": "local-lvm", "type": "lvmthin", "vgname": "pve", "thinpool": "data"},
            {"storage": "nfs1", "type": "nfs", "path": "/mnt/pve/nfs1", "server": "10.0.0.5"},
            {"storage": "bulk", "type": "dir", "path": "/srv/bulk//pve/"},
            {"storage": "odd", "type": "dir", "path": "/srv/x/../odd"},
            {"storage": "weird", "type": "dir", "path": 7},
        ]);
        let found = |p: &str| overlapping_storage(p, &config).map(|(id, _)| id);
        // inside, at, above
        assert_eq!(found("/srv/bulk/pve/iso").as_deref(), Some("bulk"));
        assert_eq!(found("/srv/bulk/pve").as_deref(), Some("bulk"));
        assert_eq!(found("/srv/bulk").as_deref(), Some("bulk"));
        assert_eq!(found("/mnt/pve").as_deref(), Some("nfs1"));
        assert_eq!(found("/var/lib/vz/template").as_deref(), Some("local"));
        assert_eq!(found("/srv/odd/a").as_deref(), Some("odd"));
        // siblings and prefixes of a segment are apart
        assert_eq!(found("/srv/bulky"), None);
        assert_eq!(found("/srv/bulk2/pve"), None);
        assert_eq!(found("/mnt/pve2"), None);
        assert_eq!(found("/srv/x"), None);
        // the path that is reported is the host's, as written
        assert_eq!(
            overlapping_storage("/srv/bulk", &config),
            Some(("bulk".into(), "/srv/bulk//pve/".into()))
        );
        // a root storage is above everything; a configuration that is not a list holds none
        let root = serde_json::json!([{"storage": "all", "type": "dir", "path": "/"}]);
        assert!(overlapping_storage("/srv/a", &root).is_some());
        assert_eq!(overlapping_storage("/srv/a", &serde_json::json!({})), None);
    }
}
