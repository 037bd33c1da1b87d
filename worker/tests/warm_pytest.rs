//! The warm pytest runner against real pytest: a forked run ends like a fresh `python -m pytest`
//! run, sees the product code as it is on disk at each run, gets the job's environment, and is
//! killed with its process group at the timeout while the server stays usable.

use assay_worker::sandbox::process::ProcessSandbox;
use assay_worker::sandbox::warm::WarmPytest;
use assay_worker::sandbox::{MutantSource, Sandbox, SandboxExit, SandboxRun, clean_env};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

struct Job {
    _root: tempfile::TempDir,
    tree: PathBuf,
    scratch: PathBuf,
}

impl Job {
    fn new() -> Job {
        let root = tempfile::tempdir().expect("temp dir");
        let tree = root.path().join("tree");
        let scratch = root.path().join("private");
        std::fs::create_dir_all(tree.join("pager")).expect("tree dir");
        std::fs::create_dir_all(tree.join("tests")).expect("tests dir");
        std::fs::create_dir_all(scratch.join("home")).expect("home dir");
        std::fs::write(
            tree.join("pager/__init__.py"),
            "def page_count(total, size):\n    return -(-total // size)\n",
        )
        .expect("product file");
        std::fs::write(
            tree.join("tests/test_pager.py"),
            concat!(
                "import os, time\n",
                "from pager import page_count\n\n",
                "def test_partial_last_page_is_counted():\n",
                "    assert page_count(11, 5) == 3\n\n",
                "def test_home_is_the_jobs_own():\n",
                "    assert os.environ['HOME'].endswith('private/home')\n",
                "    assert os.environ['PAGER_LOCALE'] == 'en_GB'\n\n",
                "def test_slow_render():\n",
                "    if os.environ.get('PAGER_HANG'):\n",
                "        time.sleep(600)\n",
            ),
        )
        .expect("test file");
        Job {
            _root: root,
            tree,
            scratch,
        }
    }

    fn run(&self, args: &[&str], timeout: Duration, extra_env: &[(&str, &str)]) -> SandboxRun {
        let mut command = vec!["python3".to_owned(), "-m".into(), "pytest".into()];
        command.extend(["-p", "no:cacheprovider", "-q"].map(String::from));
        command.push(format!(
            "--junitxml={}",
            self.scratch.join("report.xml").display()
        ));
        command.extend(args.iter().map(|a| a.to_string()));
        let mut env = clean_env(&[]);
        env.push((
            "HOME".into(),
            self.scratch.join("home").display().to_string(),
        ));
        env.push(("PYTHONDONTWRITEBYTECODE".into(), "1".into()));
        env.extend(
            extra_env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string())),
        );
        SandboxRun {
            proof_id: "p-1796000000-0a1b2c3d".into(),
            job_id: "p-1796000000-0a1b2c3d/0001".into(),
            tree_dir: self.tree.clone(),
            scratch_dir: self.scratch.clone(),
            proof_dir: self._root.path().to_path_buf(),
            command,
            env,
            stdout_path: self.scratch.join("stdout.log"),
            stderr_path: self.scratch.join("stderr.log"),
            timeout,
            forked_timeout: None,
            network: false,
            vendored: None,
        }
    }

    fn stdout(&self) -> String {
        std::fs::read_to_string(self.scratch.join("stdout.log")).unwrap_or_default()
    }
}

fn write(path: &Path, text: &str) {
    std::fs::write(path, text).expect("rewrite product file");
}

const LOCALE: [(&str, &str); 1] = [("PAGER_LOCALE", "en_GB")];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forked_run_ends_like_a_fresh_one_and_sees_each_edit() {
    let warm = WarmPytest::new(ProcessSandbox::default(), 1);
    let job = Job::new();
    let tests = ["tests/test_pager.py::test_partial_last_page_is_counted"];
    let fresh = ProcessSandbox::default()
        .run(&job.run(&tests, Duration::from_secs(120), &LOCALE))
        .await
        .expect("fresh run");
    let forked = warm
        .run_mutant(&job.run(&tests, Duration::from_secs(120), &LOCALE))
        .await
        .expect("forked run");
    assert_eq!(fresh, SandboxExit::Exited(0));
    assert_eq!(forked, fresh);
    assert!(job.stdout().contains("1 passed"), "{}", job.stdout());
    let report = std::fs::read_to_string(job.scratch.join("report.xml")).expect("junit report");
    assert!(report.contains("test_partial_last_page_is_counted"));

    // The same server, the product changed on disk: the child must load the new code.
    write(
        &job.tree.join("pager/__init__.py"),
        "def page_count(total, size):\n    return total // size\n",
    );
    let mutated = warm
        .run_mutant(&job.run(&tests, Duration::from_secs(120), &LOCALE))
        .await
        .expect("forked run of the mutant");
    assert_eq!(mutated, SandboxExit::Exited(1), "{}", job.stdout());
    assert!(job.stdout().contains("1 failed"), "{}", job.stdout());

    // The job's own environment reaches the tests; pytest's own exit codes come through.
    write(
        &job.tree.join("pager/__init__.py"),
        "def page_count(total, size):\n    return -(-total // size)\n",
    );
    let env_run = warm
        .run_mutant(&job.run(
            &["tests/test_pager.py::test_home_is_the_jobs_own"],
            Duration::from_secs(120),
            &LOCALE,
        ))
        .await
        .expect("forked run");
    assert_eq!(env_run, SandboxExit::Exited(0), "{}", job.stdout());
    let no_tests = warm
        .run_mutant(&job.run(
            &["tests/test_pager.py", "-k", "no_such_test"],
            Duration::from_secs(120),
            &LOCALE,
        ))
        .await
        .expect("forked run");
    assert_eq!(no_tests, SandboxExit::Exited(5), "{}", job.stdout());
}

/// `python -c CODE ARGS` (the coverage baseline, the re-run plugin) runs warm as it would
/// fresh, and the job's PYTEST_ADDOPTS applies to its run (the server's warm-up sets it aside).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dash_c_code_and_the_jobs_pytest_addopts_run_warm_as_they_would_fresh() {
    let warm = WarmPytest::new(ProcessSandbox::default(), 1);
    let job = Job::new();
    let addopts = [("PAGER_LOCALE", "en_GB"), ("PYTEST_ADDOPTS", "-k partial")];
    let selected = warm
        .run_mutant(&job.run(&["tests/test_pager.py"], Duration::from_secs(120), &addopts))
        .await
        .expect("forked run");
    assert_eq!(selected, SandboxExit::Exited(0), "{}", job.stdout());
    assert!(
        job.stdout().contains("1 passed, 2 deselected"),
        "{}",
        job.stdout()
    );

    let mut code = job.run(&[], Duration::from_secs(120), &addopts);
    code.command = [
        "python3",
        "-c",
        // The last field tells a warm fork (pytest already loaded) from a fresh interpreter.
        "import os, sys\nfrom pager import page_count\nprint(sys.argv[1:], page_count(11, 5), os.environ['PAGER_LOCALE'], 'pytest' in sys.modules)\nsys.exit(3)",
        "report.json",
        "-q",
    ]
    .map(String::from)
    .to_vec();
    let fresh = ProcessSandbox::default()
        .run(&code)
        .await
        .expect("fresh -c run");
    let fresh_stdout = job.stdout();
    let forked = warm.run_mutant(&code).await.expect("forked -c run");
    assert_eq!(fresh, SandboxExit::Exited(3));
    assert_eq!(forked, fresh);
    assert_eq!(fresh_stdout, "['report.json', '-q'] 3 en_GB False\n");
    assert_eq!(job.stdout(), "['report.json', '-q'] 3 en_GB True\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hanging_run_is_killed_at_its_timeout_and_the_server_serves_on() {
    let warm = WarmPytest::new(ProcessSandbox::default(), 1);
    let job = Job::new();
    let mut env = LOCALE.to_vec();
    env.push(("PAGER_HANG", "1"));
    let started = Instant::now();
    let hung = warm
        .run_mutant(&job.run(
            &["tests/test_pager.py::test_slow_render"],
            Duration::from_secs(3),
            &env,
        ))
        .await
        .expect("forked run");
    assert_eq!(hung, SandboxExit::TimedOut);
    assert!(started.elapsed() < Duration::from_secs(30));
    let after = warm
        .run_mutant(&job.run(
            &["tests/test_pager.py::test_partial_last_page_is_counted"],
            Duration::from_secs(120),
            &env,
        ))
        .await
        .expect("run after a timeout");
    assert_eq!(after, SandboxExit::Exited(0), "{}", job.stdout());
}

/// Pids of running processes whose command line is exactly `words`.
fn processes_running(words: &[&str]) -> Vec<u32> {
    let wanted: Vec<u8> = words
        .iter()
        .flat_map(|w| [w.as_bytes(), b"\0"].concat())
        .collect();
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| c == wanted))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn daemons_a_forked_run_starts_end_with_it() {
    let warm = WarmPytest::new(ProcessSandbox::default(), 1);
    let job = Job::new();
    std::fs::write(
        job.tree.join("tests/test_spooler.py"),
        concat!(
            "import shutil, subprocess\n\n",
            "def test_print_spooler_starts_in_the_background():\n",
            "    subprocess.Popen(['setsid', 'sleep', '971'])\n",
            "    subprocess.Popen(['sh', '-c', 'sleep 972 &'], start_new_session=True).wait()\n",
            "    # A name that reads as more /proc/PID/stat fields than it is.\n",
            "    shutil.copy(shutil.which('sleep'), 'spool) S 1 (x')\n",
            "    subprocess.Popen(['setsid', './spool) S 1 (x', '973'])\n",
        ),
    )
    .expect("test file");
    let exit = warm
        .run_mutant(&job.run(&["tests/test_spooler.py"], Duration::from_secs(60), &LOCALE))
        .await
        .expect("forked run");
    assert_eq!(exit, SandboxExit::Exited(0), "{}", job.stdout());
    let deadline = Instant::now() + Duration::from_secs(5);
    let left = loop {
        let left = [
            processes_running(&["sleep", "971"]),
            processes_running(&["sleep", "972"]),
            processes_running(&["./spool) S 1 (x", "973"]),
        ];
        if left.iter().all(Vec::is_empty) || Instant::now() > deadline {
            break left;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    for pid in left.iter().flatten() {
        let _ = std::process::Command::new("kill")
            .args(["-9", &pid.to_string()])
            .status();
    }
    assert!(
        left.iter().all(Vec::is_empty),
        "a setsid, a double-forked or an oddly named daemon outlived its job: {left:?}"
    );
    // The server serves on.
    let after = warm
        .run_mutant(&job.run(
            &["tests/test_pager.py::test_partial_last_page_is_counted"],
            Duration::from_secs(60),
            &LOCALE,
        ))
        .await
        .expect("run after the sweep");
    assert_eq!(after, SandboxExit::Exited(0), "{}", job.stdout());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn other_commands_run_in_the_wrapped_sandbox() {
    let warm = WarmPytest::new(ProcessSandbox::default(), 1);
    let job = Job::new();
    let mut run = job.run(&[], Duration::from_secs(60), &LOCALE);
    run.command = ["sh", "-c", "echo rendered 3 pages"]
        .map(String::from)
        .to_vec();
    assert_eq!(
        warm.run_mutant(&run).await.expect("shell run"),
        SandboxExit::Exited(0)
    );
    assert_eq!(job.stdout(), "rendered 3 pages\n");
    assert_eq!(warm.name(), "process");
}

/// Forks share the test modules pytest rewrote, by content, across trees: a second tree's run
/// gets code that names its own file, still explains a failed assert, still warns about an
/// assert that is always true (a module whose rewrite warns is not shared), and runs the test
/// module's import-time code afresh, with no state of the first run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forks_share_rewritten_test_modules_yet_each_run_is_its_own() {
    let warm = WarmPytest::new(ProcessSandbox::default(), 1);
    let suite = concat!(
        "import os\n",
        "from pager import page_count\n",
        "import pager\n\n",
        "pager.IMPORTED_BY.append(os.getpid())\n",
        "with open('imports.log', 'a') as log:\n",
        "    log.write(__file__ + '\\n')\n\n",
        "def test_code_names_its_own_file():\n",
        "    assert test_code_names_its_own_file.__code__.co_filename == __file__\n\n",
        "def test_import_time_code_ran_once_in_this_session():\n",
        "    assert len(pager.IMPORTED_BY) == 1\n",
        "    with open('imports.log') as log:\n",
        "        assert log.read().splitlines() == [__file__]\n\n",
        "def test_partial_last_page_is_counted():\n",
        "    assert page_count(11, 5) == 4\n",
    );
    let warning = concat!(
        "from pager import page_count\n\n",
        "def test_always_true():\n",
        "    assert (page_count(11, 5), 'pages')\n",
    );
    let jobs = [Job::new(), Job::new()];
    for job in &jobs {
        write(
            &job.tree.join("pager/__init__.py"),
            "IMPORTED_BY = []\n\ndef page_count(total, size):\n    return -(-total // size)\n",
        );
        write(&job.tree.join("tests/test_pager.py"), suite);
        write(&job.tree.join("tests/test_warning.py"), warning);
    }
    for job in &jobs {
        let exit = warm
            .run_mutant(&job.run(
                &["-o", "junit_family=xunit1", "tests"],
                Duration::from_secs(120),
                &LOCALE,
            ))
            .await
            .expect("forked run");
        let stdout = job.stdout();
        assert_eq!(exit, SandboxExit::Exited(1), "{stdout}");
        assert!(stdout.contains("1 failed, 3 passed"), "{stdout}");
        assert!(stdout.contains("assert 3 == 4"), "{stdout}");
        assert!(stdout.contains("assertion is always true"), "{stdout}");
        let report = std::fs::read_to_string(job.scratch.join("report.xml")).expect("report");
        assert!(report.contains(r#"file="tests/test_pager.py""#), "{report}");
    }
}

/// A mutation run's baseline names the command its mutants will run: the session of that
/// command is collected while the baseline runs, so the first mutant runs in a fork of it and
/// collects nothing of its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_mutants_session_is_collected_while_the_baseline_runs() {
    let warm = WarmPytest::new(ProcessSandbox::default(), 1);
    let job = Job::new();
    let collections = job._root.path().join("collections.log");
    write(
        &job.tree.join("conftest.py"),
        concat!(
            "import os\n\n",
            "def pytest_collection_modifyitems(session, config, items):\n",
            "    with open(os.environ['PAGER_COLLECTIONS'], 'a') as log:\n",
            "        log.write(f'{os.getpid()} {len(items)}\\n')\n",
        ),
    );
    let collections_env = collections.display().to_string();
    let env = [LOCALE[0], ("PAGER_COLLECTIONS", collections_env.as_str())];
    let collected = || {
        std::fs::read_to_string(&collections)
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    let limit = Duration::from_secs(120);
    let baseline = job.run(&[], limit, &env);
    // The mutants' command: the baseline's, with no test named.
    let next = job.run(&[], limit, &env).command;
    warm.prepare_next(&baseline, &next, "4b825dc6").await;
    assert_eq!(
        pristine_copies(&job),
        1,
        "the warm-up copies the tree before the baseline"
    );
    let exit = warm.run_mutant(&baseline).await.expect("baseline run");
    assert_eq!(exit, SandboxExit::Exited(0), "{}", job.stdout());
    // The baseline's own collection, and the session's, made before any mutant asked for it.
    let deadline = Instant::now() + limit;
    while collected().len() < 2 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let before = collected();
    assert_eq!(
        before.len(),
        2,
        "no session collected during the baseline: {before:?}"
    );
    assert!(before.iter().all(|line| line.ends_with(" 3")), "{before:?}");

    let product = job.tree.join("pager/__init__.py");
    let original = std::fs::read(&product).expect("product file");
    write(
        &product,
        "def page_count(total, size):\n    return total // size\n",
    );
    let killing = ["tests/test_pager.py::test_partial_last_page_is_counted"];
    let source = MutantSource {
        tree: "4b825dc6",
        path: "pager/__init__.py",
        original: &original,
    };
    let exit = warm
        .run_mutant_of(&job.run(&killing, limit, &env), &source)
        .await
        .expect("mutant run");
    assert_eq!(exit, SandboxExit::Exited(1), "{}", job.stdout());
    assert!(job.stdout().contains("1 failed"), "{}", job.stdout());
    assert_eq!(
        collected(),
        before,
        "the mutant collected again instead of forking the session"
    );
}

/// The unmutated trees kept in `job`'s proof directory for session servers.
fn pristine_copies(job: &Job) -> usize {
    std::fs::read_dir(job._root.path())
        .expect("proof dir")
        .filter_map(Result::ok)
        .filter(|entry| {
            entry
                .file_name()
                .to_string_lossy()
                .starts_with(".unmutated-")
        })
        .count()
}

/// A hint that is no mutants' pytest command starts nothing and copies nothing: one that names
/// tests (no session's options), another program, or an option without its value.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hint_that_is_no_session_command_is_ignored() {
    let warm = WarmPytest::new(ProcessSandbox::default(), 2);
    let job = Job::new();
    let limit = Duration::from_secs(120);
    let baseline = job.run(&[], limit, &LOCALE);
    let marker = job._root.path().join("hint-ran");
    let hints = [
        job.run(&["tests/test_pager.py::test_slow_render"], limit, &LOCALE)
            .command,
        vec![
            "sh".into(),
            "-c".into(),
            format!("touch {}", marker.display()),
        ],
        job.run(&["--junitxml"], limit, &LOCALE).command,
    ];
    for hint in &hints {
        warm.prepare_next(&baseline, hint, "4b825dc6").await;
        assert_eq!(pristine_copies(&job), 0, "{hint:?} started a warm-up");
    }
    let exit = warm.run_mutant(&baseline).await.expect("baseline run");
    assert_eq!(exit, SandboxExit::Exited(0), "{}", job.stdout());
    assert!(!marker.exists(), "a hint is never run as a command");
}

/// A warm server hosts guest code and belongs to one proof: its tests can write their own
/// tree, but not another proof's directory on the same worker (where that proof's servers keep
/// their rewritten test modules), and the rewritten modules live in the proof's own directory,
/// not in a directory every run on the machine shares.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_warm_servers_tests_cannot_write_another_proofs_directory() {
    let warm = WarmPytest::new(ProcessSandbox::default(), 1);
    let job = Job::new();
    let other_proof = Job::new();
    std::fs::write(
        job.tree.join("tests/test_reach.py"),
        concat!(
            "import os, pathlib\n\n\n",
            "def test_another_proofs_directory_is_out_of_reach():\n",
            "    pathlib.Path('own-tree-written').write_text('ok')\n",
            "    target = pathlib.Path(os.environ['OTHER_PROOF_DIR'], 'planted.pyc')\n",
            "    try:\n",
            "        target.write_bytes(b'poison')\n",
            "    except OSError:\n",
            "        return\n",
            "    raise AssertionError(f'wrote {target}')\n",
        ),
    )
    .expect("test file");
    let other_dir = other_proof._root.path().to_string_lossy().into_owned();
    let env = [("OTHER_PROOF_DIR", other_dir.as_str())];
    let tests = ["tests/test_reach.py"];
    let fresh = ProcessSandbox::default()
        .run(&job.run(&tests, Duration::from_secs(120), &env))
        .await
        .expect("fresh run");
    assert_eq!(fresh, SandboxExit::Exited(0), "{}", job.stdout());
    let forked = warm
        .run_mutant(&job.run(&tests, Duration::from_secs(120), &env))
        .await
        .expect("forked run");
    assert_eq!(forked, SandboxExit::Exited(0), "{}", job.stdout());
    assert!(job.tree.join("own-tree-written").is_file());
    assert!(!other_proof._root.path().join("planted.pyc").exists());
    let own_rewrites = std::fs::read_dir(job._root.path())
        .expect("proof dir")
        .filter_map(Result::ok)
        .any(|e| e.file_name().to_string_lossy().starts_with(".rewrites-"));
    assert!(
        own_rewrites,
        "the proof's rewritten modules are kept in its directory"
    );
}
