//! `pxagent sudoers render|lint`: the whitelist for the host, and the lint for any sudoers file.

use serde_json::json;

use super::Failure;
use crate::base::error::{Error, Result};
use crate::host::sudoers::lint::{self, Severity};
use crate::host::sudoers::render::{self, RenderOptions};
use crate::output::{self, Format, Output};

/// Print the sudoers file for these options.
pub fn sudoers_render(opts: &RenderOptions, out: &Output) -> Result<u8> {
    let text = render::render(opts);
    match out.format {
        Format::Json => out.success(
            "sudoers.render",
            json!({"user": opts.user, "profile": opts.profile.name(), "sudoers": text}),
            |_| String::new(),
        ),
        Format::Table => output::write_raw(&text),
    }
    Ok(0)
}

/// Lint a sudoers file (or stdin) for the account `user`: exit 1 on error-severity findings.
/// The account's uid and groups come from this host's passwd and group files when it is in
/// them, plus `groups`.
pub fn sudoers_lint(
    file: &str,
    user: &str,
    groups: &[String],
    out: &Output,
) -> std::result::Result<u8, Failure> {
    let db = |path: &str| std::fs::read_to_string(path).unwrap_or_default();
    let who = lint::Principal::from_databases(user, &db("/etc/passwd"), &db("/etc/group"))
        .with_groups(groups.iter().cloned());
    let text = if file == "-" {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut std::io::stdin(), &mut s).map_err(|e| {
            (
                Error::ReadFile {
                    path: "-".into(),
                    source: e,
                },
                None,
            )
        })?;
        s
    } else {
        std::fs::read_to_string(file).map_err(|e| {
            (
                Error::ReadFile {
                    path: file.into(),
                    source: e,
                },
                None,
            )
        })?
    };
    let findings = lint::lint_for(&text, &who);
    let errors = findings
        .iter()
        .filter(|f| matches!(f.severity, Severity::Error))
        .count();
    let data = json!({"file": file, "user": who.name, "errors": errors, "findings": findings});
    let human = |findings: &[lint::Finding]| {
        let mut s = String::new();
        for f in findings {
            let sev = serde_json::to_value(f.severity)
                .ok()
                .and_then(|v| v.as_str().map(String::from))
                .unwrap_or_default();
            s.push_str(&format!(
                "{file}:{}: {sev} [{}] {}\n    {}\n    why: {}\n    fix: {}\n",
                f.line,
                f.code,
                f.source.lines().next().unwrap_or(""),
                f.source.lines().skip(1).collect::<Vec<_>>().join(" "),
                f.why,
                f.fix
            ));
        }
        s.push_str(&format!(
            "{} finding(s), {errors} error(s)\n",
            findings.len()
        ));
        s.replace("\n    \n", "\n")
    };
    if errors > 0 {
        if out.format == Format::Table {
            output::write_human(&human(&findings));
        }
        return Err((
            Error::Findings(format!("{errors} error-severity finding(s) in {file}")),
            Some(data),
        ));
    }
    out.success("sudoers.lint", data, |_| human(&findings));
    Ok(0)
}
