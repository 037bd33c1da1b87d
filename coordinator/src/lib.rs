pub mod mutants;
