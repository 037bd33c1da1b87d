//! The pytest 8 and 9 virtual environments `.ci/run` creates for tests that run both majors.

/// The interpreter of the pytest `major` environment, from `ASSAY_PYTEST{major}_PYTHON`.
/// Outside CI a missing one skips the test with a note; in CI (`CI` set) it fails.
pub fn pytest_python(major: u8) -> Option<String> {
    let var = format!("ASSAY_PYTEST{major}_PYTHON");
    match std::env::var(&var) {
        Ok(python) if !python.is_empty() => Some(python),
        _ if std::env::var_os("CI").is_some() => {
            panic!("{var} is not set: .ci/run creates the pytest {major} environment")
        }
        _ => {
            eprintln!("skipped: {var} is not set (see .ci/run)");
            None
        }
    }
}
