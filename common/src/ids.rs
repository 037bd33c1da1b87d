//! Id newtypes, so a proof id is never passed where a job id is expected.

use serde::{Deserialize, Serialize};
use std::fmt;

macro_rules! id_type {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(pub String);
        id_methods!($name);
    };
}

macro_rules! id_methods {
    ($name:ident) => {
        impl $name {
            /// The id as text.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl From<&str> for $name {
            fn from(value: &str) -> Self {
                Self(value.to_owned())
            }
        }
    };
}

id_type!(
    /// One proof, e.g. `p-20261129-3f9a1c`.
    ProofId
);
id_type!(
    /// One job of a proof: `{proof_id}/{index:04}`; unique across the fleet.
    JobId
);
/// A git tree object id (hex); trees are content-addressed by it everywhere. A worker names
/// its cache files after it, so one read from the wire must be hex and nothing else.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct TreeId(pub String);
id_methods!(TreeId);

/// A tree id read from outside that is not a git object id.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("tree id {0:?} is not a git object id (1 to 64 lowercase hex digits)")]
pub struct TreeIdError(String);

impl TreeId {
    /// `id` as a tree id, refused unless it is 1 to 64 lowercase hex digits.
    pub fn parse(id: &str) -> Result<Self, TreeIdError> {
        let hex = !id.is_empty()
            && id.len() <= 64
            && id
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        if hex {
            Ok(Self(id.to_owned()))
        } else {
            Err(TreeIdError(id.to_owned()))
        }
    }
}

impl TryFrom<String> for TreeId {
    type Error = TreeIdError;

    fn try_from(id: String) -> Result<Self, Self::Error> {
        Self::parse(&id)
    }
}

impl From<TreeId> for String {
    fn from(id: TreeId) -> Self {
        id.0
    }
}
id_type!(
    /// One worker process of the fleet.
    WorkerId
);

impl JobId {
    /// The id of job `index` of proof `proof_id`.
    pub fn for_index(proof_id: &ProofId, index: usize) -> Self {
        Self(format!("{proof_id}/{index:04}"))
    }
}

/// Longest proof id the coordinator accepts; ids end up in subjects, KV keys and store keys.
pub const MAX_PROOF_ID_LEN: usize = 128;

impl ProofId {
    /// The submission of job `index` of run `run` alone (`{run}-{index:04}`): how a run that
    /// submits a job at a time (`assay mutate --cluster`, `assay test --cluster`) names each.
    pub fn for_one_job(run: &ProofId, index: u32) -> Self {
        Self(format!("{run}-{index:04}"))
    }

    /// The run this id is one job of, when it is shaped as [`ProofId::for_one_job`] makes
    /// them: `RUN` of `RUN-0007`.
    pub fn run_of_one_job(&self) -> Option<&str> {
        self.0
            .rsplit_once('-')
            .filter(|(run, index)| {
                !run.is_empty() && index.len() >= 4 && index.bytes().all(|b| b.is_ascii_digit())
            })
            .map(|(run, _)| run)
    }

    /// Whether the id is safe in a NATS subject token, a KV key and a store key: ASCII
    /// letters, digits, `-` and `_` only, at most [`MAX_PROOF_ID_LEN`] of them.
    pub fn is_well_formed(&self) -> bool {
        !self.0.is_empty()
            && self.0.len() <= MAX_PROOF_ID_LEN
            && self
                .0
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tree_id_from_the_wire_is_hex_or_refused() {
        let ok: TreeId =
            serde_json::from_str("\"4b825dc642cb6eb9a060e54bf8d69288fbee4904\"").unwrap();
        assert_eq!(ok.as_str(), "4b825dc642cb6eb9a060e54bf8d69288fbee4904");
        for bad in ["\"../../etc/passwd\"", "\"\"", "\"ABC\"", "\"a/b\""] {
            assert!(serde_json::from_str::<TreeId>(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn proof_ids_with_subject_or_path_characters_are_not_well_formed() {
        assert!(ProofId("p-1795995829-5b97289d0a1b2c3d".into()).is_well_formed());
        assert!(ProofId("t-1795995829-0a1b2c3d-0004".into()).is_well_formed());
        for bad in ["", "p.1", "p>", "p*", "../p", "p/1", "p 1"] {
            assert!(!ProofId(bad.into()).is_well_formed(), "{bad:?}");
        }
        assert!(!ProofId("p".repeat(MAX_PROOF_ID_LEN + 1)).is_well_formed());
    }

    #[test]
    fn a_one_job_submission_names_its_run_and_other_ids_do_not() {
        let run = ProofId("m-1795995829-0a1b2c3d".into());
        let job = ProofId::for_one_job(&run, 7);
        assert_eq!(job.as_str(), "m-1795995829-0a1b2c3d-0007");
        assert_eq!(job.run_of_one_job(), Some(run.as_str()));
        for other in [
            "p-1795995829-5b97289d0a1b2c3d",
            "-0007",
            "release-v2",
            "p-007",
        ] {
            assert_eq!(ProofId(other.into()).run_of_one_job(), None, "{other}");
        }
    }
}
