//! The fleet's least-privilege NATS permissions: for each role (coordinator, worker,
//! submitter, operator) exactly the subjects it publishes and subscribes to, the JetStream API calls it
//! makes and the key-value subjects it reads or writes, all derived from the subject prefix
//! the way [`Subjects`] derives stream, consumer and bucket names. `deploy/nats/permissions.conf`
//! is [`render`] for the default prefix, and `assay nats-permissions` prints it for another.
//!
//! What each role needs was read off the code that connects, not guessed:
//! - **coordinator**: creates the two streams, the proofs bucket and both durable consumers;
//!   publishes jobs and progress; pulls and acknowledges results; reads, watches and writes the
//!   proofs bucket; purges a cancelled proof's jobs; answers submit and cancel requests.
//! - **worker**: looks up the two streams and its consumer (never creates them: the
//!   coordinator does, so a worker started first retries until it has), pulls and acknowledges
//!   jobs, publishes results. No key-value access and no progress subject.
//! - **submitter** (the CLI): requests on submit and cancel, follows progress, reads and
//!   watches the proofs bucket. It writes nothing a verdict depends on: no result, job or
//!   progress subject, and no key-value write.
//!
//! - **operator** (`assay halt|resume --cluster`, `assay status`, `assay cancel`): writes the
//!   halt key of the proofs bucket and nothing else there, reads the bucket, requests cancels.
//!   No submission, job, result or progress subject, so halting a fleet needs neither the
//!   coordinator's credentials nor a submitter's.
//!
//! Replies: every role has an inbox prefix of its own ([`inbox_prefix`]:
//! `_INBOX_assay_coordinator`, `_INBOX_assay_submitter`, … for the default prefix), every Assay
//! client connects with its role's prefix, and each role may subscribe to its own inbox prefix
//! only, never `_INBOX.>`: the answers to its requests (the JetStream API, a JetStream publish's
//! acknowledgement, a submit reply) and the deliveries of its key-value watches are not
//! readable by another role. Nobody may publish to any inbox, except that the coordinator may
//! answer the requests it received (`allow_responses`), so no role can forge another's replies.

use crate::fleet::{Subjects, keys};

/// A role of the fleet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// The coordinator: plans proofs, hands out jobs, records results.
    Coordinator,
    /// A worker: takes jobs from the queue and publishes their results.
    Worker,
    /// The CLI submitting proofs (`assay prove --fleet`): submit, cancel, follow progress.
    Submitter,
    /// The CLI steering the fleet (`assay halt|resume --cluster`, `assay status`, `assay cancel`).
    Operator,
}

impl Role {
    /// Every role, in the order the rendered file lists them.
    pub const ALL: [Role; 4] = [
        Role::Coordinator,
        Role::Worker,
        Role::Submitter,
        Role::Operator,
    ];

    /// The role as users, variables and inboxes name it (`coordinator`).
    pub fn name(self) -> &'static str {
        match self {
            Role::Coordinator => "coordinator",
            Role::Worker => "worker",
            Role::Submitter => "submitter",
            Role::Operator => "operator",
        }
    }
}

/// The inbox prefix of `role` in the fleet of `subjects` (`_INBOX_assay_coordinator` for the
/// default prefix): its clients connect with it, so every reply, JetStream answer and
/// key-value watch delivery they ask for arrives on `{prefix}.…`, and [`permissions`] lets
/// `role` alone subscribe there. One token, so no other role's or fleet's prefix is under it.
pub fn inbox_prefix(subjects: &Subjects, role: Role) -> String {
    format!(
        "_INBOX_{}_{}",
        subjects.name_token().to_ascii_lowercase(),
        role.name()
    )
}

/// How the rendered users authenticate; the secret itself stays out of the file: it is an
/// environment variable of the server (`$NAME` in its configuration), named by [`secret_var`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UserAuth {
    /// `user` and `password` (the password may be a bcrypt hash).
    Password,
    /// An nkey public key (`U…`); the client holds the seed.
    Nkey,
}

/// One role's permissions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Permissions {
    /// Subjects the role may publish to (wildcards allowed).
    pub publish: Vec<String>,
    /// Subjects the role may subscribe to (wildcards allowed).
    pub subscribe: Vec<String>,
    /// May answer the requests it receives (publish to their reply subjects, once each).
    pub allow_responses: bool,
}

/// The user name of `role` in the fleet of `subjects`: `assay-coordinator` for the default
/// prefix, so two fleets' users on one server do not clash.
pub fn user_name(subjects: &Subjects, role: Role) -> String {
    format!(
        "{}-{}",
        subjects.name_token().to_ascii_lowercase(),
        role.name()
    )
}

/// The server environment variable holding `role`'s password or nkey:
/// `ASSAY_COORDINATOR_PASSWORD`, `ASSAY_WORKER_NKEY`, … for the default prefix.
pub fn secret_var(subjects: &Subjects, role: Role, auth: UserAuth) -> String {
    let token: String = subjects
        .name_token()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_uppercase()
            } else {
                '_'
            }
        })
        .collect();
    let kind = match auth {
        UserAuth::Password => "PASSWORD",
        UserAuth::Nkey => "NKEY",
    };
    format!("{token}_{}_{kind}", role.name().to_ascii_uppercase())
}

/// What `role` may do in the fleet of `subjects`.
pub fn permissions(subjects: &Subjects, role: Role) -> Permissions {
    let p = subjects.prefix();
    let jobs = subjects.jobs_stream();
    let results = subjects.results_stream();
    let workers = subjects.workers_consumer();
    let coordinator = subjects.coordinator_consumer();
    let bucket = subjects.proofs_bucket();
    let kv = format!("KV_{bucket}");
    let api = "$JS.API";
    // Reading the proofs bucket: a key's last value (direct get, or a message get where direct
    // get is off), and the ordered consumers behind a watch and a key listing, with their
    // flow-control replies.
    let kv_read = [
        format!("{api}.STREAM.INFO.{kv}"),
        format!("{api}.DIRECT.GET.{kv}.>"),
        format!("{api}.STREAM.MSG.GET.{kv}"),
        format!("{api}.CONSUMER.CREATE.{kv}"),
        format!("{api}.CONSUMER.CREATE.{kv}.>"),
        format!("{api}.CONSUMER.INFO.{kv}.>"),
        format!("$JS.FC.{kv}.>"),
    ];
    // Deleting a consumer on the bucket's stream: only the coordinator's. A consumer's name is
    // one subject token, so a permission cannot say "its own"; the monitoring port lists every
    // consumer's name, and a submitter or operator that may delete one may stall the
    // coordinators' watches. Their own watches' ordered consumers expire by themselves when
    // left (async-nats deletes one only when it recreates it, and ignores a refusal).
    let kv_delete = format!("{api}.CONSUMER.DELETE.{kv}.>");
    let inbox = format!("{}.>", inbox_prefix(subjects, role));
    match role {
        Role::Coordinator => {
            let mut publish = vec![
                format!("{p}.jobs.>"),
                format!("{p}.progress.>"),
                format!("$KV.{bucket}.>"),
                format!("{api}.INFO"),
            ];
            for stream in [&jobs, &results, &kv] {
                publish.push(format!("{api}.STREAM.INFO.{stream}"));
                publish.push(format!("{api}.STREAM.CREATE.{stream}"));
            }
            publish.extend([
                format!("{api}.STREAM.PURGE.{jobs}"),
                format!("{api}.CONSUMER.INFO.{jobs}.{workers}"),
                format!("{api}.CONSUMER.CREATE.{jobs}.{workers}.>"),
                format!("{api}.CONSUMER.INFO.{results}.{coordinator}"),
                format!("{api}.CONSUMER.CREATE.{results}.{coordinator}.>"),
                format!("{api}.CONSUMER.MSG.NEXT.{results}.{coordinator}"),
                format!("$JS.ACK.{results}.{coordinator}.>"),
            ]);
            publish.extend(
                kv_read
                    .into_iter()
                    .filter(|s| !s.starts_with(&format!("{api}.STREAM.INFO."))),
            );
            publish.push(kv_delete);
            Permissions {
                publish,
                subscribe: vec![subjects.submit(), subjects.cancel(), inbox],
                allow_responses: true,
            }
        }
        Role::Worker => Permissions {
            publish: vec![
                format!("{p}.results.>"),
                format!("{api}.STREAM.INFO.{jobs}"),
                format!("{api}.STREAM.INFO.{results}"),
                format!("{api}.CONSUMER.INFO.{jobs}.{workers}"),
                format!("{api}.CONSUMER.MSG.NEXT.{jobs}.{workers}"),
                format!("$JS.ACK.{jobs}.{workers}.>"),
            ],
            subscribe: vec![inbox],
            allow_responses: false,
        },
        Role::Submitter => {
            let mut publish = vec![subjects.submit(), subjects.cancel()];
            publish.extend(kv_read);
            Permissions {
                publish,
                subscribe: vec![format!("{p}.progress.>"), inbox],
                allow_responses: false,
            }
        }
        Role::Operator => {
            // A key-value put and delete are both publishes on the key's subject.
            let mut publish = vec![subjects.cancel(), format!("$KV.{bucket}.{}", keys::HALT)];
            publish.extend(kv_read);
            Permissions {
                publish,
                subscribe: vec![inbox],
                allow_responses: false,
            }
        }
    }
}

/// The NATS server configuration fragment for the fleet of `subjects`: one permissions
/// variable per role and an `authorization` block with the three users, whose secrets are the
/// server's environment variables [`secret_var`] names. Include it from the server's main
/// configuration (`include permissions.conf`).
/// Refuses a prefix with any character but ASCII letters, digits, `-`, `_` and `.`: the
/// configuration is text a server parses, and a quote, `$` or newline in a prefix would change
/// what it says.
pub fn render(subjects: &Subjects, auth: UserAuth) -> Result<String, UnsafePrefix> {
    let prefix = subjects.prefix();
    if prefix.is_empty()
        || !prefix
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
    {
        return Err(UnsafePrefix {
            prefix: prefix.to_owned(),
        });
    }
    let mut out = String::new();
    out.push_str(&format!(
        "# NATS permissions of the Assay fleet with subject prefix \"{}\": what each of the\n\
         # coordinator, the workers, the submitters (the CLI) and the operators (halt, resume,\n\
         # status, cancel) may publish and subscribe to.\n\
         # Generated by `assay nats-permissions --subject-prefix {}{}`; SECURITY.md says what\n\
         # each role may do and why. The users' secrets are environment variables of the server.\n\n",
        subjects.prefix(),
        subjects.prefix(),
        match auth {
            UserAuth::Password => "",
            UserAuth::Nkey => " --auth nkey",
        },
    ));
    for role in Role::ALL {
        let perms = permissions(subjects, role);
        out.push_str(&format!("{} = {{\n", variable(role)));
        out.push_str("  publish = {\n    allow = [\n");
        for subject in &perms.publish {
            out.push_str(&format!("      {}\n", quoted(subject)));
        }
        out.push_str("    ]\n  }\n  subscribe = {\n    allow = [\n");
        for subject in &perms.subscribe {
            out.push_str(&format!("      {}\n", quoted(subject)));
        }
        out.push_str("    ]\n  }\n");
        if perms.allow_responses {
            out.push_str("  allow_responses = true\n");
        }
        out.push_str("}\n\n");
    }
    out.push_str("authorization {\n  users = [\n");
    for role in Role::ALL {
        let secret = secret_var(subjects, role, auth);
        let who = match auth {
            UserAuth::Password => format!(
                "user: {}, password: ${secret}",
                quoted(&user_name(subjects, role))
            ),
            UserAuth::Nkey => format!("nkey: ${secret}"),
        };
        out.push_str(&format!(
            "    {{ {who}, permissions: ${} }}\n",
            variable(role)
        ));
    }
    out.push_str("  ]\n}\n");
    Ok(out)
}

#[derive(Debug, thiserror::Error)]
/// A subject prefix that cannot be written into a NATS configuration safely.
#[error(
    "cannot write NATS permissions for subject prefix {prefix:?} (hint: use only ASCII letters, digits, '-', '_' and '.')"
)]
pub struct UnsafePrefix {
    /// The prefix refused, as configured.
    pub prefix: String,
}

fn variable(role: Role) -> String {
    format!("ASSAY_{}_PERMISSIONS", role.name().to_ascii_uppercase())
}

/// A NATS configuration string literal: quoted strings are never variable references, so the
/// `$JS…` and `$KV…` subjects stay literal.
fn quoted(text: &str) -> String {
    format!("\"{}\"", text.replace('\\', "\\\\").replace('"', "\\\""))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shipped_permissions_file_is_the_default_prefix_rendered() {
        let rendered = render(&Subjects::new("assay"), UserAuth::Password).unwrap();
        if std::env::var_os("ASSAY_UPDATE_PERMISSIONS").is_some() {
            let path = concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../deploy/nats/permissions.conf"
            );
            std::fs::write(path, &rendered).expect("rewrite deploy/nats/permissions.conf");
            return;
        }
        let shipped = include_str!("../../deploy/nats/permissions.conf");
        assert_eq!(
            shipped, rendered,
            "deploy/nats/permissions.conf is stale (hint: ASSAY_UPDATE_PERMISSIONS=1 cargo test -p assay-common nats_permissions)"
        );
    }

    #[test]
    fn only_the_coordinator_writes_the_bucket_jobs_and_progress_and_only_workers_results() {
        let subjects = Subjects::new("assay");
        let coordinator = permissions(&subjects, Role::Coordinator);
        let worker = permissions(&subjects, Role::Worker);
        let submitter = permissions(&subjects, Role::Submitter);
        let operator = permissions(&subjects, Role::Operator);
        for (subject, owner) in [
            ("$KV.ASSAY_PROOFS.>", &coordinator),
            ("assay.jobs.>", &coordinator),
            ("assay.progress.>", &coordinator),
            ("assay.results.>", &worker),
        ] {
            for perms in [&coordinator, &worker, &submitter, &operator] {
                assert_eq!(
                    perms.publish.iter().any(|s| s == subject),
                    std::ptr::eq(perms, owner),
                    "{subject} in {perms:?}"
                );
            }
        }
        // The operator writes one key of the bucket, and no job, result, progress or submission.
        let writes: Vec<_> = operator
            .publish
            .iter()
            .filter(|s| !s.starts_with("$JS.") && *s != "assay.cancel")
            .collect();
        assert_eq!(writes, ["$KV.ASSAY_PROOFS.fleet.halt"], "{operator:?}");
        for perms in [&coordinator, &worker, &submitter, &operator] {
            assert!(!perms.publish.iter().any(|s| s.starts_with("_INBOX")));
            assert!(!perms.publish.iter().any(|s| s.contains("STREAM.DELETE")));
        }
        assert!(!worker.publish.iter().any(|s| s.contains("CREATE")));
        assert!(
            !submitter
                .publish
                .iter()
                .any(|s| s.contains("STREAM.CREATE"))
        );
    }

    #[test]
    fn each_role_subscribes_to_its_own_inbox_prefix_and_to_no_other_inbox() {
        for subjects in [Subjects::new("assay"), Subjects::new("billing.ci")] {
            for role in Role::ALL {
                let own = format!("{}.>", inbox_prefix(&subjects, role));
                let inboxes: Vec<_> = permissions(&subjects, role)
                    .subscribe
                    .into_iter()
                    .filter(|s| s.starts_with("_INBOX"))
                    .collect();
                assert_eq!(
                    inboxes,
                    std::slice::from_ref(&own),
                    "{role:?} of {subjects:?}"
                );
                for other in Role::ALL.into_iter().filter(|&o| o != role) {
                    let theirs = inbox_prefix(&subjects, other);
                    // One token each, so neither prefix's wildcard covers the other's inboxes.
                    assert!(!theirs.contains('.') && !own.starts_with(&format!("{theirs}.")));
                }
            }
        }
        assert_eq!(
            inbox_prefix(&Subjects::new("assay"), Role::Coordinator),
            "_INBOX_assay_coordinator"
        );
        assert_ne!(
            inbox_prefix(&Subjects::new("assay"), Role::Submitter),
            inbox_prefix(&Subjects::new("billing.ci"), Role::Submitter)
        );
    }

    #[test]
    fn only_the_coordinator_subscribes_to_jobs_submissions_or_cancels_and_only_it_answers() {
        let subjects = Subjects::new("assay");
        for role in Role::ALL {
            let perms = permissions(&subjects, role);
            let reads_jobs = perms
                .subscribe
                .iter()
                .any(|s| s.starts_with("assay.jobs") || s == ">" || s == "assay.>");
            assert!(!reads_jobs, "{role:?} may read job specs: {perms:?}");
            assert_eq!(
                perms.subscribe.contains(&subjects.submit()),
                role == Role::Coordinator
            );
            assert_eq!(perms.allow_responses, role == Role::Coordinator);
        }
    }

    #[test]
    fn another_prefix_gets_its_own_names_users_and_variables() {
        let subjects = Subjects::new("billing.ci");
        let text = render(&subjects, UserAuth::Nkey).unwrap();
        assert!(text.contains("\"billing.ci.results.>\""), "{text}");
        assert!(text.contains(&format!("\"$KV.{}.>\"", subjects.proofs_bucket())));
        assert!(!text.contains("assay."), "{text}");
        let var = secret_var(&subjects, Role::Worker, UserAuth::Nkey);
        assert!(
            var.starts_with("BILLING_CI_") && var.ends_with("_WORKER_NKEY"),
            "{var}"
        );
        assert!(var.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'));
        assert_eq!(
            secret_var(
                &Subjects::new("pager-ci"),
                Role::Submitter,
                UserAuth::Password
            ),
            "PAGER_CI_SUBMITTER_PASSWORD"
        );
        assert_eq!(
            user_name(&Subjects::new("assay"), Role::Coordinator),
            "assay-coordinator"
        );
    }

    #[test]
    fn a_prefix_that_would_rewrite_the_configuration_is_refused() {
        for hostile in [
            "assay\nauthorization { users = [] }",
            "x\"y",
            "pay$MENTS",
            "a\\b",
            "",
        ] {
            let err = render(&Subjects::new(hostile), UserAuth::Password).unwrap_err();
            assert!(err.to_string().contains("hint:"), "{err}");
        }
    }
}
