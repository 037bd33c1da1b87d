//! The change as its own judge: what of the change runs inside the test process around the
//! tests (runner hooks and plugins, runner configuration, start-up files, result-class
//! overrides, support code that patches the product), as the engine's classifier found it, and
//! how the proof checked it. Data only; the rules that use it are in `verdict::harness`.

use crate::TreeId;
use serde::{Deserialize, Serialize};
use std::fmt;

/// What kind of harness construct a finding is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HarnessKind {
    /// A runner hook implementation: a `pytest_*` function in a conftest or plugin, a
    /// `hookimpl`/`hookwrapper`, Go's `TestMain` or a test file's `init`.
    Hook,
    /// A plugin loaded into the runner: `pytest_plugins`, `-p NAME`, a `pytest11` entry point,
    /// node's `--require`/`--import`, a reporter.
    Plugin,
    /// Runner configuration that changes what runs or how: `addopts`, `python_files`, a
    /// Vitest config, `harness = false`, `.cargo/config.toml`.
    RunnerConfig,
    /// A file the interpreter runs at start-up: `sitecustomize`, `usercustomize`, `.pth`.
    StartupFile,
    /// Support code that assigns into another module (at import, or in an autouse fixture).
    ProductPatch,
    /// unittest's machinery: `load_tests`, overrides of `run`/`__call__`/`debug`, custom
    /// `TestResult`s, runners and suites.
    ResultMachinery,
    /// A build script or custom test framework attribute (cargo).
    BuildScript,
}

impl fmt::Display for HarnessKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Hook => "hook",
            Self::Plugin => "plugin",
            Self::RunnerConfig => "runner_config",
            Self::StartupFile => "startup_file",
            Self::ProductPatch => "product_patch",
            Self::ResultMachinery => "result_machinery",
            Self::BuildScript => "build_script",
        })
    }
}

/// One construct of the change that can alter how tests are collected, run or reported.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HarnessFinding {
    /// The file, relative to the tree's root.
    pub file: String,
    /// 1-based line of the construct.
    pub line: u32,
    /// Its name: `pytest_runtest_makereport`, `PagerTests.run`, `-p pager._support`.
    pub construct: String,
    /// What the construct can alter.
    pub kind: HarnessKind,
    /// Whether the differential run can replace it with the base's version: false when it sits
    /// in a test module the change adds or modifies (the proving tests' own file), which cannot
    /// be taken away without taking the tests too.
    pub replaceable: bool,
}

impl HarnessFinding {
    /// `tests/conftest.py:5 pytest_runtest_makereport`, as reasons name it.
    pub fn place(&self) -> String {
        format!("{}:{} {}", self.file, self.line, self.construct)
    }
}

/// Whether the change's product diff has an executable effect.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct InertProduct {
    /// The changed product files, every one the same program as on the base without its
    /// comments and docstrings.
    pub files: Vec<String>,
}

/// What a proof knows of the change's harness before it runs: the findings, the differential
/// job that checks the replaceable ones, whether a person accepted the harness change, and
/// whether the product change is inert. Planned where the repository is and carried to a
/// fleet's coordinator in the submission, so it concludes the same way.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HarnessPlan {
    /// The harness constructs the change adds or modifies.
    pub findings: Vec<HarnessFinding>,
    /// The candidate tree with the replaceable findings' files put back as the base has them
    /// (removed where the base has none), when there are any.
    pub check_tree: Option<TreeId>,
    /// The files `check_tree` reverts.
    pub reverted_files: Vec<String>,
    /// `--trust-harness-change` (or `ASSAY_TRUST_HARNESS_CHANGE`): a person reviewed the
    /// harness change and accepts it. Never set from the repository's configuration.
    pub trusted: bool,
    /// Set when every changed product file is inert.
    pub inert_product: Option<InertProduct>,
}

impl HarnessPlan {
    /// Whether the harness has nothing to say of this change: no finding, no inert product, no trust.
    pub fn is_empty(&self) -> bool {
        self.findings.is_empty() && self.inert_product.is_none() && !self.trusted
    }
}

/// How one criterion's verdict met the change's harness.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HarnessDecision {
    /// The proving test ran with the base's harness in place of the change's and came out
    /// the same: the harness change was checked and did not decide it.
    CheckedDidNotDecide,
    /// With the base's harness the outcome differed (or could no longer be observed): the
    /// change's harness decides it; the criterion is unverified.
    Decides,
    /// The construct cannot be taken away from the tests (it is in their own file): unverified.
    Unchecked,
    /// A person accepted the harness change (`--trust-harness-change`): the verdict stands
    /// without a check deciding it.
    Trusted,
    /// The product change is inert; the outcome changed anyway: unverified.
    InertProduct,
}

/// One criterion's harness record in the evidence.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CriterionHarness {
    /// The criterion's name, as the plan gives it.
    pub criterion: String,
    /// How its verdict met the harness change.
    pub decision: HarnessDecision,
    /// The outcome the differential job observed, when one ran (`passed`, `failed`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub without_harness: Option<String>,
}

/// The evidence's `harness` section.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HarnessEvidence {
    /// The harness constructs the change adds or modifies.
    pub findings: Vec<HarnessFinding>,
    /// A person accepted the harness change (`--trust-harness-change`).
    pub trusted: bool,
    /// The differential job's plan index, when one ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check_job: Option<u32>,
    /// The files the differential job's tree put back as the base has them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reverted_files: Vec<String>,
    /// Set when every changed product file is inert.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inert_product: Option<InertProduct>,
    /// Each criterion's harness record.
    pub criteria: Vec<CriterionHarness>,
}
