//! Where a job runs on this worker: its proof's directory, shared by the proof's jobs and
//! removed by the last, and its own scratch directory's name and removal.

use assay_common::job::JobSpec;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

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

/// Removes a job's scratch directory; one already gone is no failure. The removal runs on the
/// blocking pool, or here when the pool takes no more work: a signal stops the CLI while a job
/// is finishing, the runtime shuts down around it, and `tokio::fs` would then fail with
/// "background task failed" and leave the directory for the exit's sweep.
pub(super) async fn remove_scratch(scratch: &Path) -> std::io::Result<()> {
    let path = scratch.to_path_buf();
    let removed = match tokio::task::spawn_blocking(move || std::fs::remove_dir_all(path)).await {
        Ok(removed) => removed,
        // Refused before it started (a blocking task is never stopped once running).
        Err(_) => std::fs::remove_dir_all(scratch),
    };
    match removed {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        other => other,
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

    fn scratch_with_a_file() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let scratch = dir.path().join("p-0000");
        std::fs::create_dir_all(scratch.join("tree/src")).unwrap();
        std::fs::write(scratch.join("tree/src/lib.rs"), "pub fn f() {}\n").unwrap();
        (dir, scratch)
    }

    #[test]
    fn a_scratch_directory_is_removed_once_the_runtime_takes_no_blocking_work() {
        let (_dir, scratch) = scratch_with_a_file();
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .build()
            .unwrap();
        let handle = runtime.handle().clone();
        // What a signal leaves a finishing job: a runtime shutting down, whose blocking pool
        // refuses the work `tokio::fs` hands it.
        drop(runtime);
        assert!(
            handle
                .block_on(tokio::fs::remove_dir_all(&scratch))
                .is_err()
        );
        handle.block_on(remove_scratch(&scratch)).unwrap();
        assert!(!scratch.exists());
        // Already gone is no failure either.
        handle.block_on(remove_scratch(&scratch)).unwrap();
    }

    #[tokio::test]
    async fn a_scratch_directory_that_cannot_be_removed_is_still_an_error() {
        let (_dir, scratch) = scratch_with_a_file();
        remove_scratch(&scratch).await.unwrap();
        assert!(!scratch.exists());
        // A file where the directory should be: the removal fails, and says so.
        std::fs::write(&scratch, "not a directory").unwrap();
        assert!(remove_scratch(&scratch).await.is_err());
        assert!(scratch.exists());
    }
}
