//! Mutant jobs' trees, reused instead of written afresh. Hundreds of mutant jobs run on one
//! tree, and writing each job's copy file by file (then deleting it) was most of the worker's
//! own CPU on a 100-file project: a file system allocating inodes while thousands were just
//! freed searches past each of them. A directory a finished mutant job leaves is parked
//! instead, and the next job of the same tree gets it back *reset*: every entry compared with
//! a pristine copy written once per tree, anything the job added removed, anything it changed
//! or replaced written again. The job then sees exactly the files a fresh copy holds.
//!
//! The reset never writes into a file the guest could have aimed elsewhere: a changed file, a
//! file with other hard links, a link or directory where a file was is removed and written new,
//! and links are never followed. Any error drops the parked directory and the job gets a fresh
//! copy from the wrapped source.

use assay_common::TreeId;
use assay_transport::tree::{TreeError, TreeSource};
use async_trait::async_trait;
use std::collections::BTreeSet;
use std::fs;
use std::io;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// Trees with a pristine copy kept: the oldest is dropped beyond this.
const PRISTINE_TREES: usize = 2;

/// Wraps a tree source; see the module documentation.
pub struct ReusedTrees {
    inner: Arc<dyn TreeSource>,
    root: PathBuf,
    /// Directories parked at most: about two per slot.
    limit: usize,
    state: Mutex<State>,
    /// One pristine copy is written at a time.
    writing: tokio::sync::Mutex<()>,
}

#[derive(Default)]
struct State {
    /// Oldest first.
    pristine: Vec<(TreeId, PathBuf)>,
    parked: Vec<(TreeId, PathBuf)>,
    made: u64,
}

impl State {
    fn fresh_path(&mut self, root: &Path, kind: &str) -> PathBuf {
        self.made += 1;
        root.join(format!("{kind}-{}", self.made))
    }

    fn pristine_of(&self, tree: &TreeId) -> Option<PathBuf> {
        self.pristine
            .iter()
            .find(|(t, _)| t == tree)
            .map(|(_, p)| p.clone())
    }
}

impl ReusedTrees {
    /// Parks directories under `root` (created when needed; on the scratch directories' file
    /// system, so that a directory moves by renaming).
    pub fn new(inner: Arc<dyn TreeSource>, root: PathBuf, slots: usize) -> Self {
        Self {
            inner,
            root,
            limit: 2 * slots.max(1),
            state: Mutex::default(),
            writing: tokio::sync::Mutex::new(()),
        }
    }

    async fn pristine(&self, tree: &TreeId) -> Option<PathBuf> {
        if let Some(path) = self.state.lock().ok()?.pristine_of(tree) {
            return Some(path);
        }
        let _writing = self.writing.lock().await;
        if let Some(path) = self.state.lock().ok()?.pristine_of(tree) {
            return Some(path);
        }
        let path = self.state.lock().ok()?.fresh_path(&self.root, "pristine");
        tokio::fs::create_dir_all(&path).await.ok()?;
        if let Err(why) = self.inner.materialize(tree, &path).await {
            tracing::debug!(why = %assay_transport::error_chain::error_chain(&why), "no pristine copy to reuse trees from");
            remove_quietly(path).await;
            return None;
        }
        let dropped = {
            let mut state = self.state.lock().ok()?;
            state.pristine.push((tree.clone(), path.clone()));
            let excess = state.pristine.len().saturating_sub(PRISTINE_TREES);
            let dropped: Vec<(TreeId, PathBuf)> = state.pristine.drain(..excess).collect();
            let gone: BTreeSet<&TreeId> = dropped.iter().map(|(t, _)| t).collect();
            let (stale, kept): (Vec<_>, Vec<_>) =
                state.parked.drain(..).partition(|(t, _)| gone.contains(t));
            state.parked = kept;
            dropped.into_iter().chain(stale).collect::<Vec<_>>()
        };
        for (_, old) in dropped {
            remove_quietly(old).await;
        }
        Some(path)
    }

    fn take_parked(&self, tree: &TreeId) -> Option<PathBuf> {
        let mut state = self.state.lock().ok()?;
        let at = state.parked.iter().position(|(t, _)| t == tree)?;
        Some(state.parked.swap_remove(at).1)
    }
}

#[async_trait]
impl TreeSource for ReusedTrees {
    async fn materialize(&self, tree: &TreeId, dest: &Path) -> Result<(), TreeError> {
        if let (Some(parked), Some(pristine)) = (self.take_parked(tree), self.pristine(tree).await)
        {
            let (to, from) = (parked.clone(), pristine);
            let reset = tokio::task::spawn_blocking(move || reset(&from, &to)).await;
            match reset {
                Ok(Ok(())) if fs::rename(&parked, dest).is_ok() => return Ok(()),
                Ok(Err(why)) => tracing::debug!(%why, "a parked tree could not be reset"),
                _ => {}
            }
            remove_quietly(parked).await;
        }
        self.inner.materialize(tree, dest).await
    }

    async fn release(&self, tree: &TreeId, dir: &Path) {
        if self.pristine(tree).await.is_none() {
            return;
        }
        let Ok(mut state) = self.state.lock() else {
            return;
        };
        if state.parked.len() >= self.limit {
            return;
        }
        let parked = state.fresh_path(&self.root, "parked");
        if fs::create_dir_all(&self.root).is_ok() && fs::rename(dir, &parked).is_ok() {
            state.parked.push((tree.clone(), parked));
        }
    }
}

async fn remove_quietly(path: PathBuf) {
    let _ = tokio::fs::remove_dir_all(path).await;
}

/// Makes `target` hold exactly what `pristine` holds: the same names, kinds, bytes, link
/// targets and permission bits, nothing more.
fn reset(pristine: &Path, target: &Path) -> io::Result<()> {
    let mut wanted = BTreeSet::new();
    for entry in fs::read_dir(pristine)? {
        let entry = entry?;
        let name = entry.file_name();
        let (from, to) = (entry.path(), target.join(&name));
        wanted.insert(name);
        let want = fs::symlink_metadata(&from)?;
        let have = fs::symlink_metadata(&to).ok();
        let mode = |m: &fs::Metadata| m.permissions().mode() & 0o7777;
        if want.is_dir() {
            if !have.as_ref().is_some_and(|h| h.is_dir()) {
                remove(&to)?;
                fs::create_dir(&to)?;
            }
            reset(&from, &to)?;
            if have.is_none_or(|h| mode(&h) != mode(&want)) {
                fs::set_permissions(&to, want.permissions())?;
            }
        } else if want.file_type().is_symlink() {
            let link = fs::read_link(&from)?;
            let same =
                have.is_some_and(|h| h.file_type().is_symlink()) && fs::read_link(&to)? == link;
            if !same {
                remove(&to)?;
                std::os::unix::fs::symlink(link, &to)?;
            }
        } else {
            let bytes = fs::read(&from)?;
            let same = have.as_ref().is_some_and(|h| {
                h.is_file() && h.nlink() == 1 && mode(h) == mode(&want) && h.len() == want.len()
            }) && fs::read(&to)? == bytes;
            if !same {
                remove(&to)?;
                fs::write(&to, &bytes)?;
                fs::set_permissions(&to, want.permissions())?;
            }
        }
    }
    for entry in fs::read_dir(target)? {
        let entry = entry?;
        if !wanted.contains(&entry.file_name()) {
            remove(&entry.path())?;
        }
    }
    Ok(())
}

/// Removes whatever is at `path` without following a link; nothing there is fine.
fn remove(path: &Path) -> io::Result<()> {
    match fs::symlink_metadata(path) {
        Ok(m) if m.is_dir() => fs::remove_dir_all(path),
        Ok(_) => fs::remove_file(path),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}
