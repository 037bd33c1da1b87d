//! The parts of the warm runner's hot swap that are not about servers: telling a mutant job's
//! selection (its node ids) from the options every mutant of a tree shares, and the unmutated
//! copy of the tree a session server collects.

use std::path::Path;

/// The JUnit option of a session server's key: the real path differs per job and per server.
pub const JUNIT_PLACEHOLDER: &str = "--junitxml={report}";

/// A pytest argument list split into what a session server is keyed by and what one job adds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Split {
    /// Every argument but the node ids, the JUnit option as [`JUNIT_PLACEHOLDER`].
    pub options: Vec<String>,
    /// The trailing node ids (`FILE::NAME…`), in order.
    pub select: Vec<String>,
    /// The job's JUnit report path, when it asks for one.
    pub junitxml: Option<String>,
}

/// Splits `args` into the options and the trailing node ids (arguments holding `::` that are
/// not options), as `assay mutate` writes a mutant's command. A command with no node ids runs
/// the whole suite: its selection is empty, and a server serves it only when its options name
/// nothing to collect (the server declines otherwise). `None` when an option lacks its value.
/// A node id an option took as its value (`--deselect a.py::t`) makes the server's options
/// end in that option: pytest then refuses them, or names a path to collect, and the server
/// declines (see `adapters/warm_pytest.py`), so no job runs with options it did not ask for.
pub fn split(args: &[String]) -> Option<Split> {
    let ids = args
        .iter()
        .rev()
        .take_while(|a| !a.starts_with('-') && a.contains("::"))
        .count();
    let (options, select) = args.split_at(args.len() - ids);
    let mut kept = Vec::with_capacity(options.len());
    let mut junitxml = None;
    let mut rest = options.iter();
    while let Some(arg) = rest.next() {
        if let Some(path) = arg
            .strip_prefix("--junitxml=")
            .or_else(|| arg.strip_prefix("--junit-xml="))
        {
            junitxml = Some(path.to_owned());
            kept.push(JUNIT_PLACEHOLDER.to_owned());
        } else if arg == "--junitxml" || arg == "--junit-xml" {
            junitxml = Some(rest.next()?.clone());
            kept.push(JUNIT_PLACEHOLDER.to_owned());
        } else {
            kept.push(arg.clone());
        }
    }
    Some(Split {
        options: kept,
        select: select.to_vec(),
        junitxml,
    })
}

/// Copies the tree at `from` to `to` (links as links), then writes `original` back over
/// `path`: the unmutated tree a mutant job's tree was made from.
pub fn unmutated_copy(from: &Path, to: &Path, path: &str, original: &[u8]) -> std::io::Result<()> {
    copy_tree(from, to)?;
    let file = to.join(path);
    // The mutant's file was written in place; a link there would be followed by the write.
    if std::fs::symlink_metadata(&file)?.file_type().is_symlink() {
        return Err(std::io::Error::other(format!("{path} is a link")));
    }
    std::fs::write(file, original)
}

/// Copies the tree at `from` to `to`, links as links.
pub fn copy_tree(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let kind = entry.file_type()?;
        let target = to.join(entry.file_name());
        if kind.is_dir() {
            copy_tree(&entry.path(), &target)?;
        } else if kind.is_symlink() {
            std::os::unix::fs::symlink(std::fs::read_link(entry.path())?, &target)?;
        } else {
            std::fs::copy(entry.path(), &target)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn trailing_node_ids_are_the_selection_and_the_report_path_is_the_jobs() {
        let split = split(&argv(&[
            "-x",
            "-p",
            "no:cacheprovider",
            "--junitxml=/s/private/report",
            "-q",
            "tests/test_a.py::test_one",
            "tests/test_a.py::TestB::test_two[1-2]",
        ]))
        .expect("node ids");
        assert_eq!(
            split.options,
            argv(&["-x", "-p", "no:cacheprovider", JUNIT_PLACEHOLDER, "-q"])
        );
        assert_eq!(
            split.select,
            argv(&[
                "tests/test_a.py::test_one",
                "tests/test_a.py::TestB::test_two[1-2]"
            ])
        );
        assert_eq!(split.junitxml.as_deref(), Some("/s/private/report"));
        let spaced = super::split(&argv(&["--junitxml", "/r.xml", "t.py::x"])).expect("ids");
        assert_eq!(spaced.options, argv(&[JUNIT_PLACEHOLDER]));
        assert_eq!(spaced.junitxml.as_deref(), Some("/r.xml"));
    }

    #[test]
    fn a_command_without_trailing_node_ids_selects_the_whole_suite() {
        let whole = split(&argv(&["-q", "--junitxml=/r.xml"])).expect("options");
        assert_eq!(whole.options, argv(&["-q", JUNIT_PLACEHOLDER]));
        assert!(whole.select.is_empty());
        // A path stays among the options: the server then refuses to serve (it names what
        // to collect), so such a job runs the usual way.
        let path = split(&argv(&["-q", "tests/test_a.py"])).expect("options");
        assert_eq!(path.options, argv(&["-q", "tests/test_a.py"]));
        assert!(path.select.is_empty());
        assert_eq!(split(&argv(&[])).map(|s| s.options), Some(vec![]));
        // The node id is the option's value, and the option then lacks one.
        assert_eq!(split(&argv(&["--junitxml", "t.py::x"])), None);
    }
}
