//! The `assay` binary's end-to-end tests, one module per area, built as one test binary: as 26
//! binaries, each linked against every dependency and each compiling `support` again, they
//! took 73 s of a test build (133 s of CPU); as one, 5 s. nextest still runs every test in a
//! process of its own.

mod support;

mod cache;
mod cargo;
mod confinement;
mod daily_loop;
mod dependencies;
mod diff_coverage;
mod escapes;
mod fidelity;
mod fleet_cli;
mod forgery;
mod html_reports;
mod mutate_cache;
mod mutate_fleet;
mod mutate_go;
mod mutate_hotswap;
mod mutate_js;
mod mutate_rust;
mod mutation;
mod observe;
mod progress;
mod prove;
mod runners;
mod sandbox;
mod suite_cache;
mod suites;
mod toolchains;
