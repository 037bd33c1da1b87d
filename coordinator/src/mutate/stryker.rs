//! The Stryker mutation-testing-report-schema (version 1) document of a run: what Stryker's
//! HTML viewer and dashboards read. The one place that knows the schema's shape.

use super::{MutateReport, sorted};

impl MutateReport {
    /// Stryker's mutation-testing-report-schema (version 1) document, which its HTML viewer
    /// reads; Assay's summary rides along under `assay`.
    pub fn stryker_json(&self) -> serde_json::Value {
        let mut files = serde_json::Map::new();
        for (path, source) in &self.files {
            let mutants: Vec<serde_json::Value> = self
                .results
                .iter()
                .filter(|r| r.mutant.path.as_str() == path.as_str())
                .map(|r| {
                    let edit = &r.mutant.edit;
                    let mut mutant = serde_json::json!({
                        "id": r.mutant.id,
                        "mutatorName": r.mutant.operator.name(),
                        "replacement": edit.replacement,
                        "description": r.mutant.description,
                        "location": {
                            "start": position(source, edit.start),
                            "end": position(source, edit.end),
                        },
                        "status": r.status,
                        // Run order follows measured durations; the report's order must not.
                        "coveredBy": sorted(&r.covered_by),
                        "killedBy": r.killed_by,
                        "static": false,
                    });
                    if let Some(reason) = &r.status_reason {
                        mutant["statusReason"] = reason.clone().into();
                    }
                    if let Some(n) = r.tests_completed {
                        mutant["testsCompleted"] = n.into();
                    }
                    mutant
                })
                .collect();
            if mutants.is_empty() {
                continue;
            }
            files.insert(
                path.clone(),
                serde_json::json!({"language": "python", "source": source, "mutants": mutants}),
            );
        }
        serde_json::json!({
            "schemaVersion": "1",
            "thresholds": {"high": 80, "low": 60},
            "files": files,
            "framework": {"name": "assay", "version": env!("CARGO_PKG_VERSION")},
            "assay": {
                "tree": self.tree,
                "perLineSelection": self.per_line_selection,
                "selectionNote": self.selection_note,
                "summary": self.summary(),
                "skipped": self.plan.skipped,
                "excludedFiles": self.plan.excluded_files,
            },
        })
    }
}

/// 1-based line and column (in characters) of a byte offset, as Stryker's schema counts them.
fn position(source: &str, offset: usize) -> serde_json::Value {
    let offset = offset.min(source.len());
    let before = source.get(..offset).unwrap_or(source);
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let column = before[line_start..].chars().count() + 1;
    serde_json::json!({"line": line, "column": column})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_are_one_based_and_count_characters() {
        let source = "def f(x):\n    return x > 0\n";
        assert_eq!(
            position(source, 23),
            serde_json::json!({"line": 2, "column": 14})
        );
        assert_eq!(
            position(source, 0),
            serde_json::json!({"line": 1, "column": 1})
        );
    }
}
