//! Decisions: what a compiled [`Policy`] says about an invocation before anything
//! is sent — refuse it (exit 3), demand a confirmation phrase, or let it through — plus the
//! questions the front ends ask of it (list this op? which limits? is this guest command
//! allowed?). Uses the policy's [`schema`](super::schema) types, the compiled
//! [`allowlist`](super::allowlist), the catalog, invocations and the confirmation phrase; it
//! reads no file and no environment ([`super::load`] builds the [`Policy`]).
//!
//! Decisions, in this order, first match wins:
//!
//! 1. the most specific `ops` rule is `deny` → refused;
//! 2. `read_only` and the op is not a read → refused;
//! 3. the op changes state (risk `change`, `confirm` or `exec`) and one of its VMIDs (every
//!    parameter of kind VMID, so a clone's or restore's *target* too) is protected, or the
//!    target guest carries a protected tag → refused;
//! 4. the most specific rule is `confirm` → [`Decision::Confirm`];
//! 5. otherwise [`Decision::Allow`].
//!
//! `allow` never waives the catalog's own soft blacklist: `vm.destroy: allow` still needs
//! `yes destroy N`. It exists to carve exceptions out of a glob (`"*": deny` + `vm.status:
//! allow`). Specificity: an exact id beats any glob; among globs the one with more literal
//! (non-`*`) characters wins; between equally specific globs the stricter action wins
//! (deny > confirm > allow), so the outcome never depends on key order. A named group
//! (`@power-off`, [`super::groups`]) ranks between the exact entries and the globs. An entry for an op
//! covers its variants ([`Op::variant_of`]: `backup.restore` covers the overwrite and the
//! container restores, `vm.snapshot` the RAM snapshot) unless a variant has an exact entry of
//! its own; an exact entry for a base beats a glob that matches the variant. A rule's `limits` and
//! `commands` are taken from the most specific rule too; ops that run a guest command and
//! name no limits get 10 per minute ([`Limit::exec_default`]).

use std::collections::BTreeSet;

use super::allowlist::Allowlist;
use super::schema::{Action, Limit, Rule};
use crate::base::error::{Error, Result};
use crate::catalog::invocation::Invocation;
use crate::catalog::{Kind, Op, Risk};

/// What the policy says about an invocation it does not refuse.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// The policy adds nothing (the catalog's own confirmation, if any, still applies).
    Allow,
    /// A `confirm` rule matched: the op is soft-blacklisted and needs this confirmation.
    Confirm(Confirmation),
    /// An `approve` rule matched (host policy only): the op needs a signed approval.
    Approve {
        /// The rule that demanded it, for messages.
        rule: String,
        /// The rule's reason, if it gave one.
        reason: Option<String>,
        /// A `grantable` rule: only a grant admits it, never a one-time approval.
        grant_only: bool,
    },
}

/// The confirmation a `confirm` rule demands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Confirmation {
    /// The exact phrase: the catalog's phrase when the op has one (`yes destroy 100`), else
    /// [`crate::policy::confirm::policy_phrase`] (`yes vm start 100`), bound to the target.
    pub phrase: String,
    /// The rule that demanded it, for messages: `policy.ops.vm.* in /path/config.yaml`.
    pub rule: String,
    /// The rule's reason, if it gave one.
    pub reason: Option<String>,
}

impl Confirmation {
    /// The error when the phrase is missing (exit 4). A catalog confirm op keeps the
    /// catalog's wording (it names the consequence); any other op says the policy asks.
    pub fn refusal(&self, inv: &Invocation) -> Error {
        if let Some(e) = inv.refusal() {
            return e;
        }
        let why = match &self.reason {
            Some(r) => format!("local policy requires confirmation: {r} ({})", self.rule),
            None => format!("local policy requires confirmation ({})", self.rule),
        };
        Error::ConfirmationRequired {
            message: format!(
                "I won't run `{}` without explicit confirmation — {why}. Reply `{}` if you want me to proceed.",
                inv.display(),
                self.phrase
            ),
            phrase: self.phrase.clone(),
            hint: None,
            scope: None,
        }
    }
}

/// Whether the policy key `key` — an op id, a glob (`vm.*`) or a named group
/// (`@power-off`, [`super::groups`]) — covers the op id `id`.
pub(super) fn key_matches(key: &str, id: &str) -> bool {
    if key.starts_with('@') {
        return super::groups::find(key).is_some_and(|g| g.ops.contains(&id));
    }
    glob_match(key, id)
}

/// One compiled `ops` entry (built by [`super::load`]).
#[derive(Debug, Clone)]
pub(super) struct Compiled {
    pub(super) key: String,
    pub(super) rule: Rule,
    pub(super) commands: Option<Allowlist>,
    pub(super) glob: bool,
    /// A named group (`@power-off`): ranks above any glob, below an exact entry.
    pub(super) group: bool,
    /// Literal (non-`*`) characters: the specificity of a glob.
    pub(super) literals: usize,
}

/// A validated policy plus where it came from (for messages). Built by
/// [`Policy::from_config`], [`Policy::from_file`] or [`Policy::load`] ([`super::load`]).
#[derive(Debug, Clone)]
pub struct Policy {
    pub(super) read_only: bool,
    pub(super) rules: Vec<Compiled>,
    pub(super) protect_ids: BTreeSet<u64>,
    /// Lower-cased.
    pub(super) protect_tags: Vec<String>,
    pub(super) allow_privileged_ct_exec: bool,
    pub(super) source: String,
    /// `download_hosts`, lower-cased.
    pub(super) download_hosts: Option<Vec<String>>,
    /// `nfs_servers`, lower-cased.
    pub(super) nfs_servers: Option<Vec<String>>,
    /// `iso_max_used`.
    pub(super) iso_max_used: Option<u8>,
    /// `allow_ssh_lockout`.
    pub(super) allow_ssh_lockout: bool,
    /// `runaway` (host policy).
    pub(super) runaway: super::schema::Runaway,
    /// `budget` (host policy).
    pub(super) budget: Option<super::schema::Budget>,
    /// `grants.max_for` (host policy), seconds.
    pub(super) grant_max_for: u64,
    /// `snapshot_before`: op ids or globs.
    pub(super) snapshot_before: Vec<String>,
    /// `taint: after_exec`.
    pub(super) taint_after_exec: bool,
    /// Layers that narrow this one (see [`Policy::narrowed_by`]).
    pub(super) also: Vec<Policy>,
}

impl Default for Policy {
    /// No policy: nothing is refused and nothing extra is confirmed.
    fn default() -> Policy {
        Policy {
            read_only: false,
            rules: Vec::new(),
            protect_ids: BTreeSet::new(),
            protect_tags: Vec::new(),
            allow_privileged_ct_exec: false,
            source: "built-in defaults".into(),
            download_hosts: None,
            nfs_servers: None,
            iso_max_used: None,
            allow_ssh_lockout: false,
            runaway: super::schema::Runaway::default(),
            budget: None,
            grant_max_for: super::schema::Grants::DEFAULT_MAX_FOR,
            snapshot_before: Vec::new(),
            taint_after_exec: false,
            also: Vec::new(),
        }
    }
}

impl Policy {
    /// The rate limits of an op: the most specific rule's `limits`, else 10 per minute for
    /// ops that run a command in a guest, else none.
    fn limits_for_one(&self, op: &Op) -> Vec<Limit> {
        match self.compiled_for(op).and_then(|c| c.rule.limits.clone()) {
            Some(l) => l,
            None if op.runs_guest_command() => vec![Limit::exec_default(op)],
            None => Vec::new(),
        }
    }

    /// Whether a snapshot of the guest is to be taken before `op` (`snapshot_before`, in any
    /// layer).
    pub fn snapshot_before(&self, op: &Op) -> bool {
        self.layers()
            .any(|l| l.snapshot_before.iter().any(|p| glob_match(p, op.id)))
    }

    /// Whether `op` is held back in a tainted session (`taint: after_exec`, in any layer):
    /// changes are; confirm ops need their own phrase anyway, and reads, guest commands and
    /// file writes go on.
    pub fn taint_holds(&self, op: &Op) -> bool {
        op.risk == Risk::Change && self.layers().any(|l| l.taint_after_exec)
    }

    /// The longest a grant may last on this host, seconds (`grants.max_for`).
    pub fn grant_max_for(&self) -> u64 {
        self.grant_max_for
    }

    /// The host's sliding caps on this call: identical calls (`runaway`: the same op with the
    /// same values, the `digest` a change is pinned to aside; reads only when it says so) and
    /// the account's budget of changes.
    pub fn caps_for(&self, inv: &Invocation) -> Vec<super::limits::Cap> {
        use super::limits::{Cap, CapKind};
        let op = inv.op;
        let mut same = op.id.to_string();
        let pin = op.pinned_digest();
        for (k, v) in inv.values.iter().filter(|(k, _)| Some(**k) != pin) {
            same.push_str(&format!("\0{k}={v}"));
        }
        let line = [same];
        let changes = op.risk != crate::catalog::Risk::Read;
        let mut caps = Vec::new();
        let r = self.runaway;
        if r.max > 0 && (changes || r.reads) {
            caps.push(Cap {
                kind: CapKind::Runaway,
                key: format!(
                    "same:{}",
                    crate::base::text::sha256_hex(line.join("\0").as_bytes())
                ),
                max: r.max,
                window: r.window,
            });
        }
        if let (Some(b), true) = (self.budget, changes) {
            caps.push(Cap {
                kind: CapKind::Budget,
                key: "budget".into(),
                max: b.changes,
                window: b.window,
            });
        }
        caps
    }

    /// Where an op's limits were written (`None`: pxagent's default).
    fn limits_source_one(&self, op: &Op) -> Option<String> {
        let c = self.compiled_for(op)?;
        c.rule
            .limits
            .as_ref()
            .map(|_| format!("policy.ops.{}.limits in {}", c.key, self.source))
    }

    /// Whether the most specific rule's allowlist admits this guest command (program first).
    /// `Err` is [`Error::Policy`] (exit 3) naming the allowed shapes.
    fn check_command_one(&self, inv: &Invocation, argv: &[String]) -> Result<()> {
        let Some(c) = self.compiled_for(inv.op) else {
            return Ok(());
        };
        let Some(list) = &c.commands else {
            return Ok(());
        };
        if list.admits(argv) {
            return Ok(());
        }
        let target = match inv.vmid() {
            Some(id) => format!("{} on {id}", inv.op.id),
            None => inv.op.id.to_string(),
        };
        Err(Error::Policy(format!(
            "policy refuses {target}: `{}` is not one of the allowed commands ({}) (policy.ops.{}.commands in {})",
            crate::base::text::printable(&crate::base::text::quote_argv(argv)),
            crate::base::text::printable(&list.describe()),
            c.key,
            self.source
        )))
    }

    /// Whether a file may move between the client and a guest in the flow of `exec_op`
    /// (`vm.exec`, `ct.exec`): the rule's `push`/`pull` globs decide; a rule with a command
    /// allowlist and no list for that direction allows none (fail closed); otherwise files move
    /// freely, as the commands do. `Err` is [`Error::Policy`] (exit 3).
    fn check_transfer_one(&self, exec_op: &Op, dir: Transfer, path: &str) -> Result<()> {
        let Some(c) = self.compiled_for(exec_op) else {
            return Ok(());
        };
        let (what, list) = match dir {
            Transfer::Push => ("push", &c.rule.push),
            Transfer::Pull => ("pull", &c.rule.pull),
        };
        let shown = crate::base::text::printable(path);
        match list {
            Some(globs) if globs.iter().any(|g| path_glob(g, path)) => Ok(()),
            Some(globs) => Err(Error::Policy(format!(
                "policy refuses to {what} {shown} for {}: not one of {} (policy.ops.{}.{what} in {})",
                exec_op.id,
                globs.join(", "),
                c.key,
                self.source
            ))),
            None if c.commands.is_some() => Err(Error::Policy(format!(
                "policy refuses to {what} {shown} for {}: the rule allows only listed commands and lists no {what} paths (add `{what}: [\"/path/*\"]` to policy.ops.{} in {})",
                exec_op.id, c.key, self.source
            ))),
            None => Ok(()),
        }
    }

    /// Whether `ct exec` may enter privileged containers.
    fn allow_privileged_ct_exec_one(&self) -> bool {
        self.allow_privileged_ct_exec
    }

    /// The rule for an op: the most specific entry naming the op or one of the ops it is a
    /// variant of ([`Op::lineage`]). An exact entry for the op itself beats an exact entry for
    /// a base (nearer bases first), which beats any glob; among globs the one with more
    /// literal characters wins; ties go to the stricter action.
    fn compiled_for(&self, op: &Op) -> Option<&Compiled> {
        self.compiled_for_lineage(&op.lineage())
    }

    fn compiled_for_lineage(&self, lineage: &[(&str, usize)]) -> Option<&Compiled> {
        self.rules
            .iter()
            .filter_map(|c| {
                let nearest = lineage
                    .iter()
                    .filter(|(id, _)| key_matches(&c.key, id))
                    .map(|(_, depth)| *depth)
                    .min()?;
                // Exact entries rank by how near the op they name is; groups below all of
                // them, globs below groups.
                let tier = if c.group {
                    1
                } else if c.glob {
                    0
                } else {
                    usize::MAX - nearest
                };
                Some((tier, c))
            })
            .max_by_key(|(tier, c)| (*tier, c.literals, c.rule.action))
            .map(|(_, c)| c)
    }

    /// [`Policy::compiled_for`] by id: a catalog op's lineage, else the id alone.
    fn compiled_for_id(&self, op_id: &str) -> Option<&Compiled> {
        match crate::catalog::find(op_id) {
            Some(op) => self.compiled_for(op),
            None => self.compiled_for_lineage(&[(op_id, 0)]),
        }
    }

    /// Where this policy came from.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// Whether `read_only` is on.
    fn read_only_one(&self) -> bool {
        self.read_only
    }

    /// The rule that applies to an op id and the key it was written under (for dry-run
    /// output and, later, rate limits): the most specific match, as the module doc says.
    fn rule_for_one(&self, op_id: &str) -> Option<(&str, &Rule)> {
        self.compiled_for_id(op_id)
            .map(|c| (c.key.as_str(), &c.rule))
    }

    /// Decide before anything is sent. `guest_tags` are the guests' tags as
    /// `/cluster/resources` reports them ([`GuestTags`]; a guest missing there has none),
    /// `None` when they were not looked up. When tags are protected and a state-changing op
    /// names a guest whose tags are unknown, the op is refused — the policy fails closed
    /// rather than guess. The guests an op names are its VMID parameters and the guest whose
    /// backup an archive parameter is (restoring, removing or pruning a protected guest's
    /// backups is a change to it).
    ///
    /// `Err` is always [`Error::Policy`] (exit 3) with a one-line reason.
    fn check_one(&self, inv: &Invocation, guest_tags: Option<&GuestTags>) -> Result<Decision> {
        let op = inv.op;
        let target = match inv.vmid() {
            Some(id) => format!("{} on {id}", op.id),
            None => op.id.to_string(),
        };
        let refuse = |why: String, key: &str| {
            Err(Error::Policy(format!(
                "policy refuses {target}: {why} ({key} in {})",
                self.source
            )))
        };
        let rule = self.compiled_for(op).map(|c| (c.key.as_str(), &c.rule));
        if let Some((key, r)) = rule
            && r.action == Action::Deny
        {
            let why = r
                .reason
                .clone()
                .unwrap_or_else(|| format!("{} is denied", op.id));
            return refuse(why, &format!("policy.ops.{key}"));
        }
        if self.read_only && op.risk != Risk::Read {
            return refuse(
                format!("read_only is on and {} {}", op.id, what_it_does(op.risk)),
                "policy.read_only",
            );
        }
        if op.risk != Risk::Read {
            let guests = guest_ids(inv);
            if let Some(g) = guests.iter().find(|g| self.protect_ids.contains(&g.vmid)) {
                return refuse(format!("{g} is protected"), "policy.protect");
            }
            if !self.protect_tags.is_empty() {
                for g in &guests {
                    let Some(known) = guest_tags else {
                        return refuse(
                            format!(
                                "cannot tell whether {g} carries a protected tag ({}): its tags are unknown",
                                self.protect_tags.join(", ")
                            ),
                            "policy.protect",
                        );
                    };
                    if let Some(t) = known
                        .of(g.vmid)
                        .iter()
                        .find(|t| self.protect_tags.iter().any(|p| p.eq_ignore_ascii_case(t)))
                    {
                        return refuse(
                            format!("{g} carries the protected tag '{t}'"),
                            "policy.protect",
                        );
                    }
                }
            }
        }
        match rule {
            Some((key, r)) if r.action == Action::Confirm => Ok(Decision::Confirm(Confirmation {
                phrase: inv
                    .phrase()
                    .unwrap_or_else(|| crate::policy::confirm::policy_phrase(inv)),
                rule: format!("policy.ops.{key} in {}", self.source),
                reason: r.reason.clone(),
            })),
            Some((key, r)) if matches!(r.action, Action::Approve | Action::Grantable) => {
                Ok(Decision::Approve {
                    rule: format!("policy.ops.{key} in {}", self.source),
                    reason: r.reason.clone(),
                    grant_only: r.action == Action::Grantable,
                })
            }
            _ => Ok(Decision::Allow),
        }
    }

    /// Whether [`Policy::check`] needs the guest's tags (some protect entry is a tag). The
    /// caller then reads them from the guest's `/cluster/resources` entry — the same lookup
    /// that finds the guest's node.
    fn needs_guest_tags_one(&self) -> bool {
        !self.protect_tags.is_empty()
    }

    /// Whether an op should be offered at all (MCP tool listing): false when a `deny` rule or
    /// `read_only` refuses it whatever its arguments. Protection depends on the arguments, so
    /// it does not hide an op.
    fn allows_listing_one(&self, op: &Op) -> bool {
        let denied = self
            .compiled_for(op)
            .is_some_and(|c| c.rule.action == Action::Deny);
        let read_only_blocks = self.read_only && op.risk != Risk::Read;
        !(denied || read_only_blocks)
    }
}

/// Layers: `--policy FILE` and `PXAGENT_POLICY` add to the config's policy; they
/// never replace it. Every check asks every layer, and the most restrictive answer wins:
/// any refusal refuses, `approve` beats `confirm` beats `allow`, limits add up, `read_only` and
/// `protect` accumulate, an allowlist must admit in every layer that has one.
impl Policy {
    /// This policy narrowed by `more` (checked after it). Nothing in `more` can widen it.
    pub fn narrowed_by(mut self, more: Policy) -> Policy {
        self.source = format!("{} + {}", self.source, more.source);
        self.also.push(more);
        self
    }

    fn layers(&self) -> impl Iterator<Item = &Policy> {
        std::iter::once(self).chain(self.also.iter())
    }

    /// The rate limits of an op: the `limits` of the most specific rule in each layer that
    /// states some, all of them counting; when no layer states any, 10 per minute for ops
    /// that run a command in a guest, else none.
    pub fn limits_for(&self, op: &Op) -> Vec<Limit> {
        let mut all: Vec<Limit> = Vec::new();
        let stated = self
            .layers()
            .filter_map(|p| p.compiled_for(op).and_then(|c| c.rule.limits.clone()));
        for l in stated.flatten() {
            if !all.contains(&l) {
                all.push(l);
            }
        }
        if all.is_empty() {
            return self.limits_for_one(op);
        }
        all
    }

    /// Where an op's limits were written (`None`: pxagent's default).
    pub fn limits_source(&self, op: &Op) -> Option<String> {
        self.layers().find_map(|p| p.limits_source_one(op))
    }

    /// Whether every layer's allowlist admits this guest command (program first). `Err` is
    /// [`Error::Policy`] (exit 3) naming the allowed shapes.
    pub fn check_command(&self, inv: &Invocation, argv: &[String]) -> Result<()> {
        self.layers()
            .try_for_each(|p| p.check_command_one(inv, argv))
    }

    /// Whether a file may move between the client and a guest in the flow of `exec_op`
    /// (`vm.exec`, `ct.exec`) in every layer: the rule's `push`/`pull` globs decide; a rule
    /// with a command allowlist and no list for that direction allows none (fail closed);
    /// otherwise files move freely, as the commands do. `Err` is [`Error::Policy`] (exit 3).
    pub fn check_transfer(&self, exec_op: &Op, dir: Transfer, path: &str) -> Result<()> {
        if let Some(why) = crate::catalog::kind::guest_path_problem(path) {
            return Err(Error::Policy(format!(
                "policy refuses to move {} for {}: {why}; name the guest file by its plain absolute path",
                crate::base::text::printable(path),
                exec_op.id
            )));
        }
        self.layers()
            .try_for_each(|p| p.check_transfer_one(exec_op, dir, path))
    }

    /// Whether `ct exec` may enter privileged containers (every layer must say so).
    pub fn allow_privileged_ct_exec(&self) -> bool {
        self.layers().all(|p| p.allow_privileged_ct_exec_one())
    }

    /// Whether `read_only` is on in any layer.
    pub fn read_only(&self) -> bool {
        self.layers().any(|p| p.read_only_one())
    }

    /// The rule that applies to an op id and the key it was written under (for dry-run
    /// output): the first layer's most specific match.
    pub fn rule_for(&self, op_id: &str) -> Option<(&str, &Rule)> {
        self.layers().find_map(|p| p.rule_for_one(op_id))
    }

    /// Decide before anything is sent (see the layer rules above). `guest_tags` are the tags
    /// of the guest named by the op's `vmid` (`None`: not looked up; a layer that protects tags
    /// then refuses a change). `Err` is always [`Error::Policy`] (exit 3).
    pub fn check(&self, inv: &Invocation, guest_tags: Option<&GuestTags>) -> Result<Decision> {
        let mut out = Decision::Allow;
        for p in self.layers() {
            let d = p.check_one(inv, guest_tags)?;
            let rank = |d: &Decision| match d {
                Decision::Allow => 0,
                Decision::Confirm(_) => 1,
                Decision::Approve {
                    grant_only: false, ..
                } => 2,
                Decision::Approve {
                    grant_only: true, ..
                } => 3,
            };
            if rank(&d) > rank(&out) {
                out = d;
            }
        }
        Ok(out)
    }

    /// Whether the host may be asked to download from `url`: a URL whose host is
    /// `localhost`, a loopback, link-local, private, unspecified, broadcast or multicast
    /// address, or a number that some resolver reads as one (`127.1`, `2130706433`,
    /// `0x7f000001`), would reach inside the host's own network; it passes only when a layer
    /// lists it under `download_hosts`. A layer that has such a list admits only its hosts.
    /// `Err` is [`Error::Usage`] (exit 2): nothing was sent.
    pub fn check_download(&self, url: &str) -> Result<()> {
        let host = url_host(url).to_ascii_lowercase();
        let shown = crate::base::text::printable(&host);
        for p in self.layers() {
            if let Some(list) = &p.download_hosts
                && !list.contains(&host)
            {
                return Err(Error::usage(format!(
                    "downloads from {shown} are refused: it is not in download_hosts ({}) in {}",
                    list.join(", "),
                    p.source
                )));
            }
        }
        let listed = self.lists_download_host(&host);
        if let (Some(why), false) = (internal_host(&host), listed) {
            return Err(Error::usage(format!(
                "downloads from {shown} are refused: it is {why}, inside the host's own network; list it under the policy's download_hosts to allow it"
            )));
        }
        Ok(())
    }

    /// Whether some layer lists `host` (lower-cased) under `download_hosts`.
    fn lists_download_host(&self, host: &str) -> bool {
        self.layers().any(|p| {
            p.download_hosts
                .as_ref()
                .is_some_and(|l| l.iter().any(|h| h == host))
        })
    }

    /// [`Policy::check_download`], and on the host itself: a URL whose host is one of `names`
    /// (the host's `/etc/hosts`, its own name: what its resolver answers without DNS) is
    /// refused unless a layer lists it under `download_hosts`. The gate calls this.
    pub fn check_download_on_host(&self, url: &str, names: &[String]) -> Result<()> {
        self.check_download(url)?;
        let host = url_host(url).to_ascii_lowercase();
        let host = host.trim_end_matches('.');
        if !self.lists_download_host(host) && names.iter().any(|n| n.eq_ignore_ascii_case(host)) {
            return Err(Error::usage(format!(
                "downloads from {} are refused: the host's own /etc/hosts or hostname names it, so it is inside the host's own network; list it under the policy's download_hosts to allow it",
                crate::base::text::printable(host)
            )));
        }
        Ok(())
    }

    /// Whether the invocation may name its NFS server ([`crate::catalog::Op::names_a_server`]):
    /// every layer that lists `nfs_servers` must list it; and where `required` (the gate, for
    /// the host policy), some layer must have the list at all, so that a host whose admin named
    /// no server adds no NFS storage. `Err` is [`Error::Policy`] (exit 3).
    pub fn check_nfs_server(&self, inv: &Invocation, required: bool) -> Result<()> {
        let Some(server) = inv
            .op
            .params
            .iter()
            .filter(|p| p.kind == Kind::Server)
            .find_map(|p| inv.values.get(p.name))
        else {
            return Ok(());
        };
        let server = server.to_ascii_lowercase();
        let shown = crate::base::text::printable(&server);
        let mut listed = false;
        for p in self.layers() {
            if let Some(list) = &p.nfs_servers {
                if !list.contains(&server) {
                    return Err(Error::Policy(format!(
                        "NFS server {shown} is not one the admin named (nfs_servers: {}) in {}: a share's files are written by its server and read by root-run Proxmox code",
                        list.join(", "),
                        p.source
                    )));
                }
                listed = true;
            }
        }
        if required && !listed {
            return Err(Error::Policy(format!(
                "NFS server {shown} is refused: the host policy names no NFS servers (nfs_servers), and a share's files are written by its server and read by root-run Proxmox code; the admin lists trusted servers there"
            )));
        }
        Ok(())
    }

    /// Whether [`Policy::check_storage_trust`] has anything to judge for this invocation: it
    /// names storages whose files root-run code trusts ([`crate::catalog::Precheck::Trusted`])
    /// and some layer names its NFS servers. Without such a list every NFS storage is the
    /// admin's (the account cannot add one: the gate and the render refuse every server then).
    pub fn wants_storage_config(&self, inv: &Invocation) -> bool {
        self.layers().any(|p| p.nfs_servers.is_some())
            && !inv.op.trusted_storages(&inv.values).is_empty()
    }

    /// The storages of `inv` whose files root-run Proxmox code trusts must not be NFS
    /// storages on a server some layer's `nfs_servers` leaves out: those files are whoever runs
    /// that server's (a restore's `args:` line, an image that is a symlink to a host disk).
    /// `config` is `GET /storage`'s answer ([`crate::catalog::ops::STORAGE_CONFIG`]). A storage
    /// the configuration lacks passes (Proxmox refuses it itself). `Err` is [`Error::Policy`]
    /// (exit 3).
    pub fn check_storage_trust(&self, inv: &Invocation, config: &serde_json::Value) -> Result<()> {
        for id in inv.op.trusted_storages(&inv.values) {
            let Some(entry) = config
                .as_array()
                .into_iter()
                .flatten()
                .find(|e| e.get("storage").and_then(|s| s.as_str()) == Some(id.as_str()))
            else {
                continue;
            };
            if entry.get("type").and_then(|t| t.as_str()) != Some("nfs") {
                continue;
            }
            let server = entry
                .get("server")
                .and_then(|s| s.as_str())
                .unwrap_or_default()
                .to_ascii_lowercase();
            for p in self.layers() {
                if let Some(list) = p.nfs_servers.as_ref().filter(|l| !l.contains(&server)) {
                    return Err(Error::Policy(format!(
                        "storage {id} is an NFS storage on {}, which is not one the admin named (nfs_servers: {}) in {}: root-run Proxmox code would trust its files (restore, import, boot, backup), and they are written by whoever runs that server; use a storage on a named server",
                        crate::base::text::printable(&server),
                        list.join(", "),
                        p.source
                    )));
                }
            }
        }
        Ok(())
    }

    /// Where an invocation reaches beyond the guests: every URL it carries
    /// ([`Policy::check_download_on_host`]) and its NFS server ([`Policy::check_nfs_server`]).
    /// `host_names` is `Some` on the host itself (the gate): the names its resolver answers
    /// without DNS, and the host policy must name an NFS server; the client passes `None`.
    pub fn check_destinations(
        &self,
        inv: &Invocation,
        host_names: Option<&[String]>,
    ) -> Result<()> {
        inv.op
            .params
            .iter()
            .filter(|p| p.kind == Kind::Url)
            .filter_map(|p| inv.values.get(p.name))
            .try_for_each(|u| self.check_download_on_host(u, host_names.unwrap_or_default()))?;
        self.check_nfs_server(inv, host_names.is_some())?;
        self.check_fill_limit(inv)
    }

    /// A node or cluster firewall rule ([`crate::catalog::Precheck::KeepsSsh`]) must not drop
    /// `path`, the SSH connection pxagent uses, unless every layer sets `allow_ssh_lockout`.
    /// `Err` is [`Error::Policy`] (exit 3).
    pub fn check_ssh_path(
        &self,
        inv: &Invocation,
        path: &crate::catalog::firewall::SshPath,
    ) -> Result<()> {
        if !inv
            .op
            .prechecks
            .contains(&crate::catalog::Precheck::KeepsSsh)
        {
            return Ok(());
        }
        let Some(why) = crate::catalog::firewall::drops_ssh(&inv.values, path) else {
            return Ok(());
        };
        match self.layers().find(|p| !p.allow_ssh_lockout) {
            None => Ok(()),
            Some(p) => Err(Error::Policy(format!(
                "{why}; refused by the policy ({}): only allow_ssh_lockout: true admits such a rule; narrow the rule (--source, --dport, --proto) so that it spares that connection",
                p.source
            ))),
        }
    }

    /// The strictest `iso_max_used` of every layer, if any names one.
    pub fn iso_max_used(&self) -> Option<u8> {
        self.layers().filter_map(|p| p.iso_max_used).min()
    }

    /// An upload's `--max-used` may not pass any layer's `iso_max_used` (exit 3).
    fn check_fill_limit(&self, inv: &Invocation) -> Result<()> {
        let Some(limit) = self.iso_max_used() else {
            return Ok(());
        };
        for p in inv.op.params.iter().filter(|p| p.kind == Kind::FillPercent) {
            let Some(asked) = inv.values.get(p.name).and_then(|v| v.parse::<u8>().ok()) else {
                continue;
            };
            if asked > limit {
                return Err(Error::Policy(format!(
                    "`{}` asks to fill the storage up to {asked}%, but the policy allows at most {limit}% (iso_max_used); pass --max-used {limit} or less",
                    inv.display()
                )));
            }
        }
        Ok(())
    }

    /// Whether [`Policy::check`] needs the guest's tags (some layer protects a tag).
    pub fn needs_guest_tags(&self) -> bool {
        self.layers().any(|p| p.needs_guest_tags_one())
    }

    /// Whether [`Policy::check`] of this invocation needs guests' tags: some layer protects a
    /// tag, and the op changes state and names a guest (a VMID, or an archive's guest). The
    /// front ends then read `/cluster/resources` once ([`GuestTags::from_resources`]).
    pub fn wants_tags(&self, inv: &Invocation) -> bool {
        self.needs_guest_tags() && inv.op.risk != Risk::Read && !guest_ids(inv).is_empty()
    }

    /// Whether an op should be offered at all (MCP tool listing): false when any layer's
    /// `deny` rule or `read_only` refuses it whatever its arguments.
    pub fn allows_listing(&self, op: &Op) -> bool {
        self.layers().all(|p| p.allows_listing_one(op))
    }
}

/// The host part of an `http(s)://host[:port]/…` URL (as [`crate::catalog::Kind::Url`]
/// admits them: no credentials, no IPv6 literals).
fn url_host(url: &str) -> &str {
    let rest = url.split_once("://").map(|(_, r)| r).unwrap_or(url);
    let end = rest.find([':', '/', '?', '#']).unwrap_or(rest.len());
    &rest[..end]
}

/// Suffixes of names that belong to a local network, never to the internet: mDNS
/// (`.local`), cloud and cluster internals (`.internal`: `metadata.google.internal`), resolver
/// defaults (`.localdomain`, `.lan`, `.home`, `.home.arpa`, RFC 8375) and the private-use names
/// people give their networks (`.intranet`, `.corp`, `.private`).
const LOCAL_SUFFIXES: &[&str] = &[
    "local",
    "internal",
    "localdomain",
    "lan",
    "home",
    "home.arpa",
    "intranet",
    "corp",
    "private",
];

/// Why a download host would reach inside the host's own network, if it would, as far as a
/// name alone tells: what DNS answers on the host, and where a redirect leads, cannot be known
/// here (docs/security.md says so).
fn internal_host(host: &str) -> Option<&'static str> {
    let host = host.trim_end_matches('.');
    if host.starts_with("localhost") || host.ends_with(".localhost") {
        return Some("a localhost name");
    }
    // Every label numeric (decimal, octal, 0x-hex): inet_aton reads it as an address, in
    // forms Rust's parser does not accept (`127.1`, `2130706433`, `0177.0.0.1`).
    let numeric = |l: &str| {
        !l.is_empty()
            && (l.bytes().all(|b| b.is_ascii_digit())
                || l.strip_prefix("0x")
                    .is_some_and(|h| h.bytes().all(|b| b.is_ascii_hexdigit())))
    };
    if host.split('.').all(numeric) {
        return match host.parse::<std::net::Ipv4Addr>() {
            Ok(ip) => reserved_ipv4(ip),
            // A number in a form only some resolvers read: no way to tell where it goes.
            Err(_) => Some("a numeric address in a non-standard form"),
        };
    }
    if !host.contains('.') {
        return Some(
            "a name without a domain, which the host's resolver completes with its own search domains or /etc/hosts (a cluster node, a metadata service)",
        );
    }
    if LOCAL_SUFFIXES
        .iter()
        .any(|s| host == *s || host.ends_with(&format!(".{s}")))
    {
        return Some("a name of a local network (.local, .internal, .lan, …)");
    }
    // Wildcard DNS (`10.0.0.1.nip.io`, `127-0-0-1.sslip.io`) answers with the address the name
    // spells: a name that spells an internal one is refused like the address.
    let labels: Vec<&str> = host.split('.').collect();
    let spelled = [
        labels.get(..4).map(|l| l.join(".")),
        labels.first().map(|l| l.replace('-', ".")),
    ];
    for s in spelled.into_iter().flatten() {
        if let Ok(ip) = s.parse::<std::net::Ipv4Addr>()
            && reserved_ipv4(ip).is_some()
        {
            return Some("a name that spells an internal address (wildcard DNS answers with it)");
        }
    }
    None
}

/// Why an IPv4 address is not a public internet address, if it is not (RFC 6890's special-purpose
/// registry: every block that is not globally reachable).
fn reserved_ipv4(ip: std::net::Ipv4Addr) -> Option<&'static str> {
    let [a, b, c, _] = ip.octets();
    match () {
        _ if ip.is_loopback() => Some("a loopback address"),
        _ if ip.is_private() => Some("a private address (RFC 1918)"),
        _ if ip.is_link_local() => Some("a link-local address (cloud metadata lives there)"),
        _ if ip.is_unspecified() || a == 0 => Some("an address of 'this network' (0.0.0.0/8)"),
        _ if ip.is_broadcast() => Some("the broadcast address"),
        _ if ip.is_multicast() => Some("a multicast address"),
        _ if a == 100 && (b & 0xc0) == 64 => Some("a shared address (RFC 6598)"),
        _ if a == 192 && b == 0 && c == 0 => Some("an IETF protocol address (192.0.0.0/24)"),
        _ if (a, b, c) == (192, 0, 2)
            || (a, b, c) == (198, 51, 100)
            || (a, b, c) == (203, 0, 113) =>
        {
            Some("a documentation address (RFC 5737)")
        }
        _ if a == 198 && (b & 0xfe) == 18 => Some("a benchmarking address (198.18.0.0/15)"),
        _ if (a, b, c) == (192, 88, 99) => Some("a deprecated relay address (192.88.99.0/24)"),
        _ if a >= 240 => Some("a reserved address (240.0.0.0/4)"),
        _ => None,
    }
}

/// Which way a file moves in a guest command's flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transfer {
    /// Into the guest (`--push`).
    Push,
    /// Out of the guest (`--pull`).
    Pull,
}

/// A guest path glob, matched segment by segment: `*` matches within one segment, `**` (a
/// whole segment) matches zero or more whole segments. No wildcard ever matches a `.` or `..`
/// segment or an empty one, so a glob cannot be left through the path's own text.
fn path_glob(glob: &str, path: &str) -> bool {
    fn matches(glob: &[&str], path: &[&str]) -> bool {
        match glob.split_first() {
            None => path.is_empty(),
            Some((&"**", rest)) => {
                // Zero segments (not at the end: `/srv/**` is what is inside /srv), or one
                // more acceptable segment and try again.
                (!rest.is_empty() && matches(rest, path))
                    || (rest.is_empty() && !path.is_empty() && path.iter().all(|s| wild_ok(s)))
                    || path
                        .split_first()
                        .is_some_and(|(seg, tail)| wild_ok(seg) && matches(glob, tail))
            }
            Some((g, rest)) => path.split_first().is_some_and(|(seg, tail)| {
                (if g.contains('*') {
                    wild_ok(seg) && glob_match(g, seg)
                } else {
                    g == seg
                }) && matches(rest, tail)
            }),
        }
    }
    fn wild_ok(seg: &str) -> bool {
        !matches!(seg, "" | "." | "..")
    }
    if crate::catalog::kind::guest_path_problem(path).is_some() {
        return false;
    }
    let g: Vec<&str> = glob.split('/').collect();
    let p: Vec<&str> = path.split('/').collect();
    matches(&g, &p)
}

/// Split a guest's `tags` field as Proxmox writes it (`;`-separated in `/cluster/resources`;
/// `,` and spaces are accepted on input too) into tags, dropping empty pieces.
pub fn parse_tags(s: &str) -> Vec<String> {
    s.split([';', ',', ' ', '\t'])
        .filter(|t| !t.is_empty())
        .map(str::to_string)
        .collect()
}

/// What an op of this risk does, for the read-only refusal.
fn what_it_does(risk: Risk) -> &'static str {
    match risk {
        Risk::Read => "only reads",
        Risk::Change | Risk::Confirm => "changes state",
        Risk::Exec => "runs a command inside a guest",
    }
}

/// A guest an invocation names, and how (for messages).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Named {
    vmid: u64,
    /// How the invocation names it.
    via: Via,
}

/// How an invocation names a guest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Via {
    /// A VMID parameter.
    Param,
    /// A backup archive's name.
    Archive,
    /// A task's UPID (`UPID:node:…:vzdump:100:user:`): stopping a guest's task is a change
    /// to that guest.
    Task,
}

impl std::fmt::Display for Named {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.via {
            Via::Param => write!(f, "guest {}", self.vmid),
            Via::Archive => write!(f, "guest {} (the archive is its backup)", self.vmid),
            Via::Task => write!(f, "guest {} (the task is its)", self.vmid),
        }
    }
}

/// Every guest the invocation names: every parameter of kind VMID (the guest, and a clone's
/// or restore's target), then the guest whose backup each archive parameter is, then the
/// guest whose task each UPID parameter names.
fn guest_ids(inv: &Invocation) -> Vec<Named> {
    let kind_of = |name: &str| inv.op.param(name).map(|p| p.kind);
    let of_kind = |kind: Kind, via: Via, id: fn(&str) -> Option<u64>| {
        inv.values
            .iter()
            .filter(move |(name, _)| kind_of(name) == Some(kind))
            .filter_map(move |(_, v)| id(v))
            .map(move |vmid| Named { vmid, via })
    };
    let mut out: Vec<Named> = Vec::new();
    for g in of_kind(Kind::Vmid, Via::Param, |v| v.parse().ok())
        .chain(of_kind(Kind::Archive, Via::Archive, archive_vmid))
        .chain(of_kind(Kind::Upid, Via::Task, upid_vmid))
    {
        if !out.iter().any(|o| o.vmid == g.vmid) {
            out.push(g);
        }
    }
    out
}

/// The guest a task's UPID names: its ID field (`UPID:node:pid:pstart:start:type:ID:user:`)
/// when that is a VMID; node-wide tasks name none.
fn upid_vmid(upid: &str) -> Option<u64> {
    let id = upid.split(':').nth(6)?;
    if id.is_empty() || !id.bytes().all(|b| b.is_ascii_digit()) || id.starts_with('0') {
        return None;
    }
    id.parse().ok()
}

/// The VMID in a backup archive's name ([`Kind::Archive`]:
/// `STORAGE:backup/vzdump-qemu|lxc-VMID-DATE…`).
fn archive_vmid(volid: &str) -> Option<u64> {
    let (_, rest) = volid.split_once(":backup/vzdump-")?;
    let rest = rest
        .strip_prefix("qemu-")
        .or_else(|| rest.strip_prefix("lxc-"))?;
    rest.split('-').next()?.parse().ok()
}

/// The tags of the cluster's guests by VMID, as `/cluster/resources` reports them: what
/// `protect` by tag judges. A guest that is not listed has no tags (or does not exist yet).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GuestTags(std::collections::BTreeMap<u64, Vec<String>>);

impl GuestTags {
    /// Every guest's tags in a `/cluster/resources` answer.
    pub fn from_resources(resources: &serde_json::Value) -> GuestTags {
        let mut map = std::collections::BTreeMap::new();
        for r in resources.as_array().into_iter().flatten() {
            if let (Some(vmid), Some(tags)) = (
                r.get("vmid").and_then(serde_json::Value::as_u64),
                r.get("tags").and_then(serde_json::Value::as_str),
            ) {
                map.insert(vmid, parse_tags(tags));
            }
        }
        GuestTags(map)
    }

    /// These tags with guest `vmid` carrying `tags` (tests and callers that know one guest).
    pub fn with(mut self, vmid: u64, tags: Vec<String>) -> GuestTags {
        self.0.insert(vmid, tags);
        self
    }

    /// The tags of guest `vmid` (empty when it has none).
    pub fn of(&self, vmid: u64) -> &[String] {
        self.0.get(&vmid).map(Vec::as_slice).unwrap_or(&[])
    }
}

/// `*` matches any run of characters (dots included); everything else is literal.
pub fn glob_match(pattern: &str, text: &str) -> bool {
    let (p, t) = (pattern.as_bytes(), text.as_bytes());
    let (mut pi, mut ti) = (0, 0);
    // Where the last `*` was and the text position it currently stands for.
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        if pi < p.len() && p[pi] == b'*' {
            star = Some((pi, ti));
            pi += 1;
        } else if pi < p.len() && p[pi] == t[ti] {
            pi += 1;
            ti += 1;
        } else if let Some((sp, st)) = star {
            pi = sp + 1;
            ti = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == b'*')
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::testing::inv;

    const SRC: &str = "/root/.config/pxagent/config.yaml";

    use crate::catalog::{self, OPS};
    use crate::policy::schema::PolicyConfig;

    fn policy(yaml: &str) -> Result<Policy> {
        let cfg: PolicyConfig =
            yaml_serde::from_str(yaml).map_err(|e| Error::usage(e.to_string()))?;
        Policy::from_config(cfg, SRC)
    }

    fn refusal(p: &Policy, i: &Invocation, tags: Option<&GuestTags>) -> String {
        let e = p.check(i, tags).unwrap_err();
        assert_eq!(e.exit_code(), 3, "{e}");
        let msg = e.to_string();
        assert!(!msg.contains('\n'), "one line: {msg}");
        msg
    }

    fn tags(s: &str) -> Vec<String> {
        parse_tags(s)
    }

    /// Guest 100 carries these tags.
    fn on100(s: &str) -> GuestTags {
        GuestTags::default().with(100, parse_tags(s))
    }

    #[test]
    fn no_policy_allows_everything_and_keeps_the_catalog_phrase() {
        let p = Policy::default();
        assert_eq!(
            p.check(&inv("vm.start", &[("vmid", "100")]), None).unwrap(),
            Decision::Allow
        );
        // The catalog's soft blacklist is not the policy's business: still Allow here,
        // the confirmation gate asks for `yes destroy 100`.
        assert_eq!(
            p.check(&inv("vm.destroy", &[("vmid", "100")]), None)
                .unwrap(),
            Decision::Allow
        );
        assert!(OPS.iter().all(|op| p.allows_listing(op)));
        assert!(!p.needs_guest_tags());
    }

    #[test]
    fn deny_with_and_without_reason() {
        let p = policy(
            "ops:\n  vm.destroy: deny\n  vm.stop: {action: deny, reason: \"use vm shutdown\"}\n",
        )
        .unwrap();
        assert_eq!(
            refusal(&p, &inv("vm.destroy", &[("vmid", "100")]), None),
            format!(
                "policy refuses vm.destroy on 100: vm.destroy is denied (policy.ops.vm.destroy in {SRC})"
            )
        );
        assert_eq!(
            refusal(&p, &inv("vm.stop", &[("vmid", "101")]), None),
            format!("policy refuses vm.stop on 101: use vm shutdown (policy.ops.vm.stop in {SRC})")
        );
        assert_eq!(
            p.check(&inv("vm.start", &[("vmid", "100")]), None).unwrap(),
            Decision::Allow
        );
        assert!(!p.allows_listing(catalog::find("vm.destroy").unwrap()));
        assert!(p.allows_listing(catalog::find("vm.start").unwrap()));
    }

    #[test]
    fn confirm_turns_any_op_into_a_soft_blacklisted_one() {
        let p = policy(
            "ops:\n  vm.start: {action: confirm, reason: production}\n  vm.destroy: confirm\n",
        )
        .unwrap();
        let i = inv("vm.start", &[("vmid", "100")]);
        let Decision::Confirm(c) = p.check(&i, None).unwrap() else {
            panic!("expected confirm")
        };
        assert_eq!(c.phrase, "yes vm start 100");
        assert_eq!(c.rule, format!("policy.ops.vm.start in {SRC}"));
        let e = c.refusal(&i);
        assert_eq!(e.exit_code(), 4);
        assert_eq!(
            e.to_string(),
            format!(
                "I won't run `vm start 100` without explicit confirmation — local policy requires confirmation: production (policy.ops.vm.start in {SRC}). Reply `yes vm start 100` if you want me to proceed."
            )
        );
        // A catalog confirm op keeps its own phrase and wording.
        let d = inv("vm.destroy", &[("vmid", "100")]);
        let Decision::Confirm(c) = p.check(&d, None).unwrap() else {
            panic!("expected confirm")
        };
        assert_eq!(c.phrase, "yes destroy 100");
        assert!(c.refusal(&d).to_string().contains("irrecoverably"));
        // Confirm does not hide the op.
        assert!(p.allows_listing(catalog::find("vm.start").unwrap()));
    }

    #[test]
    fn allow_never_waives_the_catalog_phrase() {
        let p = policy("ops:\n  vm.destroy: allow\n").unwrap();
        let i = inv("vm.destroy", &[("vmid", "100")]);
        assert_eq!(p.check(&i, None).unwrap(), Decision::Allow);
        assert_eq!(i.phrase().as_deref(), Some("yes destroy 100"));
    }

    #[test]
    fn exact_beats_glob_and_longer_glob_beats_shorter() {
        let p = policy("ops:\n  \"*\": deny\n  vm.*: confirm\n  vm.s*: allow\n  vm.stop: deny\n")
            .unwrap();
        assert_eq!(p.rule_for("vm.destroy").unwrap().0, "vm.*");
        assert_eq!(p.rule_for("vm.start").unwrap().0, "vm.s*");
        assert_eq!(p.rule_for("vm.stop").unwrap().0, "vm.stop");
        assert_eq!(p.rule_for("ct.start").unwrap().0, "*");
        assert!(matches!(
            p.check(&inv("vm.destroy", &[("vmid", "100")]), None),
            Ok(Decision::Confirm(_))
        ));
        assert_eq!(
            p.check(&inv("vm.start", &[("vmid", "100")]), None).unwrap(),
            Decision::Allow
        );
        assert!(
            refusal(&p, &inv("vm.stop", &[("vmid", "100")]), None).contains("policy.ops.vm.stop")
        );
        assert!(
            refusal(&p, &inv("ct.start", &[("vmid", "200")]), None).contains("(policy.ops.* in")
        );
        assert!(!p.allows_listing(catalog::find("ct.start").unwrap()));
    }

    /// An NFS storage's server must be one a policy names; the gate (required)
    /// refuses every server while the host policy names none.
    /// `iso_max_used` caps an upload's `--max-used`; the strictest layer wins.
    #[test]
    fn the_fill_limit_of_an_upload_is_the_policys() {
        let upload = |max: &str| {
            let mut v = std::collections::BTreeMap::new();
            v.insert("file", "a.iso".to_string());
            v.insert("max_used", max.to_string());
            Invocation::new(&crate::catalog::ops::ISO_UPLOAD, v).unwrap()
        };
        let none = policy("{}").unwrap();
        assert!(none.check_destinations(&upload("99"), None).is_ok());
        let p = policy("iso_max_used: 80\n").unwrap();
        assert!(p.check_destinations(&upload("80"), None).is_ok());
        let e = p.check_destinations(&upload("81"), None).unwrap_err();
        assert_eq!(e.exit_code(), 3);
        assert!(e.to_string().contains("at most 80%"), "{e}");
        let both = p.narrowed_by(policy("iso_max_used: 50\n").unwrap());
        assert_eq!(both.iso_max_used(), Some(50));
        assert!(both.check_destinations(&upload("60"), None).is_err());
        assert!(policy("iso_max_used: 100\n").is_err());
        assert!(policy("iso_max_used: 0\n").is_err());
    }

    #[test]
    fn nfs_servers_are_the_admins() {
        let add = |server: &str| {
            inv(
                "storage.add-nfs",
                &[
                    ("storage", "n1"),
                    ("server", server),
                    ("export", "/export/pve"),
                ],
            )
        };
        let none = policy("ops: {}\n").unwrap();
        none.check_nfs_server(&add("nas"), false).unwrap();
        let e = none.check_nfs_server(&add("nas"), true).unwrap_err();
        assert_eq!(e.exit_code(), 3);
        assert!(e.to_string().contains("names no NFS servers"), "{e}");
        let named = policy("nfs_servers: [NAS, 192.0.2.30]\n").unwrap();
        named.check_nfs_server(&add("nas"), true).unwrap();
        named.check_nfs_server(&add("192.0.2.30"), true).unwrap();
        for other in ["evil.example.org", "192.0.2.3", "nas.example.org"] {
            let e = named.check_nfs_server(&add(other), true).unwrap_err();
            assert!(e.to_string().contains("not one the admin named"), "{e}");
        }
        // Every layer with a list must list it.
        let both = named.narrowed_by(policy("nfs_servers: [192.0.2.30]\n").unwrap());
        assert!(both.check_nfs_server(&add("nas"), true).is_err());
        both.check_nfs_server(&add("192.0.2.30"), true).unwrap();
        // Other ops name no server.
        let status = inv("vm.status", &[("vmid", "100")]);
        none.check_nfs_server(&status, true).unwrap();
    }

    /// Where a policy names its NFS servers, ops whose storage root-run code trusts
    /// refuse an NFS storage on any other server; without a list nothing is read or refused.
    #[test]
    fn storages_on_unnamed_nfs_servers_are_not_trusted() {
        let config = serde_json::json!([
            {"storage": "local", "type": "dir", "path": "/var/lib/vz"},
            {"storage": "nas1", "type": "nfs", "server": "NAS", "path": "/mnt/pve/nas1"},
            {"storage": "evil", "type": "nfs", "server": "198.51.100.66", "path": "/mnt/pve/evil"},
        ]);
        let restore = |archive: &str, target: Option<&str>| {
            let mut v = vec![("archive", archive), ("vmid", "950")];
            if let Some(t) = target {
                v.push(("storage", t));
            }
            inv("backup.restore", &v)
        };
        let evil_archive = "evil:backup/vzdump-qemu-950-2026_01_01-00_00_00.vma.zst";
        let nas_archive = "nas1:backup/vzdump-qemu-950-2026_01_01-00_00_00.vma.zst";
        let none = policy("ops: {}\n").unwrap();
        assert!(!none.wants_storage_config(&restore(evil_archive, None)));
        let named = policy("nfs_servers: [nas]\n").unwrap();
        assert!(named.wants_storage_config(&restore(evil_archive, None)));
        named
            .check_storage_trust(&restore(nas_archive, Some("local")), &config)
            .unwrap();
        for bad in [
            restore(evil_archive, None),
            restore(nas_archive, Some("evil")),
            inv("backup.create", &[("vmid", "100"), ("storage", "evil")]),
            inv(
                "vm.create-image",
                &[
                    ("vmid", "951"),
                    ("name", "x"),
                    ("image", "evil:import/host-disk.raw"),
                ],
            ),
            inv(
                "iso.download",
                &[("url", "https://example.org/a.iso"), ("storage", "evil")],
            ),
        ] {
            let e = named.check_storage_trust(&bad, &config).unwrap_err();
            assert_eq!(e.exit_code(), 3, "{}", bad.op.id);
            assert!(
                e.to_string()
                    .contains("storage evil is an NFS storage on 198.51.100.66"),
                "{e}"
            );
        }
        // Reads and removals judge nothing; a storage the configuration lacks is Proxmox's.
        let list = inv("backup.list", &[("storage", "evil")]);
        assert!(!named.wants_storage_config(&list));
        named
            .check_storage_trust(
                &restore(
                    "gone:backup/vzdump-qemu-950-2026_01_01-00_00_00.vma.zst",
                    None,
                ),
                &config,
            )
            .unwrap();
    }

    /// Marking a storage as a mount point takes it offline, so an entry for
    /// `storage.disable` covers it, and beats a looser entry for `storage.set`.
    #[test]
    fn marking_a_mount_point_counts_as_a_disable() {
        let offline = inv(
            "storage.set-mountpoint",
            &[("storage", "local"), ("is_mountpoint", "yes")],
        );
        let back = inv(
            "storage.set",
            &[("storage", "local"), ("is_mountpoint", "no")],
        );
        let p = policy("ops:\n  storage.disable: deny\n").unwrap();
        assert!(
            refusal(&p, &offline, Some(&GuestTags::default()))
                .contains("(policy.ops.storage.disable in")
        );
        assert!(p.check(&back, Some(&GuestTags::default())).is_ok());
        let both = policy("ops:\n  storage.disable: deny\n  storage.set: allow\n").unwrap();
        assert!(both.check(&offline, Some(&GuestTags::default())).is_err());
        // It is a confirm op with the phrase of a disable, in the profiles of a disable.
        assert_eq!(
            offline.op.confirm.map(|c| c.phrase),
            catalog::find("storage.disable")
                .unwrap()
                .confirm
                .map(|c| c.phrase)
        );
        assert_eq!(
            offline.op.profiles(),
            catalog::find("storage.disable").unwrap().profiles()
        );
    }

    #[test]
    fn an_entry_covers_the_ops_variants_unless_they_have_their_own() {
        let restore_force = inv(
            "backup.restore-overwrite",
            &[
                (
                    "archive",
                    "local:backup/vzdump-qemu-100-2026_11_01-02_00_00.vma.zst",
                ),
                ("vmid", "150"),
                ("force", "1"),
            ],
        );
        let restore_ct = inv(
            "backup.restore-ct",
            &[
                (
                    "archive",
                    "local:backup/vzdump-lxc-200-2026_11_01-02_00_00.tar.zst",
                ),
                ("vmid", "250"),
            ],
        );
        let p = policy("ops:\n  backup.restore: deny\n").unwrap();
        assert!(
            refusal(&p, &restore_force, Some(&GuestTags::default()))
                .contains("(policy.ops.backup.restore in")
        );
        assert!(p.check(&restore_ct, Some(&GuestTags::default())).is_err());
        for id in [
            "backup.restore",
            "backup.restore-ct",
            "backup.restore-overwrite",
            "backup.restore-ct-overwrite",
        ] {
            assert!(!p.allows_listing(catalog::find(id).unwrap()), "{id}");
        }
        assert!(p.allows_listing(catalog::find("backup.list").unwrap()));
        // A variant's own entry decides for it; a glob does not outrank the base's entry.
        let p =
            policy("ops:\n  \"*\": allow\n  backup.restore: deny\n  backup.restore-ct: allow\n")
                .unwrap();
        assert!(p.check(&restore_ct, Some(&GuestTags::default())).is_ok());
        assert!(
            p.check(&restore_force, Some(&GuestTags::default()))
                .is_err()
        );
        assert_eq!(
            p.rule_for("backup.restore-overwrite").unwrap().0,
            "backup.restore"
        );
        // Through two bases: the nearest exact entry wins, ties go to the stricter action.
        let p =
            policy("ops:\n  backup.restore-ct: allow\n  backup.restore-overwrite: deny\n").unwrap();
        assert_eq!(
            p.rule_for("backup.restore-ct-overwrite").unwrap().1.action,
            Action::Deny
        );
        let p = policy("ops:\n  vm.snapshot: {action: confirm, reason: change window}\n").unwrap();
        let ram = inv(
            "vm.snapshot-vmstate",
            &[("vmid", "100"), ("snapshot", "s1"), ("vmstate", "1")],
        );
        let Decision::Confirm(c) = p.check(&ram, Some(&GuestTags::default())).unwrap() else {
            panic!("the RAM snapshot is covered by vm.snapshot")
        };
        assert_eq!(c.phrase, "yes vmstate 100 s1");
        let p = policy("ops:\n  vm.snapshot: deny\n").unwrap();
        assert!(!p.allows_listing(&crate::catalog::ops::VM_SNAPSHOT_VMSTATE));
    }

    #[test]
    fn equally_specific_globs_pick_the_stricter_action_whatever_the_order() {
        // `vm.*` and `*.stop` both have three literal characters.
        for yaml in [
            "ops:\n  vm.*: allow\n  \"*.stop\": deny\n",
            "ops:\n  \"*.stop\": deny\n  vm.*: allow\n",
        ] {
            let p = policy(yaml).unwrap();
            assert_eq!(p.rule_for("vm.stop").unwrap().1.action, Action::Deny);
            assert_eq!(p.rule_for("vm.start").unwrap().1.action, Action::Allow);
        }
    }

    #[test]
    fn read_only_refuses_everything_but_reads() {
        let p = policy("read_only: true\n").unwrap();
        assert_eq!(
            refusal(&p, &inv("vm.start", &[("vmid", "100")]), None),
            format!(
                "policy refuses vm.start on 100: read_only is on and vm.start changes state (policy.read_only in {SRC})"
            )
        );
        assert_eq!(
            p.check(&inv("vm.status", &[("vmid", "100")]), None)
                .unwrap(),
            Decision::Allow
        );
        for op in OPS {
            assert_eq!(p.allows_listing(op), op.risk == Risk::Read, "{}", op.id);
        }
        // An explicit allow does not lift read_only.
        let p = policy("read_only: true\nops:\n  vm.start: allow\n").unwrap();
        assert!(p.check(&inv("vm.start", &[("vmid", "100")]), None).is_err());
    }

    #[test]
    fn protected_vmids_refuse_changes_but_not_reads() {
        let p = policy("protect: [100, 105]\n").unwrap();
        assert_eq!(
            refusal(&p, &inv("vm.destroy", &[("vmid", "100")]), None),
            format!(
                "policy refuses vm.destroy on 100: guest 100 is protected (policy.protect in {SRC})"
            )
        );
        assert!(refusal(&p, &inv("vm.start", &[("vmid", "105")]), None).contains("guest 105"));
        assert_eq!(
            p.check(&inv("vm.start", &[("vmid", "101")]), None).unwrap(),
            Decision::Allow
        );
        assert_eq!(
            p.check(&inv("vm.status", &[("vmid", "100")]), None)
                .unwrap(),
            Decision::Allow
        );
        // Protection depends on the target, so it never hides an op.
        assert!(OPS.iter().all(|op| p.allows_listing(op)));
    }

    #[test]
    fn every_vmid_parameter_is_checked() {
        // Ops with a second VMID (clone / restore targets) are checked on both; this runs
        // on whichever such ops the catalog has, and on the helper directly.
        let p = policy("protect: [105]\n").unwrap();
        for op in OPS.iter().filter(|op| op.risk != Risk::Read) {
            let vmid_params: Vec<&str> = op
                .params
                .iter()
                .filter(|pa| matches!(pa.kind, Kind::Vmid))
                .map(|pa| pa.name)
                .collect();
            if vmid_params.len() < 2 {
                continue;
            }
            let mut values = catalog::example_values(op);
            for (i, name) in vmid_params.iter().enumerate() {
                values.insert(name, if i == 0 { "101" } else { "105" }.to_string());
            }
            let i = Invocation::new(op, values).unwrap();
            assert!(
                p.check(&i, Some(&GuestTags::default())).is_err(),
                "{}",
                op.id
            );
        }
        let i = inv("vm.start", &[("vmid", "105")]);
        assert_eq!(
            guest_ids(&i),
            vec![Named {
                vmid: 105,
                via: Via::Param
            }]
        );
    }

    #[test]
    fn a_named_group_covers_every_op_of_its_effect_and_exact_entries_carve_exceptions() {
        let p = policy(
            "ops:\n  '@power-off': deny\n  vm.*: allow\n  vm.exec:\n    commands: [[/usr/bin/uptime]]\n",
        )
        .unwrap();
        for (id, kv) in [
            ("vm.stop", vec![("vmid", "100")]),
            ("vm.shutdown", vec![("vmid", "100")]),
            ("ct.reboot", vec![("vmid", "200")]),
            ("vm.rollback", vec![("vmid", "100"), ("snapshot", "s1")]),
        ] {
            let msg = refusal(&p, &inv(id, &kv), None);
            assert!(msg.contains("policy.ops.@power-off"), "{id}: {msg}");
        }
        // The group beats the glob `vm.*: allow`; the exact vm.exec entry beats the group.
        let exec = inv(
            "vm.exec",
            &[("vmid", "100"), ("command", r#"["/usr/bin/uptime"]"#)],
        );
        assert_eq!(p.check(&exec, None).unwrap(), Decision::Allow);
        assert_eq!(
            p.check(&inv("vm.start", &[("vmid", "100")]), None).unwrap(),
            Decision::Allow
        );
        let e = policy("ops:\n  '@poweroff': deny\n")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("no such group") && e.contains("@power-off"),
            "{e}"
        );
    }

    #[test]
    fn a_task_of_a_protected_guest_is_protected_too() {
        let p = policy("protect: [100, keep]\n").unwrap();
        let stop = |upid: &str| inv("task.stop", &[("upid", upid)]);
        let backup = stop("UPID:pve1:0000A1B2:00C0FFEE:6752F0A1:vzdump:100:root@pam:");
        assert!(p.wants_tags(&backup));
        let msg = refusal(&p, &backup, Some(&GuestTags::default()));
        assert!(
            msg.contains("guest 100 (the task is its) is protected"),
            "{msg}"
        );
        // By tag, and failing closed when the tags are unknown.
        let other = stop("UPID:pve1:0000A1B2:00C0FFEE:6752F0A1:qmstart:101:root@pam:");
        let mut tags = std::collections::BTreeMap::new();
        tags.insert(101u64, vec!["Keep".to_string()]);
        assert!(refusal(&p, &other, Some(&GuestTags(tags))).contains("protected tag"));
        assert!(refusal(&p, &other, None).contains("unknown"));
        // Another guest's task, and a node's own task, are not.
        let free = stop("UPID:pve1:0000A1B2:00C0FFEE:6752F0A1:qmstart:102:root@pam:");
        assert_eq!(
            p.check(&free, Some(&GuestTags::default())).unwrap(),
            Decision::Allow
        );
        let node = stop("UPID:pve1:0000A1B2:00C0FFEE:6752F0A1:aptupdate::root@pam:");
        assert!(guest_ids(&node).is_empty());
        assert_eq!(upid_vmid("UPID:pve1:1:2:3:vzdump:0100:root@pam:"), None);
        // Reading a protected guest's task stays allowed.
        let log = inv(
            "task.log",
            &[(
                "upid",
                "UPID:pve1:0000A1B2:00C0FFEE:6752F0A1:vzdump:100:root@pam:",
            )],
        );
        assert_eq!(p.check(&log, None).unwrap(), Decision::Allow);
    }

    #[test]
    fn protected_tags_are_case_insensitive_and_fail_closed_when_unknown() {
        let p = policy("protect: [Keep, prod-db]\n").unwrap();
        assert!(p.needs_guest_tags());
        let start = inv("vm.start", &[("vmid", "100")]);
        assert_eq!(
            refusal(&p, &start, Some(&on100("web;KEEP"))),
            format!(
                "policy refuses vm.start on 100: guest 100 carries the protected tag 'KEEP' (policy.protect in {SRC})"
            )
        );
        assert!(refusal(&p, &start, Some(&on100("a,prod-db b"))).contains("'prod-db'"));
        assert_eq!(
            p.check(&start, Some(&on100("web;keeper"))).unwrap(),
            Decision::Allow
        );
        assert_eq!(
            p.check(&start, Some(&GuestTags::default())).unwrap(),
            Decision::Allow
        );
        let msg = refusal(&p, &start, None);
        assert!(msg.contains("its tags are unknown"), "{msg}");
        // Reads and guest-less ops need no tags.
        assert_eq!(
            p.check(&inv("vm.status", &[("vmid", "100")]), None)
                .unwrap(),
            Decision::Allow
        );
        assert_eq!(
            p.check(&inv("vm.list", &[]), None).unwrap(),
            Decision::Allow
        );
    }

    #[test]
    fn protect_covers_a_guests_backups_by_id_and_by_tag() {
        const A250: &str = "local:backup/vzdump-qemu-250-2026_11_01-02_00_00.vma.zst";
        let restore = inv("backup.restore", &[("archive", A250), ("vmid", "177")]);
        let remove = inv("backup.remove", &[("archive", A250)]);
        let prune = inv(
            "backup.prune",
            &[("vmid", "250"), ("keep_last", "1"), ("storage", "local")],
        );
        let other = inv(
            "backup.restore",
            &[
                (
                    "archive",
                    "local:backup/vzdump-qemu-300-2026_11_01-02_00_00.vma.zst",
                ),
                ("vmid", "177"),
            ],
        );
        let none = GuestTags::default();
        let p = policy("protect: [250]\n").unwrap();
        for i in [&restore, &remove, &prune] {
            let msg = refusal(&p, i, Some(&none));
            assert!(msg.contains("guest 250"), "{msg}");
        }
        assert!(refusal(&p, &remove, Some(&none)).contains("the archive is its backup"));
        assert!(p.check(&other, Some(&none)).is_ok());
        // Reading the backups stays allowed.
        assert!(
            p.check(&inv("backup.list", &[("vmid", "250")]), None)
                .is_ok()
        );
        // By tag: the archive's guest's tags count, and unknown tags fail closed.
        let p = policy("protect: [keep]\n").unwrap();
        let tagged = GuestTags::default().with(250, tags("keep"));
        assert!(p.wants_tags(&remove) && p.wants_tags(&restore));
        for i in [&restore, &remove, &prune] {
            let msg = refusal(&p, i, Some(&tagged));
            assert!(msg.contains("guest 250") && msg.contains("'keep'"), "{msg}");
            assert!(refusal(&p, i, None).contains("unknown"));
        }
        assert!(p.check(&other, Some(&tagged)).is_ok());
        assert_eq!(archive_vmid(A250), Some(250));
        assert_eq!(
            archive_vmid("local:backup/vzdump-lxc-200-2026_11_01-02_00_00.tar.zst"),
            Some(200)
        );
        assert_eq!(archive_vmid("local:iso/x.iso"), None);
    }

    #[test]
    fn guest_tags_come_from_cluster_resources() {
        let r: serde_json::Value = serde_json::json!([
            {"vmid": 100, "tags": "web;keep", "type": "qemu"},
            {"vmid": 200, "type": "lxc"},
            {"type": "storage", "storage": "local"}
        ]);
        let t = GuestTags::from_resources(&r);
        assert_eq!(t.of(100), ["web", "keep"]);
        assert!(t.of(200).is_empty() && t.of(999).is_empty());
    }

    #[test]
    fn parse_tags_splits_like_proxmox() {
        assert_eq!(tags("a;b;c"), ["a", "b", "c"]);
        assert_eq!(tags("a, b  c;;"), ["a", "b", "c"]);
        assert!(tags("").is_empty());
    }

    #[test]
    fn glob_matching() {
        assert!(glob_match("*", "vm.start"));
        assert!(glob_match("vm.*", "vm.start"));
        assert!(glob_match("*.start", "ct.start"));
        assert!(glob_match("v*.s*t", "vm.start"));
        assert!(glob_match("vm.start", "vm.start"));
        assert!(!glob_match("vm.*", "ct.start"));
        assert!(!glob_match("vm.star", "vm.start"));
        assert!(!glob_match("*.stop", "vm.start"));
        assert!(glob_match("**", ""));
    }
}

#[cfg(test)]
mod transfer_tests {
    use super::*;

    #[test]
    fn path_globs_stay_in_their_segment() {
        assert!(path_glob("/tmp/*", "/tmp/a.txt"));
        assert!(!path_glob("/tmp/*", "/tmp/a/b"));
        assert!(path_glob("/srv/**", "/srv/a/b/c"));
        assert!(!path_glob("/tmp/*", "/etc/passwd"));
        assert!(!path_glob("/tmp/a.txt", "/tmp/aXtxt"));
        // No wildcard ever matches `.`, `..` or an empty segment: the text of a path cannot
        // leave its glob.
        for (glob, path) in [
            ("/srv/**", "/srv/../etc/hostname"),
            ("/srv/**", "/srv/a/../../etc/shadow"),
            ("/srv/**", "/srv/./x"),
            ("/srv/**", "/srv//x"),
            ("/srv/**", "/srv/x/"),
            ("/srv/**", "/srv"),
            ("/srv/*/x", "/srv/../x"),
            ("/srv/*", "/srv/.."),
            ("/tmp/*", "/tmp/a\0b"),
            ("**", "etc/passwd"),
        ] {
            assert!(!path_glob(glob, path), "{glob} ~ {path:?}");
        }
        assert!(path_glob("/srv/**/x.log", "/srv/x.log"));
        assert!(path_glob("/srv/**/x.log", "/srv/a/b/x.log"));
        assert!(path_glob("/srv/*.log", "/srv/..a.log"));
        assert!(!path_glob("/srv/*.log", "/srv/a/b.log"));
    }

    #[test]
    fn transfers_follow_push_and_pull_lists_and_fail_closed_with_commands() {
        let p = |yaml: &str| {
            let cfg: crate::policy::schema::PolicyConfig = yaml_serde::from_str(yaml).unwrap();
            Policy::from_config(cfg, "t").unwrap()
        };
        let op = &crate::catalog::ops::VM_EXEC;
        let open = p("ops:\n  vm.exec: allow\n");
        assert!(open.check_transfer(op, Transfer::Push, "/etc/x").is_ok());
        let listed = p("ops:\n  vm.exec:\n    commands: [[uname]]\n    push: [\"/tmp/*\"]\n");
        assert!(listed.check_transfer(op, Transfer::Push, "/tmp/a").is_ok());
        assert_eq!(
            listed
                .check_transfer(op, Transfer::Push, "/etc/a")
                .unwrap_err()
                .exit_code(),
            3
        );
        let e = listed
            .check_transfer(op, Transfer::Pull, "/tmp/a")
            .unwrap_err();
        assert!(e.to_string().contains("lists no pull paths"), "{e}");
        let bad: crate::policy::schema::PolicyConfig =
            yaml_serde::from_str("ops:\n  vm.start:\n    push: [\"tmp\"]\n").unwrap();
        let e = Policy::from_config(bad, "t").unwrap_err().to_string();
        assert!(
            e.contains("only ops that run a command") && e.contains("absolute"),
            "{e}"
        );
    }
}

#[cfg(test)]
mod layer_tests {
    use super::*;

    fn policy(yaml: &str, source: &str) -> Policy {
        let cfg: crate::policy::schema::PolicyConfig = yaml_serde::from_str(yaml).unwrap();
        Policy::from_config(cfg, source).unwrap()
    }

    fn inv(op: &'static Op, vmid: &str) -> Invocation {
        Invocation::new(op, [("vmid", vmid.to_string())].into()).unwrap()
    }

    #[test]
    fn a_second_layer_only_narrows() {
        use crate::catalog::ops;
        let config = policy("read_only: true\nprotect: [105]\n", "config");
        let wide = policy("ops:\n  \"*\": allow\n", "flag");
        let p = config.clone().narrowed_by(wide);
        assert!(p.read_only());
        assert_eq!(
            p.check(&inv(&ops::VM_DESTROY, "100"), Some(&GuestTags::default()))
                .unwrap_err()
                .exit_code(),
            3
        );
        assert!(
            p.check(&inv(&ops::VM_STATUS, "100"), Some(&GuestTags::default()))
                .is_ok()
        );
        assert!(p.source().contains("config") && p.source().contains("flag"));
        // The narrower layer's confirm and protect count; limits add up; allowlists both apply.
        let base = policy("ops:\n  vm.exec: {commands: [[uname, ...]]}\n", "a");
        let more = policy(
            "ops:\n  vm.start: confirm\n  vm.exec:\n    commands: [[uname, -a]]\n    limits: [{counter: x, window: minute, max: 1}]\nprotect: [101]\n",
            "b",
        );
        let p = base.narrowed_by(more);
        assert!(matches!(
            p.check(&inv(&ops::VM_START, "100"), Some(&GuestTags::default()))
                .unwrap(),
            Decision::Confirm(_)
        ));
        assert!(
            p.check(&inv(&ops::VM_START, "101"), Some(&GuestTags::default()))
                .is_err()
        );
        let exec = Invocation::new(
            &ops::VM_EXEC,
            [
                ("vmid", "100".to_string()),
                ("command", r#"["uname","-r"]"#.to_string()),
            ]
            .into(),
        )
        .unwrap();
        let words = |w: &[&str]| w.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert!(p.check_command(&exec, &words(&["uname", "-a"])).is_ok());
        assert!(
            p.check_command(&exec, &words(&["uname", "-r"])).is_err(),
            "the narrower list applies"
        );
        assert!(p.limits_for(&ops::VM_EXEC).iter().any(|l| l.max == 1));
    }
}

#[cfg(test)]
mod download_tests {
    use super::*;

    #[test]
    fn inside_addresses_are_refused_unless_listed() {
        let p = Policy::default();
        for url in [
            "http://169.254.169.254/x.iso",
            "http://127.0.0.1/x.iso",
            "http://127.1/x.iso",
            "http://2130706433/x.iso",
            "http://0x7f000001/x.iso",
            "http://0177.0.0.1/x.iso",
            "https://10.1.2.3:8443/a/b.iso",
            "http://192.168.1.1/x.iso",
            "http://172.16.0.1/x.iso",
            "http://0.0.0.0/x.iso",
            "http://224.0.0.1/x.iso",
            "http://localhost/x.iso",
            "http://evil.localhost/x.iso",
            "http://LOCALHOST./x.iso",
            // A query does not hide the host.
            "http://169.254.169.254?x=http://cdimage.debian.org/a.iso",
            "http://127.0.0.1/x.iso?host=cdimage.debian.org",
            // Names of the host's networks and every reserved range.
            "http://localhost6/x.iso",
            "http://localhost.localdomain/x.iso",
            "http://pve1/x.iso",
            "http://metadata/x.iso",
            "http://metadata.google.internal/x.iso",
            "http://nas.local/x.iso",
            "http://mirror.lan/x.iso",
            "http://router.home.arpa/x.iso",
            "http://x.corp/x.iso",
            "http://10.0.0.1.nip.io/x.iso",
            "http://127-0-0-1.sslip.io/x.iso",
            "http://169.254.169.254.nip.io/x.iso",
            "http://0.1.2.3/x.iso",
            "http://192.0.0.8/x.iso",
            "http://192.0.2.10/x.iso",
            "http://198.51.100.1/x.iso",
            "http://203.0.113.9/x.iso",
            "http://198.18.0.1/x.iso",
            "http://198.19.255.1/x.iso",
            "http://240.0.0.1/x.iso",
            "http://255.255.255.255/x.iso",
            "http://100.64.0.1/x.iso",
        ] {
            let e = p.check_download(url).unwrap_err();
            assert_eq!(e.exit_code(), 2, "{url}");
        }
        for url in [
            "https://cdimage.debian.org/x.iso",
            "http://8.8.8.8/x.iso",
            "https://0x.example.com/a.iso",
            "http://198.20.0.1/x.iso",
            "https://local.example.org/x.iso",
            "https://8.8.8.8.nip.io/x.iso",
            "https://lan-mirror.example.org/x.iso",
        ] {
            p.check_download(url).unwrap();
        }
        // On the host: its own names refuse too, unless listed.
        let names = vec![
            "pve1.example.org".to_string(),
            "mirror.example.net".to_string(),
        ];
        assert!(
            p.check_download_on_host("https://PVE1.example.org./a.iso", &names)
                .is_err()
        );
        p.check_download_on_host("https://cdimage.debian.org/a.iso", &names)
            .unwrap();
        let cfg: crate::policy::schema::PolicyConfig =
            yaml_serde::from_str("download_hosts: [10.1.2.3, mirror.lan]\n").unwrap();
        let listed = Policy::from_config(cfg, "t").unwrap();
        listed
            .check_download("https://10.1.2.3:8443/a/b.iso")
            .unwrap();
        listed.check_download("http://mirror.lan/x.iso").unwrap();
        listed
            .check_download_on_host("http://mirror.lan/x.iso", &["mirror.lan".to_string()])
            .unwrap();
        let e = listed
            .check_download("https://cdimage.debian.org/x.iso")
            .unwrap_err();
        assert!(e.to_string().contains("not in download_hosts"), "{e}");
        // A layer's list is a whitelist whatever the other layers say.
        let both = Policy::default().narrowed_by(listed);
        assert!(
            both.check_download("https://cdimage.debian.org/x.iso")
                .is_err()
        );
        both.check_download("http://mirror.lan/x.iso").unwrap();
    }
}
