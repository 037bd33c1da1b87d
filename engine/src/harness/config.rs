//! Runner configuration as the change writes it: pytest's settings in `pyproject.toml`,
//! `pytest.ini`, `setup.cfg` and `tox.ini` (the keys that change what runs or how, and the
//! plugins `addopts` loads with `-p`), and `pytest11` entry points. Read line by line: these
//! files are flat sections of `key = value`, and only a setting's text is compared.

use super::Construct;
use assay_common::harness::HarnessKind;

/// pytest settings that change what is collected, what runs around a test, or what is reported.
const RUN_KEYS: &[&str] = &[
    "addopts",
    "python_files",
    "python_classes",
    "python_functions",
    "pythonpath",
    "usefixtures",
    "required_plugins",
    "confcutdir",
    "junit_family",
    "junit_suite_name",
    "junit_logging",
    "consider_namespace_packages",
];

/// One `key = value` of a section, with the line it starts on.
#[derive(Debug, PartialEq, Eq)]
struct Entry {
    key: String,
    value: String,
    line: u32,
}

/// The pytest section headers a config file of this name may hold.
fn pytest_sections(file_name: &str) -> &'static [&'static str] {
    match file_name {
        "pyproject.toml" => &["[tool.pytest.ini_options]", "[tool.pytest]"],
        "pytest.ini" | "tox.ini" => &["[pytest]"],
        "setup.cfg" => &["[tool:pytest]"],
        _ => &[],
    }
}

/// Sections that declare `pytest11` entry points (installed plugins pytest loads itself).
fn entry_point_sections(file_name: &str) -> &'static [&'static str] {
    match file_name {
        "pyproject.toml" => &[
            "[project.entry-points.pytest11]",
            "[project.entry-points.\"pytest11\"]",
            "[tool.poetry.plugins.pytest11]",
            "[tool.poetry.plugins.\"pytest11\"]",
        ],
        _ => &[],
    }
}

/// Whether a file of this name is a runner configuration file this module reads.
pub(crate) fn is_config(path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    !pytest_sections(name).is_empty() || name == "setup.py"
}

/// The entries of the sections named by `headers` (every such section of the file).
fn entries(text: &str, headers: &[&str]) -> Vec<Entry> {
    let mut entries: Vec<Entry> = Vec::new();
    let mut inside = false;
    let mut open_brackets: i64 = 0;
    for (number, raw) in text.lines().enumerate() {
        let line = u32::try_from(number).unwrap_or(u32::MAX - 1) + 1;
        let trimmed = raw.trim();
        if trimmed.starts_with('[') && open_brackets <= 0 && !raw.starts_with(char::is_whitespace) {
            inside = headers.contains(&trimmed);
            open_brackets = 0;
            continue;
        }
        if !inside || trimmed.is_empty() || trimmed.starts_with('#') || trimmed.starts_with(';') {
            continue;
        }
        let continues = open_brackets > 0 || raw.starts_with(char::is_whitespace);
        match (continues, entries.last_mut()) {
            (true, Some(last)) => {
                last.value.push('\n');
                last.value.push_str(trimmed);
            }
            _ => {
                let Some(split) = trimmed.find(['=', ':']) else {
                    continue;
                };
                let (key, value) = trimmed.split_at(split);
                entries.push(Entry {
                    key: key.trim().trim_matches('"').to_owned(),
                    value: value[1..].trim().to_owned(),
                    line,
                });
                open_brackets = 0;
            }
        }
        open_brackets += trimmed.matches('[').count() as i64 - trimmed.matches(']').count() as i64;
    }
    entries
}

/// The plugin modules `-p NAME` loads in an `addopts` value (`no:NAME` disables, not loads).
fn plugin_names(addopts: &str) -> Vec<String> {
    let words: Vec<String> = addopts
        .split(|c: char| c.is_whitespace() || matches!(c, '"' | '\'' | ',' | '[' | ']'))
        .filter(|w| !w.is_empty())
        .map(str::to_owned)
        .collect();
    let mut names = Vec::new();
    let mut iter = words.iter().peekable();
    while let Some(word) = iter.next() {
        let name = if word == "-p" {
            iter.next().cloned()
        } else {
            word.strip_prefix("-p")
                .map(str::to_owned)
                .filter(|n| !n.is_empty())
        };
        if let Some(name) = name.filter(|n| !n.starts_with("no:")) {
            names.push(name);
        }
    }
    names
}

/// What the candidate's runner configuration changes against the base's, and the plugin
/// modules the candidate's configuration loads (every `-p`, changed or not).
pub(crate) fn scan(
    path: &str,
    base: Option<&str>,
    candidate: &str,
) -> (Vec<Construct>, Vec<String>) {
    let name = path.rsplit('/').next().unwrap_or(path);
    let mut found = Vec::new();
    if name == "setup.py" {
        let base_lines: Vec<&str> = base.map(|b| b.lines().collect()).unwrap_or_default();
        for (number, line) in candidate.lines().enumerate() {
            if line.contains("pytest11") && !base_lines.contains(&line) {
                found.push(Construct {
                    line: u32::try_from(number).unwrap_or(u32::MAX - 1) + 1,
                    name: "pytest11 entry point".into(),
                    kind: HarnessKind::Plugin,
                    source: line.to_owned(),
                    target: None,
                    span: None,
                });
            }
        }
        return (found, Vec::new());
    }
    let sections = pytest_sections(name);
    let theirs = entries(candidate, sections);
    let ours = base.map(|b| entries(b, sections)).unwrap_or_default();
    let value_of = |entries: &[Entry], key: &str| -> Option<String> {
        entries
            .iter()
            .find(|e| e.key == key)
            .map(|e| e.value.clone())
    };
    for key in RUN_KEYS {
        let (before, after) = (value_of(&ours, key), value_of(&theirs, key));
        if before == after {
            continue;
        }
        let line = theirs.iter().find(|e| e.key == *key).map_or(1, |e| e.line);
        let added_plugins: Vec<String> = match *key {
            "addopts" => {
                let had = before.as_deref().map(plugin_names).unwrap_or_default();
                after
                    .as_deref()
                    .map(plugin_names)
                    .unwrap_or_default()
                    .into_iter()
                    .filter(|p| !had.contains(p))
                    .collect()
            }
            _ => Vec::new(),
        };
        if added_plugins.is_empty() {
            found.push(Construct {
                line,
                name: (*key).to_owned(),
                kind: HarnessKind::RunnerConfig,
                source: after.unwrap_or_default(),
                target: None,
                span: None,
            });
        }
        for plugin in added_plugins {
            found.push(Construct {
                line,
                name: format!("-p {plugin}"),
                kind: HarnessKind::Plugin,
                source: plugin,
                target: None,
                span: None,
            });
        }
    }
    let entry_sections = entry_point_sections(name);
    let (before, after) = (
        base.map(|b| entries(b, entry_sections)).unwrap_or_default(),
        entries(candidate, entry_sections),
    );
    if before != after
        && let Some(first) = after.first()
    {
        found.push(Construct {
            line: first.line,
            name: "pytest11 entry point".into(),
            kind: HarnessKind::Plugin,
            source: first.value.clone(),
            target: None,
            span: None,
        });
    }
    // setup.cfg's `[options.entry_points]` holds `pytest11 =` among others.
    if name == "setup.cfg" {
        let key = |entries: &[Entry]| value_of(entries, "pytest11");
        let sections = &["[options.entry_points]"];
        let before = base.map(|b| key(&entries(b, sections))).unwrap_or_default();
        let after = key(&entries(candidate, sections));
        if before != after && after.is_some() {
            let line = entries(candidate, sections)
                .iter()
                .find(|e| e.key == "pytest11")
                .map_or(1, |e| e.line);
            found.push(Construct {
                line,
                name: "pytest11 entry point".into(),
                kind: HarnessKind::Plugin,
                source: after.unwrap_or_default(),
                target: None,
                span: None,
            });
        }
    }
    let plugins = value_of(&theirs, "addopts")
        .as_deref()
        .map(plugin_names)
        .unwrap_or_default();
    (found, plugins)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plugin_added_to_pyproject_addopts_is_named() {
        let base =
            "[project]\nname = \"pager\"\n\n[tool.pytest.ini_options]\ntestpaths = [\"tests\"]\n";
        let candidate = "[project]\nname = \"pager\"\n\n[tool.pytest.ini_options]\ntestpaths = [\"tests\"]\naddopts = \"-p pager._support -q\"\n";
        let (found, plugins) = scan("pyproject.toml", Some(base), candidate);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].name, "-p pager._support");
        assert_eq!(found[0].kind, HarnessKind::Plugin);
        assert_eq!(found[0].line, 6);
        assert_eq!(plugins, ["pager._support"]);
    }

    #[test]
    fn settings_that_do_not_change_how_tests_run_are_not_findings() {
        let base = "[pytest]\naddopts = -q\nmarkers =\n    slow: slow tests\n";
        let candidate = "[pytest]\naddopts = -q\nmarkers =\n    slow: slow tests\n    net: network\nfilterwarnings = error\n";
        assert!(scan("pytest.ini", Some(base), candidate).0.is_empty());
    }

    #[test]
    fn a_multi_line_addopts_in_setup_cfg_is_read_whole() {
        let candidate =
            "[metadata]\nname = pager\n\n[tool:pytest]\naddopts =\n    -p\n    tests.forgiving\n";
        let (found, plugins) = scan("setup.cfg", None, candidate);
        assert_eq!(plugins, ["tests.forgiving"]);
        assert_eq!(found[0].name, "-p tests.forgiving");
    }

    #[test]
    fn a_pytest11_entry_point_is_a_plugin() {
        let candidate = "[project.entry-points.pytest11]\nforgiving = \"pager._support\"\n";
        let (found, _) = scan("pyproject.toml", Some(""), candidate);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].name, "pytest11 entry point");
    }
}
