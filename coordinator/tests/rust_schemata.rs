//! Mutant schemata on a real cargo build: a tiny crate built in the test, every mutant once
//! behind the runtime switch (one build, then one run of the built tests per mutant) and once
//! with a build of its own, and the two runs agree mutant by mutant, compile errors and a
//! hanging mutant included.

use assay_coordinator::mutants::rust::{plan, schema};
use assay_coordinator::mutants::{ChangedFile, Mutant, apply_edit};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const LIB: &str = r#"//! A tiny crate with strong and weak tests.

pub fn clamp(x: i32, lo: i32, hi: i32) -> i32 {
    if x < lo {
        lo
    } else if x > hi {
        hi
    } else {
        x
    }
}

pub fn is_even(n: u32) -> bool {
    n % 2 == 0
}

pub fn countdown(n: u32) -> u32 {
    let mut i = 0;
    let mut steps = 0;
    while i < n {
        i += 1;
        steps += 1;
    }
    steps
}

pub struct Meters(pub u32);

pub fn meters(n: u32) -> Meters {
    Meters(n)
}

pub const fn twice(x: u32) -> u32 {
    x * 2
}

pub const LIMIT: u32 = 2 + 1;

pub static NAMES: [&str; 1 + 1] = ["a", "b"];

pub static WIDTH: usize = 4 * 2;

pub fn table() -> [u8; 2 + 1] {
    [0; LIMIT as usize]
}

pub fn grade(n: u32) -> &'static str {
    match n {
        0 => "none",
        1 => "one",
        _ => "many",
    }
}

pub fn label() -> String {
    let raw = r"match x { _ => } {";
    format!("{}{}", raw.len(), twice!(1))
}

#[macro_export]
macro_rules! twice {
    ($e:expr) => {
        $e + $e
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(test)]
    mod nested {
        pub fn helper(a: u32) -> u32 {
            a + 1
        }
    }

    #[test]
    fn clamps() {
        assert_eq!(clamp(5, 0, 3), 3);
        assert_eq!(clamp(-1, 0, 3), 0);
        assert_eq!(clamp(2, 0, 3), 2);
    }

    #[test]
    fn even() {
        assert!(is_even(4));
    }

    #[test]
    fn counts() {
        assert_eq!(countdown(3), 3);
    }

    #[test]
    fn doubles() {
        assert_eq!(twice(2), 4);
        assert_eq!(nested::helper(1), 2);
    }

    #[test]
    fn grades() {
        assert_eq!(grade(0), "none");
    }

    #[test]
    fn wraps() {
        assert_eq!(meters(2).0, 2);
        assert!(!label().is_empty());
        assert_eq!(table().len(), LIMIT as usize);
        assert_eq!(NAMES.len(), 2);
        assert_eq!(WIDTH, 8);
    }
}
"#;

const MANIFEST: &str =
    "[package]\nname = \"tiny\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[workspace]\n";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Status {
    Killed,
    Survived,
    Timeout,
    CompileError,
}

fn cargo(dir: &Path, target: &Path) -> Command {
    let mut command = Command::new("cargo");
    command
        .args(["test", "--no-run", "--offline", "--message-format=json"])
        .current_dir(dir)
        .env("CARGO_TARGET_DIR", target)
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_BUILD_RUSTFLAGS")
        .stdin(Stdio::null())
        .stderr(Stdio::null());
    command
}

/// Builds the tests; the test executables, or the build's JSON messages when it failed.
fn build(dir: &Path, target: &Path) -> Result<Vec<PathBuf>, String> {
    let output = cargo(dir, target).output().expect("cargo runs");
    let json = String::from_utf8_lossy(&output.stdout).into_owned();
    if !output.status.success() {
        return Err(json);
    }
    let executables = json
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|v| v["reason"] == "compiler-artifact" && v["profile"]["test"] == true)
        .filter_map(|v| v["executable"].as_str().map(PathBuf::from))
        .collect();
    Ok(executables)
}

/// Runs every test executable with the switch at `number`; killed when one fails, timed out
/// past `limit`.
fn run(executables: &[PathBuf], number: u32, limit: Duration) -> Status {
    for executable in executables {
        let mut child = Command::new(executable)
            .env(schema::SWITCH_VARIABLE, number.to_string())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("the test executable starts");
        let started = Instant::now();
        let status = loop {
            if let Some(status) = child.try_wait().expect("wait for the tests") {
                break Some(status);
            }
            if started.elapsed() > limit {
                child.kill().expect("kill the hanging tests");
                child.wait().expect("reap the hanging tests");
                break None;
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        match status {
            None => return Status::Timeout,
            Some(status) if !status.success() => return Status::Killed,
            Some(_) => {}
        }
    }
    Status::Survived
}

fn write_crate(dir: &Path, lib: &str) {
    std::fs::create_dir_all(dir.join("src")).expect("src dir");
    std::fs::write(dir.join("Cargo.toml"), MANIFEST).expect("manifest");
    std::fs::write(dir.join("src/lib.rs"), lib).expect("lib");
}

/// The limit a mutant's run may take: ten times the unmutated run, at least two seconds.
fn limit_from(baseline: Duration) -> Duration {
    (baseline * 10).max(Duration::from_secs(2))
}

/// Each mutant built on its own, then its tests run.
fn per_mutant_builds(
    root: &Path,
    mutants: &[(u32, &Mutant)],
    limit: Duration,
) -> BTreeMap<u32, Status> {
    let dir = root.join("single");
    let target = root.join("single-target");
    let mut statuses = BTreeMap::new();
    for (number, mutant) in mutants {
        let mutated = apply_edit(LIB.as_bytes(), &mutant.edit).expect("the edit fits");
        write_crate(&dir, std::str::from_utf8(&mutated).expect("UTF-8"));
        let status = match build(&dir, &target) {
            Err(_) => Status::CompileError,
            Ok(executables) => run(&executables, 0, limit),
        };
        statuses.insert(*number, status);
    }
    statuses
}

#[test]
fn the_schemata_run_equals_a_build_per_mutant_mutant_by_mutant() {
    let root = tempfile::tempdir().expect("temp dir");
    let file = ChangedFile {
        path: "src/lib.rs".into(),
        bytes: LIB.as_bytes().to_vec(),
        changed_lines: (1..=LIB.lines().count() as u32).collect(),
    };
    let plan = plan(&[file], None);
    let mutants: Vec<(u32, &Mutant)> = plan
        .mutants
        .iter()
        .enumerate()
        .map(|(i, m)| (i as u32 + 1, m))
        .collect();
    assert!(mutants.len() >= 20, "{:#?}", plan.mutants);

    // The unmutated crate passes, and sizes the limit.
    let baseline_dir = root.path().join("baseline");
    write_crate(&baseline_dir, LIB);
    let baseline =
        build(&baseline_dir, &root.path().join("baseline-target")).expect("the crate builds");
    let started = Instant::now();
    assert_eq!(run(&baseline, 0, Duration::from_secs(60)), Status::Survived);
    let limit = limit_from(started.elapsed());

    // Schemata: build once; a build error takes the mutants it is blamed on out of the schema.
    let schema_started = Instant::now();
    let schema_dir = root.path().join("schema");
    let schema_target = root.path().join("schema-target");
    let mut in_schema: BTreeSet<u32> = mutants.iter().map(|(n, _)| *n).collect();
    let mut fallback: BTreeMap<u32, String> = BTreeMap::new();
    let mut builds = 0;
    let executables = loop {
        let entries: Vec<schema::Entry<'_>> = mutants
            .iter()
            .filter(|(n, _)| in_schema.contains(n))
            .map(|(number, m)| schema::Entry {
                number: *number,
                edit: &m.edit,
            })
            .collect();
        let rewritten = schema::rewrite(LIB, &entries);
        for (number, why) in &rewritten.fallback {
            in_schema.remove(number);
            fallback.insert(*number, why.clone());
        }
        write_crate(&schema_dir, &rewritten.text);
        builds += 1;
        match build(&schema_dir, &schema_target) {
            Ok(executables) => break executables,
            Err(json) => {
                assert!(builds < 6, "the schema never built:\n{json}");
                let spans = schema::error_spans(&json);
                let schemas = [("src/lib.rs".to_owned(), rewritten)].into();
                let blamed = schema::blame(&spans, &schemas)
                    .unwrap_or_else(|| panic!("an error no mutant is blamed for:\n{json}"));
                assert!(!blamed.is_empty(), "{json}");
                for number in blamed {
                    in_schema.remove(&number);
                    fallback.insert(number, "did not compile in the schema".into());
                }
            }
        }
    };
    let mut schemata: BTreeMap<u32, Status> = in_schema
        .iter()
        .map(|number| (*number, run(&executables, *number, limit)))
        .collect();
    let fallback_mutants: Vec<(u32, &Mutant)> = mutants
        .iter()
        .filter(|(n, _)| fallback.contains_key(n))
        .copied()
        .collect();
    schemata.extend(per_mutant_builds(
        &root.path().join("fallback"),
        &fallback_mutants,
        limit,
    ));
    let schema_wall = schema_started.elapsed();

    let single_started = Instant::now();
    let single = per_mutant_builds(root.path(), &mutants, limit);
    let single_wall = single_started.elapsed();

    eprintln!(
        "{} mutants: schemata {:.1}s ({} schema builds, {} held, {} fallback: {:?}); a build per mutant {:.1}s",
        mutants.len(),
        schema_wall.as_secs_f64(),
        builds,
        in_schema.len(),
        fallback.len(),
        fallback,
        single_wall.as_secs_f64()
    );
    for (number, mutant) in &mutants {
        assert_eq!(
            schemata.get(number),
            single.get(number),
            "mutant {number} {} `{}`",
            mutant.label(),
            &LIB[mutant.edit.start..mutant.edit.end]
        );
    }
    let count = |status: Status| single.values().filter(|s| **s == status).count();
    // The weak `even` test lets a mutant survive; `i += 1` -> `i *= 1` never ends; `Meters`
    // has no `Default`; the `const fn`'s mutants cannot be held by a runtime switch.
    assert!(count(Status::Killed) > 0 && count(Status::Survived) > 0);
    assert!(count(Status::Timeout) > 0, "{single:?}");
    assert!(count(Status::CompileError) > 0, "{single:?}");
    for context in ["`const fn`", "`const` item", "`static` item", "array type"] {
        assert!(
            fallback.values().any(|why| why.contains(context)),
            "{context}: {fallback:?}"
        );
    }
    assert!(in_schema.len() > fallback.len(), "{fallback:?}");
}
