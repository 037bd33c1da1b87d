//! The Go tests a job's tree declares, read before its guest starts (see
//! [`assay_common::report::go_declared`]): what the guest does to the tree afterwards cannot
//! change what the run is checked against.

use assay_common::job::{JobKind, JobSpec};
use assay_common::report::go_declared::{DeclaredTests, TreeFile};
use assay_common::runner::ReportFormat;
use std::path::Path;

/// Whether `job` is a plain `go test` run of the tree's own tests (not a mutant, not a run of
/// prebuilt test executables), whose report can be checked against the declarations.
pub fn checked(job: &JobSpec) -> bool {
    job.kind != JobKind::Mutant
        && job.binaries.is_none()
        && matches!(job.report, ReportFormat::GoTestJson)
        && job
            .command
            .first()
            .is_some_and(|program| Path::new(program).file_name().is_some_and(|n| n == "go"))
        && job.command.get(1).is_some_and(|verb| verb == "test")
}

/// The declarations of `tree`'s `go.mod` and `_test.go` files, all of them (no cap a change
/// could outgrow to leave its own package unchecked: the go command compiles them all anyway).
/// Directory links are not followed (nor does `./...`). A file committed as a link is read
/// through it when it leads to a regular file inside the tree, as the package of the link's
/// own directory (the go command reads it so); a directory there is no source file to Go
/// either. A link that leads out of the tree, dangles or loops, or a file that cannot be read,
/// is one this reader cannot vouch for: its package's report is then not evidence
/// ([`DeclaredTests::missing`]).
pub fn read(tree: &Path) -> DeclaredTests {
    let root = std::fs::canonicalize(tree);
    let mut files: Vec<(String, Found)> = Vec::new();
    let mut pending = vec![(tree.to_path_buf(), String::new())];
    while let Some((dir, relative)) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            let name = entry.file_name().to_string_lossy().into_owned();
            let path = match relative.as_str() {
                "" => name.clone(),
                parent => format!("{parent}/{name}"),
            };
            if kind.is_dir() && name != ".git" {
                pending.push((entry.path(), path));
            } else if name == "go.mod" || name.ends_with("_test.go") {
                let found = if kind.is_file() {
                    read_file(&entry.path())
                } else if kind.is_symlink() {
                    match &root {
                        Ok(root) => through_link(root, &entry.path()),
                        Err(e) => Some(Found::Unreadable(format!(
                            "is a link, and the tree's own path could not be resolved: {e}"
                        ))),
                    }
                } else {
                    None
                };
                if let Some(found) = found {
                    files.push((path, found));
                }
            }
        }
    }
    DeclaredTests::read_found(files.iter().map(|(path, found)| {
        let file = match found {
            Found::Read(bytes) => TreeFile::Read(bytes),
            Found::Unreadable(why) => TreeFile::Unreadable(why),
        };
        (path.as_str(), file)
    }))
}

/// A file's content, or why it could not be had.
enum Found {
    Read(Vec<u8>),
    Unreadable(String),
}

fn read_file(path: &Path) -> Option<Found> {
    Some(match std::fs::read(path) {
        Ok(bytes) => Found::Read(bytes),
        Err(e) => Found::Unreadable(format!("could not be read: {e}")),
    })
}

/// What the link at `link` leads to, read when it is a regular file inside `root` (the tree,
/// resolved); `None` for a directory, which is no source file to the go command.
fn through_link(root: &Path, link: &Path) -> Option<Found> {
    let target = std::fs::read_link(link)
        .map(|target| target.display().to_string())
        .unwrap_or_else(|_| "?".into());
    let resolved = match std::fs::canonicalize(link) {
        Ok(resolved) => resolved,
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
            return Some(Found::Unreadable(format!(
                "is a link that loops (to {target})"
            )));
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Some(Found::Unreadable(format!(
                "is a dangling link (to {target})"
            )));
        }
        Err(e) => {
            return Some(Found::Unreadable(format!(
                "is a link (to {target}) that could not be resolved: {e}"
            )));
        }
    };
    if !resolved.starts_with(root) {
        return Some(Found::Unreadable(format!(
            "is a link that leads out of the tree (to {target})"
        )));
    }
    match std::fs::metadata(&resolved) {
        Ok(meta) if meta.is_dir() => None,
        Ok(meta) if meta.is_file() => read_file(&resolved),
        Ok(_) => Some(Found::Unreadable(format!(
            "is a link to something other than a file (to {target})"
        ))),
        Err(e) => Some(Found::Unreadable(format!(
            "is a link (to {target}) whose target could not be read: {e}"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use assay_common::outcome::{CaseResult, Outcome, TestReport};
    use std::os::unix::fs::symlink;

    /// A shop module: `cart` tests its totals; `go.mod` at the root.
    fn shop_tree() -> tempfile::TempDir {
        let tree = tempfile::tempdir().expect("a temporary directory");
        let write = |path: &str, text: &str| {
            let path = tree.path().join(path);
            std::fs::create_dir_all(path.parent().expect("a parent")).expect("a directory");
            std::fs::write(path, text).expect("a file");
        };
        write("go.mod", "module example.com/shop\n\ngo 1.21\n");
        write(
            "cart/cart.go",
            "package cart\n\nfunc Total(prices []int) int { return 0 }\n",
        );
        write(
            "cart/cart_test.go",
            "package cart\n\nimport \"testing\"\n\nfunc TestEmptyCartCostsNothing(t *testing.T) {}\n",
        );
        tree
    }

    /// A run's report of the cart package: these tests passed.
    fn cart_report(names: &[&str]) -> TestReport {
        TestReport {
            cases: names
                .iter()
                .map(|name| CaseResult {
                    file: "example.com/shop/cart".into(),
                    suite: String::new(),
                    name: (*name).into(),
                    variant: None,
                    outcome: Outcome::Passed,
                    message: None,
                })
                .collect(),
            ..TestReport::default()
        }
    }

    fn go_test_all() -> Vec<String> {
        ["go", "test", "-json", "-count=1", "./..."]
            .map(String::from)
            .to_vec()
    }

    #[test]
    fn a_test_file_linked_to_another_directory_of_the_tree_counts_for_the_links_package() {
        let tree = shop_tree();
        let shared = tree.path().join("testcases");
        std::fs::create_dir(&shared).expect("a directory");
        std::fs::write(
            shared.join("discounts.go.txt"),
            "package cart\n\nimport \"testing\"\n\nfunc TestDiscountIsApplied(t *testing.T) {}\n",
        )
        .expect("a file");
        symlink(
            "../testcases/discounts.go.txt",
            tree.path().join("cart/discounts_test.go"),
        )
        .expect("a link");
        let declared = read(tree.path());
        // The run ended after the first test: the linked file's test never ran.
        let why = declared
            .missing(&cart_report(&["TestEmptyCartCostsNothing"]), &go_test_all())
            .expect("the linked file's test is declared");
        assert!(
            why.contains("package example.com/shop/cart never reported TestDiscountIsApplied"),
            "{why}"
        );
        let whole = cart_report(&["TestEmptyCartCostsNothing", "TestDiscountIsApplied"]);
        assert_eq!(declared.missing(&whole, &go_test_all()), None);
    }

    /// What `read` makes of the cart package's report once `cart/{name}` is a link to
    /// `target`.
    fn verdict_with_link(name: &str, target: &str) -> Option<String> {
        let tree = shop_tree();
        symlink(target, tree.path().join("cart").join(name)).expect("a link");
        read(tree.path()).missing(&cart_report(&["TestEmptyCartCostsNothing"]), &go_test_all())
    }

    #[test]
    fn a_test_file_linked_out_of_the_tree_is_not_vouched_for() {
        let why = verdict_with_link("host_test.go", "/etc/hostname").expect("not checkable");
        assert!(
            why.contains(
                "package example.com/shop/cart's test file cart/host_test.go is a link that leads out of the tree (to /etc/hostname)"
            ),
            "{why}"
        );
        // Out by way of `..` too.
        let why = verdict_with_link("up_test.go", "../../../../../../../../etc/hostname")
            .expect("not checkable");
        assert!(why.contains("leads out of the tree"), "{why}");
    }

    #[test]
    fn a_dangling_test_file_link_is_not_vouched_for() {
        let why = verdict_with_link("gone_test.go", "missing/gone.go").expect("not checkable");
        assert!(
            why.contains("cart/gone_test.go is a dangling link (to missing/gone.go)"),
            "{why}"
        );
    }

    #[test]
    fn a_test_file_link_loop_is_not_vouched_for() {
        let tree = shop_tree();
        let cart = tree.path().join("cart");
        symlink("ping_test.go", cart.join("pong_test.go")).expect("a link");
        symlink("pong_test.go", cart.join("ping_test.go")).expect("a link");
        let why = read(tree.path())
            .missing(&cart_report(&["TestEmptyCartCostsNothing"]), &go_test_all())
            .expect("not checkable");
        assert!(why.contains("is a link that loops"), "{why}");
    }

    #[test]
    fn a_link_to_a_directory_is_no_test_file() {
        // The go command skips a link to a directory among a package's files; so does this.
        assert_eq!(verdict_with_link("fixtures_test.go", "."), None);
    }

    #[test]
    fn a_go_mod_linked_out_of_the_tree_leaves_the_run_unchecked() {
        let tree = shop_tree();
        std::fs::remove_file(tree.path().join("go.mod")).expect("go.mod removed");
        symlink("/etc/hostname", tree.path().join("go.mod")).expect("a link");
        let why = read(tree.path())
            .missing(&cart_report(&["TestEmptyCartCostsNothing"]), &go_test_all())
            .expect("not checkable");
        assert!(
            why.starts_with("go.mod is a link that leads out of the tree (to /etc/hostname)"),
            "{why}"
        );
    }
}
