"""Checks of the local fleet files: each service's config keeps the contract the chart keeps."""

from __future__ import annotations

import pathlib
import tomllib

import pytest
import yaml

from test_chart import SERVICE_CONFIG_SCHEMA, assert_matches_schema

DEPLOY_DIR = pathlib.Path(__file__).resolve().parents[2] / "deploy"
FLEET_CONFIGS = sorted((DEPLOY_DIR / "fleet").glob("*.toml"))


def compose():
    return yaml.safe_load((DEPLOY_DIR / "compose.yaml").read_text())


def test_the_fleet_has_a_config_per_assay_service():
    assert [p.name for p in FLEET_CONFIGS] == ["coordinator.toml", "worker-1.toml", "worker-2.toml"]


@pytest.mark.parametrize("path", FLEET_CONFIGS, ids=lambda p: p.name)
def test_fleet_config_has_exactly_the_service_config_schema(path):
    config = tomllib.loads(path.read_text())
    assert_matches_schema(config, SERVICE_CONFIG_SCHEMA)
    assert config["schema"] == "assay.service/v1"
    assert config["nats"]["url"] == "nats://nats:4222"


def test_each_assay_service_mounts_its_own_config_and_runs_its_subcommand():
    services = compose()["services"]
    for name, subcommand in (("coordinator", "coordinator"), ("worker-1", "worker"), ("worker-2", "worker")):
        service = services[name]
        assert service["image"] == "assay:latest"
        assert service["command"] == [subcommand, "--config", "/etc/assay/assay.toml"]
        assert f"./fleet/{name}.toml:/etc/assay/assay.toml:ro" in service["volumes"]
        assert service["depends_on"]["create-bucket"] == {"condition": "service_completed_successfully"}


@pytest.mark.parametrize("worker", ["worker-1", "worker-2"])
def test_worker_trees_live_at_the_same_path_on_the_host_and_in_the_container(worker):
    service = compose()["services"][worker]
    config = tomllib.loads((DEPLOY_DIR / "fleet" / f"{worker}.toml").read_text())
    shared = [v for v in service["volumes"] if v.startswith("/var/tmp/assay-fleet/")]
    assert shared == [f"/var/tmp/assay-fleet/{worker}:/var/tmp/assay-fleet/{worker}"]
    assert config["worker"]["tree_cache_dir"].startswith(f"/var/tmp/assay-fleet/{worker}/")
    assert service["environment"]["TMPDIR"].startswith(f"/var/tmp/assay-fleet/{worker}/")
    assert "/var/run/docker.sock:/var/run/docker.sock" in service["volumes"]


def test_published_ports_bind_to_loopback_only():
    for name, service in compose()["services"].items():
        for port in service.get("ports", []):
            assert port.startswith("127.0.0.1:"), f"{name} publishes {port} beyond loopback"
