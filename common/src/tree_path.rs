//! Paths confined to a tree: relative, `/`-separated, with no component that could climb out
//! of the tree or alias another file. Report paths and manifest case paths go through here, so
//! a project's configuration can never point a worker at an ambient host path.

use serde::{Deserialize, Serialize};
use std::fmt;

/// A validated tree-relative path (`target/surefire-reports/TEST-x.xml`, `integer/add.protos`).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct TreePath(String);

/// Why a path is not confined to a tree; each variant carries the path as given.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TreePathError {
    /// The path is the empty string.
    #[error("path is empty")]
    Empty,
    /// The path starts at `/` or a drive (`C:`).
    #[error("path {0:?} is absolute (hint: give it relative to the repository root)")]
    Absolute(String),
    /// The path holds a `\`, a separator on some hosts.
    #[error("path {0:?} contains a backslash (hint: separate directories with `/`)")]
    Backslash(String),
    /// The path holds a NUL byte, which ends it early for the OS.
    #[error("path {0:?} contains a NUL byte")]
    Nul(String),
    /// The path has `//` or a trailing `/`.
    #[error("path {0:?} has an empty component")]
    EmptyComponent(String),
    /// The path has a `.` or `..` component.
    #[error("path {path:?} has a {component:?} component, which could leave the tree")]
    DotComponent {
        /// The path as given.
        path: String,
        /// The component refused (`.` or `..`).
        component: String,
    },
}

impl TreePath {
    /// `path` as a tree path, refused unless it is relative, `/`-separated and confined.
    pub fn new(path: &str) -> Result<Self, TreePathError> {
        if path.is_empty() {
            return Err(TreePathError::Empty);
        }
        if path.contains('\0') {
            return Err(TreePathError::Nul(path.to_owned()));
        }
        if path.contains('\\') {
            return Err(TreePathError::Backslash(path.to_owned()));
        }
        // `C:` style drive prefixes are absolute on the hosts that honour them.
        let drive = path.len() >= 2 && path.as_bytes()[1] == b':';
        if path.starts_with('/') || drive {
            return Err(TreePathError::Absolute(path.to_owned()));
        }
        for component in path.split('/') {
            match component {
                "" => return Err(TreePathError::EmptyComponent(path.to_owned())),
                "." | ".." => {
                    return Err(TreePathError::DotComponent {
                        path: path.to_owned(),
                        component: component.to_owned(),
                    });
                }
                _ => {}
            }
        }
        Ok(Self(path.to_owned()))
    }

    /// The path as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for TreePath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl TryFrom<String> for TreePath {
    type Error = TreePathError;

    fn try_from(path: String) -> Result<Self, Self::Error> {
        Self::new(&path)
    }
}

impl From<TreePath> for String {
    fn from(path: TreePath) -> Self {
        path.0
    }
}

/// A validated directory of a tree: the root (`""`) or a confined [`TreePath`]. A manifest
/// corpus travels as one, so a job can never name a directory outside its tree.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct TreeDir(String);

impl TreeDir {
    /// The tree's root directory.
    pub fn root() -> Self {
        Self(String::new())
    }

    /// `dir` as a tree directory: `""` is the root, anything else must be a [`TreePath`].
    pub fn new(dir: &str) -> Result<Self, TreePathError> {
        if dir.is_empty() {
            return Ok(Self::root());
        }
        TreePath::new(dir).map(|path| Self(path.0))
    }

    /// Whether this is the tree's root directory.
    pub fn is_root(&self) -> bool {
        self.0.is_empty()
    }

    /// The directory as text; `""` for the root.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for TreeDir {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl TryFrom<String> for TreeDir {
    type Error = TreePathError;

    fn try_from(dir: String) -> Result<Self, Self::Error> {
        Self::new(&dir)
    }
}

impl From<TreeDir> for String {
    fn from(dir: TreeDir) -> Self {
        dir.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_paths_inside_the_tree_are_accepted() {
        for ok in [
            "junit.xml",
            "target/nextest/ci/junit.xml",
            "integer/add-small.protos",
            "a..b/c.d",
        ] {
            assert_eq!(TreePath::new(ok).unwrap().as_str(), ok);
        }
    }

    #[test]
    fn paths_that_could_leave_or_alias_the_tree_are_refused() {
        let cases = [
            ("", "empty"),
            ("/etc/passwd", "absolute"),
            ("C:/x.xml", "absolute"),
            ("reports\\junit.xml", "backslash"),
            ("junit\0.xml", "NUL"),
            ("target//junit.xml", "empty component"),
            ("target/", "empty component"),
            ("./junit.xml", "\".\""),
            ("target/../../etc/passwd", "\"..\""),
            ("..", "\"..\""),
        ];
        for (path, expected) in cases {
            let err = TreePath::new(path).unwrap_err().to_string();
            assert!(err.contains(expected), "{path:?}: {err}");
        }
    }

    #[test]
    fn a_tree_dir_is_the_root_or_a_confined_path() {
        assert!(TreeDir::new("").unwrap().is_root());
        assert_eq!(TreeDir::new("corpus/a").unwrap().as_str(), "corpus/a");
        assert!(TreeDir::new("../corpus").is_err());
        assert!(TreeDir::new("/corpus").is_err());
        let err = serde_json::from_str::<TreeDir>("\"/etc\"").unwrap_err();
        assert!(err.to_string().contains("absolute"), "{err}");
    }

    #[test]
    fn deserializing_validates_too() {
        let err = serde_json::from_str::<TreePath>("\"../x\"").unwrap_err();
        assert!(err.to_string().contains("could leave the tree"), "{err}");
    }
}
