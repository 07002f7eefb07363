//! Whom a sudoers file is judged for (`pxagent sudoers lint --user U`, default `zen-agent`):
//! rules that apply to that account are errors when they are root; rules for other principals
//! (Debian's stock `%sudo ALL=(ALL:ALL) ALL`, an admin's own account) are information.
//!
//! A rule applies to U when its user list names U, one of U's groups (`%group`, `%#gid`,
//! `%:group`), U's uid (`#uid`), `ALL`, or a `User_Alias` that does, as sudo evaluates the list:
//! the last entry that matches decides, and `!entry` excludes (plugins/sudoers/match.c
//! `userlist_matches` walks the list backwards and stops at the first match). U's uid and groups
//! come from the host's passwd and group databases when the linter runs where U exists (the
//! CLI reads them), and from `--groups`; otherwise a `%group` is taken as not U's.

use super::*;

/// An account and what it is known to belong to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    /// The login name.
    pub name: String,
    /// Its uid, when known.
    pub uid: Option<u32>,
    /// Its groups by name (primary and supplementary), as far as known.
    pub groups: Vec<String>,
    /// Its group ids, as far as known.
    pub gids: Vec<u32>,
}

impl Principal {
    /// An account known by name only: no uid, no groups.
    pub fn new(name: &str) -> Principal {
        Principal {
            name: name.to_string(),
            uid: None,
            groups: Vec::new(),
            gids: Vec::new(),
        }
    }

    /// The account as the host's `passwd` and `group` databases (their text) describe it:
    /// uid, primary group and the groups that list it as a member. An account they do not
    /// know stays name-only.
    pub fn from_databases(name: &str, passwd: &str, group: &str) -> Principal {
        let mut p = Principal::new(name);
        let mut primary = None;
        for line in passwd.lines() {
            let f: Vec<&str> = line.split(':').collect();
            if f.len() >= 4 && f[0] == name {
                p.uid = f[2].parse().ok();
                primary = f[3].parse::<u32>().ok();
                break;
            }
        }
        if p.uid.is_none() {
            return p;
        }
        for line in group.lines() {
            let f: Vec<&str> = line.split(':').collect();
            if f.len() < 4 {
                continue;
            }
            let gid = f[2].parse::<u32>().ok();
            let member = f[3].split(',').any(|m| m.trim() == name);
            if member || (gid.is_some() && gid == primary) {
                p.groups.push(f[0].to_string());
                p.gids.extend(gid);
            }
        }
        if let Some(g) = primary
            && !p.gids.contains(&g)
        {
            p.gids.push(g);
        }
        p
    }

    /// Also count these groups as the account's (`--groups`).
    pub fn with_groups<I: IntoIterator<Item = String>>(mut self, groups: I) -> Principal {
        for g in groups {
            if !self.groups.contains(&g) {
                self.groups.push(g);
            }
        }
        self
    }

    /// Whether one user-list entry (without `!`, not an alias) names this account.
    fn is(&self, entry: &str) -> bool {
        let entry = entry.trim_matches('"');
        if entry == "ALL" || entry == self.name {
            return true;
        }
        if let Some(uid) = entry.strip_prefix('#') {
            return self.uid.is_some() && uid.parse().ok() == self.uid;
        }
        if let Some(group) = entry.strip_prefix('%') {
            let group = group.strip_prefix(':').unwrap_or(group);
            if let Some(gid) = group.strip_prefix('#') {
                return gid.parse::<u32>().is_ok_and(|g| self.gids.contains(&g));
            }
            return self.groups.iter().any(|g| g == group);
        }
        false
    }
}

impl Aliases {
    /// Whether a user list (a rule's users, a `Defaults:` binding) applies to `who`: the last
    /// matching entry decides, `!` negates, `User_Alias`es are followed (cycles cut).
    pub(super) fn users_apply(&self, list: &[String], who: &Principal) -> bool {
        self.users_decide(list, who, 0) == Some(true)
    }

    fn users_decide(&self, list: &[String], who: &Principal, depth: usize) -> Option<bool> {
        if depth > 16 {
            return None;
        }
        for entry in list.iter().rev() {
            let bangs = entry.len() - entry.trim_start_matches(['!', ' ']).len();
            let negated = entry[..bangs].matches('!').count() % 2 == 1;
            let name = entry[bangs..].trim();
            let hit = match self.user.get(name) {
                Some(members) => self.users_decide(members, who, depth + 1) == Some(true),
                None => who.is(name),
            };
            if hit {
                return Some(!negated);
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PASSWD: &str = "root:x:0:0:root:/root:/bin/bash\nzen-agent:x:1001:1001::/home/zen-agent:/bin/sh\nalice:x:1000:1000::/home/alice:/bin/bash\n";
    const GROUP: &str =
        "root:x:0:\nsudo:x:27:alice\nzen-agent:x:1001:\nops:x:1500:alice,zen-agent\n";

    #[test]
    fn databases_give_uid_and_groups() {
        let p = Principal::from_databases("zen-agent", PASSWD, GROUP);
        assert_eq!(p.uid, Some(1001));
        assert_eq!(p.groups, ["zen-agent", "ops"]);
        assert_eq!(p.gids, [1001, 1500]);
        let nobody = Principal::from_databases("ghost", PASSWD, GROUP);
        assert_eq!(nobody, Principal::new("ghost"));
    }

    #[test]
    fn lists_decide_like_sudo() {
        let mut a = Aliases::default();
        a.user
            .insert("AGENTS".into(), vec!["zen-agent".into(), "bot".into()]);
        a.user
            .insert("NOT_ME".into(), vec!["ALL".into(), "!zen-agent".into()]);
        let who = Principal::from_databases("zen-agent", PASSWD, GROUP);
        let l = |items: &[&str]| items.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        for (list, applies) in [
            (l(&["zen-agent"]), true),
            (l(&["ALL"]), true),
            (l(&["%ops"]), true),
            (l(&["%sudo"]), false),
            (l(&["%#1500"]), true),
            (l(&["#1001"]), true),
            (l(&["#1000"]), false),
            (l(&["AGENTS"]), true),
            (l(&["NOT_ME"]), false),
            (l(&["ALL", "!zen-agent"]), false),
            (l(&["!zen-agent", "ALL"]), true),
            (l(&["alice", "bob"]), false),
            (l(&["ALL", "!!zen-agent"]), true),
        ] {
            assert_eq!(a.users_apply(&list, &who), applies, "{list:?}");
        }
        // Without the databases, groups are not the account's unless told.
        let bare = Principal::new("zen-agent");
        assert!(!a.users_apply(&l(&["%ops"]), &bare));
        assert!(a.users_apply(&l(&["%ops"]), &bare.with_groups(["ops".to_string()])));
    }
}
