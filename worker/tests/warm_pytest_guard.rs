//! Runs the warm pytest runner's own Python unit tests (`tests/python/`), so the guard that
//! decides what a forked mutant may reuse is tested wherever the workspace's tests run.

use std::path::Path;
use std::process::Command;

#[test]
fn the_warm_runners_python_unit_tests_pass() {
    let python = "python3";
    let tests = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python");
    let output = Command::new(python)
        .args(["-m", "pytest", "-q", "-p", "no:cacheprovider"])
        .arg(&tests)
        .output()
        .unwrap_or_else(|why| panic!("cannot run {python} -m pytest: {why}"));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "the warm runner's unit tests failed:\n{stdout}\n{stderr}"
    );
    // Not vacuous: at least the cases written when this line was (34) ran.
    let passed = stdout
        .split_whitespace()
        .zip(stdout.split_whitespace().skip(1))
        .find(|(_, word)| *word == "passed")
        .and_then(|(count, _)| count.parse::<u32>().ok())
        .unwrap_or(0);
    assert!(passed >= 34, "{stdout}");
}
