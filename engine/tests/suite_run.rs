//! `suite::run` called as a library, as embedded `assay test` calls it: a real git repository,
//! real pytest run by the in-process queue in the process sandbox, a real file store and a
//! real signed result cache.

use assay_common::runner::{ReportFormat, RunnerKind};
use assay_common::suite::{Ending, SuiteTotals};
use assay_common::{TreeId, service_config};
use assay_engine::proof;
use assay_engine::result_cache::{
    CacheMode, CacheUnavailable, ResultCache, RunContext, SigningKey,
};
use assay_engine::suite::drive::{RunEvent, RunProgress};
use assay_engine::suite::halt::HaltFile;
use assay_engine::suite::history::History;
use assay_engine::suite::run::{AuditBase, CacheOpener, Placement};
use assay_engine::suite::runners::{SuiteRunner, SuiteSetup};
use assay_engine::suite::select::Selectors;
use assay_engine::suite::shard::ShardMode;
use assay_engine::suite::{self, SuiteOutcome, SuiteRan, SuiteRequest};
use assay_test_support::repo::Repo;
use assay_transport::store::{ArtifactStore, ObjectArtifactStore};
use assay_transport::tree::GitTreeSource;
use assay_worker::in_process::InProcessQueue;
use assay_worker::job_context::JobContext;
use assay_worker::sandbox::Sandbox as _;
use assay_worker::sandbox::process::ProcessSandbox;
use std::sync::Arc;
use std::time::{Instant, SystemTime};

const PRODUCT: &str = "def total(lines):\n    return sum(lines)\n";
const TESTS: &str = "from invoice import total\n\n\
def test_total_of_nothing_is_zero():\n    assert total([]) == 0\n\n\
def test_total_adds_lines():\n    assert total([2, 3]) == 5\n\n\
def test_total_rounds_to_cents():\n    assert total([0.1, 0.2]) == 0.3\n";

/// Writes `files`, commits them and returns the commit and its tree.
fn commit(repo: &Repo, files: &[(&str, &str)]) -> (String, TreeId) {
    for (path, text) in files {
        repo.write(path, text);
    }
    let commit = repo.commit("invoice totals");
    let tree = TreeId(repo.git(&["rev-parse", "HEAD^{tree}"]).trim().to_owned());
    (commit, tree)
}

/// A temporary invoice project and the parts an embedded run is made of.
struct Parts {
    repo: Repo,
    scratch: tempfile::TempDir,
    store: Arc<dyn ArtifactStore>,
    key: Arc<SigningKey>,
}

impl Parts {
    fn new() -> Self {
        let repo = Repo::new();
        let scratch = tempfile::tempdir().expect("temp dir");
        let url = format!("file://{}", scratch.path().join("store").display());
        let store = Arc::new(ObjectArtifactStore::open(&url).expect("store"));
        let key = SigningKey::load_or_create(&scratch.path().join("key")).expect("key");
        Self {
            repo,
            scratch,
            store,
            key: Arc::new(key),
        }
    }

    fn queue(&self) -> InProcessQueue {
        let ctx = JobContext {
            worker_id: proof::embedded_worker_id(),
            sandbox: Arc::new(ProcessSandbox::default()),
            trees: Arc::new(GitTreeSource::new(self.repo.path())),
            store: self.store.clone(),
            scratch_root: self.scratch.path().join("jobs"),
            pass_env: Vec::new(),
            output_cap_bytes: service_config::DEFAULT_OUTPUT_CAP_BYTES,
            dependencies: None,
        };
        InProcessQueue::start(ctx, 2)
    }

    fn request(&self, (commit, tree): (String, TreeId), history: History) -> SuiteRequest {
        let repo = self.repo.path().to_owned();
        SuiteRequest {
            repository: repo.display().to_string(),
            repo,
            branch: "main".into(),
            rev: "HEAD".into(),
            commit,
            tree,
            setup: SuiteSetup {
                runner: SuiteRunner::Kind(RunnerKind::Pytest),
                prefix: RunnerKind::Pytest.default_command(),
                report: ReportFormat::JunitXml,
                manifest: "manifest.tsv".into(),
                erase_types: false,
            },
            selectors: Selectors::default(),
            slots: 2,
            shards: ShardMode::Auto,
            timeout_secs: 120,
            quarantine: ".assay/quarantine.toml".into(),
            audit: None,
            list_only: false,
            placement: Placement::Embedded(Box::new(Caches(ResultCache::new(
                self.store.clone(),
                CacheMode::Use,
                self.key.clone(),
            )))),
            no_cache: false,
            history,
            history_file: self.scratch.path().join("history.json"),
            coverage_threshold: 5.0,
            started: SystemTime::now(),
            clock: Instant::now(),
        }
    }

    async fn run(&self, request: SuiteRequest) -> SuiteOutcome {
        let halt = HaltFile::in_state_dir(&self.scratch.path().join("state"));
        suite::run(request, &self.queue(), &*self.store, &halt, &Silent)
            .await
            .expect("the suite runs")
    }
}

struct Caches(ResultCache);

impl CacheOpener for Caches {
    fn context(&self) -> RunContext {
        RunContext::new(ProcessSandbox::default().evidence(), &[])
    }
    fn for_cases(&self) -> Result<ResultCache, CacheUnavailable> {
        Ok(self.0.clone())
    }
    fn for_reads(&self) -> Result<ResultCache, CacheUnavailable> {
        Ok(self.0.clone())
    }
}

struct Silent;

impl RunProgress for Silent {
    fn event(&self, _: RunEvent<'_>) {}
}

fn ran(outcome: SuiteOutcome) -> SuiteRan {
    match outcome {
        SuiteOutcome::Ran(ran) => *ran,
        other => panic!("the suite did not run: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_suite_run_reports_its_totals_and_fails_on_a_failing_case_then_serves_passes_from_the_cache()
 {
    let parts = Parts::new();
    let head = commit(
        &parts.repo,
        &[("invoice.py", PRODUCT), ("tests/test_invoice.py", TESTS)],
    );
    let repository = parts.repo.path().display().to_string();
    let first = ran(parts
        .run(parts.request(head.clone(), History::new(&repository, "main")))
        .await);
    let expected = SuiteTotals {
        total: 3,
        passed: 2,
        failed: 1,
        ..SuiteTotals::default()
    };
    assert_eq!(first.report.totals, expected);
    assert_eq!(first.ending, Ending::Failed);
    assert_eq!(first.report.status, Ending::Failed);
    assert_eq!(first.guest_failures, 1);
    assert!(!first.audit_failed);
    assert_eq!(first.report.revision, head.0);
    assert!(first.report.audit.selection.contained);
    let cache = first.report.cache.as_ref().expect("a cache report");
    assert_eq!((cache.served, cache.stored), (0, 2), "{cache:?}");
    assert_eq!(first.history.runs.len(), 1);
    assert_eq!(first.report.history.recent, first.history.runs);

    // The next run of the same tree answers the passes from the cache and runs the failure.
    let second = ran(parts.run(parts.request(head, first.history)).await);
    assert_eq!(second.report.totals, expected);
    assert_eq!(second.ending, Ending::Failed);
    let cache = second.report.cache.as_ref().expect("a cache report");
    assert_eq!(cache.served, 2, "{cache:?}");
    assert_eq!(second.answered_by, vec![first.report.run_id.clone(); 2]);
    assert_eq!(second.history.runs.len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_suite_run_whose_quarantine_ledger_gains_an_entry_is_refused_before_anything_runs() {
    let parts = Parts::new();
    let base = commit(
        &parts.repo,
        &[("invoice.py", PRODUCT), ("tests/test_invoice.py", TESTS)],
    );
    let ledger = "[[quarantine]]\ntest = \"tests/test_invoice.py::test_total_rounds_to_cents\"\n\
                  reason = \"float sums\"\nadded = \"2026-09-02\"\n";
    let head = commit(&parts.repo, &[(".assay/quarantine.toml", ledger)]);
    let mut request = parts.request(head, History::new("invoices", "main"));
    request.audit = Some(AuditBase {
        rev: "HEAD~1".into(),
        tree: base.1,
        exceptions_path: ".assay/scope_exceptions.toml".into(),
        registry_path: ".assay/fixture_reads.toml".into(),
        reachability: false,
    });
    let outcome = parts.run(request).await;
    assert_eq!(outcome.ending(), Ending::Failed);
    let SuiteOutcome::Refused(gate) = outcome else {
        panic!("the ledger gate passed: {outcome:?}");
    };
    assert!(!gate.passed());
    assert_eq!(gate.path, ".assay/quarantine.toml");
    assert_eq!(gate.violations.len(), 1, "{:?}", gate.violations);
}
