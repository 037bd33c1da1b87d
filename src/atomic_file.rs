//! Files Assay writes for users (evidence, reports, pages), never seen half-written; `-` for a
//! report (`--json -`) is stdout.

use anyhow::Context;
use std::path::Path;

/// Writes via a temporary sibling and a rename, so a reader never sees half a file.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    let tmp = path.with_extension("assay-tmp");
    std::fs::write(&tmp, bytes).with_context(|| format!("failed to write {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("failed to write {}", path.display()))
}

/// A report's file: `-` is stdout (the human summary then goes to stderr), anything else is
/// written as [`write_atomically`] does.
pub fn write_report(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    if path.as_os_str() == "-" {
        crate::console::document(bytes);
        return Ok(());
    }
    write_atomically(path, bytes)
}
