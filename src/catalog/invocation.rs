//! An [`Invocation`]: one catalog op with validated, wire-ready values.
//!
//! This is the edge where untrusted input (CLI words, later MCP arguments) becomes typed
//! data. Everything after this point trusts the values: they matched their kind's regex,
//! which is also the regex in sudoers.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::base::error::{Error, Result};
use crate::base::text::{quote_argv, quote_word};
use crate::catalog::kind::VMID_MIN;
use crate::catalog::{self, How, Kind, NodeFrom, Op, Param};

/// One op ready to run.
#[derive(Debug, Clone)]
pub struct Invocation {
    /// The catalog row.
    pub op: &'static Op,
    /// Validated wire values by parameter name. `node` is present only once known.
    pub values: BTreeMap<&'static str, String>,
    /// Keep only result entries of this `type` (from a choice such as `--type ct`).
    pub keep_type: Option<&'static str>,
    /// What travels to a gated host beside the command line.
    pub attach: Attach,
}

/// What an invocation carries to a gated host besides its command line: the host
/// gate asks for them when its policy says `confirm` or `approve`. Never part of the argv.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Attach {
    /// A signed approval (`--approval FILE`, MCP `approval`): an armored SSH signature,
    /// optionally after the statement it signs.
    pub approval: Option<String>,
    /// The confirmation phrase the user gave and the client accepted.
    pub confirmed: Option<String>,
    /// What goes with the target and what stays, read from the host before the phrase is
    /// asked for ([`crate::catalog::Precheck::Destroyable`]): the refusal and the prompt say it.
    pub scope: Option<crate::base::error::Scope>,
    /// The guest's configuration as read before a change pinned to its digest
    /// ([`crate::catalog::Precheck::PinDigest`]): what a conflict is compared with.
    pub read_config: Option<serde_json::Value>,
}

impl Invocation {
    /// Build from raw (unvalidated) values: validates each and checks required ones.
    pub fn new(op: &'static Op, raw: BTreeMap<&'static str, String>) -> Result<Invocation> {
        let mut values = BTreeMap::new();
        let mut keep_type = None;
        for (name, v) in raw {
            let p = op
                .param(name)
                .ok_or_else(|| Error::usage(format!("{} takes no parameter '{name}'", op.id)))?;
            let label = match p.kind {
                Kind::Vmid => "VMID".to_string(),
                _ => p.name.replace('_', "-"),
            };
            if let Kind::Choice(choices) = p.kind {
                keep_type = choices
                    .iter()
                    .find(|c| c.cli == v)
                    .and_then(|c| c.keep_type);
            }
            values.insert(p.name, p.kind.parse(&label, &v)?);
        }
        for p in op.params {
            match p.how {
                How::Positional if !values.contains_key(p.name) => {
                    return Err(Error::usage(format!("{} needs <{}>", op.id, p.name)));
                }
                How::Required if !values.contains_key(p.name) => {
                    // A variant at the same path that a value selects is the other way
                    // (`vm create --image STORAGE:import/NAME` instead of `--iso`).
                    let others: Vec<String> = catalog::ops_at(op.cli)
                        .iter()
                        .filter(|o| o.id != op.id)
                        .flat_map(|o| o.select.iter())
                        .filter_map(|s| match s {
                            catalog::Select::Contains(q, _, example) => Some(format!(
                                "--{} {example} ({})",
                                q.replace('_', "-"),
                                op.cli.join(" ")
                            )),
                            catalog::Select::Flag(_) => None,
                        })
                        .collect();
                    let or = if others.is_empty() {
                        String::new()
                    } else {
                        format!(", or {}", others.join(", or "))
                    };
                    return Err(Error::usage(format!(
                        "{} needs --{}{or}",
                        op.id,
                        p.name.replace('_', "-")
                    )));
                }
                How::Defaulted(d) if !values.contains_key(p.name) => {
                    values.insert(p.name, p.kind.parse(p.name, d)?);
                }
                How::BasenameOf(of) if !values.contains_key(p.name) => {
                    // The last path segment: a URL's query is not part of the file name.
                    let url = op.param(of).is_some_and(|q| q.kind == Kind::Url);
                    let path = values.get(of).map(|v| {
                        if url {
                            v.split('?').next().unwrap_or(v)
                        } else {
                            v
                        }
                    });
                    if let Some(base) = path.and_then(|v| v.rsplit('/').next()) {
                        let base = match p.kind {
                            Kind::ImageFile => super::cloud::image_name_from(base),
                            _ => base.to_string(),
                        };
                        let label = format!(
                            "{} (from <{of}>; pass --{} to choose one)",
                            p.name,
                            p.name.replace('_', "-")
                        );
                        values.insert(p.name, p.kind.parse(&label, &base)?);
                    }
                }
                _ => {}
            }
        }
        if !op.has_one_of(&values) {
            let flags: Vec<String> = op
                .needs_one_of
                .iter()
                .map(|n| format!("--{}", n.replace('_', "-")))
                .collect();
            return Err(Error::usage(format!(
                "`{}` needs at least one of {}",
                op.cli.join(" "),
                flags.join(", ")
            )));
        }
        let mut inv = Invocation {
            op,
            values,
            keep_type,
            attach: Attach::default(),
        };
        // The node of a task is written in its UPID: no lookup needed.
        if inv.node_from() == Some(NodeFrom::Upid)
            && !inv.values.contains_key("node")
            && let Some(node) = inv.values.get("upid").and_then(|u| u.split(':').nth(1))
        {
            inv.values.insert("node", node.to_string());
        }
        Ok(inv)
    }

    /// Where the node comes from when it must be resolved.
    pub fn node_from(&self) -> Option<NodeFrom> {
        self.op.params.iter().find_map(|p| match p.how {
            How::Node(from) => Some(from),
            _ => None,
        })
    }

    /// Whether the node still has to be looked up on the host.
    pub fn needs_node(&self) -> bool {
        self.node_from().is_some() && !self.values.contains_key("node")
    }

    /// The guest id, when the op names one.
    pub fn vmid(&self) -> Option<u64> {
        self.values.get("vmid").and_then(|v| v.parse().ok())
    }

    /// The remote argv, absolute tool path first.
    pub fn argv(&self) -> Vec<String> {
        self.op.argv(&self.values)
    }

    /// What is executed on the host: `sudo -n` then the argv. `-n` makes sudo fail instead
    /// of prompting, so a missing rule is an error, never a password prompt.
    pub fn remote_argv(&self) -> Vec<String> {
        let mut v = vec!["sudo".to_string(), "-n".to_string()];
        v.extend(self.argv());
        v
    }

    /// What is sent over SSH: the remote argv, or — when an approval travels with it — a
    /// gate envelope carrying the argv, the approval and the accepted phrase.
    pub fn wire_argv(&self) -> Vec<String> {
        match &self.attach.approval {
            Some(a) => self.envelope(Some(a.clone())),
            None => self.remote_argv(),
        }
    }

    /// The gate envelope for this invocation with the accepted phrase (and an approval).
    pub fn envelope(&self, approval: Option<String>) -> Vec<String> {
        crate::base::gate_protocol::Envelope {
            client: format!("pxagent {}", crate::VERSION),
            argv: Some(self.remote_argv()),
            confirm: self.attach.confirmed.clone(),
            approval,
            ..Default::default()
        }
        .to_command()
    }

    /// The command line as one string, each word POSIX-quoted as it travels over SSH.
    pub fn remote_command(&self) -> String {
        quote_argv(&self.remote_argv())
    }

    /// The confirmation phrase this invocation needs, if any.
    pub fn phrase(&self) -> Option<String> {
        self.op.phrase(&self.values)
    }

    /// The pxagent command line of this invocation, for messages (`vm destroy 100`).
    pub fn display(&self) -> String {
        let mut s = self.op.cli.join(" ");
        for p in self.op.params {
            let Some(v) = self.values.get(p.name) else {
                continue;
            };
            match p.how {
                How::Positional => s.push_str(&format!(" {}", quote_word(v))),
                How::Option
                | How::Required
                | How::Defaulted(_)
                | How::NextId
                | How::BasenameOf(_) => s.push_str(&format!(
                    " --{} {}",
                    p.name.replace('_', "-"),
                    quote_word(v)
                )),
                How::Flag => s.push_str(&format!(" --{}", p.name.replace('_', "-"))),
                How::Node(_) | How::Staged => {}
            }
        }
        s
    }

    /// The refusal an agent reads when a confirm op arrives without its phrase.
    pub fn refusal(&self) -> Option<Error> {
        let c = self.op.confirm?;
        let phrase = self.phrase()?;
        let mut consequence = catalog::fill(c.consequence, &self.values);
        if let Some(sc) = &self.attach.scope {
            if !sc.goes.is_empty() {
                consequence.push_str(&format!("; with it go: {}", sc.goes.join(", ")));
            }
            if !sc.stays.is_empty() {
                consequence.push_str(&format!("; what stays: {}", sc.stays.join(", ")));
            }
        }
        Some(Error::ConfirmationRequired {
            message: format!(
                "I won't run `{}` without explicit confirmation — {consequence}. Reply `{phrase}` if you want me to proceed.",
                self.display()
            ),
            phrase,
            hint: c.hint.map(|h| catalog::fill(h, &self.values)),
            scope: self.attach.scope.clone().map(Box::new),
        })
    }

    /// The dry-run report: what would be sent, the rule that admits it, what it needs.
    pub fn dry_run(&self) -> Value {
        let node_note = if self.needs_node() {
            Some(match self.node_from() {
                Some(NodeFrom::Guest) => {
                    "the node is looked up in /cluster/resources at run time (pass --node to pin it)"
                }
                _ => {
                    "the node is the one pxagent connects to, read from /cluster/status at run time (pass --node to pin it)"
                }
            })
        } else {
            None
        };
        json!({
            "dry_run": true,
            "op": self.op.id,
            "risk": self.op.risk.name(),
            "argv": self.remote_argv(),
            "command": self.remote_command(),
            "sudoers_rule": self.op.sudoers_rule(None),
            "profiles": self.op.profiles().iter().map(|p| p.name()).collect::<Vec<_>>(),
            "phrase": self.phrase(),
            "node": node_note,
            "vmid": self.op.params.iter().any(|p| p.how == How::NextId && !self.values.contains_key(p.name))
                .then_some("the next free VMID is read from /cluster/nextid at run time (pass --vmid to pin it)"),
            "prechecks": self.op.prechecks.iter().map(|c| c.describe(&self.values)).collect::<Vec<_>>(),
            "unless": self.op.already.map(|a| format!(
                "the guest's {} is already `{}` (read first; then nothing else is sent and no phrase is needed)",
                a.field, a.is
            )),
            "sent": false,
        })
    }
}

/// Whether a raw VMID value is a guest's name instead (`web`): all digits is always
/// a VMID (so `99` stays an invalid one), anything else that is a valid guest name (PVE's
/// `dns-name`) is a name.
pub fn is_guest_name(raw: &str) -> bool {
    !raw.bytes().all(|b| b.is_ascii_digit()) && Kind::GuestName.parse("name", raw).is_ok()
}

/// An op whose guest was given by name instead of VMID (`vm status web`): every
/// other value is already validated; the host's guest list
/// ([`crate::remote::Remote::guest_named`]) gives the VMID, and [`Named::resolve`] then makes
/// the invocation. What is sent is always the numeric VMID, so the sudoers rules and fences
/// are the same as for an id.
#[derive(Debug, Clone)]
pub struct Named {
    /// The catalog row.
    pub op: &'static Op,
    /// The guest's name as given.
    pub name: String,
    raw: BTreeMap<&'static str, String>,
}

impl Named {
    /// `Some` when `raw`'s `vmid` is a guest's name and the op takes one there; the other
    /// values are checked now (with a stand-in VMID), so a bad one is exit 2 before anything
    /// is sent.
    pub fn from_raw(
        op: &'static Op,
        raw: &BTreeMap<&'static str, String>,
    ) -> Result<Option<Named>> {
        let Some(name) = raw.get("vmid").filter(|v| is_guest_name(v)) else {
            return Ok(None);
        };
        if !op.param("vmid").is_some_and(Param::takes_name) {
            return Ok(None);
        }
        let mut stand_in = raw.clone();
        stand_in.insert("vmid", VMID_MIN.to_string());
        Invocation::new(op, stand_in)?;
        Ok(Some(Named {
            op,
            name: name.clone(),
            raw: raw.clone(),
        }))
    }

    /// The invocation for the guest the name stands for; a guest op's node is the guest's own
    /// (unless `--node` pinned one), so nothing needs to be looked up again.
    pub fn resolve(&self, guest: &GuestRef) -> Result<Invocation> {
        let mut raw = self.raw.clone();
        raw.insert("vmid", guest.vmid.to_string());
        let mut inv = Invocation::new(self.op, raw)?;
        if inv.node_from() == Some(NodeFrom::Guest) && !inv.values.contains_key("node") {
            let node = Kind::Node.parse("node", &guest.node)?;
            inv.values.insert("node", node);
        }
        Ok(inv)
    }
}

/// A guest as `/cluster/resources` lists it: what a name stands for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GuestRef {
    /// Its VMID.
    pub vmid: u64,
    /// The node it is on.
    pub node: String,
    /// `qemu` or `lxc`.
    pub kind: String,
    /// Its name (a container's host name), when it has one.
    pub name: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inv(id: &str, kv: &[(&'static str, &str)]) -> Result<Invocation> {
        let op = catalog::find(id).unwrap();
        Invocation::new(op, kv.iter().map(|(k, v)| (*k, v.to_string())).collect())
    }

    #[test]
    fn the_largest_file_write_fits_the_hosts_command_line_even_in_an_envelope() {
        // A push sends its file in one write of at most the guest agent's 60 KiB of base64;
        // with a signed approval in an envelope (base64url of JSON: a third more) the line
        // must still be one a host accepts, or the gate would never see it.
        let mut i = inv(
            "vm.file-write",
            &[
                ("vmid", "100"),
                ("node", "pve1"),
                ("file", &format!("/{}", "d".repeat(200))),
                (
                    "content",
                    &"QUJD".repeat(crate::catalog::guest::FILE_WRITE_MAX_BASE64 / 4),
                ),
            ],
        )
        .unwrap();
        i.attach.approval = Some("x".repeat(4096));
        i.attach.confirmed = Some("yes".into());
        let line = crate::ssh::command_line(&i.wire_argv()).unwrap();
        assert!(line.len() <= crate::base::text::MAX_COMMAND_LINE);
        assert!(line.len() > crate::catalog::guest::FILE_WRITE_MAX_BASE64 * 4 / 3);
    }

    #[test]
    fn refusal_uses_the_reference_wording() {
        let i = inv("vm.destroy", &[("vmid", "100")]).unwrap();
        let e = i.refusal().unwrap();
        assert_eq!(e.exit_code(), 4);
        assert_eq!(
            e.to_string(),
            "I won't run `vm destroy 100` without explicit confirmation — this deletes the VM and its disks irrecoverably. Reply `yes destroy 100` if you want me to proceed."
        );
    }

    #[test]
    fn stop_hints_at_shutdown() {
        let Error::ConfirmationRequired { hint, phrase, .. } = inv("vm.stop", &[("vmid", "101")])
            .unwrap()
            .refusal()
            .unwrap()
        else {
            panic!()
        };
        assert_eq!(phrase, "yes stop 101");
        assert!(hint.unwrap().contains("vm shutdown 101"));
    }

    #[test]
    fn upid_gives_the_node() {
        let i = inv(
            "task.status",
            &[(
                "upid",
                "UPID:pve2:0000A1B2:00C0FFEE:6752F0A1:qmstart:101:root@pam:",
            )],
        )
        .unwrap();
        assert!(!i.needs_node());
        assert_eq!(
            i.argv()[2],
            "/nodes/pve2/tasks/UPID:pve2:0000A1B2:00C0FFEE:6752F0A1:qmstart:101:root@pam:/status"
        );
    }

    #[test]
    fn bad_values_are_usage_errors() {
        let e = inv("vm.start", &[("vmid", "99")]).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert!(e.to_string().contains("VMID"), "{e}");
        assert_eq!(inv("vm.start", &[]).unwrap_err().exit_code(), 2);
        assert_eq!(
            inv("vm.start", &[("vmid", "100"), ("node", "a;b")])
                .unwrap_err()
                .exit_code(),
            2
        );
    }

    #[test]
    fn quoting_round_trips_through_a_posix_shell_split() {
        let words: Vec<String> = ["a b", "it's", "$(id)", "`id`", "x;y", "new\nline", "", "*"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let line = quote_argv(&words);
        assert_eq!(shlex::split(&line).unwrap(), words);
    }
}
