//! Mutant schemata on a real cargo build: a tiny crate built in the test, every mutant once
//! behind the runtime switch (one build, then one run of the built tests per mutant) and once
//! with a build of its own, and the two runs agree mutant by mutant, compile errors and a
//! hanging mutant included. The same comparison on a real crate is the benchmark
//! `bench/rust-schemata.sh` runs (an ignored test here, given the crate's directory).

use assay_engine::mutation::mutants::rust::{plan, schema};
use assay_engine::mutation::mutants::{ChangedFile, Mutant, apply_edit};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use std::{fs, io};

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
        // A crate's `#![deny(warnings)]` must not turn the schema's parentheses into errors;
        // both ways build with lints capped, as cargo-mutants does.
        .env("RUSTFLAGS", "--cap-lints=warn")
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

/// A crate under mutation: the directory it is copied from, and its product files' text by
/// path relative to it.
struct Project {
    dir: PathBuf,
    files: BTreeMap<String, String>,
}

fn copy_dir(from: &Path, to: &Path) -> io::Result<()> {
    fs::create_dir_all(to)?;
    for entry in fs::read_dir(from)? {
        let entry = entry?;
        let name = entry.file_name();
        if name == "target" || name == ".git" {
            continue;
        }
        if entry.file_type()?.is_dir() {
            copy_dir(&entry.path(), &to.join(&name))?;
        } else {
            fs::copy(entry.path(), to.join(&name))?;
        }
    }
    Ok(())
}

impl Project {
    /// The crate's product files: every `.rs` file under `src/`.
    fn open(dir: &Path) -> Self {
        fn walk(dir: &Path, base: &Path, files: &mut BTreeMap<String, String>) {
            for entry in fs::read_dir(dir).expect("read the crate") {
                let path = entry.expect("a directory entry").path();
                if path.is_dir() {
                    walk(&path, base, files);
                } else if path.extension().is_some_and(|e| e == "rs") {
                    let relative = path.strip_prefix(base).expect("inside the crate");
                    let text = fs::read_to_string(&path).expect("UTF-8 source");
                    files.insert(relative.to_string_lossy().replace('\\', "/"), text);
                }
            }
        }
        let mut files = BTreeMap::new();
        walk(&dir.join("src"), dir, &mut files);
        Self {
            dir: dir.to_path_buf(),
            files,
        }
    }

    /// A copy of the crate at `to`, with `files` written over its own.
    fn copy(&self, to: &Path, files: &BTreeMap<String, String>) {
        copy_dir(&self.dir, to).expect("copy the crate");
        for (path, text) in files {
            fs::write(to.join(path), text).expect("write a source file");
        }
    }
}

/// The limit a mutant's run may take: ten times the unmutated run, at least two seconds.
fn limit_from(baseline: Duration) -> Duration {
    (baseline * 10).max(Duration::from_secs(2))
}

/// Each mutant built on its own, then its tests run.
fn per_mutant_builds(
    project: &Project,
    root: &Path,
    mutants: &[(u32, &Mutant)],
    limit: Duration,
) -> BTreeMap<u32, Status> {
    let dir = root.join("single");
    let target = root.join("single-target");
    project.copy(&dir, &BTreeMap::new());
    let mut statuses = BTreeMap::new();
    for (number, mutant) in mutants {
        let path = mutant.path.as_str();
        let original = &project.files[path];
        let mutated = apply_edit(original.as_bytes(), &mutant.edit).expect("the edit fits");
        fs::write(dir.join(path), &mutated).expect("write the mutant");
        let status = match build(&dir, &target) {
            Err(_) => Status::CompileError,
            Ok(executables) => run(&executables, 0, limit),
        };
        fs::write(dir.join(path), original).expect("restore the file");
        statuses.insert(*number, status);
    }
    statuses
}

/// What the schemata run did.
struct Schemata {
    statuses: BTreeMap<u32, Status>,
    builds: usize,
    held: BTreeSet<u32>,
    fallback: BTreeMap<u32, String>,
    wall: Duration,
}

/// Every mutant behind the switch: build once, and again without the mutants a failed build
/// blames; then one run of the built tests per held mutant, a build each for the others.
fn schemata_run(
    project: &Project,
    root: &Path,
    mutants: &[(u32, &Mutant)],
    limit: Duration,
) -> Schemata {
    let started = Instant::now();
    let dir = root.join("schema");
    let target = root.join("schema-target");
    project.copy(&dir, &BTreeMap::new());
    let mut held: BTreeSet<u32> = mutants.iter().map(|(n, _)| *n).collect();
    let mut fallback: BTreeMap<u32, String> = BTreeMap::new();
    let mut builds = 0;
    let std = schema::Std::of_crate(project.files.values().map(String::as_str));
    let executables = loop {
        let mut schemas = BTreeMap::new();
        for (path, source) in &project.files {
            let entries: Vec<schema::Entry<'_>> = mutants
                .iter()
                .filter(|(n, m)| held.contains(n) && m.path.as_str() == path)
                .map(|(number, m)| schema::Entry {
                    number: *number,
                    edit: &m.edit,
                })
                .collect();
            let rewritten = schema::rewrite(source, &entries, std);
            for (number, why) in &rewritten.fallback {
                held.remove(number);
                fallback.insert(*number, why.clone());
            }
            fs::write(dir.join(path), &rewritten.text).expect("write the schema");
            schemas.insert(path.clone(), rewritten);
        }
        builds += 1;
        match build(&dir, &target) {
            Ok(executables) => break executables,
            Err(json) => {
                assert!(builds < 8, "the schema never built:\n{json}");
                let spans = schema::error_spans(&json);
                let blamed = schema::blame(&spans, &schemas)
                    .unwrap_or_else(|| panic!("an error no mutant is blamed for:\n{json}"));
                assert!(!blamed.is_empty(), "{json}");
                for number in blamed {
                    held.remove(&number);
                    fallback.insert(number, "did not compile in the schema".into());
                }
            }
        }
    };
    let mut statuses: BTreeMap<u32, Status> = held
        .iter()
        .map(|number| (*number, run(&executables, *number, limit)))
        .collect();
    let left: Vec<(u32, &Mutant)> = mutants
        .iter()
        .filter(|(n, _)| fallback.contains_key(n))
        .copied()
        .collect();
    statuses.extend(per_mutant_builds(
        project,
        &root.join("fallback"),
        &left,
        limit,
    ));
    Schemata {
        statuses,
        builds,
        held,
        fallback,
        wall: started.elapsed(),
    }
}

/// Both runs of every mutant of `project`, after its unmutated tests passed.
fn compare(project: &Project, root: &Path, single_too: bool) -> Comparison {
    let files: Vec<ChangedFile> = project
        .files
        .iter()
        .map(|(path, text)| ChangedFile {
            path: path.clone(),
            bytes: text.as_bytes().to_vec(),
            changed_lines: (1..=text.lines().count() as u32).collect(),
        })
        .collect();
    let plan = plan(&files, None);
    let mutants: Vec<(u32, Mutant)> = plan
        .mutants
        .into_iter()
        .enumerate()
        .map(|(i, m)| (i as u32 + 1, m))
        .collect();
    let borrowed: Vec<(u32, &Mutant)> = mutants.iter().map(|(n, m)| (*n, m)).collect();

    // The unmutated crate passes, and sizes the limit.
    let baseline_dir = root.join("baseline");
    project.copy(&baseline_dir, &BTreeMap::new());
    let baseline = build(&baseline_dir, &root.join("baseline-target")).expect("the crate builds");
    let started = Instant::now();
    assert_eq!(
        run(&baseline, 0, Duration::from_secs(120)),
        Status::Survived
    );
    let limit = limit_from(started.elapsed());

    let schemata = schemata_run(project, root, &borrowed, limit);
    let single_started = Instant::now();
    let single = if single_too {
        per_mutant_builds(project, root, &borrowed, limit)
    } else {
        BTreeMap::new()
    };
    Comparison {
        mutants,
        schemata,
        single,
        single_wall: single_started.elapsed(),
    }
}

struct Comparison {
    mutants: Vec<(u32, Mutant)>,
    schemata: Schemata,
    single: BTreeMap<u32, Status>,
    single_wall: Duration,
}

impl Comparison {
    fn summary(&self) -> String {
        let n = self.mutants.len() as f64;
        let per_minute = |wall: Duration| n / wall.as_secs_f64().max(f64::EPSILON) * 60.0;
        let agree = self
            .mutants
            .iter()
            .filter(|(number, _)| {
                self.single.contains_key(number)
                    && self.single.get(number) == self.schemata.statuses.get(number)
            })
            .count();
        format!(
            "{} mutants: schemata {:.1}s ({:.0}/min; {} schema builds, {} held, {} built alone); a build per mutant {:.1}s ({:.0}/min); agreement {agree}/{}",
            self.mutants.len(),
            self.schemata.wall.as_secs_f64(),
            per_minute(self.schemata.wall),
            self.schemata.builds,
            self.schemata.held.len(),
            self.schemata.fallback.len(),
            self.single_wall.as_secs_f64(),
            per_minute(self.single_wall),
            self.single.len(),
        )
    }
}

#[test]
fn the_schemata_run_equals_a_build_per_mutant_mutant_by_mutant() {
    let root = tempfile::tempdir().expect("temp dir");
    let crate_dir = root.path().join("tiny");
    fs::create_dir_all(crate_dir.join("src")).expect("src dir");
    fs::write(crate_dir.join("Cargo.toml"), MANIFEST).expect("manifest");
    fs::write(crate_dir.join("src/lib.rs"), LIB).expect("lib");
    let project = Project::open(&crate_dir);
    let comparison = compare(&project, root.path(), true);
    eprintln!("{}", comparison.summary());
    assert!(
        comparison.mutants.len() >= 20,
        "{}",
        comparison.mutants.len()
    );
    for (number, mutant) in &comparison.mutants {
        assert_eq!(
            comparison.schemata.statuses.get(number),
            comparison.single.get(number),
            "mutant {number} {} `{}`",
            mutant.label(),
            &LIB[mutant.edit.start..mutant.edit.end]
        );
    }
    let single = &comparison.single;
    let fallback = &comparison.schemata.fallback;
    let count = |status: Status| single.values().filter(|s| **s == status).count();
    // The weak `even` test lets a mutant survive; `i += 1` -> `i *= 1` never ends; `Meters`
    // has no `Default`; the const contexts' mutants cannot be held by a runtime switch.
    assert!(count(Status::Killed) > 0 && count(Status::Survived) > 0);
    assert!(count(Status::Timeout) > 0, "{single:?}");
    assert!(count(Status::CompileError) > 0, "{single:?}");
    for context in ["`const fn`", "`const` item", "`static` item", "array type"] {
        assert!(
            fallback.values().any(|why| why.contains(context)),
            "{context}: {fallback:?}"
        );
    }
    assert!(
        comparison.schemata.held.len() > fallback.len(),
        "{fallback:?}"
    );
}

/// Source that tries to break the rewrite: lints denied, a trait's default method, `?`, an
/// `async fn`, a generic return with no `Default`, a returned reference, closures, a guard
/// holding sites of its own on a deleted arm, labels, a const table.
const HOSTILE: &str = r#"#![deny(warnings)]
use std::collections::HashMap;

pub trait Shape {
    fn area(&self) -> f64;
    fn doubled(&self) -> f64 {
        self.area() * 2.0
    }
}

pub struct Square(pub f64);

impl Shape for Square {
    fn area(&self) -> f64 {
        self.0 * self.0
    }
}

pub fn parse(s: &str) -> Result<u32, std::num::ParseIntError> {
    let n: u32 = s.trim().parse()?;
    Ok(n + 1)
}

pub fn pick<T: Clone>(items: &[T], i: usize) -> T {
    items[i % items.len()].clone()
}

pub async fn later(x: u32) -> u32 {
    x - 1
}

pub fn count(words: &[&str]) -> HashMap<String, usize> {
    let mut m = HashMap::new();
    for w in words {
        *m.entry(w.to_string()).or_insert(0) += 1;
    }
    m
}

pub fn classify(n: i32) -> &'static str {
    let f = |x: i32| x > 10 && x < 100;
    match n {
        x if f(x) && x != 50 => "mid",
        0 => "zero",
        _ => "other",
    }
}

pub fn sum_to(n: u64) -> u64 {
    let mut total = 0;
    'outer: for i in 0..n {
        if i > 1000 {
            break 'outer;
        }
        total += i;
    }
    total
}

pub fn first_even(v: &[i32]) -> Option<&i32> {
    v.iter().find(|x| *x % 2 == 0)
}

const TABLE: [u8; 3] = [1, 2, 1 + 2];

pub fn table_sum() -> u32 {
    TABLE.iter().map(|&b| b as u32).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes() {
        assert_eq!(Square(3.0).doubled(), 18.0);
    }

    #[test]
    fn parses() {
        assert_eq!(parse(" 41 "), Ok(42));
        assert!(parse("x").is_err());
    }

    #[test]
    fn picks_and_counts() {
        assert_eq!(pick(&[1, 2, 3], 4), 2);
        assert_eq!(count(&["a", "b", "a"])["a"], 2);
    }

    #[test]
    fn classifies() {
        assert_eq!(classify(20), "mid");
        assert_eq!(classify(50), "other");
        assert_eq!(classify(0), "zero");
    }

    #[test]
    fn sums() {
        assert_eq!(sum_to(4), 6);
        assert_eq!(first_even(&[1, 4]), Some(&4));
        assert_eq!(table_sum(), 6);
    }
}
"#;

#[test]
fn hostile_source_builds_as_a_schema_and_agrees_with_a_build_per_mutant() {
    let root = tempfile::tempdir().expect("temp dir");
    let crate_dir = root.path().join("hostile");
    fs::create_dir_all(crate_dir.join("src")).expect("src dir");
    fs::write(
        crate_dir.join("Cargo.toml"),
        MANIFEST.replace("tiny", "hostile"),
    )
    .expect("manifest");
    fs::write(crate_dir.join("src/lib.rs"), HOSTILE).expect("lib");
    let comparison = compare(&Project::open(&crate_dir), root.path(), true);
    eprintln!("{}", comparison.summary());
    for (number, mutant) in &comparison.mutants {
        assert_eq!(
            comparison.schemata.statuses.get(number),
            comparison.single.get(number),
            "mutant {number} {}",
            mutant.label(),
        );
    }
    let fallback = &comparison.schemata.fallback;
    let label_of = |number: &u32| {
        comparison.mutants[*number as usize - 1]
            .1
            .description
            .clone()
    };
    let alone: Vec<String> = fallback.keys().map(label_of).collect();
    // `T` has no `Default`, and a reference to a temporary cannot be returned: both fail
    // to build in the schema, and alone, as compile errors.
    for expected in [
        "`fn pick` body -> `Default::default()`",
        "`fn first_even` body -> `Some(&Default::default())`",
    ] {
        assert!(
            alone.iter().any(|d| d == expected),
            "{expected} not in {alone:?}"
        );
    }
    assert!(
        fallback.values().any(|why| why.contains("`const` item")),
        "{fallback:?}"
    );
    // The deleted guarded arm and the sites inside its guard are all held.
    let held: Vec<String> = comparison.schemata.held.iter().map(label_of).collect();
    for expected in [
        "match arm `x if f(x) && x != 50 => …` deleted",
        "`!=` -> `==`",
        "`&&` -> `||`",
    ] {
        assert!(
            held.iter().any(|d| d == expected),
            "{expected} not in {held:?}"
        );
    }
}

/// The benchmark's half: the crate at `ASSAY_SCHEMATA_CRATE` (its `src/` mutated), both runs
/// unless `ASSAY_SCHEMATA_SINGLE=0`; prints the figures and requires 95 % agreement.
#[test]
#[ignore = "a benchmark: bench/rust-schemata.sh runs it on pinned crates"]
fn schemata_against_a_build_per_mutant_on_a_real_crate() {
    let dir = PathBuf::from(std::env::var("ASSAY_SCHEMATA_CRATE").expect("ASSAY_SCHEMATA_CRATE"));
    let single_too = std::env::var("ASSAY_SCHEMATA_SINGLE").map_or(true, |v| v != "0");
    let root = tempfile::tempdir().expect("temp dir");
    let project = Project::open(&dir);
    let comparison = compare(&project, root.path(), single_too);
    println!("{}: {}", dir.display(), comparison.summary());
    let fallback_reasons: BTreeMap<&str, usize> =
        comparison
            .schemata
            .fallback
            .values()
            .fold(BTreeMap::new(), |mut counts, why| {
                *counts.entry(why.as_str()).or_default() += 1;
                counts
            });
    println!("built alone: {fallback_reasons:?}");
    for (number, mutant) in &comparison.mutants {
        let (a, b) = (
            comparison.schemata.statuses.get(number),
            comparison.single.get(number),
        );
        if single_too && a != b {
            println!("differs: {} schemata {a:?} single {b:?}", mutant.label());
        }
    }
}
