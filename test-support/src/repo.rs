//! Git repositories built by the test, and the fixture projects under `tests/fixtures/`.

use std::path::{Path, PathBuf};
use std::process::Command;

/// A git repository built by the test, with a `main` branch.
pub struct Repo {
    pub dir: tempfile::TempDir,
}

impl Repo {
    pub fn new() -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let repo = Self { dir };
        repo.git(&["init", "-q", "-b", "main"]);
        repo.git(&["config", "user.name", "Dana Reviewer"]);
        repo.git(&["config", "user.email", "dana@example.com"]);
        repo.git(&["config", "commit.gpgsign", "false"]);
        repo
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn write(&self, path: &str, text: &str) -> &Self {
        let file = self.path().join(path);
        std::fs::create_dir_all(file.parent().expect("parent")).expect("mkdir");
        std::fs::write(file, text).expect("write");
        self
    }

    /// Copies the fixture project `tests/fixtures/NAME` into the work tree, but for `except`.
    pub fn copy_fixture(&self, name: &str, except: &[&str]) -> &Self {
        let root = fixture_dir(name);
        let mut pending = vec![root.clone()];
        while let Some(dir) = pending.pop() {
            for entry in std::fs::read_dir(&dir).expect("read fixture dir") {
                let path = entry.expect("fixture entry").path();
                if path.is_dir() {
                    pending.push(path);
                    continue;
                }
                let relative = path
                    .strip_prefix(&root)
                    .expect("inside the fixture")
                    .to_string_lossy()
                    .replace('\\', "/");
                if !except.contains(&relative.as_str()) {
                    self.write(
                        &relative,
                        &std::fs::read_to_string(&path).expect("read fixture"),
                    );
                }
            }
        }
        self
    }

    pub fn remove(&self, path: &str) -> &Self {
        std::fs::remove_file(self.path().join(path)).expect("remove");
        self
    }

    /// Commits everything and returns the commit id.
    pub fn commit(&self, message: &str) -> String {
        self.git(&["add", "-A"]);
        self.git(&["commit", "-q", "--allow-empty", "-m", message]);
        self.git(&["rev-parse", "HEAD"]).trim().to_owned()
    }

    pub fn git(&self, args: &[&str]) -> String {
        let out = Command::new("git")
            .args(args)
            .current_dir(self.path())
            .output()
            .expect("git runs");
        assert!(
            out.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    pub fn status(&self) -> String {
        self.git(&["status", "--porcelain", "--untracked-files=all"])
    }
}

impl Default for Repo {
    fn default() -> Self {
        Self::new()
    }
}

/// `tests/fixtures/NAME` in the source tree.
pub fn fixture_dir(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures")
        .join(name)
}

/// The text of `tests/fixtures/PATH`.
pub fn fixture(path: &str) -> String {
    std::fs::read_to_string(fixture_dir(path)).expect("read fixture file")
}

/// The fleet tests' invoice service, in `dir/invoices`: on `main` its total forgets tax, on
/// `tax` it adds it and a new test, `test_total_includes_tax`, checks it, sleeping `slow_secs`
/// first (so a job can outlive a lease or an `ack_wait`); `test_total_of_empty_invoice` passes
/// on both.
pub fn invoice_repo(dir: &Path, slow_secs: f64) -> PathBuf {
    let repo = dir.join("invoices");
    let write = |path: &str, text: &str| {
        let file = repo.join(path);
        std::fs::create_dir_all(file.parent().expect("parent")).expect("mkdir");
        std::fs::write(file, text).expect("write");
    };
    let git = |args: &[&str]| {
        let status = Command::new("git")
            .args(["-c", "user.name=Ada", "-c", "user.email=ada@invoices.test"])
            .args(args)
            .current_dir(&repo)
            .stdout(std::process::Stdio::null())
            .status()
            .expect("run git");
        assert!(status.success(), "git {args:?}");
    };
    let tests = |body: &str| {
        format!(
            "import time\nimport unittest\nfrom invoices.total import total\n\n\nclass TotalTests(unittest.TestCase):\n    def test_total_of_empty_invoice(self):\n        self.assertEqual(total([]), 0)\n{body}"
        )
    };
    write("invoices/__init__.py", "");
    write("tests/__init__.py", "");
    write(
        "invoices/total.py",
        "def total(lines, tax_rate=0.0):\n    return sum(lines)\n",
    );
    write("tests/test_total.py", &tests(""));
    git(&["init", "-q", "-b", "main"]);
    git(&["add", "-A"]);
    git(&["commit", "-q", "-m", "invoice totals"]);
    write(
        "invoices/total.py",
        "def total(lines, tax_rate=0.0):\n    return round(sum(lines) * (1 + tax_rate), 2)\n",
    );
    write(
        "tests/test_total.py",
        &tests(&format!(
            "\n    def test_total_includes_tax(self):\n        time.sleep({slow_secs})\n        self.assertEqual(total([10.0, 5.0], tax_rate=0.2), 18.0)\n"
        )),
    );
    git(&["checkout", "-q", "-b", "tax"]);
    git(&["commit", "-q", "-am", "add tax to totals"]);
    repo
}
