//! `assay halt` and `assay resume`: stop and restart admission, on this machine or a fleet.

use crate::exit::Failure;
use crate::fleet_link;
use crate::suite_state::state_dir;
use assay_common::nats_permissions::Role;
use assay_coordinator::fleet_halt;
use assay_engine::suite::halt::{HaltError, HaltFile};
use clap::Args;
use std::path::PathBuf;

#[derive(Args, Debug, Clone)]
pub struct HaltArgs {
    /// Why admission stops; printed by every run that meets the halt.
    #[arg(long, value_name = "TEXT")]
    pub reason: String,
    #[arg(long, value_name = "DIR", env = "ASSAY_STATE_DIR")]
    pub state_dir: Option<PathBuf>,
    /// Halt a fleet (a key in its proofs bucket) instead of this machine's embedded runs.
    #[arg(long, value_name = "URL")]
    pub cluster: Option<String>,
    #[command(flatten)]
    pub fleet: crate::nats_flags::FleetFlags,
}

#[derive(Args, Debug, Clone)]
pub struct ResumeArgs {
    #[arg(long, value_name = "DIR", env = "ASSAY_STATE_DIR")]
    pub state_dir: Option<PathBuf>,
    /// Lift a fleet's halt instead of this machine's.
    #[arg(long, value_name = "URL")]
    pub cluster: Option<String>,
    #[command(flatten)]
    pub fleet: crate::nats_flags::FleetFlags,
}

/// Said when `assay halt|resume --cluster` cannot reach the fleet: they connect as the
/// operator (the operator's inbox prefix is the only one its replies can arrive under), so
/// other credentials get no answer at all.
fn as_the_operator(mut failure: Failure) -> Failure {
    failure.error = failure.error.context(
        "halt and resume connect as the fleet's operator and write the proofs bucket's halt key, which only the operator's and the coordinator's users may (hint: run them with the operator's NATS credentials)",
    );
    failure
}

pub async fn run_halt(args: &HaltArgs) -> Result<u8, Failure> {
    if args.reason.trim().is_empty() {
        return Err(Failure::usage(HaltError::NoReason.into()));
    }
    match &args.cluster {
        Some(url) => {
            // Halting and resuming are the operator's.
            let fleet = fleet_link::Fleet::connect(url, &args.fleet, Role::Operator)
                .await
                .map_err(as_the_operator)?;
            fleet_halt::set_halt(&fleet.proofs, &args.reason)
                .await
                .map_err(|e| Failure::infrastructure(e.into()))?;
        }
        None => HaltFile::in_state_dir(&state_dir(&args.state_dir))
            .set(&args.reason)
            .map_err(|e| Failure::usage(e.into()))?,
    }
    crate::console::outln(format_args!(
        "[HALT] admission stopped. Reason: {}",
        args.reason.trim()
    ));
    Ok(0)
}

pub async fn run_resume(args: &ResumeArgs) -> Result<u8, Failure> {
    let cleared = match &args.cluster {
        Some(url) => {
            // Halting and resuming are the operator's.
            let fleet = fleet_link::Fleet::connect(url, &args.fleet, Role::Operator)
                .await
                .map_err(as_the_operator)?;
            fleet_halt::clear_halt(&fleet.proofs)
                .await
                .map_err(|e| Failure::infrastructure(e.into()))?
        }
        None => HaltFile::in_state_dir(&state_dir(&args.state_dir))
            .clear()
            .map_err(|e| Failure::infrastructure(e.into()))?,
    };
    crate::console::outln(format_args!(
        "{}",
        if cleared {
            "admission resumed"
        } else {
            "no halt was set"
        }
    ));
    Ok(0)
}
