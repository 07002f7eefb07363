//! Named effect groups for policy keys: `"@power-off": deny` stands for every operation that
//! can take a guest down, not just `vm.stop`. A `deny` is per operation, and several
//! operations reach a similar effect (`vm.stop` denied leaves `vm.shutdown`, a `vm.exec` of
//! `poweroff`, a rollback, an overwriting restore), so a policy author who means an effect
//! names its group. A group ranks above any glob and below an exact entry, so
//! `"@power-off": deny` with `vm.exec: {commands: [[/usr/bin/uptime]]}` still lets that one
//! command through. Uses nothing but the op ids (a unit test checks each is in the catalog).

/// One named group of op ids.
#[derive(Debug, Clone, Copy)]
pub struct Group {
    /// The key as written in a policy, with its `@`.
    pub name: &'static str,
    /// What the ops in it have in common, for the docs and error messages.
    pub about: &'static str,
    /// The ops (their variants follow them, as for any entry).
    pub ops: &'static [&'static str],
}

/// The groups a policy may name.
pub const GROUPS: &[Group] = &[
    Group {
        name: "@power-off",
        about: "can stop, restart or suspend a running guest: the power ops, a rollback or an overwriting restore (which stop it), and any command inside it (`poweroff`)",
        ops: &[
            "vm.stop",
            "vm.shutdown",
            "vm.reboot",
            "vm.suspend",
            "vm.rollback",
            "ct.stop",
            "ct.shutdown",
            "ct.reboot",
            "ct.rollback",
            "backup.restore-overwrite",
            "backup.restore-ct-overwrite",
            "vm.exec",
            "ct.exec",
            "task.stop",
        ],
    },
    Group {
        name: "@data-loss",
        about: "can lose a guest's data or a backup: destroy, rollback, snapshot and backup removal, an overwriting restore, storage content removal, and any command inside a guest (`rm`)",
        ops: &[
            "vm.destroy",
            "ct.destroy",
            "vm.rollback",
            "ct.rollback",
            "vm.delsnapshot",
            "ct.delsnapshot",
            "backup.restore-overwrite",
            "backup.restore-ct-overwrite",
            "backup.prune",
            "backup.remove",
            "storage.remove",
            "iso.remove",
            "template.remove",
            "image.remove",
            "vm.exec",
            "ct.exec",
        ],
    },
    Group {
        name: "@guest-commands",
        about: "run a command inside a guest or move a file into or out of it",
        ops: &["vm.exec", "ct.exec", "vm.file-write", "vm.file-read"],
    },
    Group {
        name: "@downloads",
        about: "make the host fetch a file from a URL",
        ops: &["iso.download", "template.download", "image.download"],
    },
];

/// The group a key names (`@power-off`), if it names one.
pub fn find(key: &str) -> Option<&'static Group> {
    GROUPS.iter().find(|g| g.name == key)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_member_is_a_catalog_op_and_names_are_unique() {
        for g in GROUPS {
            assert!(g.name.starts_with('@'));
            for id in g.ops {
                assert!(crate::catalog::find(id).is_some(), "{}: {id}", g.name);
            }
        }
        let mut names: Vec<_> = GROUPS.iter().map(|g| g.name).collect();
        names.dedup();
        assert_eq!(names.len(), GROUPS.len());
        assert!(find("@power-off").unwrap().ops.contains(&"vm.shutdown"));
        assert!(find("@nothing").is_none());
    }
}
