//! The Go tests a job's tree declares, read before its guest starts (see
//! [`assay_common::report::go_declared`]): what the guest does to the tree afterwards cannot
//! change what the run is checked against.

use assay_common::job::{JobKind, JobSpec};
use assay_common::report::go_declared::DeclaredTests;
use assay_common::runner::ReportFormat;
use std::path::Path;

/// Whether `job` is a plain `go test` run of the tree's own tests (not a mutant, not a run of
/// prebuilt test executables), whose report can be checked against the declarations.
pub fn checked(job: &JobSpec) -> bool {
    job.kind != JobKind::Mutant
        && job.binaries.is_none()
        && matches!(job.report, ReportFormat::GoTestJson)
        && job
            .command
            .first()
            .is_some_and(|program| Path::new(program).file_name().is_some_and(|n| n == "go"))
        && job.command.get(1).is_some_and(|verb| verb == "test")
}

/// The declarations of `tree`'s `go.mod` and `_test.go` files, all of them (no cap a change
/// could outgrow to leave its own package unchecked: the go command compiles them all anyway).
/// Links are not followed; a file or directory that cannot be read is left out: a test not
/// declared here is only a test not checked.
pub fn read(tree: &Path) -> DeclaredTests {
    let mut files: Vec<(String, Vec<u8>)> = Vec::new();
    let mut pending = vec![(tree.to_path_buf(), String::new())];
    while let Some((dir, relative)) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            let name = entry.file_name().to_string_lossy().into_owned();
            let path = match relative.as_str() {
                "" => name.clone(),
                parent => format!("{parent}/{name}"),
            };
            if kind.is_dir() && name != ".git" {
                pending.push((entry.path(), path));
            } else if kind.is_file()
                && (name == "go.mod" || name.ends_with("_test.go"))
                && let Ok(bytes) = std::fs::read(entry.path())
            {
                files.push((path, bytes));
            }
        }
    }
    DeclaredTests::read(files.iter().map(|(p, b)| (p.as_str(), b.as_slice())))
}
