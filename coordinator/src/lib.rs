
pub mod mutants;
