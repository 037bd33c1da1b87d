//! Secrets leave the worker's environment once it has started. `/proc/PID/environ` shows the
//! environment block the process was started with, whatever `setenv` did since, and a job in
//! the process sandbox runs as the worker's user: non-dumpable stops an unprivileged one from
//! reading it, not one running as root. So after start-up (the store and NATS clients hold
//! their credentials by then) the worker overwrites, in that block itself, the value of every
//! variable whose name says it is a secret. The reapers forked for jobs later inherit the
//! overwritten copy.

/// Words that mark a variable's value as a secret (`AWS_SECRET_ACCESS_KEY`,
/// `AWS_SESSION_TOKEN`, `NATS_PASSWORD`, …), matched case-insensitively.
const SECRET_WORDS: [&str; 7] = [
    "SECRET",
    "TOKEN",
    "PASSWORD",
    "PASSWD",
    "CREDENTIAL",
    "PRIVATE_KEY",
    "ACCESS_KEY",
];

/// Whether a variable named `name` holds a secret by the look of its name.
pub fn is_secret_name(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    SECRET_WORDS.iter().any(|word| upper.contains(word))
}

/// Why the secrets could not be overwritten in the process's environment block.
#[derive(Debug, thiserror::Error)]
pub enum ScrubError {
    /// `/proc/self/stat` could not be read.
    #[error("failed to read /proc/self/stat to find the environment block")]
    Stat(#[source] std::io::Error),
    /// `/proc/self/stat` could not be parsed; says what was wrong.
    #[error("/proc/self/stat does not name the environment block ({0})")]
    Layout(&'static str),
}

/// Overwrites with `*` the value of every variable of this process's original environment
/// block that `scrub` selects by name; returns the names it overwrote. Lengths are kept, so
/// the block's layout (and every pointer into it) stays valid; a later `std::env::var` of such
/// a variable reads the stars.
pub fn scrub_environment(scrub: impl Fn(&str) -> bool) -> Result<Vec<String>, ScrubError> {
    let (start, end) = environment_block()?;
    let mut scrubbed = Vec::new();
    let mut at = start;
    while at < end {
        // SAFETY: [start, end) is this process's environment block, mapped and writable for
        // the life of the process (the kernel placed it on the initial stack). Bytes are read
        // and written one at a time through raw pointers, so no reference aliases a reader's.
        let byte = |i: usize| unsafe { std::ptr::read_volatile(i as *const u8) };
        let entry_start = at;
        while at < end && byte(at) != 0 {
            at += 1;
        }
        let entry: Vec<u8> = (entry_start..at).map(byte).collect();
        if let Some(eq) = entry.iter().position(|b| *b == b'=') {
            let name = String::from_utf8_lossy(&entry[..eq]).into_owned();
            if scrub(&name) {
                for i in entry_start + eq + 1..at {
                    // SAFETY: as above; inside the block, before the entry's NUL.
                    unsafe { std::ptr::write_volatile(i as *mut u8, b'*') };
                }
                scrubbed.push(name);
            }
        }
        at += 1;
    }
    Ok(scrubbed)
}

/// `env_start` and `env_end` of this process, fields 50 and 51 of `/proc/self/stat`.
fn environment_block() -> Result<(usize, usize), ScrubError> {
    let stat = std::fs::read_to_string("/proc/self/stat").map_err(ScrubError::Stat)?;
    // The command name (field 2) may hold spaces and parentheses: count from its last `)`.
    let (_, rest) = stat
        .rsplit_once(") ")
        .ok_or(ScrubError::Layout("no command name"))?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // `rest` starts at field 3.
    let field = |n: usize| -> Result<usize, ScrubError> {
        fields
            .get(n - 3)
            .and_then(|f| f.parse().ok())
            .ok_or(ScrubError::Layout("too few fields"))
    };
    let (start, end) = (field(50)?, field(51)?);
    if start == 0 || end <= start {
        return Err(ScrubError::Layout("an empty block"));
    }
    Ok((start, end))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_names_are_recognized_by_their_words() {
        for secret in [
            "AWS_SECRET_ACCESS_KEY",
            "AWS_SESSION_TOKEN",
            "nats_password",
            "GITHUB_TOKEN",
            "AWS_ACCESS_KEY_ID",
        ] {
            assert!(is_secret_name(secret), "{secret}");
        }
        for plain in ["PATH", "HOME", "ASSAY_NATS_URL", "AWS_REGION"] {
            assert!(!is_secret_name(plain), "{plain}");
        }
    }
}
