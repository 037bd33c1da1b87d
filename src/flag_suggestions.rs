//! Which flag to suggest for one a command does not take. Clap suggests the closest spelling
//! among the command's own flags, which for a flag of another command is often the wrong one
//! (`assay status --nats` was told `--nats-user`); here a flag that names the same thing
//! under another name on this command is suggested instead, and a flag only another command
//! takes is said to be that command's.

use clap::Command;
use clap::error::{ContextKind, ContextValue, ErrorKind};

/// Flags that name the same thing on different commands: each command takes one of a group.
const SAME_THING: &[&[&str]] = &[
    // The fleet's NATS servers: the services' `--nats`, the CLI's `--cluster`; the others are
    // what people type for them.
    &["--nats", "--cluster", "--nats-url", "--nats-server"],
];

/// `error` with a better suggestion where one is known; `command` is the whole command tree
/// that parsed `args` (the process's arguments, the program's name first).
pub fn correct<I, T>(mut error: clap::Error, command: &mut Command, args: I) -> clap::Error
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString>,
{
    if error.kind() != ErrorKind::UnknownArgument {
        return error;
    }
    let Some(ContextValue::String(given)) = error.get(ContextKind::InvalidArg) else {
        return error;
    };
    let given = given.split('=').next().unwrap_or(given).to_owned();
    command.build();
    let path = subcommand_path(command, args);
    let Some(used) = find(command, &path) else {
        return error;
    };
    let Some(suggestion) = suggest(command, used, &path, &given) else {
        return error;
    };
    match suggestion {
        Suggestion::Flag(flag) => {
            error.insert(ContextKind::SuggestedArg, ContextValue::String(flag));
        }
        Suggestion::OtherCommand(line) => {
            error.remove(ContextKind::SuggestedArg);
            error.insert(
                ContextKind::Suggested,
                ContextValue::StyledStrs(vec![line.into()]),
            );
        }
    }
    // Clap's usage line names the flag it guessed as if it had been given.
    error.insert(
        ContextKind::Usage,
        ContextValue::StyledStr(used.clone().render_usage()),
    );
    error
}

/// What to say of a flag the command does not take.
#[derive(Debug, PartialEq, Eq)]
enum Suggestion {
    /// This command's flag for the same thing.
    Flag(String),
    /// The flag belongs to other commands, named in the line.
    OtherCommand(String),
}

fn suggest(root: &Command, used: &Command, path: &[String], given: &str) -> Option<Suggestion> {
    let takes = |command: &Command, flag: &str| {
        command.get_arguments().any(|arg| {
            arg.get_long()
                .is_some_and(|long| flag.strip_prefix("--") == Some(long))
        })
    };
    if let Some(group) = SAME_THING.iter().find(|group| group.contains(&given))
        && let Some(flag) = group
            .iter()
            .find(|flag| **flag != given && takes(used, flag))
    {
        return Some(Suggestion::Flag((*flag).to_owned()));
    }
    // A flag of sibling commands only: theirs, not a near spelling of this one's.
    let parent = find(root, path.split_last()?.1)?;
    let owners: Vec<String> = parent
        .get_subcommands()
        .filter(|sibling| sibling.get_name() != used.get_name() && takes(sibling, given))
        .map(|sibling| format!("`{}`", sibling.get_bin_name().unwrap_or(sibling.get_name())))
        .collect();
    if owners.is_empty() {
        return None;
    }
    Some(Suggestion::OtherCommand(format!(
        "{given} is a flag of {}, not of `{}`",
        owners.join(", "),
        used.get_bin_name().unwrap_or(used.get_name())
    )))
}

/// The subcommands `args` names, outermost first: each argument that is a subcommand of the
/// command reached so far.
fn subcommand_path<I, T>(command: &Command, args: I) -> Vec<String>
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString>,
{
    let mut path = Vec::new();
    let mut at = command;
    for arg in args.into_iter().skip(1) {
        let arg: std::ffi::OsString = arg.into();
        let Some(arg) = arg.to_str() else {
            continue;
        };
        if let Some(sub) = at.find_subcommand(arg) {
            path.push(sub.get_name().to_owned());
            at = sub;
        }
    }
    path
}

fn find<'a>(root: &'a Command, path: &[String]) -> Option<&'a Command> {
    path.iter()
        .try_fold(root, |at, name| at.find_subcommand(name))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory as _;

    /// The error `args` give, as the binary prints it.
    fn error_of(args: &[&str]) -> String {
        let mut command = crate::cli_command();
        let error = command
            .try_get_matches_from_mut(args)
            .expect_err("the flag is refused");
        correct(error, &mut crate::cli_command(), args)
            .render()
            .to_string()
    }

    #[test]
    fn the_services_nats_flag_on_a_fleet_client_suggests_cluster() {
        for command in ["status", "results", "cancel"] {
            let text = error_of(&["assay", command, "--nats", "nats://fleet:4222"]);
            assert!(
                text.contains("unexpected argument '--nats'")
                    && text.contains("a similar argument exists: '--cluster'")
                    && !text.contains("--nats-user"),
                "{command}: {text}"
            );
        }
        let text = error_of(&["assay", "prove", "--nats-url=nats://fleet:4222"]);
        assert!(text.contains("'--cluster'"), "{text}");
    }

    #[test]
    fn the_clis_cluster_flag_on_a_service_suggests_nats() {
        for command in ["coordinator", "worker"] {
            let text = error_of(&["assay", command, "--cluster", "nats://fleet:4222"]);
            assert!(
                text.contains("a similar argument exists: '--nats'"),
                "{command}: {text}"
            );
        }
    }

    #[test]
    fn a_worker_flag_given_to_the_coordinator_is_named_the_workers() {
        let text = error_of(&["assay", "coordinator", "--slots", "4"]);
        assert!(
            text.contains("--slots is a flag of `assay worker`, not of `assay coordinator`"),
            "{text}"
        );
    }

    #[test]
    fn a_misspelling_keeps_clap_own_suggestion() {
        let text = error_of(&["assay", "status", "--cluter", "nats://fleet:4222"]);
        assert!(text.contains("'--cluster'"), "{text}");
        // The whole tree parses as before: the factory still builds.
        crate::Cli::command().debug_assert();
    }
}
