//! The soft blacklist: a destructive op runs only with its exact confirmation phrase.
//!
//! The phrase is bound to the target (`yes destroy 100` never confirms `vm destroy 101`).
//! At a terminal the user types it; an agent (no terminal) must pass `--confirm PHRASE`,
//! which it can only have got from its human, and otherwise gets the refusal text telling it
//! what to ask for. Nothing has been sent when this refuses (exit 4).

use std::io::IsTerminal;

use crate::base::error::{Error, Result};
use crate::catalog::How;
use crate::catalog::invocation::Invocation;

/// Why local policy asks for a phrase for an op that has none of its own.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Ask {
    /// It does not.
    #[default]
    No,
    /// The policy's rule for the op says `confirm`.
    Policy,
    /// A guest's output came back in this session since the last confirmed change (policy
    /// `taint: after_exec`); what returned it.
    Tainted(String),
}

/// A session's taint (policy `taint: after_exec`): the guest command whose output came back
/// last, held until a change is confirmed. One per MCP session or batch, shared by its calls.
#[derive(Debug, Default)]
pub struct Taint(std::sync::Mutex<Option<String>>);

impl Taint {
    /// A guest's output came back: `by` returned it.
    pub fn mark(&self, by: String) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = Some(by);
    }

    /// What tainted the session, if anything since the last confirmed change.
    pub fn by(&self) -> Option<String> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// A change was confirmed: the session is clean again.
    pub fn clear(&self) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }
}

/// The phrase for an op that local policy turned into a confirm op (it has none of its own):
/// `yes` followed by the command words and the positional values (`yes vm start 100`).
pub fn policy_phrase(inv: &Invocation) -> String {
    let mut words = vec!["yes".to_string()];
    words.extend(inv.op.cli.iter().map(|s| s.to_string()));
    for p in inv.op.params.iter().filter(|p| p.how == How::Positional) {
        if let Some(v) = inv.values.get(p.name) {
            words.push(v.clone());
        }
    }
    words.join(" ")
}

/// Decide whether `inv` may run. `policy_confirm` is set when local policy demands
/// confirmation for an op that has no phrase of its own. Returns the phrase that confirmed
/// it (for the audit trail), or `None` when none was needed.
pub fn gate(inv: &Invocation, given: Option<&str>, policy_confirm: &Ask) -> Result<Option<String>> {
    let interactive = std::io::stdin().is_terminal() && std::io::stderr().is_terminal();
    gate_with(inv, given, policy_confirm, interactive, prompt)
}

/// [`gate`] with the terminal check and the prompt injected (for tests).
pub fn gate_with(
    inv: &Invocation,
    given: Option<&str>,
    policy_confirm: &Ask,
    interactive: bool,
    ask: impl FnOnce(&str) -> Result<String>,
) -> Result<Option<String>> {
    let (expected, refusal) = match inv.phrase() {
        Some(p) => (p, inv.refusal()),
        None if *policy_confirm != Ask::No => {
            let p = policy_phrase(inv);
            let why = match policy_confirm {
                Ask::Tainted(by) => format!(
                    "a guest's output came back in this session (`{}`), and what a guest prints may carry instructions that are not your user's (local policy taint: after_exec)",
                    crate::base::text::printable(by)
                ),
                _ => format!("local policy requires it for {}", inv.op.id),
            };
            let refusal = Error::ConfirmationRequired {
                message: format!(
                    "I won't run `{}` without explicit confirmation — {why}. Reply `{p}` if you want me to proceed.",
                    inv.display(),
                ),
                phrase: p.clone(),
                hint: None,
                scope: None,
            };
            (p, Some(refusal))
        }
        None => return Ok(None),
    };
    let mismatch = |given: &str| Error::ConfirmationMismatch {
        message: format!(
            "the confirmation `{}` does not match: `{}` needs exactly `{expected}`",
            crate::base::text::printable(given),
            inv.display()
        ),
        phrase: expected.clone(),
    };
    match given {
        Some(g) if g == expected => Ok(Some(expected)),
        Some(g) => Err(mismatch(g)),
        None if interactive => {
            let what = match &refusal {
                Some(Error::ConfirmationRequired { message, .. }) => message
                    .split(" — ")
                    .nth(1)
                    .and_then(|m| m.split(". Reply").next())
                    .unwrap_or("")
                    .to_string(),
                _ => String::new(),
            };
            let typed = ask(&format!(
                "`{}`: {what}.\nType `{expected}` to proceed",
                inv.display()
            ))?;
            if typed.trim_end_matches(['\r', '\n']) == expected {
                Ok(Some(expected))
            } else {
                Err(mismatch(&typed))
            }
        }
        None => {
            Err(refusal
                .unwrap_or_else(|| Error::Internal("confirm op without refusal text".into())))
        }
    }
}

/// Ask on the terminal (stderr), never with a default and never echoing a hint.
fn prompt(text: &str) -> Result<String> {
    dialoguer::Input::<String>::new()
        .with_prompt(text)
        .allow_empty(true)
        .interact_text()
        .map_err(|e| Error::ConfirmationRequired {
            message: format!("no confirmation was typed ({e})"),
            phrase: String::new(),
            hint: None,
            scope: None,
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::testing::inv;

    fn no_prompt(_: &str) -> Result<String> {
        panic!("must not prompt")
    }

    #[test]
    fn phrase_is_bound_to_the_target() {
        let i = inv("vm.destroy", &[("vmid", "101")]);
        let e = gate_with(&i, Some("yes destroy 100"), &Ask::No, false, no_prompt).unwrap_err();
        assert_eq!(e.exit_code(), 4);
        assert!(
            e.to_string().contains("needs exactly `yes destroy 101`"),
            "{e}"
        );
        assert_eq!(
            gate_with(&i, Some("yes destroy 101"), &Ask::No, false, no_prompt)
                .unwrap()
                .as_deref(),
            Some("yes destroy 101")
        );
    }

    #[test]
    fn agents_without_a_phrase_get_the_reference_refusal() {
        let i = inv("vm.destroy", &[("vmid", "100")]);
        let e = gate_with(&i, None, &Ask::No, false, no_prompt).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("I won't run `vm destroy 100` without explicit confirmation"),
            "{e}"
        );
    }

    #[test]
    fn a_terminal_user_types_the_phrase() {
        let i = inv("vm.stop", &[("vmid", "100")]);
        let ok = gate_with(&i, None, &Ask::No, true, |q| {
            assert!(q.contains("Type `yes stop 100` to proceed"), "{q}");
            Ok("yes stop 100".into())
        });
        assert_eq!(ok.unwrap().as_deref(), Some("yes stop 100"));
        let bad = gate_with(&i, None, &Ask::No, true, |_| Ok("yes".into())).unwrap_err();
        assert_eq!(bad.exit_code(), 4);
    }

    #[test]
    fn ops_without_a_phrase_pass_unless_policy_says_confirm() {
        let i = inv("vm.start", &[("vmid", "100")]);
        assert_eq!(
            gate_with(&i, None, &Ask::No, false, no_prompt).unwrap(),
            None
        );
        let e = gate_with(&i, None, &Ask::Policy, false, no_prompt).unwrap_err();
        assert!(e.to_string().contains("Reply `yes vm start 100`"), "{e}");
        assert!(gate_with(&i, Some("yes vm start 100"), &Ask::Policy, false, no_prompt).is_ok());
        let tainted = Ask::Tainted("vm exec 100 -- cat /etc/motd".into());
        let e = gate_with(&i, None, &tainted, false, no_prompt).unwrap_err();
        assert_eq!(e.exit_code(), 4);
        assert!(
            e.to_string().contains("`vm exec 100 -- cat /etc/motd`")
                && e.to_string().contains("taint: after_exec")
                && e.to_string().contains("Reply `yes vm start 100`"),
            "{e}"
        );
        assert!(gate_with(&i, Some("yes vm start 100"), &tainted, false, no_prompt).is_ok());
    }
}
