//! `assay example`: builds a small repository (a pager library whose last partial page was not
//! counted, and the commit that fixes it with a new test) and proves the fix. It needs only
//! git-free Rust and python3, so it is the first command to try on a fresh machine.

use crate::exit::{Failure, ResultExt as _};
use crate::prove::{self, ProveArgs};
use anyhow::{Context, anyhow};
use clap::Args;
use std::path::{Path, PathBuf};

#[derive(Args, Debug)]
pub struct ExampleArgs {
    /// Create the example repository here (must not exist) and keep it [default: a temporary
    /// directory, removed afterwards].
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// Write the evidence report here.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Print only the summary.
    #[arg(short, long)]
    pub quiet: bool,
}

const PAGER_BASE: &str = r#""""Pagination helpers."""


def page_count(total_items, page_size):
    """Number of pages needed to show total_items, page_size per page."""
    if page_size <= 0:
        raise ValueError("page_size must be positive")
    return total_items // page_size
"#;

const PAGER_FIXED: &str = r#""""Pagination helpers."""


def page_count(total_items, page_size):
    """Number of pages needed to show total_items, page_size per page."""
    if page_size <= 0:
        raise ValueError("page_size must be positive")
    pages = total_items // page_size
    if total_items % page_size > 0:
        pages += 1
    return pages
"#;

const TESTS_BASE: &str = r#"import unittest

from pager import page_count


class PageCountTests(unittest.TestCase):
    def test_full_pages(self):
        self.assertEqual(page_count(10, 5), 2)

    def test_rejects_empty_pages(self):
        with self.assertRaises(ValueError):
            page_count(10, 0)
"#;

const TESTS_FIXED_EXTRA: &str = r#"
    def test_partial_last_page_is_counted(self):
        self.assertEqual(page_count(11, 5), 3)
"#;

pub async fn run(args: &ExampleArgs) -> Result<u8, Failure> {
    let temp;
    let dir = match &args.dir {
        Some(dir) => {
            if dir.exists() {
                return Err(Failure::usage(anyhow!(
                    "{} already exists (hint: pick a new directory for --dir)",
                    dir.display()
                )));
            }
            dir.clone()
        }
        None => {
            temp = tempfile::Builder::new()
                .prefix("assay-example-")
                .tempdir()
                .context("failed to create a temporary directory")
                .infrastructure()?;
            temp.path().join("pager")
        }
    };
    create_repository(&dir).infrastructure()?;
    if !args.quiet {
        errln!(
            "[example] repository with a fix for the last partial page at {}",
            dir.display()
        );
    }
    let store = dir.with_file_name(format!(
        "{}-store",
        dir.file_name().and_then(|n| n.to_str()).unwrap_or("pager")
    ));
    let prove_args = ProveArgs {
        repo: dir.clone(),
        base: Some("main~1".into()),
        candidate: Some("main".into()),
        criteria: vec![
            "test: test_partial_last_page_is_counted".into(),
            "guard: test_full_pages".into(),
        ],
        json: args.json.clone(),
        target: crate::fleet_link::RunTarget {
            store: Some(format!("file://{}", absolute(&store)?.display())),
            ..Default::default()
        },
        console: crate::console_flags::ConsoleFlags {
            quiet: args.quiet,
            ..Default::default()
        },
        ..ProveArgs::default()
    };
    prove::run(&prove_args).await
}

fn absolute(path: &Path) -> Result<PathBuf, Failure> {
    std::path::absolute(path)
        .with_context(|| format!("failed to resolve {}", path.display()))
        .usage()
}

/// Two commits on `main`: the bug, then the fix with its test.
fn create_repository(dir: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("failed to create {}", dir.display()))?;
    let repo =
        git2::Repository::init_opts(dir, git2::RepositoryInitOptions::new().initial_head("main"))
            .with_context(|| format!("failed to initialise a repository in {}", dir.display()))?;
    let tests_fixed = format!("{TESTS_BASE}{TESTS_FIXED_EXTRA}");
    let signature = git2::Signature::now("Assay Example", "example@assay.invalid")?;
    let mut parent: Option<git2::Oid> = None;
    for (message, pager, tests) in [
        ("Add page_count", PAGER_BASE, TESTS_BASE),
        (
            "Count the last partial page",
            PAGER_FIXED,
            tests_fixed.as_str(),
        ),
    ] {
        for (path, text) in [
            ("pager/__init__.py", pager),
            ("tests/__init__.py", ""),
            ("tests/test_pager.py", tests),
        ] {
            let file = dir.join(path);
            if let Some(parent_dir) = file.parent() {
                std::fs::create_dir_all(parent_dir)?;
            }
            std::fs::write(&file, text)
                .with_context(|| format!("failed to write {}", file.display()))?;
        }
        let mut index = repo.index()?;
        index.add_all(["*"], git2::IndexAddOption::DEFAULT, None)?;
        index.write()?;
        let tree = repo.find_tree(index.write_tree()?)?;
        let parents: Vec<git2::Commit<'_>> = parent
            .iter()
            .map(|id| repo.find_commit(*id))
            .collect::<Result<_, _>>()?;
        let parent_refs: Vec<&git2::Commit<'_>> = parents.iter().collect();
        parent = Some(repo.commit(
            Some("HEAD"),
            &signature,
            &signature,
            message,
            &tree,
            &parent_refs,
        )?);
    }
    Ok(())
}
