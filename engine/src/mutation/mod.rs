//! Mutation testing, in three parts: `mutants` holds the rules both uses share (choosing
//! mutants per language, budgets, judging a run) and no I/O; `check` is the check a proven
//! proof runs on its changed lines; `campaign` is `assay mutate`, a whole file's or tree's
//! mutation run with its report and cache.

pub mod campaign;
pub mod check;
pub mod mutants;
