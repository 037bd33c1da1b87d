//! Which job commands a warm server can run in a fork: `PYTHON -m pytest …` and
//! `PYTHON -c CODE …`, never a shell's `-c`.

use assay_common::runner::python_m_pytest;

/// A command a warm server can run: `PYTHON -m pytest ARGS…` or `PYTHON -c CODE ARGS…`.
pub(super) struct WarmCommand<'a> {
    pub(super) python: &'a String,
    pub(super) code: Option<&'a str>,
    pub(super) args: &'a [String],
}

pub(super) fn warm_command(command: &[String]) -> Option<WarmCommand<'_>> {
    if let Some((python, args)) = python_m_pytest(command) {
        return Some(WarmCommand {
            python,
            code: None,
            args,
        });
    }
    match command {
        [python, c, code, args @ ..] if c == "-c" && is_python(python) => Some(WarmCommand {
            python,
            code: Some(code),
            args,
        }),
        _ => None,
    }
}

/// Whether `program` names a Python interpreter (`python3`, `/venv/bin/python`,
/// `python3.11`, `pypy3`): `-c` means code to a shell too, and `sh -c 'cargo test …'` (a Rust
/// schema build) must not start a session server whose script the shell would run as commands.
fn is_python(program: &str) -> bool {
    let name = program.rsplit('/').next().unwrap_or(program);
    ["python", "pypy"].iter().any(|stem| {
        name.strip_prefix(stem)
            .is_some_and(|version| version.chars().all(|c| c.is_ascii_digit() || c == '.'))
    })
}
