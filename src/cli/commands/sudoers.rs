//! `pxagent sudoers render|lint`: the whitelist for the host, and the lint for any sudoers file.

use serde_json::json;

use super::Failure;
use crate::error::{Error, Result};
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

/// Lint a sudoers file (or stdin): exit 1 on error-severity findings.
pub fn sudoers_lint(file: &str, out: &Output) -> std::result::Result<u8, Failure> {
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
    let findings = lint::lint(&text);
    let errors = findings
        .iter()
        .filter(|f| matches!(f.severity, Severity::Error))
        .count();
    let data = json!({"file": file, "errors": errors, "findings": findings});
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
