//! Mutant jobs' scratch directories (`private/` and `logs/`; the tree is `reused_trees`'),
//! parked when a job ends and given to the next mutant job instead of made afresh. Hundreds of
//! mutant jobs a minute each made and deleted five directories and two log files: on ext4 an
//! inode allocated while thousands were deleted in the last seconds searches past each of them,
//! which cost more of the worker's CPU than anything it did for the job.
//!
//! A directory is cleaned when it is parked, after every process of its job has ended: in
//! `private/` only the empty `home/` and `tmp/` stay, and `logs/` keeps its two log files,
//! emptied. Nothing is followed: what the guest left there (a link where `home` was, a file in
//! `tmp/`) is removed as itself. The parking place is outside every proof directory, where no
//! job or warm server can reach it; what an earlier process parked there is removed when this
//! one first parks (a restarted fleet worker leaves nothing behind).

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// Directories parked per scratch root: about two per slot of a large worker.
const PARKED_AT_MOST: usize = 8;
/// What stays in `private/` (emptied), and in `logs/` (emptied).
const PRIVATE_DIRS: [&str; 2] = ["home", "tmp"];
const LOG_FILES: [&str; 2] = ["stdout.log", "stderr.log"];

#[derive(Default)]
struct Parked {
    dirs: Vec<PathBuf>,
    made: u64,
}

/// Parked directories by scratch root (one per worker context, several in tests).
static PARKED: Mutex<BTreeMap<PathBuf, Parked>> = Mutex::new(BTreeMap::new());

/// Moves a parked scratch directory of `root` to `scratch` (which must not exist yet); false
/// when none is parked or the move fails, and the job makes its own.
pub(super) fn take(root: &Path, scratch: &Path) -> bool {
    let Some(parked) = PARKED
        .lock()
        .ok()
        .and_then(|mut all| all.get_mut(root)?.dirs.pop())
    else {
        return false;
    };
    if fs::rename(&parked, scratch).is_ok() {
        return true;
    }
    let _ = fs::remove_dir_all(&parked);
    false
}

/// Cleans the finished job's `scratch` (its tree already gone) and parks it for the next
/// mutant job; false when it could not be, and the caller removes it.
pub(super) fn park(root: &Path, scratch: &Path) -> bool {
    if clean(scratch).is_err() {
        return false;
    }
    let Ok(mut all) = PARKED.lock() else {
        return false;
    };
    if !all.contains_key(root) {
        // What an earlier process of this scratch root parked is no one's now.
        let _ = fs::remove_dir_all(root.join(".scratch"));
    }
    let parked = all.entry(root.to_owned()).or_default();
    if parked.dirs.len() >= PARKED_AT_MOST {
        return false;
    }
    parked.made += 1;
    let place = root
        .join(".scratch")
        .join(format!("parked-{}", parked.made));
    let moved = place
        .parent()
        .is_some_and(|dir| fs::create_dir_all(dir).is_ok())
        && fs::rename(scratch, &place).is_ok();
    if moved {
        parked.dirs.push(place);
    }
    moved
}

/// Leaves in `scratch` exactly an empty `private/home`, `private/tmp` and two empty log files.
fn clean(scratch: &Path) -> io::Result<()> {
    for entry in fs::read_dir(scratch)? {
        let entry = entry?;
        let name = entry.file_name();
        if name != "private" && name != "logs" || !entry.file_type()?.is_dir() {
            remove(&entry.path())?;
        }
    }
    let private = scratch.join("private");
    let logs = scratch.join("logs");
    keep_only(&private, |name, kind| {
        PRIVATE_DIRS.contains(&name) && kind.is_dir()
    })?;
    for dir in PRIVATE_DIRS {
        let dir = private.join(dir);
        match fs::create_dir(&dir) {
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => keep_only(&dir, |_, _| false)?,
            other => other?,
        }
    }
    keep_only(&logs, |name, kind| {
        LOG_FILES.contains(&name) && kind.is_file()
    })?;
    for file in LOG_FILES {
        fs::File::create(logs.join(file))?;
    }
    Ok(())
}

/// Creates `dir` when missing and removes each entry `keep` does not accept (by name and
/// type, links never followed).
fn keep_only(dir: &Path, keep: impl Fn(&str, fs::FileType) -> bool) -> io::Result<()> {
    match fs::create_dir(dir) {
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        other => return other,
    }
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let kind = entry.file_type()?;
        if !entry
            .file_name()
            .to_str()
            .is_some_and(|name| keep(name, kind))
        {
            remove(&entry.path())?;
        }
    }
    Ok(())
}

/// Removes whatever is at `path` without following a link.
fn remove(path: &Path) -> io::Result<()> {
    match fs::symlink_metadata(path)?.is_dir() {
        true => fs::remove_dir_all(path),
        false => fs::remove_file(path),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_parked_directory_comes_back_with_nothing_its_last_job_left() {
        let root = tempfile::tempdir().expect("temp dir");
        let outside = root.path().join("outside");
        fs::create_dir_all(outside.join("kept")).expect("outside dir");
        fs::write(outside.join("kept/file"), "not the job's").expect("outside file");
        let stale = root.path().join(".scratch/parked-7/private");
        fs::create_dir_all(&stale).expect("an earlier process's parked directory");
        let first = root.path().join("proof/job-1");
        for dir in ["private/tmp/cache", "logs", "tree"] {
            fs::create_dir_all(first.join(dir)).expect("job dirs");
        }
        fs::write(first.join("private/report"), "<testsuites/>").expect("report");
        fs::write(first.join("private/tmp/cache/data"), "left").expect("temp file");
        fs::write(first.join("logs/stdout.log"), "output").expect("log");
        fs::write(first.join("logs/extra.log"), "extra").expect("extra log");
        // The guest made `home` a link out of its directory: it goes, and what it led to stays.
        std::os::unix::fs::symlink(&outside, first.join("private/home")).expect("link");

        assert!(park(root.path(), &first));
        assert!(!first.exists());
        assert!(
            !stale.exists(),
            "an earlier process's parked directory is removed"
        );
        let second = root.path().join("proof/job-2");
        assert!(take(root.path(), &second));
        let mut found: Vec<String> = walkdir(&second);
        found.sort();
        assert_eq!(
            found,
            [
                "logs/",
                "logs/stderr.log",
                "logs/stdout.log",
                "private/",
                "private/home/",
                "private/tmp/"
            ]
        );
        assert_eq!(fs::read(second.join("logs/stdout.log")).expect("log"), b"");
        assert_eq!(
            fs::read_to_string(outside.join("kept/file")).expect("outside file"),
            "not the job's"
        );
        assert!(
            !take(root.path(), &root.path().join("proof/job-3")),
            "one was parked"
        );
    }

    fn walkdir(dir: &Path) -> Vec<String> {
        let mut found = Vec::new();
        let mut todo = vec![dir.to_owned()];
        while let Some(at) = todo.pop() {
            for entry in fs::read_dir(&at).expect("read dir") {
                let entry = entry.expect("entry");
                let relative = entry.path().strip_prefix(dir).expect("inside").to_owned();
                let relative = relative.to_string_lossy().into_owned();
                if entry.file_type().expect("type").is_dir() {
                    found.push(format!("{relative}/"));
                    todo.push(entry.path());
                } else {
                    found.push(relative);
                }
            }
        }
        found
    }
}
