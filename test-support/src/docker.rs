//! The docker engine as tests see it: a sandbox on it, and the containers carrying a label.

use assay_worker::sandbox::docker::{DockerConfig, DockerSandbox, DockerSetupError};
use std::process::Command;

/// Connects to the engine and checks the runner image, or says loudly why the test cannot run
/// here (a failure when `ASSAY_REQUIRE_DOCKER` is set, as in CI).
pub async fn docker_sandbox(worker_id: &str, config: DockerConfig) -> Option<DockerSandbox> {
    let setup = async {
        let sandbox = DockerSandbox::connect(config, worker_id).await?;
        sandbox.check_image().await?;
        Ok::<_, DockerSetupError>(sandbox)
    };
    match setup.await {
        Ok(sandbox) => Some(sandbox),
        Err(error) if std::env::var_os("ASSAY_REQUIRE_DOCKER").is_none() => {
            eprintln!(
                "\n*** SKIPPING docker test: {error}\n*** (set ASSAY_REQUIRE_DOCKER=1 to make this a failure)\n"
            );
            None
        }
        Err(error) => panic!("docker sandbox required but unavailable: {error}"),
    }
}

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
