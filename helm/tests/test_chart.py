"""Checks of the assay Helm chart, offline: lint, render, schema, Kubernetes validity, config.

The Helm SDK is embedded through helm-python-sdk, so no helm binary and no cluster are needed.
`pytest helm/tests --update` rewrites rendered-default-config.toml and rendered-custom-config.toml,
which common/tests/chart_config.rs parses with the real service config loader.
"""

from __future__ import annotations

import copy
import pathlib
import tomllib

import helm_python as helm
import kubernetes_validate
import pytest
import yaml

TESTS_DIR = pathlib.Path(__file__).resolve().parent
CHART_DIR = TESTS_DIR.parent / "assay"
RENDERED_DEFAULT_CONFIG = TESTS_DIR / "rendered-default-config.toml"
RENDERED_CUSTOM_CONFIG = TESTS_DIR / "rendered-custom-config.toml"
RELEASE = "assay"
NAMESPACE = "proofs"
# The oldest Kubernetes the chart supports (native sidecars for dind) and the newest schemas here.
KUBE_VERSIONS = ["1.29.0", kubernetes_validate.latest_version()]

# The service config contract, schema assay.service/v1: every section, key and TOML type.
SERVICE_CONFIG_SCHEMA = {
    "schema": str,
    "nats": {"url": str, "subject_prefix": str, "credentials_file": str, "replicas": int},
    "store": {"url": str},
    "http": {"listen": str},
    "worker": {
        "slots": int,
        "sandbox": str,
        "image": str,
        "memory_mb": int,
        "cpus": float,
        "pids": int,
        "tree_cache_dir": str,
        "shutdown_grace_secs": int,
    },
    "coordinator": {"max_jobs_per_proof": int, "lease_ttl_ms": int},
}

# The fleet cache's section, rendered only with a signing key Secret: for the process sandbox
# the declared sandbox is its kind; for docker also the container the workers report.
CACHE_CONFIG_SCHEMA = {"key_file": str, "interpreter": str, "env": list, "sandbox": {"kind": str}}
DOCKER_CACHE_CONFIG_SCHEMA = {
    **CACHE_CONFIG_SCHEMA,
    "sandbox": {
        "kind": str,
        "container": {
            "image": str,
            "image_id": str,
            "repo_digests": list,
            "memory_mb": int,
            "cpus": float,
            "pids": int,
            "network": str,
        },
    },
}
RUNNER_IMAGE_ID = "sha256:" + "5c1d0b7e" * 8

EVERY_FEATURE_ON = {
    "imagePullSecrets": [{"name": "registry-pull"}],
    "serviceAccount": {"annotations": {"iam.example.com/role": "assay-artifacts-rw"}},
    "nats": {
        "credentials": {"existingSecret": "assay-nats-creds"},
        "bundled": {"enabled": True},
    },
    "store": {
        "url": "s3://invoice-service-proofs",
        "s3": {"endpoint": "https://objects.internal.example:9000", "region": "eu-west-1"},
        "credentials": {"existingSecret": "assay-store-keys"},
    },
    "otel": {"endpoint": "http://otel-collector.observability:4318"},
    "extraEnv": [{"name": "ASSAY_LOG", "value": "info,assay=debug"}],
    "coordinator": {
        "podAnnotations": {"team": "platform"},
        "cache": {"existingSecret": "assay-cache-key", "imageId": "sha256:" + "5c1d0b7e" * 8},
    },
    "worker": {"podAnnotations": {"team": "platform"}, "nodeSelector": {"pool": "builders"}},
    "keda": {"enabled": True},
    "serviceMonitor": {"enabled": True, "labels": {"release": "prometheus"}},
}

HOST_SOCKET = {"worker": {"docker": {"mode": "hostSocket"}}}
# The clustered preset, as shipped beside values.yaml.
CLUSTERED = yaml.safe_load((CHART_DIR / "values-clustered.yaml").read_text())
PROCESS_SANDBOX = {"worker": {"sandbox": "process"}}


@pytest.fixture(scope="module")
def chart():
    with helm.Chart.load(CHART_DIR) as loaded:
        yield loaded


def render(chart, values=None):
    """Rendered manifests as parsed documents, NOTES.txt and empty documents left out."""
    files = chart.render(values or {}, name=RELEASE, namespace=NAMESPACE)
    documents = []
    for path, text in sorted(files.items()):
        if path.endswith("NOTES.txt"):
            continue
        for document in yaml.safe_load_all(text):
            if document is not None:
                documents.append(document)
    return documents


def find(documents, kind, name):
    matches = [d for d in documents if d["kind"] == kind and d["metadata"]["name"] == name]
    assert len(matches) == 1, f"expected one {kind}/{name}, found {len(matches)}"
    return matches[0]


def kinds_and_names(documents):
    return sorted((d["kind"], d["metadata"]["name"]) for d in documents)


def service_config(documents):
    config_map = find(documents, "ConfigMap", f"{RELEASE}-config")
    return tomllib.loads(config_map["data"]["assay.toml"])


def pod_spec(documents, kind, name):
    return find(documents, kind, name)["spec"]["template"]["spec"]


def container(spec, name, *, init=False):
    containers = spec.get("initContainers" if init else "containers", [])
    matches = [c for c in containers if c["name"] == name]
    assert len(matches) == 1, f"expected one container {name}"
    return matches[0]


def env_map(container_spec):
    return {e["name"]: e for e in container_spec.get("env", [])}


def merged(*layers):
    result: dict = {}
    for layer in layers:
        result = _deep_merge(result, layer)
    return result


def _deep_merge(base, override):
    out = copy.deepcopy(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def assert_matches_schema(config, schema, where="config"):
    assert set(config) == set(schema), f"{where} keys differ from assay.service/v1"
    for key, expected in schema.items():
        if isinstance(expected, dict):
            assert isinstance(config[key], dict), f"{where}.{key} is not a table"
            assert_matches_schema(config[key], expected, f"{where}.{key}")
        else:
            # bool is an int in Python; the contract has no booleans, so reject them outright.
            assert type(config[key]) is expected, f"{where}.{key} is {type(config[key]).__name__}"


# --- lint -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "values",
    [{}, EVERY_FEATURE_ON, HOST_SOCKET, PROCESS_SANDBOX, CLUSTERED],
    ids=["defaults", "every-feature-on", "host-socket", "process-sandbox", "clustered"],
)
def test_helm_lint_strict_finds_no_warnings_or_errors(values):
    report = helm.lint(CHART_DIR, values, strict=True, namespace=NAMESPACE)
    assert report["errors"] == []
    # Severity 1 is informational ("icon is recommended"); 2 and 3 fail a strict lint.
    problems = [m for m in report["messages"] if m["severity"] >= 2]
    assert problems == []
    assert report["total_charts_linted"] == 1


# --- render -----------------------------------------------------------------------------------


def test_default_values_render_coordinator_workers_and_their_support(chart):
    documents = render(chart)
    assert kinds_and_names(documents) == [
        ("ConfigMap", "assay-config"),
        ("Deployment", "assay-coordinator"),
        ("Deployment", "assay-worker"),
        ("PodDisruptionBudget", "assay-worker"),
        ("Service", "assay-coordinator"),
        ("Service", "assay-worker"),
        ("ServiceAccount", "assay"),
    ]


def test_every_optional_feature_renders_its_resources(chart):
    documents = render(chart, EVERY_FEATURE_ON)
    assert kinds_and_names(documents) == [
        ("ConfigMap", "assay-config"),
        ("ConfigMap", "assay-nats"),
        ("Deployment", "assay-coordinator"),
        ("Deployment", "assay-worker"),
        ("PodDisruptionBudget", "assay-worker"),
        ("ScaledObject", "assay-worker"),
        ("Service", "assay-coordinator"),
        ("Service", "assay-nats"),
        ("Service", "assay-worker"),
        ("ServiceAccount", "assay"),
        ("ServiceMonitor", "assay"),
        ("StatefulSet", "assay-nats"),
    ]


@pytest.mark.parametrize(
    "values",
    [{}, EVERY_FEATURE_ON, HOST_SOCKET, PROCESS_SANDBOX, CLUSTERED],
    ids=["defaults", "every-feature-on", "host-socket", "process-sandbox", "clustered"],
)
def test_no_values_ever_render_an_inline_secret(chart, values):
    documents = render(chart, values)
    assert "Secret" not in {d["kind"] for d in documents}


# --- values.schema.json -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("values", "offending_path"),
    [
        ({"worker": {"slots": -1}}, "/worker/slots"),
        ({"worker": {"slots": 0}}, "/worker/slots"),
        ({"worker": {"slots": "two"}}, "/worker/slots"),
        ({"worker": {"sandbox": "vm"}}, "/worker/sandbox"),
        ({"worker": {"cpus": 0}}, "/worker/cpus"),
        ({"worker": {"memoryMb": "2G"}}, "/worker/memoryMb"),
        ({"worker": {"treeCacheDir": "relative/trees"}}, "/worker/treeCacheDir"),
        ({"worker": {"terminationGracePeriodSeconds": -5}}, "/worker/terminationGracePeriodSeconds"),
        ({"worker": {"shutdownGraceSecs": -1}}, "/worker/shutdownGraceSecs"),
        ({"worker": {"shutdownGraceSecs": "14m"}}, "/worker/shutdownGraceSecs"),
        ({"worker": {"docker": {"mode": "socket"}}}, "/worker/docker/mode"),
        ({"worker": {"slotz": 2}}, "/worker"),
        ({"nats": {"url": "localhost:4222"}}, "/nats/url"),
        ({"nats": {"subjectPrefix": "assay.>"}}, "/nats/subjectPrefix"),
        ({"store": {"url": "ftp://artifacts"}}, "/store/url"),
        ({"store": {"accessKey": "AKIAEXAMPLE"}}, "/store"),
        ({"http": {"port": 70000}}, "/http/port"),
        ({"coordinator": {"maxJobsPerProof": 0}}, "/coordinator/maxJobsPerProof"),
        ({"coordinator": {"cache": {"imageId": "assay-runner-python:latest"}}}, "/coordinator/cache/imageId"),
        ({"coordinator": {"cache": {"env": ["PIP INDEX"]}}}, "/coordinator/cache/env/0"),
        ({"coordinator": {"cache": {"keyFile": "/tmp/key"}}}, "/coordinator/cache"),
        ({"keda": {"lagThreshold": 0}}, "/keda/lagThreshold"),
        ({"keda": {"natsMonitoringEndpoint": "http://nats:8222"}}, "/keda/natsMonitoringEndpoint"),
        ({"serviceMonitor": {"interval": "often"}}, "/serviceMonitor/interval"),
        ({"replicas": 3}, ""),
        ({"nats": {"replicas": 0}}, "/nats/replicas"),
        ({"nats": {"replicas": 7}}, "/nats/replicas"),
        ({"nats": {"bundled": {"replicas": 2}}}, "/nats/bundled/replicas"),
        ({"coordinator": {"replicas": 0}}, "/coordinator/replicas"),
        ({"coordinator": {"leaseTtlMs": 100}}, "/coordinator/leaseTtlMs"),
    ],
)
def test_schema_rejects_bad_values_and_names_the_key(chart, values, offending_path):
    with pytest.raises(helm.HelmValuesError) as rejected:
        chart.validate_schema(chart.merge_values(values))
    assert f"at '{offending_path}'" in str(rejected.value)
    # Install renders through the same gate, so a bad value never reaches a manifest.
    with pytest.raises(helm.HelmValuesError):
        chart.render(values, name=RELEASE, namespace=NAMESPACE)


@pytest.mark.parametrize(
    "values",
    [
        {},
        EVERY_FEATURE_ON,
        HOST_SOCKET,
        PROCESS_SANDBOX,
        {"worker": {"cpus": 0.5, "slots": 16}, "store": {"url": "file:///srv/assay"}},
        {"worker": {"podDisruptionBudget": {"maxUnavailable": "25%"}}},
        {"nats": {"url": "tls://nats.messaging.svc:4222"}},
    ],
    ids=["defaults", "every-feature-on", "host-socket", "process", "file-store", "pdb-percent", "tls"],
)
def test_schema_accepts_documented_values(chart, values):
    chart.validate_schema(chart.merge_values(values))


# --- Kubernetes validity ----------------------------------------------------------------------

CUSTOM_RESOURCES = {
    ("keda.sh/v1alpha1", "ScaledObject"),
    ("monitoring.coreos.com/v1", "ServiceMonitor"),
}


@pytest.mark.parametrize("kube_version", KUBE_VERSIONS)
@pytest.mark.parametrize(
    "values",
    [{}, EVERY_FEATURE_ON, HOST_SOCKET, PROCESS_SANDBOX, CLUSTERED],
    ids=["defaults", "every-feature-on", "host-socket", "process-sandbox", "clustered"],
)
def test_rendered_manifests_validate_against_kubernetes_schemas(chart, values, kube_version):
    documents = render(chart, values)
    validated = 0
    for document in documents:
        if (document["apiVersion"], document["kind"]) in CUSTOM_RESOURCES:
            continue
        kubernetes_validate.validate(document, kube_version, strict=True)
        validated += 1
    assert validated >= 7


def test_custom_resources_have_the_shape_their_operators_expect(chart):
    documents = render(chart, EVERY_FEATURE_ON)
    scaled = find(documents, "ScaledObject", "assay-worker")
    assert scaled["apiVersion"] == "keda.sh/v1alpha1"
    assert scaled["spec"]["scaleTargetRef"] == {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "name": "assay-worker",
    }
    (trigger,) = scaled["spec"]["triggers"]
    assert trigger["type"] == "nats-jetstream"
    # KEDA reads trigger metadata as strings only.
    assert all(isinstance(v, str) for v in trigger["metadata"].values())
    assert trigger["metadata"]["stream"] == "ASSAY_JOBS"
    assert trigger["metadata"]["consumer"] == "assay-workers"
    assert trigger["metadata"]["lagThreshold"] == "10"
    assert trigger["metadata"]["natsServerMonitoringEndpoint"] == f"assay-nats.{NAMESPACE}.svc:8222"
    assert (scaled["spec"]["minReplicaCount"], scaled["spec"]["maxReplicaCount"]) == (1, 20)

    monitor = find(documents, "ServiceMonitor", "assay")
    assert monitor["metadata"]["labels"]["release"] == "prometheus"
    assert monitor["spec"]["endpoints"] == [{"port": "http", "path": "/metrics", "interval": "30s"}]
    selected = [
        d
        for d in documents
        if d["kind"] == "Service"
        and all(d["metadata"]["labels"].get(k) == v for k, v in monitor["spec"]["selector"]["matchLabels"].items())
        and d["metadata"]["labels"].get("app.kubernetes.io/component") in ("coordinator", "worker")
    ]
    assert sorted(s["metadata"]["name"] for s in selected) == ["assay-coordinator", "assay-worker"]
    assert all(any(p["name"] == "http" for p in s["spec"]["ports"]) for s in selected)


# --- the service config -----------------------------------------------------------------------


def test_default_config_has_exactly_the_service_config_schema(chart):
    config = service_config(render(chart))
    assert_matches_schema(config, SERVICE_CONFIG_SCHEMA)
    assert config == {
        "schema": "assay.service/v1",
        "nats": {
            "url": "nats://nats:4222",
            "subject_prefix": "assay",
            "credentials_file": "",
            "replicas": 1,
        },
        "store": {"url": "s3://assay-artifacts"},
        "http": {"listen": "0.0.0.0:9464"},
        "worker": {
            "slots": 2,
            "sandbox": "docker",
            "image": "assay-runner-python:latest",
            "memory_mb": 2048,
            "cpus": 1.0,
            "pids": 512,
            "tree_cache_dir": "/var/cache/assay/trees",
            "shutdown_grace_secs": 840,
        },
        "coordinator": {"max_jobs_per_proof": 64, "lease_ttl_ms": 6000},
    }


# Every value that reaches the service config set away from its default; rendered into
# rendered-custom-config.toml for the Rust side, like the defaults.
CUSTOM_CONFIG_VALUES = {
    "nats": {"url": "nats://nats.messaging.svc:4222", "subjectPrefix": "pager-ci", "replicas": 3},
    "store": {"url": "file:///srv/assay-artifacts"},
    "http": {"port": 9100},
    "worker": {
        "slots": 6,
        "sandbox": "process",
        "runnerImage": "registry.internal.example/assay-runner-python:3.12",
        "memoryMb": 4096,
        "cpus": 1.5,
        "pids": 1024,
        "treeCacheDir": "/cache/trees",
        "shutdownGraceSecs": 1200,
        "terminationGracePeriodSeconds": 1260,
    },
    "coordinator": {
        "maxJobsPerProof": 300,
        "leaseTtlMs": 4000,
        "cache": {
            "existingSecret": "assay-cache-key",
            "key": "signing.key",
            "interpreter": "python3 3.12.3",
            "env": ["PIP_INDEX_URL"],
        },
    },
}


def test_config_follows_values_key_by_key(chart):
    documents = render(chart, CUSTOM_CONFIG_VALUES)
    config = service_config(documents)
    assert_matches_schema(config, {**SERVICE_CONFIG_SCHEMA, "cache": CACHE_CONFIG_SCHEMA})
    assert config["nats"] == {
        "url": "nats://nats.messaging.svc:4222",
        "subject_prefix": "pager-ci",
        "credentials_file": "",
        "replicas": 3,
    }
    assert config["store"] == {"url": "file:///srv/assay-artifacts"}
    assert config["http"] == {"listen": "0.0.0.0:9100"}
    assert config["worker"] == {
        "slots": 6,
        "sandbox": "process",
        "image": "registry.internal.example/assay-runner-python:3.12",
        "memory_mb": 4096,
        "cpus": 1.5,
        "pids": 1024,
        "tree_cache_dir": "/cache/trees",
        "shutdown_grace_secs": 1200,
    }
    assert config["coordinator"] == {"max_jobs_per_proof": 300, "lease_ttl_ms": 4000}
    assert config["cache"] == {
        "key_file": "/etc/assay/cache/signing.key",
        "interpreter": "python3 3.12.3",
        "env": ["PIP_INDEX_URL"],
        "sandbox": {"kind": "process"},
    }
    for name in ("assay-coordinator", "assay-worker"):
        (port,) = container(pod_spec(documents, "Deployment", name), name.split("-")[1])["ports"]
        assert port == {"name": "http", "containerPort": 9100, "protocol": "TCP"}


@pytest.mark.parametrize(("cpus", "rendered"), [(2, "cpus = 2.0"), (1.0, "cpus = 1.0"), (0.125, "cpus = 0.125")])
def test_cpus_always_render_as_a_toml_float(chart, cpus, rendered):
    documents = render(chart, {"worker": {"cpus": cpus}})
    text = find(documents, "ConfigMap", f"{RELEASE}-config")["data"]["assay.toml"]
    assert rendered in text.splitlines()
    assert tomllib.loads(text)["worker"]["cpus"] == float(cpus)


def test_strings_with_toml_metacharacters_survive_rendering(chart):
    prefix_safe = {"worker": {"runnerImage": 'runner "quoted" \\ back#slash = [x]'}}
    config = service_config(render(chart, prefix_safe))
    assert config["worker"]["image"] == 'runner "quoted" \\ back#slash = [x]'


def test_bundled_nats_becomes_the_configured_url_and_its_service_exists(chart):
    documents = render(chart, {"nats": {"bundled": {"enabled": True}}})
    assert service_config(documents)["nats"]["url"] == "nats://assay-nats:4222"
    service = find(documents, "Service", "assay-nats")
    assert {p["name"]: p["port"] for p in service["spec"]["ports"]} == {"client": 4222, "monitor": 8222}
    nats_conf = find(documents, "ConfigMap", "assay-nats")["data"]["nats.conf"]
    assert "jetstream" in nats_conf and "store_dir: /data" in nats_conf


def test_nats_credentials_secret_is_mounted_where_the_config_points(chart):
    documents = render(chart, {"nats": {"credentials": {"existingSecret": "assay-nats-creds", "key": "fleet.creds"}}})
    credentials_file = service_config(documents)["nats"]["credentials_file"]
    assert credentials_file == "/etc/assay/nats/fleet.creds"
    for name, container_name in (("assay-coordinator", "coordinator"), ("assay-worker", "worker")):
        spec = pod_spec(documents, "Deployment", name)
        (volume,) = [v for v in spec["volumes"] if v["name"] == "nats-credentials"]
        assert volume["secret"] == {
            "secretName": "assay-nats-creds",
            "items": [{"key": "fleet.creds", "path": "fleet.creds"}],
        }
        (mount,) = [m for m in container(spec, container_name)["volumeMounts"] if m["name"] == "nats-credentials"]
        assert credentials_file == f"{mount['mountPath']}/fleet.creds"


def test_store_credentials_come_only_from_a_secret_reference(chart):
    documents = render(chart, EVERY_FEATURE_ON)
    for name, container_name in (("assay-coordinator", "coordinator"), ("assay-worker", "worker")):
        env = env_map(container(pod_spec(documents, "Deployment", name), container_name))
        assert env["AWS_ACCESS_KEY_ID"]["valueFrom"]["secretKeyRef"] == {
            "name": "assay-store-keys",
            "key": "AWS_ACCESS_KEY_ID",
        }
        assert env["AWS_SECRET_ACCESS_KEY"]["valueFrom"]["secretKeyRef"] == {
            "name": "assay-store-keys",
            "key": "AWS_SECRET_ACCESS_KEY",
        }
        assert env["AWS_ENDPOINT_URL"]["value"] == "https://objects.internal.example:9000"
        assert env["AWS_REGION"]["value"] == "eu-west-1"
        assert env["OTEL_EXPORTER_OTLP_ENDPOINT"]["value"] == "http://otel-collector.observability:4318"
        assert env["OTEL_SERVICE_NAME"]["value"] == f"assay-{container_name}"
        assert env["ASSAY_LOG"]["value"] == "info,assay=debug"
        assert env["ASSAY_CONFIG"]["value"] == "/etc/assay/assay.toml"


def test_the_fleet_cache_is_off_by_default_and_no_pod_mounts_a_cache_key(chart):
    documents = render(chart)
    assert "cache" not in service_config(documents)
    for name in ("assay-coordinator", "assay-worker"):
        volumes = pod_spec(documents, "Deployment", name).get("volumes", [])
        assert not [v for v in volumes if v["name"] == "cache-key"], name


def test_the_cache_key_is_mounted_into_the_coordinator_only_and_declares_the_workers_sandbox(chart):
    values = {
        "coordinator": {"cache": {"existingSecret": "assay-cache-key", "imageId": RUNNER_IMAGE_ID}},
        "worker": {"memoryMb": 4096, "cpus": 2, "pids": 256},
    }
    documents = render(chart, values)
    config = service_config(documents)
    assert_matches_schema(config["cache"], DOCKER_CACHE_CONFIG_SCHEMA, "config.cache")
    # The declaration is the workers' own settings: what their results report.
    assert config["cache"]["sandbox"] == {
        "kind": "docker",
        "container": {
            "image": config["worker"]["image"],
            "image_id": RUNNER_IMAGE_ID,
            "repo_digests": [],
            "memory_mb": 4096,
            "cpus": 2.0,
            "pids": 256,
            "network": "none",
        },
    }
    spec = pod_spec(documents, "Deployment", "assay-coordinator")
    (volume,) = [v for v in spec["volumes"] if v["name"] == "cache-key"]
    assert volume["secret"]["secretName"] == "assay-cache-key"
    assert volume["secret"]["items"] == [{"key": "cache.key", "path": "cache.key"}]
    (mount,) = [m for m in container(spec, "coordinator")["volumeMounts"] if m["name"] == "cache-key"]
    assert config["cache"]["key_file"] == f"{mount['mountPath']}/cache.key"
    assert mount["readOnly"] is True
    worker = pod_spec(documents, "Deployment", "assay-worker")
    assert not [v for v in worker["volumes"] if v["name"] == "cache-key"]
    assert not [m for c in worker["containers"] for m in c.get("volumeMounts", []) if m["name"] == "cache-key"]


def test_default_render_sets_no_store_credentials_or_otlp_export(chart):
    documents = render(chart)
    env = env_map(container(pod_spec(documents, "Deployment", "assay-coordinator"), "coordinator"))
    assert not {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "OTEL_EXPORTER_OTLP_ENDPOINT"} & set(env)


@pytest.mark.parametrize(
    ("committed", "values"),
    [(RENDERED_DEFAULT_CONFIG, {}), (RENDERED_CUSTOM_CONFIG, CUSTOM_CONFIG_VALUES)],
    ids=["defaults", "custom"],
)
def test_committed_rendered_config_matches_the_chart(chart, request, committed, values):
    # common/tests/chart_config.rs parses these files with Assay's own loader.
    config_map = find(render(chart, values), "ConfigMap", f"{RELEASE}-config")
    rendered = config_map["data"]["assay.toml"]
    if request.config.getoption("--update"):
        committed.write_text(rendered)
    assert committed.exists(), "run `pytest helm/tests --update` to write it"
    assert committed.read_text() == rendered, (
        f"helm/tests/{committed.name} is stale (hint: run `pytest helm/tests --update`)"
    )


# --- coordinator --------------------------------------------------------------------------------


def test_coordinator_runs_one_replica_replaced_by_recreate(chart):
    documents = render(chart)
    deployment = find(documents, "Deployment", "assay-coordinator")
    assert deployment["spec"]["replicas"] == 1
    assert deployment["spec"]["strategy"] == {"type": "Recreate"}
    assert "affinity" not in deployment["spec"]["template"]["spec"]
    assert ("PodDisruptionBudget", "assay-coordinator") not in kinds_and_names(documents)


def spread_across_nodes(spec, component):
    """The pod's required anti-affinity keeps its component's pods on distinct nodes."""
    (term,) = spec["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert term["topologyKey"] == "kubernetes.io/hostname"
    assert term["labelSelector"]["matchLabels"]["app.kubernetes.io/component"] == component
    assert term["labelSelector"]["matchLabels"]["app.kubernetes.io/instance"] == RELEASE


def test_the_clustered_preset_runs_two_coordinators_and_three_nats_servers_apart(chart):
    documents = render(chart, CLUSTERED)
    coordinator = find(documents, "Deployment", "assay-coordinator")
    assert coordinator["spec"]["replicas"] == 2
    assert coordinator["spec"]["strategy"]["type"] == "RollingUpdate"
    spread_across_nodes(coordinator["spec"]["template"]["spec"], "coordinator")
    budget = find(documents, "PodDisruptionBudget", "assay-coordinator")
    assert budget["spec"]["minAvailable"] == 1
    assert budget["spec"]["selector"]["matchLabels"]["app.kubernetes.io/component"] == "coordinator"

    nats = find(documents, "StatefulSet", "assay-nats")
    assert nats["spec"]["replicas"] == 3
    assert nats["spec"]["serviceName"] == "assay-nats-cluster"
    spread_across_nodes(nats["spec"]["template"]["spec"], "nats")
    headless = find(documents, "Service", "assay-nats-cluster")
    assert headless["spec"]["clusterIP"] == "None"
    assert find(documents, "PodDisruptionBudget", "assay-nats")["spec"]["maxUnavailable"] == 1
    nats_conf = find(documents, "ConfigMap", "assay-nats")["data"]["nats.conf"]
    for i in range(3):
        assert f"nats://assay-nats-{i}.assay-nats-cluster:6222" in nats_conf
    assert "server_name: $SERVER_NAME" in nats_conf
    env = env_map(container(nats["spec"]["template"]["spec"], "nats"))
    assert env["SERVER_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"

    config = service_config(documents)
    assert config["nats"]["replicas"] == 3
    assert config["nats"]["url"].split(",") == [
        f"nats://assay-nats-{i}.assay-nats-cluster:4222" for i in range(3)
    ]
    assert config["coordinator"]["lease_ttl_ms"] == 6000


def test_more_replicas_than_bundled_servers_are_refused(chart):
    with pytest.raises(Exception, match="exceeds the bundled NATS servers"):
        chart.render(
            {"nats": {"replicas": 3, "bundled": {"enabled": True}}}, name=RELEASE, namespace=NAMESPACE
        )


def test_the_bundled_cluster_routes_are_open_only_between_its_servers(chart):
    documents = render(chart, merged(CLUSTERED, {"networkPolicy": {"enabled": True}}))
    policy = find(documents, "NetworkPolicy", "assay-nats")
    routes = [rule for rule in policy["spec"]["ingress"] if rule["ports"][0]["port"] == 6222]
    assert len(routes) == 1
    assert routes[0]["from"][0]["podSelector"]["matchLabels"]["app.kubernetes.io/component"] == "nats"
    assert any(rule["ports"][0]["port"] == 6222 for rule in policy["spec"]["egress"])


def test_coordinator_runs_non_root_with_read_only_root_and_no_capabilities(chart):
    spec = pod_spec(render(chart), "Deployment", "assay-coordinator")
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert spec["securityContext"]["runAsUser"] != 0
    security = container(spec, "coordinator")["securityContext"]
    assert security["runAsNonRoot"] is True
    assert security["readOnlyRootFilesystem"] is True
    assert security["allowPrivilegeEscalation"] is False
    assert security["capabilities"] == {"drop": ["ALL"]}
    assert spec["automountServiceAccountToken"] is False


@pytest.mark.parametrize(("name", "container_name"), [("assay-coordinator", "coordinator"), ("assay-worker", "worker")])
def test_probes_hit_health_endpoints_on_the_configured_http_port(chart, name, container_name):
    documents = render(chart)
    listen_port = int(service_config(documents)["http"]["listen"].rsplit(":", 1)[1])
    service_container = container(pod_spec(documents, "Deployment", name), container_name)
    (port,) = service_container["ports"]
    assert port["containerPort"] == listen_port and port["name"] == "http"
    assert service_container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    assert service_container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
    assert service_container["args"] == [container_name, "--config", "/etc/assay/assay.toml"]
    assert service_container["resources"]["requests"]


# --- workers ----------------------------------------------------------------------------------


def test_worker_grace_period_follows_values(chart):
    spec = pod_spec(render(chart, {"worker": {"terminationGracePeriodSeconds": 2700}}), "Deployment", "assay-worker")
    assert spec["terminationGracePeriodSeconds"] == 2700


def test_worker_shutdown_grace_is_rendered_and_the_pod_outlives_it(chart):
    values = {"worker": {"shutdownGraceSecs": 1800, "terminationGracePeriodSeconds": 1860}}
    documents = render(chart, values)
    config = service_config(documents)
    assert config["worker"]["shutdown_grace_secs"] == 1800
    spec = pod_spec(documents, "Deployment", "assay-worker")
    assert spec["terminationGracePeriodSeconds"] > config["worker"]["shutdown_grace_secs"]
    # By default too: the pod is not killed while the worker still hands back its jobs.
    defaults = render(chart)
    default_config = service_config(defaults)
    default_spec = pod_spec(defaults, "Deployment", "assay-worker")
    assert default_spec["terminationGracePeriodSeconds"] > default_config["worker"]["shutdown_grace_secs"]


@pytest.mark.parametrize("termination", [600, 840])
def test_a_pod_grace_not_above_the_shutdown_grace_is_refused(chart, termination):
    values = {"worker": {"shutdownGraceSecs": 840, "terminationGracePeriodSeconds": termination}}
    with pytest.raises(Exception) as refused:
        render(chart, values)
    assert "must exceed worker.shutdownGraceSecs" in str(refused.value)


def test_dind_sidecar_shares_socket_trees_and_scratch_at_the_same_paths(chart):
    spec = pod_spec(render(chart), "Deployment", "assay-worker")
    dind = container(spec, "dind", init=True)
    worker = container(spec, "worker")
    # A native sidecar: up before the worker, stopped after it.
    assert dind["restartPolicy"] == "Always"
    assert dind["securityContext"]["privileged"] is True
    assert env_map(worker)["DOCKER_HOST"]["value"] == "unix:///run/docker/docker.sock"
    assert "--host=unix:///run/docker/docker.sock" in dind["args"]

    def mounts(c):
        return {(m["name"], m.get("subPath"), m["mountPath"]) for m in c["volumeMounts"]}

    shared = {
        ("docker-socket", None, "/run/docker"),
        ("work", "trees", "/var/cache/assay/trees"),
        ("work", "scratch", "/var/lib/assay/scratch"),
    }
    assert shared <= mounts(dind)
    assert shared <= mounts(worker)
    assert env_map(worker)["TMPDIR"]["value"] == "/var/lib/assay/scratch"
    # The worker itself stays unprivileged.
    assert worker["securityContext"]["runAsNonRoot"] is True
    assert worker["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert spec["securityContext"]["runAsGroup"] == 10001 and "--group=10001" in dind["args"]


def test_host_socket_mode_mounts_the_nodes_socket_and_no_privileged_container(chart):
    spec = pod_spec(render(chart, HOST_SOCKET), "Deployment", "assay-worker")
    assert "initContainers" not in spec
    worker = container(spec, "worker")
    assert env_map(worker)["DOCKER_HOST"]["value"] == "unix:///var/run/docker.sock"
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert volumes["docker-socket"]["hostPath"] == {"path": "/var/run/docker.sock", "type": "Socket"}
    # The node's engine bind-mounts by path, so host paths equal container paths.
    for name in ("host-trees", "host-scratch"):
        (mount,) = [m for m in worker["volumeMounts"] if m["name"] == name]
        assert volumes[name]["hostPath"]["path"] == mount["mountPath"]
    assert spec["securityContext"]["supplementalGroups"] == [999]
    assert not worker["securityContext"].get("privileged", False)


def test_process_sandbox_needs_no_docker_engine(chart):
    spec = pod_spec(render(chart, PROCESS_SANDBOX), "Deployment", "assay-worker")
    assert "initContainers" not in spec
    worker = container(spec, "worker")
    assert "DOCKER_HOST" not in env_map(worker)
    assert "docker-socket" not in {v["name"] for v in spec["volumes"]}


def test_workers_have_a_disruption_budget_matching_their_pods(chart):
    documents = render(chart)
    budget = find(documents, "PodDisruptionBudget", "assay-worker")
    deployment = find(documents, "Deployment", "assay-worker")
    assert budget["spec"]["maxUnavailable"] == 1
    assert budget["spec"]["selector"]["matchLabels"] == deployment["spec"]["selector"]["matchLabels"]
    assert deployment["spec"]["replicas"] == 2


def test_keda_owns_the_worker_count_when_enabled(chart):
    documents = render(chart, {"keda": {"enabled": True, "natsMonitoringEndpoint": "nats.messaging.svc:8222"}})
    assert "replicas" not in find(documents, "Deployment", "assay-worker")["spec"]
    scaled = find(documents, "ScaledObject", "assay-worker")
    assert scaled["spec"]["triggers"][0]["metadata"]["natsServerMonitoringEndpoint"] == "nats.messaging.svc:8222"


def test_keda_against_an_external_nats_requires_its_monitoring_endpoint(chart):
    with pytest.raises(helm.HelmRenderError) as failed:
        chart.render({"keda": {"enabled": True}}, name=RELEASE, namespace=NAMESPACE)
    assert "keda.natsMonitoringEndpoint is required" in str(failed.value)


def test_config_change_rolls_both_deployments(chart):
    def checksums(values):
        documents = render(chart, values)
        return [
            find(documents, "Deployment", n)["spec"]["template"]["metadata"]["annotations"]["checksum/config"]
            for n in ("assay-coordinator", "assay-worker")
        ]

    assert checksums({}) != checksums({"worker": {"slots": 3}})
