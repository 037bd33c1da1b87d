//! Reused mutant trees against fresh copies, with a real git repository: a tree a job changed
//! every way a test can (edited, added, removed, re-permissioned files, a directory swapped
//! for a link out of the tree, a file swapped for a hard link to a file outside) comes back
//! byte for byte as committed, nothing outside is written through it, and it is reused (the
//! files no job touched keep their inodes).

use assay_common::TreeId;
use assay_transport::tree::{GitTreeSource, TreeSource};
use assay_worker::reused_trees::ReusedTrees;
use std::collections::BTreeMap;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(["-c", "user.name=Ada", "-c", "user.email=ada@example.com"])
        .args(args)
        .current_dir(dir)
        .output()
        .expect("git runs");
    assert!(out.status.success(), "git {args:?}: {out:?}");
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().expect("parent")).expect("dirs");
    std::fs::write(path, text).expect("write");
}

/// Every entry under `dir`: kind, bytes or link target, permission bits.
fn listing(dir: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(at) = stack.pop() {
        for entry in std::fs::read_dir(&at).expect("read dir") {
            let path = entry.expect("entry").path();
            let name = path
                .strip_prefix(dir)
                .expect("inside")
                .display()
                .to_string();
            let meta = std::fs::symlink_metadata(&path).expect("metadata");
            let mode = meta.permissions().mode() & 0o7777;
            let what = if meta.file_type().is_symlink() {
                format!(
                    "link {}",
                    std::fs::read_link(&path).expect("link").display()
                )
            } else if meta.is_dir() {
                stack.push(path.clone());
                format!("dir {mode:o}")
            } else {
                let bytes = std::fs::read(&path).expect("bytes");
                format!("file {mode:o} {}", String::from_utf8_lossy(&bytes))
            };
            out.insert(name, what);
        }
    }
    out
}

/// A job's tree, as `execute` asks for one: an empty directory filled by the source.
async fn job_tree(trees: &ReusedTrees, tree: &TreeId, scratch: &Path, name: &str) -> PathBuf {
    let dir = scratch.join(name);
    std::fs::create_dir_all(&dir).expect("job dir");
    trees.materialize(tree, &dir).await.expect("job's tree");
    dir
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reused_tree_comes_back_as_committed_whatever_its_job_did() {
    let repo = tempfile::tempdir().expect("repo");
    let root = repo.path();
    git(root, &["init", "-q", "-b", "main"]);
    write(
        &root.join("ledger/__init__.py"),
        "def fee(amount):\n    return 1\n",
    );
    write(
        &root.join("tests/test_ledger.py"),
        "def test_fee():\n    pass\n",
    );
    write(&root.join("tests/data/rates.csv"), "eur,1\n");
    write(&root.join("docs/index.md"), "# Ledger\n");
    write(&root.join("run.sh"), "#!/bin/sh\n");
    std::fs::set_permissions(root.join("run.sh"), std::fs::Permissions::from_mode(0o755))
        .expect("chmod");
    std::os::unix::fs::symlink("ledger/__init__.py", root.join("entry.py")).expect("link");
    git(root, &["add", "-A"]);
    git(root, &["commit", "-qm", "ledger"]);
    let tree = TreeId::parse(&git(root, &["rev-parse", "HEAD^{tree}"])).expect("tree id");

    let source = Arc::new(GitTreeSource::new(root));
    let scratch = tempfile::tempdir().expect("scratch");
    let trees = ReusedTrees::new(source.clone(), scratch.path().join(".trees"), 1);
    let fresh = scratch.path().join("fresh");
    std::fs::create_dir_all(&fresh).expect("fresh dir");
    source.materialize(&tree, &fresh).await.expect("fresh copy");
    let committed = listing(&fresh);

    let first = job_tree(&trees, &tree, scratch.path(), "job-1").await;
    assert_eq!(listing(&first), committed);

    // What one job's tests did to its tree.
    let outside = tempfile::tempdir().expect("outside");
    let secret = outside.path().join("secret.txt");
    write(&secret, "not the tree's\n");
    write(
        &first.join("ledger/__init__.py"),
        "def fee(amount):\n    return 0\n",
    );
    write(&first.join("receipts.log"), "one run\n");
    write(&first.join("ledger/__pycache__/x.pyc"), "bytecode");
    std::fs::remove_file(first.join("tests/test_ledger.py")).expect("rm");
    std::fs::set_permissions(first.join("run.sh"), std::fs::Permissions::from_mode(0o600))
        .expect("chmod");
    std::fs::remove_dir_all(first.join("tests/data")).expect("rm data");
    std::os::unix::fs::symlink(outside.path(), first.join("tests/data")).expect("dir link");
    std::fs::remove_file(first.join("entry.py")).expect("rm link");
    write(&first.join("entry.py"), "not a link\n");
    std::fs::remove_file(first.join("docs/index.md")).expect("rm doc");
    std::fs::hard_link(&secret, first.join("docs/index.md")).expect("hard link");
    trees.release(&tree, &first).await;
    assert!(!first.exists(), "the released tree was not taken");

    let second = job_tree(&trees, &tree, scratch.path(), "job-2").await;
    assert_eq!(listing(&second), committed);
    assert_eq!(
        std::fs::read_to_string(&secret).expect("secret"),
        "not the tree's\n",
        "the reset wrote through a hard link"
    );
    assert_eq!(
        listing(outside.path()).len(),
        1,
        "the reset wrote through a link"
    );
    // Reused, not written afresh: a file no job touched is the same file (the second tree
    // still exists when the third is asked for, unless it was taken back).
    let inode = |dir: &Path| std::fs::metadata(dir.join("run.sh")).expect("script").ino();
    let before = inode(&second);
    trees.release(&tree, &second).await;
    let third = job_tree(&trees, &tree, scratch.path(), "job-3").await;
    assert_eq!(listing(&third), committed);
    assert_eq!(
        inode(&third),
        before,
        "the tree was written afresh, not reused"
    );
}
