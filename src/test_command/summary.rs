//! What `assay test` prints once a run ends: findings, order-dependent cases, reach, the
//! cache's line, the scope audit and the closing line.

use super::*;

pub(super) fn print_findings(args: &TestArgs, ran: &SuiteRan) {
    let audit = &ran.report.audit;
    audit.reachability.iter().flatten().for_each(print_reach);
    for warning in &ran.warnings {
        errln!("warning: {warning}");
    }
    if let Some(scope) = &audit.scope {
        print_scope(scope, args.audit_base.as_deref().unwrap_or("the base"));
    }
    print_order_dependent(&ran.report.cases);
    for outlier in &audit.selection.executed_not_selected {
        errln!(
            "[audit] FAIL containment: job {} executed {}, which it did not select",
            outlier.job,
            outlier.id
        );
    }
    for outlier in &audit.selection.selected_not_collected {
        errln!(
            "[audit] FAIL containment: job {} selected {}, which the tree does not collect",
            outlier.job,
            outlier.id
        );
    }
    if let Some(cache) = &ran.report.cache
        && !args.console.quiet
    {
        print_cache(cache, ran, args.cache.no_cache);
    }
}

/// Cases that failed apart and passed in the whole suite's order: named, never a regression.
pub(super) fn print_order_dependent(cases: &[CaseReport]) {
    let names: Vec<&str> = cases
        .iter()
        .filter(|c| c.order_dependent)
        .map(|c| c.display.as_str())
        .collect();
    if !names.is_empty() {
        errln!(
            "[order] {} order-dependent (failed when run apart from the cases before {}, passed with the whole suite in collection order; counted as passed): {}",
            match names.len() {
                1 => "1 case is".to_owned(),
                n => format!("{n} cases are"),
            },
            if names.len() == 1 { "it" } else { "them" },
            names.join(", ")
        );
    }
}

/// A changed file the executed tests do not reach, or only in part.
pub(super) fn print_reach(file: &reach::FileReach) {
    if !file.imported {
        errln!(
            "[audit] UNREACHED {}: no executed test imports it",
            file.file
        );
    } else if !file.unreached.is_empty() {
        errln!(
            "[audit] UNREACHED {}: changed lines {}",
            file.file,
            reach::ranges(&file.unreached)
        );
    }
}

/// What the cache did: passes withheld, entries refused and served, passes stored, or why it
/// was not used (unless `--no-cache` said so).
pub(super) fn print_cache(cache: &SuiteCacheReport, ran: &SuiteRan, no_cache: bool) {
    if let Some(why) = &cache.withheld {
        errln!("[cache] passes not stored: {why}");
        return;
    }
    if let Some(why) = &cache.not_used {
        if !no_cache {
            errln!("[cache] not used: {why}");
        }
        return;
    }
    for refused in &cache.refused {
        errln!(
            "[cache] refused entry {}: {}; the case ran instead",
            refused.entry,
            refused.why
        );
    }
    let from = console::stored_by(ran.answered_by.iter().map(String::as_str));
    errln!(
        "[cache] {} of {} cases answered from the cache{from}, {} passes stored",
        cache.served,
        ran.selected,
        cache.stored
    );
    if let Some(why) = &cache.store_error {
        errln!("[cache] passes not stored: {why}");
    }
}

/// `--json`, `--junit` and the `--output` reports.
pub(super) fn closing_line(
    totals: &SuiteTotals,
    ending: Ending,
    failed: u64,
    audit_failed: bool,
) -> String {
    let n = totals.total;
    let quarantined = match totals.quarantined {
        0 => String::new(),
        q => format!(", {q} quarantined"),
    };
    match ending {
        Ending::Aborted => format!("[test] {}/{n} infrastructure-aborted", n - totals.not_run),
        Ending::Passed if totals.quarantined == 0 => format!("[test] {n}/{n} passed"),
        Ending::Passed => format!("[test] {}/{n} passed{quarantined}", totals.passed),
        Ending::Failed if failed == 0 && audit_failed => format!(
            "[test] {}/{n} passed{quarantined}; the selection audit failed",
            totals.passed
        ),
        Ending::Failed => format!("[test] {n}/{n} completed, {failed} failed{quarantined}"),
    }
}

/// Prints the scope gates' findings: every gap, every excuse used, every expired one, every
/// relocation; and one closing line when the audit fails.
pub(super) fn print_scope(audit: &ScopeAudit, base: &str) {
    for why in [&audit.closure.unchecked, &audit.inventory.unchecked]
        .into_iter()
        .flatten()
    {
        errln!("[audit] FAIL not checked: {why}");
    }
    let excuse = |excused: &Option<scope::ScopeException>| match excused {
        Some(e) => format!(
            " — EXCUSED by {} until {}: {}",
            audit.exceptions.path, e.expires, e.reason
        ),
        None => String::new(),
    };
    for gap in &audit.closure.gaps {
        let reads: Vec<String> = gap
            .reads
            .iter()
            .map(|r| match r.source {
                ReadSource::Recorded => r.file.clone(),
                ReadSource::Declared => format!("{} (declared)", r.file),
            })
            .collect();
        let verdict = if gap.excused_by.is_some() {
            "EXCUSED"
        } else {
            "FAIL"
        };
        errln!(
            "[audit] {verdict} closure: {} reads {}, which the change touches, and was not run{}",
            gap.test,
            reads.join(", "),
            excuse(&gap.excused_by)
        );
    }
    for moved in &audit.inventory.found.relocated {
        let how = match moved.kind {
            Relocation::Renamed => "RENAMED",
            Relocation::Moved => "MOVED",
        };
        errln!("[audit] {how} {} -> {}", moved.from, moved.to);
    }
    for removed in &audit.inventory.found.removed {
        let verdict = if removed.excused_by.is_some() {
            "EXCUSED"
        } else {
            "FAIL"
        };
        errln!(
            "[audit] {verdict} inventory: {} is collected at {base} and gone at the candidate{}",
            removed.test,
            excuse(&removed.excused_by)
        );
    }
    for expired in &audit.exceptions.usage.expired {
        errln!(
            "[audit] exception for {} expired on {}: it excuses nothing",
            expired.test,
            expired.expires
        );
    }
    if !audit.passed() {
        errln!("error: the selection audit's scope gates failed against {base}");
    }
}
