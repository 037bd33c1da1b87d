//! The configuration the Helm chart and the local fleet hand to the services, read by Assay's
//! own loader: if the chart's values and `ServiceConfig` drift apart (a renamed key, a changed
//! type), this fails. helm/tests keeps the rendered files equal to what the chart renders now.

use assay_common::service_config::{SandboxKind, ServiceConfig};
use std::path::{Path, PathBuf};

fn repo_file(relative: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(relative)
}

fn load(relative: &str) -> ServiceConfig {
    let path = repo_file(relative);
    let config = ServiceConfig::from_file(&path).unwrap_or_else(|e| {
        panic!(
            "{relative} does not parse: {e}: {:?}",
            std::error::Error::source(&e)
        )
    });
    config
        .validate()
        .unwrap_or_else(|e| panic!("{relative} does not validate: {e}"));
    config
}

#[test]
fn the_charts_default_config_loads_as_rendered() {
    let config = load("helm/tests/rendered-default-config.toml");
    assert_eq!(config.nats.url, "nats://nats:4222");
    assert_eq!(config.store.url, "s3://assay-artifacts");
    assert_eq!(config.worker.sandbox, SandboxKind::Docker);
    // The chart's defaults are the loader's defaults wherever the chart has no reason to differ.
    let defaults = ServiceConfig::default();
    assert_eq!(config.schema, defaults.schema);
    // In a pod the probes must be reachable from the kubelet, not loopback only.
    assert_eq!(config.http.listen.as_deref(), Some("0.0.0.0:9464"));
    assert_eq!(config.coordinator, defaults.coordinator);
    assert_eq!(config.worker.slots, defaults.worker.slots);
    assert_eq!(config.worker.tree_cache_dir, defaults.worker.tree_cache_dir);
    // No signing key Secret by default: the fleet's cache is off.
    assert_eq!(config.cache, defaults.cache);
}

#[test]
fn every_value_the_chart_renders_reaches_the_loader() {
    let config = load("helm/tests/rendered-custom-config.toml");
    assert_eq!(config.nats.url, "nats://nats.messaging.svc:4222");
    assert_eq!(config.nats.subject_prefix, "pager-ci");
    assert_eq!(config.store.url, "file:///srv/assay-artifacts");
    assert_eq!(config.http.listen.as_deref(), Some("0.0.0.0:9100"));
    assert_eq!(config.worker.slots, 6);
    assert_eq!(config.worker.sandbox, SandboxKind::Process);
    assert_eq!(
        config.worker.image,
        "registry.internal.example/assay-runner-python:3.12"
    );
    assert_eq!(config.worker.memory_mb, 4096);
    assert_eq!(config.worker.cpus, 1.5);
    assert_eq!(config.worker.pids, 1024);
    assert_eq!(config.worker.tree_cache_dir, "/cache/trees");
    assert_eq!(config.coordinator.max_jobs_per_proof, 300);
    assert_eq!(config.nats.replicas, 3);
    assert_eq!(config.coordinator.lease_ttl_ms, 4000);
    assert_eq!(config.cache.key_file, "/etc/assay/cache/signing.key");
    assert_eq!(config.cache.interpreter, "python3 3.12.3");
    assert_eq!(config.cache.env, ["PIP_INDEX_URL"]);
    let sandbox = config.cache.sandbox.expect("a declared sandbox");
    assert_eq!(
        (sandbox.kind.as_str(), sandbox.container),
        ("process", None)
    );
}

#[test]
fn the_local_fleets_configs_load() {
    for name in ["coordinator", "worker-1", "worker-2"] {
        let config = load(&format!("deploy/fleet/{name}.toml"));
        assert_eq!(config.nats.url, "nats://nats:4222", "{name}");
        assert_eq!(config.worker.sandbox, SandboxKind::Docker, "{name}");
    }
}
