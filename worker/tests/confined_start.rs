//! The process sandbox starts a confined job again when bubblewrap fails before the job's
//! command runs: it copies the host's mounts and remounts each read-only, and a mount that
//! vanishes in between (a container engine starting and stopping containers beside the
//! worker) fails the whole setup. What tells the two apart is a byte written by a trusted stub
//! just before the command runs, on a descriptor the command never holds.

use assay_worker::sandbox::process::ProcessSandbox;
use assay_worker::sandbox::{Sandbox, SandboxError, SandboxExit, SandboxRun, clean_env};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

fn run_in(root: &Path, command: &[&str]) -> SandboxRun {
    let tree = root.join("tree");
    let scratch = root.join("scratch");
    std::fs::create_dir_all(&tree).expect("tree dir");
    std::fs::create_dir_all(&scratch).expect("scratch dir");
    SandboxRun {
        proof_id: "invoice-proof".into(),
        job_id: "invoice-base".into(),
        tree_dir: tree,
        scratch_dir: scratch.clone(),
        proof_dir: root.to_path_buf(),
        command: command.iter().map(|arg| (*arg).to_owned()).collect(),
        env: clean_env(&[]),
        stdout_path: scratch.join("stdout"),
        stderr_path: scratch.join("stderr"),
        timeout: Duration::from_secs(30),
        forked_timeout: None,
        network: false,
        vendored: None,
    }
}

fn confined_here() -> bool {
    let confined = assay_worker::sandbox::confine::confiner().is_ok();
    if !confined {
        eprintln!("skipped: bubblewrap cannot confine on this host");
    }
    confined
}

#[tokio::test]
async fn the_command_holds_its_standard_streams_and_no_other_descriptor() {
    if !confined_here() {
        return;
    }
    let root = tempfile::tempdir().expect("temp dir");
    let run = run_in(root.path(), &["sh", "-c", "ls /proc/self/fd"]);
    let exit = ProcessSandbox::default()
        .run(&run)
        .await
        .expect("sandbox run");
    assert_eq!(exit, SandboxExit::Exited(0));
    let listed = std::fs::read_to_string(&run.stdout_path).expect("stdout");
    let fds: Vec<&str> = listed.split_whitespace().collect();
    // 0-2 are its standard streams, 3 is the directory `ls` reads.
    assert_eq!(fds, ["0", "1", "2", "3"], "{listed}");
}

#[tokio::test]
async fn a_sandbox_that_cannot_be_built_is_tried_again_then_is_an_infrastructure_error() {
    if !confined_here() {
        return;
    }
    let root = tempfile::tempdir().expect("temp dir");
    let mut run = run_in(root.path(), &["sh", "-c", "echo ran >> ran.txt"]);
    // A scratch directory that is gone by the time bubblewrap binds it fails every setup.
    run.scratch_dir = root.path().join("vanished");
    let error = ProcessSandbox::default()
        .run(&run)
        .await
        .expect_err("a sandbox that cannot be built is no exit of the job");
    let SandboxError::Backend { message, .. } = &error else {
        panic!("an infrastructure error, not {error:?}");
    };
    assert!(message.contains("in 10 attempts"), "{message}");
    assert!(
        message.contains("bwrap:"),
        "bubblewrap's own words: {message}"
    );
    assert!(
        !run.tree_dir.join("ran.txt").exists(),
        "the command never ran"
    );
}

fn c_path(path: &Path) -> std::ffi::CString {
    std::ffi::CString::new(path.to_string_lossy().as_bytes()).expect("a path without NUL")
}

/// Makes `dir` a shared mount of its own, as every mount is on a systemd host: a mount made or
/// removed under it then shows in every namespace copied from this one, bubblewrap's too.
fn share(dir: &Path) {
    let dir = c_path(dir);
    // SAFETY: mount(2) with NUL-terminated paths that outlive the calls.
    unsafe {
        let bound = libc::mount(
            dir.as_ptr(),
            dir.as_ptr(),
            std::ptr::null(),
            libc::MS_BIND,
            std::ptr::null(),
        );
        assert_eq!(bound, 0, "{}", std::io::Error::last_os_error());
        let shared = libc::mount(
            std::ptr::null(),
            dir.as_ptr(),
            std::ptr::null(),
            libc::MS_SHARED,
            std::ptr::null(),
        );
        assert_eq!(shared, 0, "{}", std::io::Error::last_os_error());
    }
}

/// Binds and unbinds a directory under `dir` until stopped, as a container engine does when
/// containers come and go; then unmounts `dir` itself.
fn churn_mounts(dir: PathBuf, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<u64> {
    std::thread::spawn(move || {
        let layer = dir.join("image-layer");
        let merged = dir.join("merged");
        std::fs::create_dir_all(&layer).expect("layer dir");
        std::fs::create_dir_all(&merged).expect("mount point");
        share(&dir);
        let (source, target) = (c_path(&layer), c_path(&merged));
        let mut cycles = 0;
        while !stop.load(Ordering::SeqCst) {
            // SAFETY: mount(2) and umount(2) with NUL-terminated paths that outlive the calls.
            unsafe {
                if libc::mount(
                    source.as_ptr(),
                    target.as_ptr(),
                    std::ptr::null(),
                    libc::MS_BIND,
                    std::ptr::null(),
                ) == 0
                {
                    libc::umount2(target.as_ptr(), libc::MNT_DETACH);
                    cycles += 1;
                }
            }
        }
        // SAFETY: umount2(2) of the bind made by `share`.
        unsafe { libc::umount2(c_path(&dir).as_ptr(), libc::MNT_DETACH) };
        cycles
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_started_while_the_hosts_mounts_churn_all_run() {
    if !confined_here() {
        return;
    }
    // SAFETY: geteuid(2) reads this process's effective user id.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: changing the host's mount table needs root");
        return;
    }
    let churn_dir = tempfile::tempdir().expect("temp dir");
    let stop = Arc::new(AtomicBool::new(false));
    let churn = churn_mounts(churn_dir.path().to_path_buf(), stop.clone());
    let sandbox = ProcessSandbox::default();
    let mut failures = Vec::new();
    for job in 0..150 {
        let root = tempfile::tempdir().expect("temp dir");
        let run = run_in(root.path(), &["sh", "-c", "echo invoice total 42"]);
        match sandbox.run(&run).await {
            Ok(SandboxExit::Exited(0)) => {}
            other => failures.push(format!(
                "job {job}: {other:?}: {}",
                std::fs::read_to_string(&run.stderr_path).unwrap_or_default()
            )),
        }
    }
    stop.store(true, Ordering::SeqCst);
    let cycles = churn.join().expect("churn thread");
    assert!(cycles > 0, "the mount table changed during the run");
    assert!(failures.is_empty(), "{failures:#?}");
}
