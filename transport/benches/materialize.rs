//! What materializing a tree from the worker's tree cache costs: a repository of 2,000 files
//! (about 30 MiB) built with git in a temporary directory, its archive uploaded to a file
//! store, fetched once, then unpacked from the cache into a fresh directory per round (every
//! round verifies the archive, as every job does). Prints the first materialization (the
//! fetch) and, over the cached rounds, the median and fastest wall time and the median CPU
//! time (user + system, every thread of the process: the unpacking runs on blocking threads),
//! which a machine shared with other work disturbs less than the wall time.
//!
//!   cargo bench -p assay-transport --bench materialize
//!   ROUNDS=20 FILES=2000 FILE_KIB=15 cargo bench -p assay-transport --bench materialize

use assay_common::TreeId;
use assay_transport::store::open_store;
use assay_transport::store_tree::{StoreTreeSource, upload_tree};
use assay_transport::tree::TreeSource as _;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// User + system CPU time of this process so far.
fn cpu() -> Duration {
    // SAFETY: getrusage writes into the struct it is given and reads nothing else.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: as above; RUSAGE_SELF is always valid.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) } != 0 {
        return Duration::ZERO;
    }
    let time = |t: libc::timeval| {
        Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64)
    };
    time(usage.ru_utime) + time(usage.ru_stime)
}

fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn git(repo: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args([
            "-c",
            "user.name=Bench",
            "-c",
            "user.email=bench@invoices.test",
        ])
        .args(args)
        .current_dir(repo)
        .output()
        .expect("git runs");
    assert!(out.status.success(), "git {args:?}: {out:?}");
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// `files` files of about `kib` KiB each, 50 to a directory, of text that does not repeat.
fn repository(dir: &Path, files: usize, kib: usize) -> (TreeId, u64) {
    git(dir, &["init", "-q", "-b", "main"]);
    let mut state = 0x2545_f491_4f6c_dd1d_u64;
    let mut total = 0u64;
    for i in 0..files {
        let sub = dir.join(format!("pkg{:02}", i / 50));
        std::fs::create_dir_all(&sub).expect("mkdir");
        let size = kib * 1024 / 2 + (i * 997) % (kib * 1024);
        let mut text = String::with_capacity(size + 64);
        while text.len() < size {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            text.push_str(&format!("INVOICE_{i}_{state:016x} = {}\n", state % 1000));
        }
        total += text.len() as u64;
        std::fs::write(sub.join(format!("module_{i}.py")), text).expect("write");
    }
    git(dir, &["add", "."]);
    git(dir, &["commit", "-q", "-m", "bench"]);
    (TreeId(git(dir, &["rev-parse", "HEAD^{tree}"])), total)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let files = env("FILES", 2000);
    let kib = env("FILE_KIB", 15);
    let rounds = env("ROUNDS", 10);
    let work = tempfile::tempdir().expect("tempdir");
    let repo = work.path().join("repo");
    std::fs::create_dir_all(&repo).expect("mkdir");
    let (tree, bytes) = repository(&repo, files, kib);
    let store = Arc::new(
        open_store(
            &format!("file://{}", work.path().join("store").display()),
            &[],
        )
        .expect("store"),
    );
    upload_tree(store.as_ref(), &repo, &tree)
        .await
        .expect("upload");
    let trees = StoreTreeSource::new(store, work.path().join("cache"));
    let dest = |n: usize| {
        let dest = work.path().join(format!("tree-{n}"));
        std::fs::create_dir_all(&dest).expect("mkdir");
        dest
    };
    let first = dest(0);
    let started = Instant::now();
    trees.materialize(&tree, &first).await.expect("first");
    let fetch = started.elapsed();
    std::fs::remove_dir_all(&first).expect("rm");
    let mut times: Vec<Duration> = Vec::with_capacity(rounds);
    let mut cpus: Vec<Duration> = Vec::with_capacity(rounds);
    for n in 1..=rounds {
        let into = dest(n);
        let (started, spent) = (Instant::now(), cpu());
        trees.materialize(&tree, &into).await.expect("cached");
        times.push(started.elapsed());
        cpus.push(cpu().saturating_sub(spent));
        std::fs::remove_dir_all(&into).expect("rm");
    }
    times.sort();
    cpus.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!(
        "materialize {files} files, {:.1} MiB: first (fetch) {:.1} ms; cached median {:.1} ms, fastest {:.1} ms, median CPU {:.1} ms over {rounds} rounds; downloads {}",
        bytes as f64 / (1024.0 * 1024.0),
        ms(fetch),
        ms(times[times.len() / 2]),
        ms(times[0]),
        ms(cpus[cpus.len() / 2]),
        trees.downloads()
    );
}
