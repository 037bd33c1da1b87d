//! What Assay's integration tests share, in every crate: real servers on 127.0.0.1
//! (`servers`: a JetStream nats-server, an S3-protocol server), git repositories built in the
//! test and the fixture projects (`repo`), one run of a command (`run`), the pytest 8 and 9
//! environments `.ci/run` makes (`pytest_envs`), with the `docker` feature the Docker engine
//! (`docker`), and with the `cluster` feature the one fleet harness every fleet test runs on
//! (`cluster::ClusterSandbox`: nats-server, a store, coordinators and workers). Nothing here fakes what it stands for: each helper starts or drives the
//! real thing.

#[cfg(feature = "cluster")]
pub mod cluster;
#[cfg(feature = "docker")]
pub mod docker;
pub mod pytest_envs;
pub mod repo;
pub mod run;
pub mod servers;

pub use repo::{Repo, fixture, fixture_dir, invoice_repo};
pub use run::{Run, run};
