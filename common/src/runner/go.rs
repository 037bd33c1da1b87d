//! Go selection: which packages a run covers and the `-run` pattern that selects tests and
//! subtests by path. Selection may run more than was named, never less; the report decides.

use std::collections::BTreeSet;

/// `go test` takes packages, not files: each test file's directory, as `./dir` (`.` for the
/// module root), deduplicated in first-seen order. No files means every package (`./...`).
pub fn packages(files: &[String]) -> Vec<String> {
    if files.is_empty() {
        return vec!["./...".into()];
    }
    let mut seen = BTreeSet::new();
    let mut packages = Vec::new();
    for file in files {
        let package = match file.rsplit_once('/') {
            Some((dir, _)) => format!("./{dir}"),
            None => ".".into(),
        };
        if seen.insert(package.clone()) {
            packages.push(package);
        }
    }
    packages
}

/// The `-run` pattern for `names` (`TestA`, `TestA/expired`), or `None` to run everything.
///
/// Go splits `-run` on a top-level `|` first and on `/` second, so `^TestA$/^x$|^y$` means
/// "(TestA/x) or (y)". Each level is therefore one group, `^(TestA|TestB)$/^(x|y)$`, whose `|`
/// sits inside parentheses where Go does not split. Level `k` lists every name's `k`-th element,
/// and only as many levels are given as the shallowest name has: a bare function name must run
/// all of its subtests. This over-selects (a cross product) but never drops a named test.
pub fn run_pattern(names: &[String]) -> Option<String> {
    let paths: Vec<Vec<&str>> = names
        .iter()
        .filter(|n| !n.is_empty())
        .map(|n| n.split('/').collect())
        .collect();
    let depth = paths.iter().map(Vec::len).min()?;
    let levels: Vec<String> = (0..depth)
        .map(|level| {
            let mut elements: Vec<&str> = Vec::new();
            for path in &paths {
                if !elements.contains(&path[level]) {
                    elements.push(path[level]);
                }
            }
            let alternatives: Vec<String> = elements.iter().map(|e| quote_meta(e)).collect();
            format!("^({})$", alternatives.join("|"))
        })
        .collect();
    Some(levels.join("/"))
}

/// Go's `regexp.QuoteMeta`.
fn quote_meta(text: &str) -> String {
    let mut quoted = String::with_capacity(text.len());
    for c in text.chars() {
        if r"\.+*?()|[]{}^$".contains(c) {
            quoted.push('\\');
        }
        quoted.push(c);
    }
    quoted
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(words: &[&str]) -> Vec<String> {
        words.iter().map(|w| (*w).to_owned()).collect()
    }

    #[test]
    fn functions_are_anchored_alternatives() {
        assert_eq!(
            run_pattern(&names(&["TestA", "TestB"])).as_deref(),
            Some("^(TestA|TestB)$")
        );
        assert_eq!(run_pattern(&[]), None);
    }

    #[test]
    fn subtests_add_a_level_per_path_element() {
        assert_eq!(
            run_pattern(&names(&["TestA/expired"])).as_deref(),
            Some("^(TestA)$/^(expired)$")
        );
        assert_eq!(
            run_pattern(&names(&["TestA/expired", "TestA/at_the_limit"])).as_deref(),
            Some("^(TestA)$/^(expired|at_the_limit)$")
        );
    }

    #[test]
    fn a_bare_function_keeps_every_subtest_selected() {
        assert_eq!(
            run_pattern(&names(&["TestA/expired", "TestB"])).as_deref(),
            Some("^(TestA|TestB)$")
        );
    }

    #[test]
    fn regexp_metacharacters_in_subtest_names_are_quoted() {
        assert_eq!(
            run_pattern(&names(&["TestParse/a+b_(x)"])).as_deref(),
            Some(r"^(TestParse)$/^(a\+b_\(x\))$")
        );
    }

    #[test]
    fn packages_are_test_file_directories() {
        assert_eq!(
            packages(&names(&[
                "cache/a_test.go",
                "cache/b_test.go",
                "main_test.go"
            ])),
            names(&["./cache", "."])
        );
        assert_eq!(packages(&[]), names(&["./..."]));
    }
}
