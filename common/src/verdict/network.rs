//! Whether a failing test's output shows it could not reach the network. Jobs run with no
//! network beyond a loopback of their own unless the run gives them one, so a test that looks
//! a host up or connects out fails there however right the code is: its criterion's reason
//! says so, and how to go on.

use super::MatchedCase;
use crate::outcome::Outcome;

/// What each kind of runtime prints when a name cannot be looked up or a host reached.
const SIGNS: &[&str] = &[
    // The C library's resolver, as Python (`socket.gaierror`), Ruby and others quote it.
    "Temporary failure in name resolution",
    "Name or service not known",
    "No address associated with hostname",
    "nodename nor servname provided",
    "socket.gaierror",
    // urllib3 2 and requests.
    "NameResolutionError",
    "Failed to resolve",
    // Python, the C library.
    "Network is unreachable",
    // Go's net package.
    "network is unreachable",
    "dial tcp: lookup ",
    "dial udp: lookup ",
    ": no such host",
    // node.
    "getaddrinfo ENOTFOUND",
    "getaddrinfo EAI_AGAIN",
    "ENETUNREACH",
];

/// The first sign of a network failure in `message`: one of [`SIGNS`], or a connection
/// refused by an address that is not this machine's loopback.
pub fn network_failure(message: &str) -> Option<String> {
    if let Some(sign) = SIGNS.iter().find(|sign| message.contains(**sign)) {
        return Some(sign.trim_matches([' ', ':']).to_owned());
    }
    let refused = message.contains("Connection refused")
        || message.contains("connection refused")
        || message.contains("ECONNREFUSED");
    if !refused {
        return None;
    }
    refused_host(message)
        .filter(|host| !is_loopback(host))
        .map(|host| format!("connection refused by {host}"))
}

/// The host a refused connection went to, where the message names it: urllib3's
/// `host='api.example.com'`, Go's `dial tcp 10.0.0.5:443`, node's `ECONNREFUSED 10.0.0.5:443`.
fn refused_host(message: &str) -> Option<&str> {
    for (before, end) in [
        ("host='", &['\''][..]),
        ("dial tcp ", &[' ', ':'][..]),
        ("ECONNREFUSED ", &[' ', ':'][..]),
    ] {
        if let Some(rest) = message.split(before).nth(1) {
            // An IPv6 address in brackets: up to its closing bracket.
            if let Some(inner) = rest.strip_prefix('[') {
                return inner.split(']').next();
            }
            return rest.split(end).next().filter(|host| !host.is_empty());
        }
    }
    None
}

fn is_loopback(host: &str) -> bool {
    host == "localhost"
        || host.ends_with(".localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback() || ip.is_unspecified())
}

/// The hint a failing criterion's reason ends with when a failing case's message shows a
/// network failure; empty otherwise.
pub(super) fn network_hint(cases: &[MatchedCase]) -> String {
    let sign = cases
        .iter()
        .filter(|case| matches!(case.outcome, Outcome::Failed | Outcome::Error))
        .find_map(|case| network_failure(case.message.as_deref()?));
    match sign {
        Some(sign) => format!(
            " (hint: its output shows a network failure ({sign}), and jobs run with no network beyond a loopback of their own unless given one: make the test independent of the network (a local stub or a recorded response), name a test that needs none, or, if it must reach the network, pass --network bridge)"
        ),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_runtimes_lookup_and_reach_failures_are_network_failures() {
        for (message, sign) in [
            (
                "socket.gaierror: [Errno -3] Temporary failure in name resolution",
                "Temporary failure in name resolution",
            ),
            (
                "urllib.error.URLError: <urlopen error [Errno -2] Name or service not known>",
                "Name or service not known",
            ),
            (
                "OSError: [Errno 101] Network is unreachable",
                "Network is unreachable",
            ),
            (
                "Get \"https://rates.example.com/eur\": dial tcp: lookup rates.example.com on 127.0.0.53:53: server misbehaving",
                "dial tcp: lookup",
            ),
            (
                "dial tcp 203.0.113.9:443: connect: network is unreachable",
                "network is unreachable",
            ),
            (
                "Error: getaddrinfo ENOTFOUND rates.example.com",
                "getaddrinfo ENOTFOUND",
            ),
            (
                "Error: getaddrinfo EAI_AGAIN registry.npmjs.org",
                "getaddrinfo EAI_AGAIN",
            ),
            (
                "requests.exceptions.ConnectionError: HTTPSConnectionPool(host='rates.example.com', port=443): Max retries exceeded with url: /eur (Caused by NewConnectionError('<urllib3.connection.HTTPSConnection object>: Failed to establish a new connection: [Errno 111] Connection refused'))",
                "connection refused by rates.example.com",
            ),
            (
                "dial tcp 10.20.0.7:5432: connect: connection refused",
                "connection refused by 10.20.0.7",
            ),
            (
                "Error: connect ECONNREFUSED [2001:db8::7]:443",
                "connection refused by 2001:db8::7",
            ),
        ] {
            assert_eq!(network_failure(message).as_deref(), Some(sign), "{message}");
        }
    }

    #[test]
    fn a_refused_loopback_connection_or_a_plain_failure_is_not_the_network() {
        for message in [
            "ConnectionRefusedError: [Errno 111] Connection refused",
            "dial tcp 127.0.0.1:5432: connect: connection refused",
            "Error: connect ECONNREFUSED 127.0.0.1:6379",
            "Error: connect ECONNREFUSED [::1]:6379",
            "HTTPConnectionPool(host='localhost', port=8000): Max retries exceeded ([Errno 111] Connection refused)",
            "assert 1200 == 1100",
            "AssertionError: expected 3 pages, got 2",
        ] {
            assert_eq!(network_failure(message), None, "{message}");
        }
    }
}
