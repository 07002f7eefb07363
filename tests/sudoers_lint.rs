//! Black-box tests of `pxagent sudoers lint --user U --groups G`: whose rules are errors. Needs no
//! host: the binary reads the file from stdin.

use serde_json::Value;

use crate::support::px;

const STOCK: &str = "Defaults\tenv_reset\nDefaults\tsecure_path=\"/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\"\nroot\tALL=(ALL:ALL) ALL\n%sudo\tALL=(ALL:ALL) ALL\n@includedir /etc/sudoers.d\n";

fn lint(text: &str, extra: &[&str]) -> (i32, Value) {
    let mut args = vec!["sudoers", "lint", "-", "-o", "json"];
    args.extend_from_slice(extra);
    let r = px().args(&args).stdin(text.as_bytes().to_vec()).run();
    let doc: Value = serde_json::from_str(&r.stdout).unwrap_or_else(|_| panic!("{}", r.stdout));
    (r.code, doc)
}

#[test]
fn other_principals_rules_are_information() {
    // Debian's stock file: the agent is not in group sudo.
    let (code, doc) = lint(STOCK, &[]);
    assert_eq!(code, 0, "{doc}");
    assert_eq!(doc["data"]["user"], "zen-agent");
    assert_eq!(doc["data"]["errors"], 0);
    let f = &doc["data"]["findings"];
    assert!(
        f.as_array()
            .unwrap()
            .iter()
            .any(|x| x["code"] == "all-commands"
                && x["severity"] == "info"
                && x["why"].as_str().unwrap().contains("%sudo")),
        "{doc}"
    );
    // Told the account is in group sudo, the same rule is root.
    let (code, doc) = lint(STOCK, &["--groups", "adm,sudo"]);
    assert_eq!(code, 1, "{doc}");
    assert_eq!(doc["error"]["kind"], "findings", "{doc}");
}

#[test]
fn user_picks_whose_rules_are_errors() {
    let text =
        "Defaults:alice log_input, log_output\nalice ALL=(root) NOPASSWD: /usr/sbin/pct exec *\n";
    let (code, doc) = lint(text, &[]);
    assert_eq!(code, 0, "{doc}");
    let (code, doc) = lint(text, &["--user", "alice"]);
    assert_eq!(code, 1, "{doc}");
    // Through a User_Alias, and excluded again with `!`.
    let text = "Defaults:zen-agent log_input, log_output\nUser_Alias BOTS = zen-agent, bot\nBOTS ALL=(root) NOPASSWD: /usr/sbin/qm monitor 100\n";
    assert_eq!(lint(text, &[]).0, 1);
    let text = "Defaults log_input, log_output\nALL, !zen-agent ALL=(root) NOPASSWD: /usr/sbin/qm monitor 100\n";
    assert_eq!(lint(text, &[]).0, 0);
}
