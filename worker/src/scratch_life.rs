//! One life of a worker on its scratch root: a directory of its own that holds every job's
//! scratch, locked for as long as the process lives, and the sweep of earlier lives whose
//! lock nobody holds any more (a worker killed by SIGKILL, a crash, a lost node). Several
//! workers may share one root (the default is `$TMPDIR/assay-worker`): each sweeps only what
//! a dead process left, never a live worker's jobs.
//!
//! On the root, a life is `life-PID-NANOS/` beside `life-PID-NANOS.lock`. The lock file is
//! locked before it gets its name (made as `.life-PID-NANOS.lock.new`, locked, then renamed),
//! so a lock file in the root is locked from the moment it can be seen; the directory is made
//! after it. A sweep removes a life whose lock it can take, then the lock file; a `life-*`
//! directory with no lock file is a sweep cut short, and goes too.

use std::fs::{self, File, OpenOptions, TryLockError};
use std::io;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

const PREFIX: &str = "life-";
const LOCK: &str = ".lock";
/// A lock file before its rename: the creator holds its lock, or died holding it.
const NEW_LOCK: &str = ".lock.new";

/// This process's directory on the scratch root, locked until it is dropped.
#[derive(Debug)]
pub struct ScratchLife {
    dir: PathBuf,
    lock_path: PathBuf,
    // Held, never read: dropping it (or the process dying) releases the life.
    _lock: File,
}

/// What [`ScratchLife::begin`]'s sweep removed.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Swept {
    /// Earlier lives' directories removed, by name.
    pub lives: Vec<String>,
    /// Entries it could not remove, with why (left for the next sweep).
    pub failed: Vec<(String, String)>,
}

/// A scratch root that could not be prepared.
#[derive(Debug, thiserror::Error)]
#[error("cannot prepare the worker's scratch directory {path}")]
pub struct ScratchError {
    /// What could not be made or locked.
    pub path: PathBuf,
    /// The underlying error.
    #[source]
    pub source: io::Error,
}

fn at(path: &Path) -> impl FnOnce(io::Error) -> ScratchError + '_ {
    move |source| ScratchError {
        path: path.to_owned(),
        source,
    }
}

impl ScratchLife {
    /// Makes `root` if needed, sweeps the lives no process holds, then starts this one.
    pub fn begin(root: &Path) -> Result<(Self, Swept), ScratchError> {
        fs::create_dir_all(root).map_err(at(root))?;
        let swept = sweep(root);
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let name = format!("{PREFIX}{}-{nanos}", std::process::id());
        let new_lock = root.join(format!(".{name}{NEW_LOCK}"));
        let lock_path = root.join(format!("{name}{LOCK}"));
        let lock = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&new_lock)
            .map_err(at(&new_lock))?;
        lock.lock().map_err(at(&new_lock))?;
        fs::rename(&new_lock, &lock_path).map_err(at(&lock_path))?;
        let dir = root.join(&name);
        fs::create_dir(&dir).map_err(at(&dir))?;
        Ok((
            Self {
                dir,
                lock_path,
                _lock: lock,
            },
            swept,
        ))
    }

    /// The directory this life's jobs make their scratch in.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

impl Drop for ScratchLife {
    /// A clean end leaves nothing behind: whatever its jobs left goes, then the lock file.
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.dir);
        let _ = fs::remove_file(&self.lock_path);
    }
}

/// Whether nobody holds the lock of the file at `path` (taking it), or it is gone.
fn unheld(path: &Path) -> io::Result<Option<File>> {
    let file = match File::open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    match file.try_lock() {
        Ok(()) => Ok(Some(file)),
        Err(TryLockError::WouldBlock) => Err(io::Error::from(io::ErrorKind::WouldBlock)),
        Err(TryLockError::Error(e)) => Err(e),
    }
}

/// Removes every earlier life on `root` that no process holds.
fn sweep(root: &Path) -> Swept {
    let mut swept = Swept::default();
    let Ok(entries) = fs::read_dir(root) else {
        return swept;
    };
    let names: Vec<String> = entries
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .collect();
    let has = |name: &str| names.iter().any(|n| n == name);
    for name in &names {
        // A creator that died between making its lock file and naming it.
        if let Some(life) = name
            .strip_prefix('.')
            .and_then(|n| n.strip_suffix(NEW_LOCK))
            .filter(|n| n.starts_with(PREFIX))
        {
            let path = root.join(name);
            if let Ok(Some(_held)) = unheld(&path) {
                remove(&mut swept, &path, life, false);
            }
            continue;
        }
        let Some(life) = name.strip_prefix(PREFIX).map(|_| name.as_str()) else {
            continue;
        };
        if let Some(base) = life.strip_suffix(LOCK) {
            let lock_path = root.join(name);
            // Held while its directory goes, so no second sweep races this one.
            if let Ok(Some(_held)) = unheld(&lock_path) {
                let dir = root.join(base);
                if remove(&mut swept, &dir, base, true) {
                    remove(&mut swept, &lock_path, name, false);
                }
            }
        } else if !has(&format!("{life}{LOCK}")) {
            // Its lock is gone: a sweep that stopped between the directory and the lock.
            remove(&mut swept, &root.join(life), life, true);
        }
    }
    swept
}

/// Removes `path` (a directory when `dir`), recording it; whether it is gone.
fn remove(swept: &mut Swept, path: &Path, name: &str, dir: bool) -> bool {
    let removed = if dir {
        fs::remove_dir_all(path)
    } else {
        fs::remove_file(path)
    };
    match removed {
        Ok(()) => {
            if dir {
                swept.lives.push(name.to_owned());
            }
            true
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => true,
        Err(e) => {
            swept.failed.push((name.to_owned(), e.to_string()));
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(root: &Path) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(root)
            .map(|entries| {
                entries
                    .flatten()
                    .filter_map(|e| e.file_name().into_string().ok())
                    .collect()
            })
            .unwrap_or_default();
        names.sort();
        names
    }

    /// An earlier life whose process died: its lock file, unlocked, and its proof directory.
    fn dead_life(root: &Path, name: &str) {
        fs::create_dir_all(root.join(name).join("proof-4f1c/job-2/tree")).unwrap();
        fs::write(
            root.join(name).join("proof-4f1c/job-2/tree/pager.py"),
            "x = 1\n",
        )
        .unwrap();
        fs::write(root.join(format!("{name}{LOCK}")), "").unwrap();
    }

    #[test]
    fn a_dead_lives_directory_goes_and_a_live_ones_stays() {
        let root = tempfile::tempdir().unwrap();
        let root = root.path();
        dead_life(root, "life-4242-1");
        let (live, swept) = ScratchLife::begin(root).unwrap();
        assert_eq!(swept.lives, vec!["life-4242-1".to_owned()]);
        assert!(swept.failed.is_empty(), "{:?}", swept.failed);
        fs::write(live.dir().join("job-scratch"), "running").unwrap();

        // A second worker on the same root leaves the first one's life alone.
        let (second, swept) = ScratchLife::begin(root).unwrap();
        assert!(swept.lives.is_empty(), "{swept:?}");
        assert!(live.dir().join("job-scratch").exists());
        assert_ne!(live.dir(), second.dir());

        let first_dir = live.dir().to_owned();
        drop(live);
        assert!(!first_dir.exists(), "a clean end removes its own life");
        drop(second);
        assert!(names(root).is_empty(), "{:?}", names(root));
    }

    #[test]
    fn leftovers_of_a_cut_short_sweep_or_start_go_and_other_entries_stay() {
        let root = tempfile::tempdir().unwrap();
        let root = root.path();
        // A directory whose lock file a cut-short sweep already removed.
        fs::create_dir_all(root.join("life-7-7/proof-a")).unwrap();
        // A creator that died before naming its lock file.
        fs::write(root.join(".life-8-8.lock.new"), "").unwrap();
        // What is not a life (an older worker's proof directory, a user's file) is not ours.
        fs::create_dir_all(root.join("proof-older-layout/job-1")).unwrap();
        fs::write(root.join("notes.txt"), "keep").unwrap();
        let (life, swept) = ScratchLife::begin(root).unwrap();
        assert_eq!(swept.lives, vec!["life-7-7".to_owned()]);
        let mut left = names(root);
        let own = life.dir().file_name().unwrap().to_str().unwrap().to_owned();
        left.retain(|n| !n.starts_with(&own));
        assert_eq!(left, vec!["notes.txt", "proof-older-layout"]);
    }

    #[test]
    fn a_lock_held_elsewhere_keeps_its_life_even_before_its_directory_exists() {
        let root = tempfile::tempdir().unwrap();
        let root = root.path();
        // Another worker mid-start: its lock named and held, its directory not made yet.
        let held = File::create(root.join("life-9-9.lock")).unwrap();
        held.lock().unwrap();
        let pending = File::create(root.join(".life-10-10.lock.new")).unwrap();
        pending.lock().unwrap();
        let (_life, swept) = ScratchLife::begin(root).unwrap();
        assert!(swept.lives.is_empty(), "{swept:?}");
        assert!(root.join("life-9-9.lock").exists());
        assert!(root.join(".life-10-10.lock.new").exists());
    }
}
