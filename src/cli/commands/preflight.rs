//! `pxagent preflight`: prove the host's setup, one pass/warn/fail line per check.

use serde_json::json;

use super::{Failure, open};
use crate::base::error::Error;
use crate::base::runtime::runtime;
use crate::catalog::Profile;
use crate::config::context::Context;
use crate::engine::Trail;
use crate::host::preflight::{self, Check, Status};
use crate::output::{self, Format, Output};

/// Run the preflight for `profile`.
pub fn preflight(
    ctx: &Context,
    profile: Profile,
    out: &mut Output,
    trail: &mut Trail,
) -> std::result::Result<u8, Failure> {
    let target = super::resolve(ctx, out, trail).map_err(|e| (e, None))?;
    let user = target.user.clone();
    let checks = runtime().map_err(|e| (e, None))?.block_on(async {
        match open(ctx, &target).await {
            Ok(remote) => {
                let c = preflight::run(&remote, profile, &user).await;
                remote.session.close().await;
                c
            }
            Err(e) => vec![Check {
                name: "ssh",
                status: Status::Fail,
                remedy: match e.exit_code() {
                    6 => "check the key, the account and known_hosts (see the message)".into(),
                    _ => "check the host, port and that sshd runs".into(),
                },
                detail: e.to_string(),
            }],
        }
    });
    let data = json!({"profile": profile.name(), "checks": checks});
    let human = |checks: &[Check]| {
        let mut s = String::new();
        for c in checks {
            let tag = match c.status {
                Status::Pass => "PASS",
                Status::Warn => "WARN",
                Status::Fail => "FAIL",
            };
            s.push_str(&format!("{tag}  {:<16} {}\n", c.name, c.detail));
            if !c.remedy.is_empty() && c.status != Status::Pass {
                s.push_str(&format!("      {:<16} fix: {}\n", "", c.remedy));
            }
        }
        s
    };
    if preflight::failed(&checks) {
        let n = checks.iter().filter(|c| c.status == Status::Fail).count();
        if out.format == Format::Table {
            output::write_human(&human(&checks));
        }
        return Err((
            Error::Preflight(format!("preflight: {n} check(s) failed")),
            Some(data),
        ));
    }
    out.success("preflight", data, |_| human(&checks));
    Ok(0)
}

/// `pxagent skill --from-host`: the skill narrowed to what the account may run on its host
/// ([`preflight::host_rules`]), printed as markdown whatever the output format.
pub fn skill_from_host(
    ctx: &Context,
    profile: Profile,
    out: &mut Output,
    trail: &mut Trail,
) -> crate::Result<u8> {
    let target = super::resolve(ctx, out, trail)?;
    let who = format!("{}@{}", target.user, target.host);
    let rules = runtime()?.block_on(async {
        let remote = open(ctx, &target).await?;
        let r = preflight::host_rules(&remote, &target.user).await;
        remote.session.close().await;
        r
    })?;
    output::write_raw(&crate::catalog::skill::render_narrowed(
        profile,
        Some((&who, &rules.ops)),
    ));
    Ok(0)
}
