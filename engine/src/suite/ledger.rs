//! The quarantine ledger: tests excused from counting as suite regressions. A change may remove
//! entries or edit their reason or tracker, but never add one or extend an expiry — otherwise
//! the patch a ledger protects could quietly excuse its own regression. The gate compares the
//! candidate's ledger with the base tree's, by content hash first.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;

pub use assay_common::suite_audit::{LedgerGate, LedgerViolation};

/// The ledger file (TOML): `[[quarantine]]` tables.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Ledger {
    /// The quarantined tests, one `[[quarantine]]` table each.
    #[serde(default)]
    pub quarantine: Vec<LedgerEntry>,
}

/// One quarantined test: whose failures are excused, why, and until when.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct LedgerEntry {
    /// The runner's test id (a pytest node id, a unittest dotted id).
    pub test: String,
    /// Why the test is quarantined, in the author's words.
    pub reason: String,
    /// `YYYY-MM-DD`.
    pub added: String,
    /// `YYYY-MM-DD`; absent means no expiry.
    pub expires: Option<String>,
    /// The tracking issue for the fix (e.g. `INV-4412`), when given.
    pub tracker: Option<String>,
}

/// Why a quarantine ledger cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum LedgerError {
    /// The file is not a ledger's TOML.
    #[error("failed to parse the quarantine ledger {path} at {side}")]
    Parse {
        /// The ledger's path, relative to the root.
        path: String,
        /// Which tree it was read from (`base abc123`, `candidate`).
        side: String,
        /// The TOML parser's failure.
        #[source]
        source: Box<toml::de::Error>,
    },
    #[error(
        "quarantine ledger {path} at {side}: entry {test:?} has {field} {value:?}, not YYYY-MM-DD"
    )]
    /// A date field is not `YYYY-MM-DD`.
    BadDate {
        /// The ledger's path, relative to the root.
        path: String,
        /// Which tree it was read from.
        side: String,
        /// The entry's test id.
        test: String,
        /// The field (`added`, `expires`).
        field: &'static str,
        /// The field's value as written.
        value: String,
    },
    /// One test has two entries.
    #[error("quarantine ledger {path} at {side} lists {test:?} twice")]
    Duplicate {
        /// The ledger's path, relative to the root.
        path: String,
        /// Which tree it was read from.
        side: String,
        /// The test listed twice.
        test: String,
    },
}

/// A ledger file's sha256, hex: what the gate compares between base and candidate.
fn sha256(bytes: &[u8]) -> String {
    hex_lower(&Sha256::digest(bytes))
}

fn hex_lower(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Parses a ledger; `side` names where it came from for errors (`base abc123`, `candidate`).
pub fn parse(bytes: &[u8], path: &str, side: &str) -> Result<Ledger, LedgerError> {
    let text = String::from_utf8_lossy(bytes);
    let ledger: Ledger = toml::from_str(&text).map_err(|source| LedgerError::Parse {
        path: path.into(),
        side: side.into(),
        source: Box::new(source),
    })?;
    let mut seen = std::collections::BTreeSet::new();
    for entry in &ledger.quarantine {
        if !seen.insert(entry.test.as_str()) {
            return Err(LedgerError::Duplicate {
                path: path.into(),
                side: side.into(),
                test: entry.test.clone(),
            });
        }
        let dates = [
            ("added", Some(&entry.added)),
            ("expires", entry.expires.as_ref()),
        ];
        for (field, value) in dates {
            if let Some(value) = value
                && !is_date(value)
            {
                return Err(LedgerError::BadDate {
                    path: path.into(),
                    side: side.into(),
                    test: entry.test.clone(),
                    field,
                    value: value.clone(),
                });
            }
        }
    }
    Ok(ledger)
}

pub(crate) fn is_date(value: &str) -> bool {
    let b = value.as_bytes();
    b.len() == 10
        && b[4] == b'-'
        && b[7] == b'-'
        && b.iter()
            .enumerate()
            .all(|(i, c)| i == 4 || i == 7 || c.is_ascii_digit())
}

/// Compares the candidate's ledger with the base's. Identical bytes pass without parsing; a
/// missing file is an empty ledger.
pub fn compare(
    path: &str,
    base: Option<&[u8]>,
    candidate: Option<&[u8]>,
) -> Result<LedgerGate, LedgerError> {
    let base_sha256 = base.map(sha256);
    let candidate_sha256 = candidate.map(sha256);
    let mut gate = LedgerGate {
        path: path.into(),
        base_sha256: base_sha256.clone(),
        candidate_sha256: candidate_sha256.clone(),
        violations: Vec::new(),
    };
    if base_sha256 == candidate_sha256 {
        return Ok(gate);
    }
    let base = base
        .map(|b| parse(b, path, "base"))
        .transpose()?
        .unwrap_or_default();
    let candidate = candidate
        .map(|b| parse(b, path, "candidate"))
        .transpose()?
        .unwrap_or_default();
    let base_entries: BTreeMap<&str, &LedgerEntry> = base
        .quarantine
        .iter()
        .map(|e| (e.test.as_str(), e))
        .collect();
    for entry in &candidate.quarantine {
        match base_entries.get(entry.test.as_str()) {
            None => gate.violations.push(LedgerViolation::Added {
                test: entry.test.clone(),
            }),
            Some(before) => {
                // ISO dates order as strings; no expiry is later than any date.
                let extended = match (&before.expires, &entry.expires) {
                    (Some(_), None) => true,
                    (Some(b), Some(c)) => c > b,
                    (None, _) => false,
                };
                if extended {
                    gate.violations.push(LedgerViolation::ExpiryExtended {
                        test: entry.test.clone(),
                        base: before.expires.clone(),
                        candidate: entry.expires.clone(),
                    });
                }
            }
        }
    }
    Ok(gate)
}

impl Ledger {
    /// Is `test` quarantined on `today` (`YYYY-MM-DD`)? An expired entry excuses nothing.
    pub fn excuses(&self, test: &str, today: &str) -> bool {
        self.quarantine
            .iter()
            .any(|e| e.test == test && e.expires.as_deref().is_none_or(|x| x >= today))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: &str = r#"
[[quarantine]]
test = "tests/test_ingest.py::test_retry_budget"
reason = "timing-dependent under parallel execution"
added = "2026-09-02"
expires = "2026-11-02"
tracker = "INV-4412"

[[quarantine]]
test = "tests/test_pager.py::test_cursor_wraps"
reason = "flaky on slow disks"
added = "2026-08-01"
"#;

    fn gate(candidate: &str) -> Vec<LedgerViolation> {
        compare(
            ".assay/quarantine.toml",
            Some(BASE.as_bytes()),
            Some(candidate.as_bytes()),
        )
        .unwrap()
        .violations
    }

    #[test]
    fn removals_and_reason_edits_pass_additions_and_extensions_fail() {
        let removed = BASE
            .split("\n[[quarantine]]\ntest = \"tests/test_pager")
            .next()
            .unwrap();
        assert_eq!(gate(BASE), []);
        assert_eq!(gate(removed), []);
        assert_eq!(
            gate(&BASE.replace("flaky on slow disks", "slow CI disks")),
            []
        );
        assert_eq!(gate(&BASE.replace("2026-11-02", "2026-10-01")), []);
        assert_eq!(
            gate(&format!(
                "{BASE}\n[[quarantine]]\ntest = \"tests/test_tax.py::test_vat\"\nreason = \"x\"\nadded = \"2026-09-10\"\n"
            )),
            [LedgerViolation::Added {
                test: "tests/test_tax.py::test_vat".into()
            }]
        );
        assert_eq!(
            gate(&BASE.replace("2026-11-02", "2027-01-01")),
            [LedgerViolation::ExpiryExtended {
                test: "tests/test_ingest.py::test_retry_budget".into(),
                base: Some("2026-11-02".into()),
                candidate: Some("2027-01-01".into()),
            }]
        );
        assert_eq!(
            gate(&BASE.replace("expires = \"2026-11-02\"\n", "")).len(),
            1
        );
    }

    #[test]
    fn a_ledger_created_by_the_change_gains_every_entry() {
        let result = compare("q.toml", None, Some(BASE.as_bytes())).unwrap();
        assert_eq!(result.violations.len(), 2);
        assert!(
            compare("q.toml", Some(BASE.as_bytes()), None)
                .unwrap()
                .passed()
        );
    }

    #[test]
    fn malformed_ledgers_are_errors_that_name_the_file() {
        let err = compare("q.toml", Some(b"[[quarantine]]\ntest = 3\n"), Some(b"")).unwrap_err();
        assert!(err.to_string().contains("q.toml"), "{err}");
        let bad_date = BASE.replace("2026-11-02", "next month");
        let err = compare("q.toml", Some(BASE.as_bytes()), Some(bad_date.as_bytes())).unwrap_err();
        assert!(err.to_string().contains("next month"), "{err}");
    }

    #[test]
    fn only_unexpired_entries_excuse_a_test() {
        let ledger = parse(BASE.as_bytes(), "q.toml", "candidate").unwrap();
        assert!(ledger.excuses("tests/test_ingest.py::test_retry_budget", "2026-10-01"));
        assert!(!ledger.excuses("tests/test_ingest.py::test_retry_budget", "2026-12-01"));
        assert!(ledger.excuses("tests/test_pager.py::test_cursor_wraps", "2030-01-01"));
        assert!(!ledger.excuses("tests/test_tax.py::test_vat", "2026-10-01"));
    }
}
