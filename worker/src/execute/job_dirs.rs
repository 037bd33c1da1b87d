//! Where a job runs on this worker: its proof's directory, shared by the proof's jobs and
//! removed by the last, and its own scratch directory's name.

use assay_common::job::JobSpec;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// The jobs of each proof running on this worker, by proof directory: the last to leave
/// removes the directory, unless a warm server of the proof still keeps files there.
static ACTIVE_PROOF_DIRS: std::sync::Mutex<BTreeMap<PathBuf, usize>> =
    std::sync::Mutex::new(BTreeMap::new());

/// A job's hold on its proof's directory; the directory is made by the job's own
/// `create_dir_all`, and removed (when empty) as the last job of the proof drops its hold.
pub(super) struct ProofDir {
    pub(super) path: PathBuf,
}

impl ProofDir {
    pub(super) fn enter(path: PathBuf) -> Self {
        if let Ok(mut active) = ACTIVE_PROOF_DIRS.lock() {
            *active.entry(path.clone()).or_default() += 1;
        }
        Self { path }
    }
}

impl Drop for ProofDir {
    fn drop(&mut self) {
        let Ok(mut active) = ACTIVE_PROOF_DIRS.lock() else {
            return;
        };
        let Some(count) = active.get_mut(&self.path) else {
            return;
        };
        *count -= 1;
        if *count == 0 {
            active.remove(&self.path);
            // Under the lock, so no job of the proof is making its directory meanwhile; a
            // directory still holding a warm server's files stays.
            let _ = std::fs::remove_dir(&self.path);
        }
    }
}

/// The directory of a proof's jobs: readable and unique per proof, as [`scratch_name`] is.
pub(super) fn proof_dir_name(job: &JobSpec) -> String {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(job.proof_id.as_str());
    format!(
        "{}-{}",
        sanitize(job.proof_id.as_str()),
        hex::encode(&digest[..8])
    )
}

/// The job's scratch directory name: readable (the proof id with unsafe characters replaced,
/// the index) and unique per job, since a digest of the exact ids tells apart two proof ids
/// that sanitize alike (`p.1`, `p_1`).
pub(super) fn scratch_name(job: &JobSpec) -> String {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(format!("{}\0{}", job.proof_id, job.index));
    format!(
        "{}-{:04}-{}",
        sanitize(job.proof_id.as_str()),
        job.index,
        hex::encode(&digest[..8])
    )
}

fn sanitize(id: &str) -> String {
    id.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use assay_common::job::JobKind;

    #[test]
    fn proof_ids_that_sanitize_alike_get_distinct_scratch_directories() {
        let job = |proof: &str| {
            JobSpec::new(
                &assay_common::ProofId(proof.into()),
                0,
                JobKind::Targeted,
                assay_common::job::Side::Base,
                &assay_common::TreeId("0".repeat(40)),
                vec!["true".into()],
                assay_common::runner::ReportFormat::JunitXml,
                1,
            )
        };
        let names: Vec<String> = ["p.1", "p_1", "p/1"]
            .iter()
            .map(|p| scratch_name(&job(p)))
            .collect();
        assert!(
            names.iter().all(|n| n.starts_with("p_1-0000-")),
            "{names:?}"
        );
        assert_ne!(names[0], names[1]);
        assert_ne!(names[1], names[2]);
        assert_ne!(names[0], names[2]);
    }
}
