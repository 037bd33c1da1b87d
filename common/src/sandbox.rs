//! What isolated a job: the sandbox kind, a container's exact image and limits, and how a
//! process sandbox confined its guest. Carried by every job result and by the proof's
//! evidence, so it sits below both.

use serde::{Deserialize, Serialize};

/// What isolated the jobs: the sandbox kind and, for a container, the exact image and limits.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SandboxEvidence {
    /// `process` or `docker`.
    pub kind: String,
    /// `null` for the process sandbox. Always written: job results carry this struct in
    /// bincode, which cannot skip a field.
    #[serde(default)]
    pub container: Option<ContainerEvidence>,
    /// How the process sandbox confined the code under test; `null` for a container, which
    /// the engine confines. Always written, for the same reason as `container`.
    #[serde(default)]
    pub confinement: Option<Confinement>,
}

impl SandboxEvidence {
    /// Whether `self` is the sandbox `declared` names: the same kind and container. An
    /// operator declares the kind; how a process sandbox confined its guest is what the
    /// worker found on its host, so it is not part of the declaration.
    pub fn is_declared(&self, declared: &SandboxEvidence) -> bool {
        self.kind == declared.kind && self.container == declared.container
    }

    /// Why the code under test could reach more than its own tree and scratch, if it could:
    /// such a run's results are never cached, since the guest could reach the cache.
    pub fn unconfined(&self) -> Option<&str> {
        self.confinement
            .as_ref()
            .filter(|c| !c.confined)
            .map(|c| c.detail.as_str())
    }
}

/// How a process sandbox confined its guest.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Confinement {
    /// The guest ran in namespaces of its own: a read-only root, only its tree and scratch
    /// writable, none of Assay's state, stores, caches or keys visible, and no network beyond
    /// its own loopback unless the run asked for it.
    pub confined: bool,
    /// What confined it (`bubblewrap 0.8.0`), or why nothing could.
    pub detail: String,
}

/// The container a job ran in: its exact image and the limits it ran under.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ContainerEvidence {
    /// The image as named (`assay-runner-python:latest`).
    pub image: String,
    /// The engine's content id of that image (`sha256:…`), which a tag does not pin.
    pub image_id: String,
    /// Registry digests of the image; empty for an image built locally.
    pub repo_digests: Vec<String>,
    /// The container's memory limit, in MiB.
    pub memory_mb: u64,
    /// The container's CPU limit, in cores (fractions allowed).
    pub cpus: f64,
    /// The most processes the container may hold at once.
    pub pids: i64,
    /// `none` or `bridge`.
    pub network: String,
}
