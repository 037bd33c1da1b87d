//! The pre-flight check of a command's program, before anything runs: a program that does not
//! resolve where jobs look for it is named at once, instead of failing (or, for `npx`, waiting
//! on a registry) in every job.

use super::PreparedProof;
use crate::source::{self, SourceError};

/// Whether `program` is an executable file in a directory of this process's `PATH`.
pub fn on_path(program: &str) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::env::var_os("PATH").is_some_and(|path| {
        std::env::split_paths(&path).any(|dir| {
            std::fs::metadata(dir.join(program))
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
    })
}

/// A program a proof's command needs that is not installed where its jobs would look for it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MissingTool {
    /// The program, as the command names it (`vitest`, `pytest9`).
    pub tool: String,
    /// Where it was looked for.
    pub looked_in: String,
}

/// Checked before anything runs, where jobs run on this machine: a command whose program does
/// not resolve would otherwise fail in every job, or (`npx` fetching a package) wait on a
/// registry the sandbox cannot reach until the job's timeout. The program is looked for on the
/// `PATH`, a relative one in the candidate tree, and what `npx`/`npm exec` run in
/// `node_modules/.bin` of the candidate tree or of the repository's directory.
pub fn missing_tool(prepared: &PreparedProof) -> Result<Option<MissingTool>, SourceError> {
    match prepared.jobs.first() {
        Some(job) => missing_program(
            &prepared.request.repo,
            &prepared.change.candidate.tree,
            &job.command,
        ),
        None => Ok(None),
    }
}

/// [`missing_tool`] for any command run on `tree` of `repo` (`assay test`, `assay mutate`).
pub fn missing_program(
    repo: &std::path::Path,
    tree: &assay_common::TreeId,
    command: &[String],
) -> Result<Option<MissingTool>, SourceError> {
    let Some(program) = command.first() else {
        return Ok(None);
    };
    // Placeholders (`{adapter}`) are Assay's own files, written into each job's scratch.
    if program.contains('{') {
        return Ok(None);
    }
    let in_tree = |path: &str| -> Result<bool, SourceError> {
        let path = path.trim_start_matches("./");
        Ok(source::read_file(repo, tree, path)?.is_some()
            || source::list_files(repo, tree)?
                .iter()
                .any(|f| f.starts_with(&format!("{path}/"))))
    };
    if program.starts_with('/') {
        return Ok(
            (!std::path::Path::new(program).exists()).then(|| MissingTool {
                tool: program.clone(),
                looked_in: "this machine".into(),
            }),
        );
    }
    if program.contains('/') {
        return Ok((!in_tree(program)?).then(|| MissingTool {
            tool: program.clone(),
            looked_in: "the tree".into(),
        }));
    }
    if !on_path(program) {
        return Ok(Some(MissingTool {
            tool: program.clone(),
            looked_in: "PATH".into(),
        }));
    }
    let runs_a_package = match program.as_str() {
        "npx" => Some(&command[1..]),
        "npm" if command.get(1).is_some_and(|a| a == "exec") => Some(&command[2..]),
        _ => None,
    };
    if let Some(args) = runs_a_package
        && let Some(package) = args.iter().find(|a| !a.starts_with('-'))
    {
        let bin = format!("node_modules/.bin/{package}");
        if !in_tree(&bin)? && !repo.join(&bin).exists() {
            return Ok(Some(MissingTool {
                tool: package.clone(),
                looked_in: format!("{bin} of the candidate tree and of {}", repo.display()),
            }));
        }
    }
    Ok(None)
}
