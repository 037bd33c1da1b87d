//! The docker engine as tests see it: the containers carrying a label. Shared by the root
//! package's tests and the worker's (which include this file by path).

use std::process::Command;

/// Ids of every container (running or not) labelled `filter` (`key=value`).
pub fn containers_labelled(filter: &str) -> Vec<String> {
    let out = Command::new("docker")
        .args(["ps", "-a", "-q", "--filter"])
        .arg(format!("label={filter}"))
        .output()
        .expect("docker ps runs");
    assert!(out.status.success(), "docker ps: {out:?}");
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .map(str::to_owned)
        .collect()
}
