//! The report of several switched mutants run in one process
//! ([`crate::runner::Runner::mutant_batch_command`]): JSON lines, appended as the batch goes.
//! Each mutant whose tests ran to their end has an `assay.node/v1` document of its own (with
//! `mutant`, its time `ms`, and `broken` when a test file failed to load), and, when it
//! failed, a second one marked `rerun` from the pass that confirms kills; the batch script
//! adds `assay.node-batch/v1` lines: `start` as a mutant's tests begin, `timeout` when its
//! limit stopped the process, `unbatchable` when a test ran outside its file's suite, and
//! `confirmed` when one process ran every first run and confirmed its kills (for the batch's
//! own shell loop; it says nothing of any mutant).
//!
//! The report is the guest's and is read as hostile: a line that does not parse is skipped (a
//! process killed mid-write leaves half a line), a mutant outside the batch is ignored, and a
//! mutant with two first documents, a broken file or a stray test is left unsettled, to be
//! run on its own.

use super::node;
use crate::outcome::ReportOutcome;
use serde::Deserialize;
use std::collections::BTreeMap;

/// The `schema` of the batch script's own lines.
pub const SCHEMA: &str = "assay.node-batch/v1";

/// The longest time a mutant's run may claim: what a guest writes cannot overflow a sum.
const MAX_MS: u64 = 24 * 60 * 60 * 1000;

/// What a batch says of one of its mutants.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MemberRun {
    /// Its tests ran to their end: the report of that run, followed by its re-run's when it
    /// failed and the re-run finished, and the run's time.
    Ran {
        /// The parsed documents, as one job's report.
        report: ReportOutcome,
        /// Its tests' own time, in milliseconds.
        ms: u64,
    },
    /// It outlived its limit: the batch stopped it after `ms` milliseconds.
    TimedOut {
        /// How long it ran.
        ms: u64,
    },
    /// The batch says nothing a verdict can rest on: it runs on its own, for this reason.
    Unsettled(String),
}

#[derive(Deserialize)]
struct Line {
    schema: String,
    mutant: Option<u32>,
    #[serde(default)]
    rerun: bool,
    #[serde(default)]
    timeout: bool,
    #[serde(default)]
    start: bool,
    ms: Option<u64>,
    broken: Option<String>,
    unbatchable: Option<String>,
}

/// Per mutant of `members`, what the batch's `bytes` say of it.
pub fn read(bytes: &[u8], members: &[u32]) -> BTreeMap<u32, MemberRun> {
    let mut first: BTreeMap<u32, Vec<(&[u8], Line)>> = BTreeMap::new();
    let mut again: BTreeMap<u32, &[u8]> = BTreeMap::new();
    let mut timed_out: BTreeMap<u32, u64> = BTreeMap::new();
    let mut started: Vec<u32> = Vec::new();
    let mut stray: Option<String> = None;
    for raw in bytes.split(|b| *b == b'\n') {
        let Ok(line) = serde_json::from_slice::<Line>(raw) else {
            continue;
        };
        if let Some(name) = &line.unbatchable {
            stray.get_or_insert_with(|| name.clone());
            continue;
        }
        let Some(mutant) = line.mutant.filter(|m| members.contains(m)) else {
            continue;
        };
        match (line.schema.as_str(), line.rerun) {
            (node::SCHEMA, false) => first.entry(mutant).or_default().push((raw, line)),
            (node::SCHEMA, true) => {
                again.entry(mutant).or_insert(raw);
            }
            (SCHEMA, false) if line.timeout => {
                timed_out.insert(mutant, line.ms.unwrap_or(0).min(MAX_MS));
            }
            (SCHEMA, false) if line.start => started.push(mutant),
            _ => {}
        }
    }
    members
        .iter()
        .map(|&mutant| {
            let run = if let Some(name) = &stray {
                MemberRun::Unsettled(format!(
                    "the test {name:?} ran outside its file's suite in a batch"
                ))
            } else {
                settle(
                    mutant,
                    first.remove(&mutant).unwrap_or_default(),
                    again.get(&mutant).copied(),
                    timed_out.get(&mutant).copied(),
                    started.contains(&mutant),
                )
            };
            (mutant, run)
        })
        .collect()
}

fn settle(
    mutant: u32,
    mut first: Vec<(&[u8], Line)>,
    again: Option<&[u8]>,
    timed_out: Option<u64>,
    started: bool,
) -> MemberRun {
    if first.len() > 1 {
        return MemberRun::Unsettled(format!("the batch reports mutant {mutant} twice"));
    }
    match (first.pop(), timed_out) {
        (Some((_, line)), _) if line.broken.is_some() => MemberRun::Unsettled(format!(
            "a test file failed to load in the batch: {}",
            line.broken.unwrap_or_default()
        )),
        (Some((raw, line)), _) => {
            let mut documents = raw.to_vec();
            if let Some(again) = again {
                documents.push(b'\n');
                documents.extend_from_slice(again);
            }
            MemberRun::Ran {
                report: node::parse(&documents),
                ms: line.ms.unwrap_or(0).min(MAX_MS),
            }
        }
        (None, Some(ms)) => MemberRun::TimedOut { ms },
        (None, None) if started => {
            MemberRun::Unsettled("its tests ended the batch's process".into())
        }
        (None, None) => MemberRun::Unsettled("the batch did not run it".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::outcome::Outcome;

    fn document(mutant: u32, passed: bool, rerun: bool) -> String {
        let fail = u32::from(!passed);
        format!(
            r#"{{"schema":"assay.node/v1","mutant":{mutant},"counts":{{"tests":1,"pass":{},"fail":{fail}}},"results":[{{"file":"test/pager.test.js","nesting":0,"name":"partial page","passed":{passed},"suite":false,"skip":false,"todo":false,"failure_type":{},"message":null}}],"ms":12,"failed":{}{}}}"#,
            1 - fail,
            if passed {
                "null"
            } else {
                r#""testCodeFailure""#
            },
            !passed,
            if rerun { r#","rerun":true"# } else { "" }
        )
    }

    fn start(mutant: u32) -> String {
        format!(r#"{{"schema":"{SCHEMA}","mutant":{mutant},"start":true,"rerun":false}}"#)
    }

    #[test]
    fn each_mutant_gets_its_own_run_its_confirmation_or_its_timeout() {
        let report = [
            start(1),
            document(1, false, false),
            start(2),
            format!(r#"{{"schema":"{SCHEMA}","mutant":2,"timeout":true,"ms":1012}}"#),
            start(3),
            document(3, true, false),
            start(4),
            start(5),
            document(5, false, false),
            document(1, false, true),
            format!(r#"{{"schema":"{SCHEMA}","confirmed":true}}"#),
            // Half a line from a process killed mid-write.
            r#"{"schema":"assay.node/v1","mutant":5,"coun"#.to_owned(),
        ]
        .join("\n");
        let runs = read(report.as_bytes(), &[1, 2, 3, 4, 5, 6]);
        let MemberRun::Ran { report: one, ms } = &runs[&1] else {
            panic!("{:?}", runs[&1]);
        };
        assert_eq!(*ms, 12);
        let cases = &one.parsed().expect("parsed").cases;
        assert_eq!(cases.len(), 2, "{cases:?}");
        assert!(cases.iter().all(|c| c.outcome == Outcome::Failed));
        assert_eq!(
            cases[1].variant.as_deref(),
            Some(super::super::libtest::RERUN_VARIANT)
        );
        assert_eq!(runs[&2], MemberRun::TimedOut { ms: 1012 });
        let MemberRun::Ran { report: three, .. } = &runs[&3] else {
            panic!("{:?}", runs[&3]);
        };
        assert_eq!(
            three.parsed().expect("parsed").cases[0].outcome,
            Outcome::Passed
        );
        assert!(matches!(&runs[&4], MemberRun::Unsettled(why) if why.contains("ended")));
        // A failed run whose confirmation never came stands alone.
        let MemberRun::Ran { report: five, .. } = &runs[&5] else {
            panic!("{:?}", runs[&5]);
        };
        assert_eq!(five.parsed().expect("parsed").cases.len(), 1);
        assert!(matches!(&runs[&6], MemberRun::Unsettled(why) if why.contains("did not run")));
    }

    #[test]
    fn hostile_lines_settle_nothing_they_should_not() {
        // A mutant outside the batch, a second first run, a broken file, a stray test.
        let outside = read(document(9, true, false).as_bytes(), &[1]);
        assert!(matches!(&outside[&1], MemberRun::Unsettled(_)));
        assert!(!outside.contains_key(&9));
        let twice = [document(1, true, false), document(1, false, false)].join("\n");
        assert!(matches!(
            &read(twice.as_bytes(), &[1])[&1],
            MemberRun::Unsettled(why) if why.contains("twice")
        ));
        let broken = document(1, true, false).replace(
            r#""ms":12"#,
            r#""ms":12,"broken":"Cannot find module './gone'""#,
        );
        assert!(matches!(
            &read(broken.as_bytes(), &[1])[&1],
            MemberRun::Unsettled(why) if why.contains("gone")
        ));
        let stray = [
            document(1, true, false),
            format!(r#"{{"schema":"{SCHEMA}","unbatchable":"late test"}}"#),
        ]
        .join("\n");
        assert!(matches!(
            &read(stray.as_bytes(), &[1])[&1],
            MemberRun::Unsettled(why) if why.contains("late test")
        ));
        // A claimed time past a day is a day; a count that contradicts the results is no pass.
        let long = document(1, true, false).replace(r#""ms":12"#, r#""ms":18446744073709551615"#);
        assert!(
            matches!(&read(long.as_bytes(), &[1])[&1], MemberRun::Ran { ms, .. } if *ms == MAX_MS)
        );
        let lying = document(1, true, false).replace(r#""tests":1"#, r#""tests":7"#);
        let MemberRun::Ran { report, .. } = &read(lying.as_bytes(), &[1])[&1] else {
            panic!("not ran");
        };
        assert!(report.parsed().is_none(), "{report:?}");
    }
}
