//! One line per operation (`pxagent audit show`): a two-phase operation's `started` record and
//! its completion are shown as one, the completion (its result, with `started` naming the
//! first half), in the place where the operation began.

use super::{Phase, Record};

/// The records as operations: each completion replaces the started record it names; a
/// started record without a completion (pxagent was killed while it ran) stays as it is.
pub fn operations(records: Vec<Record>) -> Vec<Record> {
    let mut out: Vec<Record> = Vec::with_capacity(records.len());
    // Where each started record sits in `out`, by seq.
    let mut at: std::collections::BTreeMap<u64, usize> = Default::default();
    for r in records {
        match (r.phase, r.started) {
            (Some(Phase::Started), _) => {
                at.insert(r.seq, out.len());
                out.push(r);
            }
            (Some(Phase::Done | Phase::Interrupted), Some(n)) => match at.remove(&n) {
                Some(i) => out[i] = r,
                None => out.push(r),
            },
            _ => out.push(r),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::{NewRecord, Verdict, Via, append, read};
    use super::*;

    #[test]
    fn a_started_record_and_its_completion_are_one_operation() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        let started = |op: &str| {
            let mut r = NewRecord::new(op, Via::Cli, Verdict::Allowed);
            r.phase = Some(Phase::Started);
            append(&path, r).unwrap().seq
        };
        let done = |op: &str, of: u64, phase: Phase| {
            let mut r = NewRecord::new(op, Via::Cli, Verdict::Allowed);
            r.phase = Some(phase);
            r.started = Some(of);
            r.exit_code = 7;
            append(&path, r).unwrap();
        };
        let a = started("vm.snapshot");
        append(
            &path,
            NewRecord::new("vm.status", Via::Cli, Verdict::Allowed),
        )
        .unwrap();
        let b = started("vm.start");
        done("vm.start", b, Phase::Done);
        started("vm.stop");
        done("vm.snapshot", a, Phase::Interrupted);
        let v = super::super::verify(&path).unwrap();
        assert_eq!(v.first_broken, None);
        assert_eq!(v.unfinished, vec![5]);
        let ops = operations(read(&path, None).unwrap());
        let shown: Vec<(&str, Option<Phase>)> =
            ops.iter().map(|r| (r.op.as_str(), r.phase)).collect();
        assert_eq!(
            shown,
            [
                ("vm.snapshot", Some(Phase::Interrupted)),
                ("vm.status", None),
                ("vm.start", Some(Phase::Done)),
                ("vm.stop", Some(Phase::Started)),
            ]
        );
        assert_eq!(ops[0].started, Some(1));
    }

    #[test]
    fn a_completion_must_name_a_pending_start_of_the_same_op() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        let mut s = NewRecord::new("vm.snapshot", Via::Cli, Verdict::Allowed);
        s.phase = Some(Phase::Started);
        append(&path, s).unwrap();
        let mut d = NewRecord::new("vm.destroy", Via::Cli, Verdict::Allowed);
        d.phase = Some(Phase::Done);
        d.started = Some(1);
        append(&path, d).unwrap();
        let (n, why) = super::super::verify(&path).unwrap().first_broken.unwrap();
        assert_eq!(n, 2);
        assert!(why.contains("started vm.snapshot"), "{why}");
        // Completed twice.
        let path = dir.path().join("twice.jsonl");
        let mut s = NewRecord::new("vm.start", Via::Mcp, Verdict::Allowed);
        s.phase = Some(Phase::Started);
        append(&path, s).unwrap();
        for _ in 0..2 {
            let mut d = NewRecord::new("vm.start", Via::Mcp, Verdict::Allowed);
            d.phase = Some(Phase::Done);
            d.started = Some(1);
            append(&path, d).unwrap();
        }
        let (n, why) = super::super::verify(&path).unwrap().first_broken.unwrap();
        assert_eq!(n, 3);
        assert!(why.contains("not a started record"), "{why}");
    }
}
