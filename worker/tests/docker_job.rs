//! A whole job (`execute::run_job`) in the Docker sandbox against the real engine: the guest
//! cannot reach, rewrite or replace the output the worker captured for it, nor hand the worker
//! a host file as its report. Skips loudly without the runner image unless
//! `ASSAY_REQUIRE_DOCKER` is set.

use assay_common::WorkerId;
use assay_common::job::{JobKind, JobSpec, JobStatus, Side};
use assay_common::outcome::ReportOutcome;
use assay_common::runner::ReportFormat;
use assay_transport::store::{ArtifactStore, ObjectArtifactStore};
use assay_transport::tree::GitTreeSource;
use assay_worker::execute::run_job;
use assay_worker::job_context::JobContext;
use assay_worker::sandbox::docker::{DockerConfig, DockerSandbox};
use std::path::Path;
use std::process::Command;
use std::sync::Arc;

use assay_test_support::docker;

async fn docker_sandbox(worker_id: &str) -> Option<DockerSandbox> {
    let config = DockerConfig {
        memory_mb: 256,
        pids: 64,
        ..DockerConfig::default()
    };
    docker::docker_sandbox(worker_id, config).await
}

fn git(repo: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(args)
        .current_dir(repo)
        .output()
        .expect("git runs");
    assert!(out.status.success(), "git {args:?}: {out:?}");
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

fn containers_of_job(job_id: &str) -> Vec<String> {
    docker::containers_labelled(&format!("assay.job_id={job_id}"))
}

/// The guest prints its genuine output, then tries everything it can against the worker's
/// copy of it and against the report path.
const FORGER: &str = r#"
echo "rendered 3 pages"
echo "page 4 is blank" >&2
ls -a /work/scratch | tr '\n' ' '; echo
for target in /work/scratch/stdout.log /work/scratch/stderr.log /work/scratch/../logs/stdout.log /work/tree/../logs/stdout.log; do
    { echo "all 12 tests passed" > "$target"; } 2>/dev/null && echo "wrote $target"
done
ln -s "$SECRET" "$REPORT"
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_guest_cannot_forge_its_output_or_hand_over_a_host_file_as_its_report() {
    let Some(sandbox) = docker_sandbox("worker-forger").await else {
        return;
    };
    let root = tempfile::tempdir().expect("temp dir");
    // A host file the guest knows the path of but must never get the worker to read.
    let secret = root.path().join("deploy-token");
    std::fs::write(&secret, "s3cr3t-deploy-token\n").expect("secret");
    let repo = root.path().join("pager");
    std::fs::create_dir_all(&repo).expect("repo dir");
    std::fs::write(repo.join("forge.sh"), FORGER).expect("script");
    git(&repo, &["init", "-q", "-b", "main"]);
    git(&repo, &["add", "-A"]);
    git(
        &repo,
        &[
            "-c",
            "user.name=Dana Reviewer",
            "-c",
            "user.email=dana@example.com",
            "commit",
            "-q",
            "-m",
            "pager",
        ],
    );
    let tree = git(&repo, &["rev-parse", "HEAD^{tree}"]);
    let store: Arc<ObjectArtifactStore> = Arc::new(
        ObjectArtifactStore::open(&format!("file://{}", root.path().join("store").display()))
            .expect("store"),
    );
    let ctx = JobContext {
        worker_id: WorkerId("worker-forger".into()),
        sandbox: Arc::new(sandbox),
        trees: Arc::new(GitTreeSource::new(&repo)),
        store: store.clone(),
        scratch_root: root.path().join("jobs"),
        pass_env: Vec::new(),
        output_cap_bytes: assay_common::service_config::DEFAULT_OUTPUT_CAP_BYTES,
        dependencies: None,
    };
    let proof_id = format!("p-forger-{}", std::process::id());
    let job = JobSpec {
        env: vec![("SECRET".into(), secret.to_string_lossy().into_owned())],
        ..JobSpec::new(
            &proof_id.as_str().into(),
            0,
            JobKind::Targeted,
            Side::Candidate,
            &tree.as_str().into(),
            // `{report}` is replaced in the command only; the script gets it through the shell.
            vec![
                "sh".into(),
                "-c".into(),
                "REPORT={report} exec sh forge.sh".into(),
            ],
            ReportFormat::JunitXml,
            60,
        )
    };

    let result = run_job(&job, &ctx).await;
    assert_eq!(
        result.status,
        JobStatus::Completed { exit_code: 0 },
        "{result:?}"
    );
    match &result.report {
        ReportOutcome::Malformed(why) => assert!(why.contains("symbolic link"), "{why}"),
        other => panic!("a linked report must be refused, got {other:?}"),
    }
    let artifact = |name: &str| {
        let key = result
            .artifacts
            .iter()
            .find(|a| a.name == name)
            .unwrap_or_else(|| panic!("artifact {name} in {:?}", result.artifacts))
            .key
            .clone();
        let store = store.clone();
        async move {
            let bytes = store.get(&key).await.expect("get").expect("stored");
            String::from_utf8_lossy(&bytes).into_owned()
        }
    };
    let stdout = artifact("stdout").await;
    let stderr = artifact("stderr").await;
    let mut lines = stdout.lines();
    assert_eq!(lines.next(), Some("rendered 3 pages"), "{stdout}");
    let listing = lines.next().unwrap_or_default();
    assert!(
        !listing.contains("stdout.log") && !listing.contains("stderr.log"),
        "the guest sees the worker's log files: {listing}"
    );
    // Writing into its own mounted scratch dir works but writes the guest's file, not the log.
    assert_eq!(
        lines.collect::<Vec<_>>(),
        [
            "wrote /work/scratch/stdout.log",
            "wrote /work/scratch/stderr.log"
        ],
        "{stdout}"
    );
    assert_eq!(stderr, "page 4 is blank\n");
    assert!(
        !result.artifacts.iter().any(|a| a.name == "report"),
        "{:?}",
        result.artifacts
    );
    assert_eq!(
        std::fs::read_to_string(&secret).expect("secret"),
        "s3cr3t-deploy-token\n"
    );
    assert!(containers_of_job(job.job_id.as_str()).is_empty());
    assert!(
        std::fs::read_dir(root.path().join("jobs"))
            .map(|mut d| d.next().is_none())
            .unwrap_or(true),
        "the job's scratch directory is removed"
    );
}
