//! Id newtypes, so a proof id is never passed where a job id is expected.

use serde::{Deserialize, Serialize};
use std::fmt;

macro_rules! id_type {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(pub String);

        impl $name {
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
id_type!(
    /// A git tree object id (hex); trees are content-addressed by it everywhere.
    TreeId
);
id_type!(
    /// One worker process of the fleet.
    WorkerId
);

impl JobId {
    pub fn for_index(proof_id: &ProofId, index: usize) -> Self {
        Self(format!("{proof_id}/{index:04}"))
    }
}
