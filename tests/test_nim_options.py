"""Issue 18b: the NVIDIA NIM Helm chart's options (probes, existing NGC / pull Secrets, a worker command) and the
Azure InfiniBand resource name (fabric.rdmaResourceName).

The chart values are asserted field by field against NVIDIA/nim-deploy helm/nim-llm at commit bb84c40
(2025-05-12), the chart version docs/workloads.md follows:
- values.yaml `model.ngcAPISecret` ("Name of pre-existing secret with a key named `NGC_API_KEY`"), and
  templates/multi_node_deployment.yaml: `NGC_API_KEY: valueFrom.secretKeyRef {name: .Values.model.ngcAPISecret,
  key: NGC_API_KEY}` on the LWS leader / worker and the MPIJob launcher / worker;
- values.yaml `imagePullSecrets: [{name: ngc-secret}]`, rendered `imagePullSecrets: toYaml .Values.imagePullSecrets`
  on every multi-node pod template;
- values.yaml `livenessProbe: {enabled: true, method: http, path: /v1/health/live, initialDelaySeconds: 15,
  timeoutSeconds: 1, periodSeconds: 10, successThreshold: 1, failureThreshold: 3}` and `readinessProbe` /
  `startupProbe` `.enabled` (templates/_helpers.tpl "nim-llm.probes": each probe only when enabled).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from multinode import plan as mplan
from multinode.schema_check import validate_object

GUIDES = Path(__file__).resolve().parent / "guides"
STACKS = Path(__file__).resolve().parent.parent / "stacks"
_CACHE: dict[str, mplan.PlanResult] = {}

CHART_LIVENESS = {"httpGet": {"path": "/v1/health/live", "port": 8000}, "initialDelaySeconds": 15,
                  "periodSeconds": 10, "timeoutSeconds": 1, "successThreshold": 1, "failureThreshold": 3}


def _plan(tmp_path: Path, doc: dict[str, Any], name: str = "t") -> mplan.PlanResult:
    f = tmp_path / f"Pulumi.{name}.yaml"
    f.write_text(yaml.safe_dump(doc))
    return mplan.plan(name, tmp_path / f"out-{name}", f)


def _guide(name: str) -> dict[str, Any]:
    return yaml.safe_load((GUIDES / f"Pulumi.{name}.yaml").read_text())


def _find(res: mplan.PlanResult, kind: str) -> dict[str, Any]:
    hits = [o for o in res.k8s_objects if o.get("kind") == kind]
    assert len(hits) == 1, [o.get("kind") for o in res.k8s_objects]
    return hits[0]


def _env(container: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container.get("env", [])}


def _secrets_created(res: mplan.PlanResult) -> list[str]:
    return [r.name for r in res.registrations if r.type == "kubernetes:core/v1:Secret"]


@pytest.fixture(scope="module")
def options(tmp_path_factory) -> mplan.PlanResult:
    out = tmp_path_factory.mktemp("nim-options")
    return mplan.plan("nim-lws-options", out, GUIDES / "Pulumi.nim-lws-options.yaml")


def test_lws_nim_takes_the_charts_existing_secrets(options):
    assert options.exit_code == mplan.EXIT_OK, options.error or options.violations
    lwt = _find(options, "LeaderWorkerSet")["spec"]["leaderWorkerTemplate"]
    for role in ("leaderTemplate", "workerTemplate"):
        spec = lwt[role]["spec"]
        assert spec["imagePullSecrets"] == [{"name": "ngc-secret"}]
        assert _env(spec["containers"][0])["NGC_API_KEY"] == {"secretKeyRef": {"name": "ngc-api", "key": "NGC_API_KEY"}}
    # existing Secrets are only named: the stack creates none (no ngcApiKey / imagePullSecret in this stack)
    assert _secrets_created(options) == []


def test_lws_nim_probes_and_worker_command(options):
    lwt = _find(options, "LeaderWorkerSet")["spec"]["leaderWorkerTemplate"]
    leader = lwt["leaderTemplate"]["spec"]["containers"][0]
    worker = lwt["workerTemplate"]["spec"]["containers"][0]
    assert leader["livenessProbe"] == CHART_LIVENESS
    assert leader["readinessProbe"]["httpGet"] == {"path": "/v1/health/ready", "port": 8000}
    assert leader["startupProbe"]["httpGet"] == {"path": "/v1/health/ready", "port": 8000}
    assert "command" not in leader                       # the leader keeps the image's entrypoint
    # the worker's own command ends in the image's start script (a worker that does not run it never joins)
    assert worker["command"] == ["/bin/bash", "-c", "nvidia-smi topo -m; exec /opt/nim/start_server.sh"]
    assert not any(k.endswith("Probe") for k in worker)  # the workers serve no HTTP
    for obj in options.k8s_objects:
        assert validate_object(obj) == [], obj["kind"]


def test_probe_switches_remove_what_they_turn_off(tmp_path):
    doc = _guide("nim-lws")
    w = doc["config"]["multinode:workloads"][0]
    w.update(nodes=1, pipelineParallel=1, probes={"startup": False, "readiness": False})
    w.pop("groupPlacement")
    res = _plan(tmp_path, doc)
    assert res.exit_code == mplan.EXIT_OK, res.error
    leader = _find(res, "LeaderWorkerSet")["spec"]["leaderWorkerTemplate"]["leaderTemplate"]["spec"]["containers"][0]
    assert not any(k.endswith("Probe") for k in leader)
    # unset probes render as before: startup + readiness, no liveness
    res2 = _plan(tmp_path, _guide("nim-lws"), "default")
    leader2 = _find(res2, "LeaderWorkerSet")["spec"]["leaderWorkerTemplate"]["leaderTemplate"]["spec"]["containers"][0]
    assert sorted(k for k in leader2 if k.endswith("Probe")) == ["readinessProbe", "startupProbe"]


def test_mpijob_nim_takes_the_charts_existing_secrets(tmp_path):
    doc = _guide("nim-mpijob")
    doc["config"].pop("multinode:ngcApiKey")
    w = doc["config"]["multinode:workloads"][0]
    w.update(ngcApiSecret="ngc-api", imagePullSecrets=["ngc-secret", "mirror-pull"])
    res = _plan(tmp_path, doc)
    assert res.exit_code == mplan.EXIT_OK, res.error
    specs = _find(res, "MPIJob")["spec"]["mpiReplicaSpecs"]
    for role in ("Launcher", "Worker"):
        spec = specs[role]["template"]["spec"]
        assert spec["imagePullSecrets"] == [{"name": "ngc-secret"}, {"name": "mirror-pull"}]
        assert _env(spec["containers"][0])["NGC_API_KEY"] == {"secretKeyRef": {"name": "ngc-api", "key": "NGC_API_KEY"}}
    assert _secrets_created(res) == []


def _base() -> dict[str, Any]:
    return _guide("nim-lws")


@pytest.mark.parametrize("edit, key, words", [
    (lambda c, w: w.update(probes={"readiness": False}), "workloads[0].probes.readiness", "keep readiness true"),
    (lambda c, w: w.update(probes={"startup": False, "liveness": True}), "workloads[0].probes.liveness",
     "RecreateGroupOnPodRestart"),
    (lambda c, w: w.update(probes={"startup": False}, startupTimeoutMinutes=90), "workloads[0].startupTimeoutMinutes",
     "startup probe"),
    (lambda c, w: w.update(ngcApiSecret="ngc-api"), "workloads[0].ngcApiSecret", "choose one"),
    (lambda c, w: w.update(ngcApiSecret="Not_A_Name"), "workloads[0].ngcApiSecret", "not a Secret name"),
    (lambda c, w: (c.update({"multinode:imagePullSecret": {"secure": "v1:eyJhdXRocyI6IHt9fQ=="}}),
                   w.update(imagePullSecrets=["ngc-secret"])), "workloads[0].imagePullSecrets", "choose one"),
    (lambda c, w: w.update(imagePullSecrets=["a", "a"]), "workloads[0].imagePullSecrets[1]", "listed twice"),
    (lambda c, w: w.update(workerCommand=[]), "workloads[0].workerCommand", "empty command"),
    (lambda c, w: w.update(engine="vllm", image=None, ngcApiSecret="x"), "workloads[0].ngcApiSecret",
     "only NIM"),
])
def test_nim_option_errors_name_the_key(tmp_path, edit, key, words):
    doc = _base()
    w = doc["config"]["multinode:workloads"][0]
    edit(doc["config"], w)
    w = {k: v for k, v in w.items() if v is not None}
    doc["config"]["multinode:workloads"][0] = w
    res = _plan(tmp_path, doc)
    assert res.exit_code == mplan.EXIT_CONFIG and res.registrations == [], res.error
    assert key in res.error and words in res.error, res.error


@pytest.mark.parametrize("edit, key, words", [
    (lambda w: w.update(probes={"liveness": True}), "workloads[0].probes", "WaitForWorkersReady"),
    (lambda w: w.update(workerCommand=["sleep", "1"]), "workloads[0].workerCommand", "sshd"),
])
def test_mpijob_refuses_probes_and_worker_command(tmp_path, edit, key, words):
    doc = _guide("nim-mpijob")
    edit(doc["config"]["multinode:workloads"][0])
    res = _plan(tmp_path, doc)
    assert res.exit_code == mplan.EXIT_CONFIG and res.registrations == [], res.error
    assert key in res.error and words in res.error, res.error


def test_nim_without_any_ngc_key_names_both_ways(tmp_path):
    doc = _base()
    doc["config"].pop("multinode:ngcApiKey")
    res = _plan(tmp_path, doc)
    assert res.exit_code == mplan.EXIT_CONFIG
    assert "ngcApiKey" in res.error and "ngcApiSecret" in res.error


# ------------------------------------------------------------------ fabric.rdmaResourceName (Azure InfiniBand)
# The Network Operator's NicClusterPolicy example and NeMo's multinode networking docs name the shared RDMA
# resource hca_shared_devices_a -> rdma/hca_shared_devices_a (k8s-rdma-shared-dev-plugin: resourcePrefix
# defaults to "rdma").
def _azure(**fabric: Any) -> dict[str, Any]:
    doc = yaml.safe_load((STACKS / "Pulumi.azure-dev.yaml").read_text())
    doc["config"]["multinode:fabric"] = {**doc["config"].get("multinode:fabric", {}), **fabric}
    return doc


def _effective(res: mplan.PlanResult) -> dict[str, dict[str, Any]]:
    assert res.out_dir is not None
    return {p.stem: yaml.safe_load(p.read_text()) for p in sorted((res.out_dir / "effective").glob("*.yaml"))}


def _device_plugin_config(res: mplan.PlanResult, plugin: str) -> dict[str, Any]:
    return json.loads(_find(res, "NicClusterPolicy")["spec"][plugin]["config"])


def test_rdma_resource_name_flows_to_every_reader(tmp_path):
    res = _plan(tmp_path, _azure(rdmaResourceName="hca_shared_devices_a"), "azure-named")
    assert res.exit_code == mplan.EXIT_OK, res.error or res.violations
    entry = _device_plugin_config(res, "rdmaSharedDevicePlugin")["configList"]
    assert entry == [{"resourceName": "hca_shared_devices_a", "rdmaHcaMax": 63,
                      "selectors": {"vendors": ["15b3"], "linkTypes": ["infiniband"]}}]
    pods = _effective(res)
    assert pods, "no effective pods written"
    for name, pod in pods.items():
        for c in pod["spec"]["containers"]:
            if "nvidia.com/gpu" in c.get("resources", {}).get("limits", {}):
                limits = c["resources"]["limits"]
                assert limits["rdma/hca_shared_devices_a"] == "1" and "rdma/shared_ib" not in limits, name
    # placement counts the named resource (63 per node) and the gangs fit
    assert res.placement is not None and res.placement.fits
    assert [v for v in res.violations if v["enforcementLevel"] == "mandatory"] == []
    # default unchanged: the example stack renders rdma/shared_ib
    base = _plan(tmp_path, _azure(), "azure-default")
    assert _device_plugin_config(base, "rdmaSharedDevicePlugin")["configList"][0]["resourceName"] == "shared_ib"


def test_rdma_resource_name_with_a_prefix_and_in_sriov_mode(tmp_path):
    res = _plan(tmp_path, _azure(rdmaResourceName="example.com/ib_ndr"), "azure-prefixed")
    assert res.exit_code == mplan.EXIT_OK, res.error
    entry = _device_plugin_config(res, "rdmaSharedDevicePlugin")["configList"][0]
    assert (entry["resourcePrefix"], entry["resourceName"]) == ("example.com", "ib_ndr")
    sriov = _plan(tmp_path, _azure(rdmaMode="sriov", rdmaResourceName="hca_vfs"), "azure-sriov")
    assert sriov.exit_code == mplan.EXIT_OK, sriov.error
    rl = _device_plugin_config(sriov, "sriovDevicePlugin")["resourceList"][0]
    assert (rl["resourcePrefix"], rl["resourceName"]) == ("rdma", "hca_vfs")
    limits = [c["resources"]["limits"] for p in _effective(sriov).values() for c in p["spec"]["containers"]
              if "nvidia.com/gpu" in c.get("resources", {}).get("limits", {})]
    assert limits and all(lim["rdma/hca_vfs"] == "8" for lim in limits)


@pytest.mark.parametrize("value, words", [
    ("bad name!", "not an extended resource name"),
    ("kubernetes.io/ib", "not an extended resource name"),
    ("nvidia.com/gpu", "the GPUs"),
])
def test_rdma_resource_name_errors(tmp_path, value, words):
    res = _plan(tmp_path, _azure(rdmaResourceName=value), "azure-bad")
    assert res.exit_code == mplan.EXIT_CONFIG and res.registrations == [], res.error
    assert "fabric.rdmaResourceName" in res.error and words in res.error, res.error


def test_rdma_resource_name_needs_an_infiniband_fabric(tmp_path):
    doc = _guide("nim-lws")       # an EFA stack
    doc["config"]["multinode:fabric"]["rdmaResourceName"] = "hca_shared_devices_a"
    res = _plan(tmp_path, doc, "efa")
    assert res.exit_code == mplan.EXIT_CONFIG and "only an InfiniBand fabric" in res.error, res.error


def test_policy_pack_counts_the_named_resource():
    """fabric-devices-match-catalog reads the stack's name: a MutatingPolicy still injecting rdma/shared_ib on a
    stack that names hca_shared_devices_a is told to inject the stack's name."""
    from multinode import checks, stackfile
    from multinode.manifests import kyverno
    from policy import objects
    from policy.engine import Resource, build_context
    from policy.rules import stack as rs
    raw, secrets, _ = stackfile.read_stack_file(stackfile.stack_path("azure-dev"))
    raw = dict(raw, fabric={"rdmaResourceName": "hca_shared_devices_a"})
    cfg = checks.load(raw, secrets)
    mutating = next(p for p in kyverno.fabric_policies(cfg) if p["kind"] == kyverno.MUTATING_KIND)
    res = [Resource(type="kubernetes:policies.kyverno.io/v1:MutatingPolicy", name="m", urn="u", props=mutating)]
    ctx = build_context(cfg, [])
    # the rules see the stack's name as an Azure fabric device (the built-in table alone does not list it)
    known = objects.fabric_resources(cfg)
    assert "rdma/hca_shared_devices_a" not in objects.FABRIC_RESOURCES
    assert [r for _, r, _ in rs.kyverno_fabric_counts(mutating, known)] == ["rdma/hca_shared_devices_a"]
    assert rs.fabric_signals(res[0], known) == {"azure": {"rdma/hca_shared_devices_a"}}
    assert list(rs.check_kyverno_devices(res, ctx)) == []
    stale = json.loads(json.dumps(mutating).replace("hca_shared_devices_a", "shared_ib"))
    bad = list(rs.check_kyverno_devices([Resource(type=res[0].type, name="m", urn="u", props=stale)], ctx))
    assert len(bad) == 1 and "inject rdma/hca_shared_devices_a" in bad[0][1], bad
