//! Structured report parsers. Each turns the bytes a run wrote into a checked [`ReportOutcome`];
//! a report that cannot be trusted yields no named result at all.

pub mod junit;
pub mod summary;
pub mod unittest;

use crate::outcome::ReportOutcome;
use crate::runner::ReportFormat;

/// Parses a freshly written report; `None` means the file was absent.
pub fn parse(format: ReportFormat, bytes: Option<&[u8]>) -> ReportOutcome {
    let Some(bytes) = bytes else {
        return ReportOutcome::Missing;
    };
    match format {
        ReportFormat::JunitXml => junit::parse(bytes),
        ReportFormat::UnittestJson => unittest::parse(bytes),
    }
}
