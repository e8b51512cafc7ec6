"""Issue 34 item 3: preflight init containers for multi-node gangs (multinode/manifests/workloads/preflight.py)."""
from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from multinode import config as mconfig
from multinode import fabric
from multinode.manifests import workloads as wm
from multinode.manifests.workloads import preflight as pf
from tests.conftest import example_raw


def _cfg(machine: str = "p5.48xlarge", preflight: dict | None = None, nodes: int = 2, pool_nodes: int = 4,
         kinds: tuple[str, ...] = ("lws-inference", "volcano-training")) -> mconfig.StackConfig:
    raw, _ = example_raw("aws-dev")
    raw["nodePools"] = raw["nodePools"][:1]
    raw["nodePools"][0].update({"machine": machine, "nodeCount": pool_nodes})
    raw["workloads"] = [dict(w) for w in raw["workloads"] if w["kind"] in kinds]
    for w in raw["workloads"]:
        w["nodes"] = nodes
        w.pop("image", None)               # the default image of the machine's fabric
        if w["kind"] == "lws-inference":
            w["model"] = "meta-llama/Llama-3.1-70B-Instruct"
            w.pop("tensorParallel", None)
            w.pop("pipelineParallel", None)
        if preflight is not None:
            w["preflight"] = preflight
    return mconfig.load(raw, {k for k in raw if k in mconfig.SECRET_KEYS})


def _inits(cfg: mconfig.StackConfig, name: str) -> list[list[dict]]:
    """The initContainers of every fabric pod template the workload renders."""
    w = next(x for x in cfg.workloads if x.name == name)
    out = []
    for obj in wm.build(cfg, w).objects:
        out += [spec.get("initContainers", []) for spec in pf.fabric_pod_specs(obj)]
    return out


def _named(ic: list[dict], name: str) -> dict:
    return next(c for c in ic if c["name"] == name)


EMBEDDED = {"dcgm": "embedded"}


def _env(cont: dict) -> dict[str, str]:
    return {e["name"]: e.get("value") for e in cont.get("env", [])}


# ------------------------------------------------------------------ the floor: catalog per machine
def test_floor_comes_from_the_catalog_per_machine():
    big, small = _cfg("p5.48xlarge"), _cfg("p4d.24xlarge")
    for cfg, gbits in ((big, 3200), (small, 400)):
        for w in cfg.workloads:
            p = pf.plan(cfg, w)
            assert p is not None and p.nccl
            assert p.floor_gbytes == round(gbits / 8 * w.bus_bandwidth_efficiency, 2)
            machine = cfg.node_pools[0].machine
            assert p.floor_source == f"catalog {machine} {gbits} Gbit/s x {w.bus_bandwidth_efficiency}"
    floors = {cfg.node_pools[0].machine:
              _env(_named(_inits(cfg, "llama-405b")[0], pf.NCCL_NAME))["PREFLIGHT_FLOOR_GBPS"] for cfg in (big, small)}
    assert floors == {"p5.48xlarge": "240", "p4d.24xlarge": "30"}


def test_the_floor_is_the_nccl_checks_own():
    from multinode.manifests.workloads import nccl_test
    raw, _ = example_raw("aws-dev")
    cfg = mconfig.load(raw, {k for k in raw if k in mconfig.SECRET_KEYS})
    check = next(w for w in cfg.workloads if w.kind == "nccl-test")
    gang = next(w for w in cfg.workloads if w.kind == "lws-inference")
    assert nccl_test.threshold_gbytes(cfg, check)[0] == pf.plan(cfg, gang).floor_gbytes


def test_override_and_efficiency():
    cfg = _cfg(preflight={"minBusBandwidthGbps": 800})
    p = pf.plan(cfg, cfg.workloads[0])
    assert (p.floor_gbytes, p.floor_source) == (100.0, "preflight.minBusBandwidthGbps")


def test_unconfirmed_bandwidth_runs_dcgm_only_and_advises():
    from multinode import checks
    cfg = _cfg("p6e-gb200.36xlarge", kinds=("volcano-training",), preflight=EMBEDDED)  # bandwidth unconfirmed
    p = pf.plan(cfg, cfg.workloads[0])
    assert p is not None and not p.nccl and "preflight.minBusBandwidthGbps" in p.why_no_nccl
    assert [[c["name"] for c in ic] for ic in _inits(cfg, cfg.workloads[0].name)] == [[pf.DCGM_NAME]] * 2
    adv = [a for a in checks.advisories(cfg) if a.path == "workloads[0].preflight.minBusBandwidthGbps"]
    assert len(adv) == 1 and "no NCCL all-reduce" in adv[0].message
    # the fix the advisory names works
    fixed = _cfg("p6e-gb200.36xlarge", kinds=("volcano-training",),
                 preflight={**EMBEDDED, "minBusBandwidthGbps": 1600})
    assert pf.plan(fixed, fixed.workloads[0]).nccl
    assert not [a for a in checks.advisories(fixed) if "preflight.minBusBandwidthGbps" in a.path]


def test_kinds_without_a_reachable_rendezvous_run_dcgm_only():
    raw, secrets = example_raw("gcp-dev")
    for w in raw["workloads"]:
        w["preflight"] = EMBEDDED
    cfg = mconfig.load(raw, secrets)
    grove = [w for w in cfg.workloads if w.kind == "grove-inference"]
    assert grove
    for w in grove:
        p = pf.plan(cfg, w)
        assert p is not None and not p.nccl and "rendezvous host" in p.why_no_nccl
        inits = _inits(cfg, w.name)                  # the Grove cliques that span nodes get the DCGM check
        assert inits and all([c["name"] for c in ic] == [pf.DCGM_NAME] for ic in inits)


# ------------------------------------------------------------------ who gets it
def test_multi_node_gangs_get_both_checks_with_the_fabric():
    cfg = _cfg(preflight=EMBEDDED)
    profile = fabric.profile_for(cfg, cfg.node_pools[0])
    for name in ("llama-405b", "llama-finetune"):
        inits = _inits(cfg, name)
        assert len(inits) == 2                                  # leader + worker / master + worker templates
        for ic in inits:
            dcgm, nccl = ic[0], ic[1]
            assert dcgm["name"] == pf.DCGM_NAME and dcgm["image"] == pf.DCGM_IMAGE
            assert "dcgmi diag -r 1" in dcgm["command"][-1]
            assert dcgm["resources"]["limits"]["nvidia.com/gpu"] == nccl["resources"]["limits"]["nvidia.com/gpu"]
            env = _env(nccl)
            assert env["NCCL_NET"] == profile.nccl_net                 # pinned to the fabric, as the policy does
            assert {k: env[k] for k in profile.env} == profile.env
            assert nccl["resources"]["limits"][profile.device_resource] == str(profile.devices_per_node)
            assert "--nnodes=2 --nproc_per_node=8" in nccl["command"][-1]


def test_lws_workers_start_with_the_leader_so_the_gang_can_meet():
    """With startupPolicy LeaderReady the workers would wait for a leader whose preflight waits for them."""
    cfg = _cfg()
    w = next(x for x in cfg.workloads if x.kind == "lws-inference")
    lws = next(o for o in wm.build(cfg, w).objects if o.get("kind") == "LeaderWorkerSet")
    assert lws["spec"]["startupPolicy"] == "LeaderCreated"
    assert "$LWS_LEADER_ADDRESS:29510" in _named(_inits(cfg, w.name)[0], pf.NCCL_NAME)["command"][-1]


def test_volcano_service_publishes_not_ready_pods_for_the_rendezvous():
    cfg = _cfg()
    w = next(x for x in cfg.workloads if x.kind == "volcano-training")
    job = next(o for o in wm.build(cfg, w).objects if o.get("kind") == "Job")
    assert "--publish-not-ready-addresses=true" in job["spec"]["plugins"]["svc"]
    off = _cfg(preflight={"enabled": False})
    w = next(x for x in off.workloads if x.kind == "volcano-training")
    job = next(o for o in wm.build(off, w).objects if o.get("kind") == "Job")
    assert job["spec"]["plugins"]["svc"] == []


def test_opt_out_removes_it():
    cfg = _cfg(preflight={"enabled": False})
    assert all(pf.plan(cfg, w) is None for w in cfg.workloads)
    assert all(not any(c["name"].startswith("preflight-") for c in ic)
               for w in cfg.workloads for ic in _inits(cfg, w.name))


def test_single_node_workloads_get_none():
    cfg = _cfg(nodes=1, kinds=("lws-inference",))
    assert pf.plan(cfg, cfg.workloads[0]) is None
    objs = wm.build(cfg, cfg.workloads[0]).objects
    assert "preflight-" not in str(objs)


def test_nccl_check_gets_none():
    raw, secrets = example_raw("aws-dev")
    cfg = mconfig.load(raw, secrets)
    check = next(w for w in cfg.workloads if w.kind == "nccl-test")
    assert pf.plan(cfg, check) is None


def test_dcgm_level_two():
    cfg = _cfg(preflight={**EMBEDDED, "dcgmDiagLevel": 2})
    assert "dcgmi diag -r 2" in _inits(cfg, "llama-405b")[0][0]["command"][-1]


def test_bad_preflight_keys_are_refused_with_the_key():
    with pytest.raises(mconfig.ConfigError) as e:
        _cfg(preflight={"dcgmDiagLevel": 3})
    assert "preflight.dcgmDiagLevel" in str(e.value)
    with pytest.raises(mconfig.ConfigError) as e:
        _cfg(preflight={"ncclFloor": 3})
    assert "ncclFloor" in str(e.value)


# ------------------------------------------------------------------ the scripts run (with stub tools)
def _stub(bin_dir: Path, name: str, body: str) -> None:
    p = bin_dir / name
    p.write_text("#!/bin/sh\n" + body + "\n")
    p.chmod(p.stat().st_mode | stat.S_IEXEC)


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed")
@pytest.mark.parametrize("diag_rc,expect_rc,expect_pass", [(0, 0, "true"), (226, 1, "false")])
def test_dcgm_script_fails_the_init_container_on_a_failed_diag(tmp_path, diag_rc, expect_rc, expect_pass):
    _stub(tmp_path, "nv-hostengine", "sleep 0")
    _stub(tmp_path, "dcgmi", f'[ "$1" = diag ] && exit {diag_rc}; exit 0')
    env = {**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}", "NODE_NAME": "node-7"}
    out = subprocess.run(["bash", "-c", pf.dcgm_script(1)], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == expect_rc, out.stderr
    line = next(ln for ln in out.stdout.splitlines() if ln.startswith(pf.VERDICT_TAG))
    assert f'"pass": {expect_pass}' in line and '"node": "node-7"' in line


def test_nccl_program_compiles_and_reads_its_floor():
    compile(pf.NCCL_PROGRAM, "preflight_nccl.py", "exec")
    assert "PREFLIGHT_FLOOR_GBPS" in pf.NCCL_PROGRAM and "2 * (n - 1) / n" in pf.NCCL_PROGRAM


def test_fabric_sidecars_start_before_the_all_reduce():
    """GCP TCPX: the fabric's native sidecar (the RxDM daemon) is placed before the preflight, so the all-reduce
    runs with it up; the fabric policy's upsert by name then replaces it in place."""
    raw, secrets = example_raw("gcp-dev")
    raw["nodePools"] = [dict(raw["nodePools"][0], machine="a3-highgpu-8g")]
    raw["workloads"] = [dict(w, nodePool=raw["nodePools"][0]["name"]) for w in raw["workloads"]
                        if w["kind"] == "lws-inference"]
    for w in raw["workloads"]:
        w.pop("image", None)
    cfg = mconfig.load(raw, secrets)
    profile = fabric.profile_for(cfg, cfg.node_pools[0])
    assert profile.init_containers, "a3-highgpu-8g's TCPX profile has a sidecar"
    p = pf.plan(cfg, cfg.workloads[0])
    assert p is not None and p.nccl and p.floor_gbytes == 75.0           # 1000 Gbit/s / 8 x 0.6
    sidecar = profile.init_containers[0]["name"]
    for spec in (s for o in wm.build(cfg, cfg.workloads[0]).objects for s in pf.fabric_pod_specs(o)):
        names = [c["name"] for c in spec["initContainers"]]
        assert names.index(sidecar) < names.index(pf.NCCL_NAME), names
        vols = {v["name"] for v in spec["volumes"]}
        assert {v["name"] for v in profile.volumes} <= vols
        nccl = next(c for c in spec["initContainers"] if c["name"] == pf.NCCL_NAME)
        assert {m["name"] for m in nccl.get("volumeMounts", [])} <= vols


# ------------------------------------------------------------------ Dynamo: the operator renders the pods
def _dynamo(decode: dict | None = None, preflight: dict | None = None) -> tuple[mconfig.StackConfig, dict]:
    """dynamo-dev (prefill on 1 node, decode across 2) and its DynamoGraphDeployment's components by name."""
    raw, secrets = example_raw("dynamo-dev")
    w = raw["workloads"][0]
    if decode is not None:
        w["disaggregated"]["decode"] = decode
    w["preflight"] = {**EMBEDDED, **(preflight or {})}
    cfg = mconfig.load(raw, secrets)
    dgd = next(o for o in wm.build(cfg, cfg.workloads[0]).objects if o["kind"] == "DynamoGraphDeployment")
    return cfg, {c["name"]: c for c in dgd["spec"]["components"]}


def _names(comp: dict) -> list[str]:
    return [c["name"] for c in comp["podTemplate"]["spec"].get("initContainers", [])]


def test_dynamo_multi_node_worker_gets_dcgm_only():
    """The operator merges podTemplate.spec, initContainers included, into the leader's and the workers' pod specs
    (docs/preflight.md); its rendezvous is its own, so no NCCL part."""
    cfg, comps = _dynamo()
    decode = comps["decode"]
    assert decode["multinode"] == {"nodeCount": 2}
    assert _names(decode) == [pf.DCGM_NAME]                   # once: apply() does not add a second copy
    dcgm = decode["podTemplate"]["spec"]["initContainers"][0]
    assert dcgm["image"] == pf.DCGM_IMAGE and "dcgmi diag -r 1" in dcgm["command"][-1]
    gpus = decode["podTemplate"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"]
    assert dcgm["resources"]["limits"]["nvidia.com/gpu"] == gpus == "8"
    p = pf.plan(cfg, cfg.workloads[0])
    assert p is not None and not p.nccl and "Dynamo operator" in p.why_no_nccl
    # the one-node prefill (fabric-labelled: it moves the KV cache across nodes) and the frontend get none
    assert comps["prefill"]["podTemplate"]["metadata"]["labels"].get("multinode.dev/fabric")
    assert _names(comps["prefill"]) == [] and _names(comps["frontend"]) == []


def test_dynamo_single_node_and_opt_out_get_none():
    cfg, comps = _dynamo(decode={"nodes": 1, "tensorParallel": 8})
    assert pf.plan(cfg, cfg.workloads[0]) is None
    assert all(_names(c) == [] for c in comps.values())
    assert pf.for_component(cfg, cfg.workloads[0], 2, 8) == []
    cfg, comps = _dynamo(preflight={"enabled": False})
    assert pf.plan(cfg, cfg.workloads[0]) is None
    assert comps["decode"]["multinode"] == {"nodeCount": 2} and _names(comps["decode"]) == []
    assert "preflight-" not in str(comps)


def test_dynamo_dcgm_level_reaches_the_component():
    _, comps = _dynamo(preflight={"dcgmDiagLevel": 2})
    assert "dcgmi diag -r 2" in comps["decode"]["podTemplate"]["spec"]["initContainers"][0]["command"][-1]


# ------------------------------------------------------------------ issue 40: DCGM as upstream runs it
def _azure(gpu_operator: bool, preflight: dict | None = None, nvsentinel: bool = False) -> mconfig.StackConfig:
    raw, secrets = example_raw("azure-dev")
    addons = raw.setdefault("addons", {})
    addons["gpuOperator"] = {"enabled": gpu_operator}
    addons["nvsentinel"] = {"enabled": nvsentinel}
    if preflight is not None:
        for w in raw["workloads"]:
            w["preflight"] = preflight
    return mconfig.load(raw, secrets)


def test_no_dcgm_part_by_default_where_the_stack_has_no_host_engine():
    """aws-dev runs no GPU Operator: the default is no DCGM part (the NCCL part stays), said in plan's report. The
    old default ran an unprivileged embedded nv-hostengine in every gang pod, as no upstream does."""
    cfg = _cfg()
    for name in ("llama-405b", "llama-finetune"):
        p = pf.plan(cfg, next(w for w in cfg.workloads if w.name == name))
        assert p is not None and p.nccl and not p.has_dcgm and "no DCGM host engine" in p.dcgm.why_none
        for ic in _inits(cfg, name):
            assert [c["name"] for c in ic if c["name"].startswith("preflight-")] == [pf.NCCL_NAME]
    assert all("no DCGM part (no DCGM host engine" in line for line in pf.report(cfg))


def test_dcgm_only_kinds_get_no_preflight_without_a_host_engine():
    raw, secrets = example_raw("gcp-dev")
    cfg = mconfig.load(raw, secrets)
    for w in (x for x in cfg.workloads if x.kind == "grove-inference"):
        assert pf.plan(cfg, w) is None and _inits(cfg, w.name) and all(
            not any(c["name"].startswith("preflight-") for c in ic) for ic in _inits(cfg, w.name))


def test_the_gpu_operators_node_local_host_engine_when_the_stack_installs_it():
    from multinode.manifests import addons
    cfg = _azure(gpu_operator=True)
    w = next(x for x in cfg.workloads if x.kind == "lws-inference")
    p = pf.plan(cfg, w)
    assert p is not None and p.dcgm == pf.DcgmSetting("hostEngine", "nvidia-dcgm.gpu-operator.svc:5555")
    dcgm = _named(_inits(cfg, w.name)[0], pf.DCGM_NAME)
    script = dcgm["command"][-1]
    assert "H=nvidia-dcgm.gpu-operator.svc:5555" in script and 'dcgmi diag --host "$H" -r 1 -i "$IDS"' in script
    assert "nv-hostengine" not in script
    assert _env(dcgm)["NVIDIA_DRIVER_CAPABILITIES"] == "compute,utility"
    # the operator's standalone DCGM is turned on for it, NVSentinel or not
    gpu_op = next(r for r in addons.fabric_releases(cfg) if r.key == "gpuOperator")
    assert gpu_op.values["dcgm"] == {"enabled": True}
    # without the GPU Operator: no host engine, no DCGM part, and nothing turned on
    off = _azure(gpu_operator=False)
    assert not pf.plan(off, next(x for x in off.workloads if x.kind == "lws-inference")).has_dcgm


def test_opt_ins_keep_working():
    cfg = _cfg(preflight={"dcgm": "hostEngine", "dcgmHostEngine": "dcgm.monitoring.svc:5555"})
    p = pf.plan(cfg, cfg.workloads[0])
    assert p.dcgm == pf.DcgmSetting("hostEngine", "dcgm.monitoring.svc:5555")
    assert "H=dcgm.monitoring.svc:5555" in _named(_inits(cfg, cfg.workloads[0].name)[0], pf.DCGM_NAME)["command"][-1]
    cfg = _cfg(preflight={"dcgm": "hostEngine"})     # an existing cluster running the GPU Operator
    assert pf.plan(cfg, cfg.workloads[0]).dcgm.host_engine == "nvidia-dcgm.gpu-operator.svc:5555"
    cfg = _cfg(preflight=EMBEDDED)
    assert "nv-hostengine -n" in _named(_inits(cfg, cfg.workloads[0].name)[0], pf.DCGM_NAME)["command"][-1]
    adv = [a for a in pf.advisories(cfg) if a.path.endswith(".preflight.dcgm")]
    assert len(adv) == len(cfg.workloads) and "no upstream does" in adv[0].message
    assert not [a for a in pf.advisories(_cfg()) if a.path.endswith(".preflight.dcgm")]
    cfg = _azure(gpu_operator=True, preflight={"dcgm": "off"})
    assert not pf.plan(cfg, cfg.workloads[0]).has_dcgm
    with pytest.raises(mconfig.ConfigError) as e:
        _cfg(preflight={"dcgm": "privileged"})
    assert "preflight.dcgm" in str(e.value)
    with pytest.raises(mconfig.ConfigError) as e:
        _cfg(preflight={"dcgmHostEngine": "http://x:5555/"})
    assert "preflight.dcgmHostEngine" in str(e.value)
    with pytest.raises(mconfig.ConfigError) as e:
        _cfg(preflight={"dcgm": "embedded", "dcgmHostEngine": "dcgm.monitoring.svc:5555"})
    assert "preflight.dcgmHostEngine" in str(e.value) and "not used with preflight.dcgm embedded" in str(e.value)


_DISCOVERY = """4 GPUs found.
+--------+----------------------------------------------------------------------+
| GPU ID | Device Information                                                   |
+--------+----------------------------------------------------------------------+
| 0      | Name: NVIDIA H100 80GB HBM3                                          |
|        | PCI Bus ID: 00000000:18:00.0                                         |
|        | Device UUID: GPU-aaaa0000-0000-0000-0000-000000000000                |
+--------+----------------------------------------------------------------------+
| 1      | Name: NVIDIA H100 80GB HBM3                                          |
|        | Device UUID: GPU-bbbb0000-0000-0000-0000-000000000000                |
+--------+----------------------------------------------------------------------+
| 2      | Name: NVIDIA H100 80GB HBM3                                          |
|        | Device UUID: GPU-cccc0000-0000-0000-0000-000000000000                |
+--------+----------------------------------------------------------------------+
| 3      | Name: NVIDIA H100 80GB HBM3                                          |
|        | Device UUID: GPU-dddd0000-0000-0000-0000-000000000000                |
+--------+----------------------------------------------------------------------+
"""


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed")
@pytest.mark.parametrize("pod_uuids,diag_rc,busy_once,expect_rc,expect_ids", [
    ("GPU-bbbb0000-0000-0000-0000-000000000000\nGPU-dddd0000-0000-0000-0000-000000000000", 0, False, 0, "1,3"),
    ("GPU-bbbb0000-0000-0000-0000-000000000000", 0, True, 0, "1"),        # another pod's diag was running
    ("GPU-cccc0000-0000-0000-0000-000000000000", 226, False, 1, "2"),     # the diag fails
    ("GPU-eeee0000-0000-0000-0000-000000000000", 0, False, 1, None),      # the pod's GPU is not on that engine
])
def test_host_engine_script_diagnoses_only_the_pods_gpus(tmp_path, monkeypatch, pod_uuids, diag_rc, busy_once,
                                                         expect_rc, expect_ids):
    monkeypatch.setattr(pf, "BUSY_WAIT_S", 0)
    (tmp_path / "discovery.txt").write_text(_DISCOVERY)
    calls = tmp_path / "calls.txt"
    busy = tmp_path / "busy"
    if busy_once:
        busy.write_text("1")
    _stub(tmp_path, "nvidia-smi", f"printf '%s\\n' '{pod_uuids.splitlines()[0]}'"
          + "".join(f"; printf '%s\\n' '{u}'" for u in pod_uuids.splitlines()[1:]))
    _stub(tmp_path, "dcgmi", f'echo "$@" >> {calls}\n'
          f'[ "$1" = discovery ] && cat {tmp_path}/discovery.txt && exit 0\n'
          f'if [ -f {busy} ]; then rm {busy}; echo "Error: A diag instance is already running"; exit 255; fi\n'
          f'exit {diag_rc}')
    env = {**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}", "NODE_NAME": "node-3"}
    out = subprocess.run(["bash", "-c", pf.dcgm_script(1, "nvidia-dcgm.gpu-operator.svc:5555")], env=env,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == expect_rc, out.stdout + out.stderr
    diag = [ln for ln in calls.read_text().splitlines() if ln.startswith("diag")]
    if expect_ids is None:
        assert diag == []
    else:
        assert diag[-1] == f"diag --host nvidia-dcgm.gpu-operator.svc:5555 -r 1 -i {expect_ids}"
        assert len(diag) == (2 if busy_once else 1)
    line = next(ln for ln in out.stdout.splitlines() if ln.startswith(pf.VERDICT_TAG))
    assert f'"pass": {"true" if expect_rc == 0 else "false"}' in line and '"node": "node-3"' in line


def test_tcpxo_daemon_has_upstreams_startup_probe_so_the_all_reduce_waits_for_it():
    """GKE's TCPXO guide: the RxDM writes HEALTH_CHECK_LOG_FILE once initialised; a startupProbe `cat`s it. A native
    sidecar's startupProbe holds back the init containers after it: the NCCL preflight starts once the RxDM serves."""
    from multinode.clouds import gcp
    raw, secrets = example_raw("gcp-dev")
    raw["workloads"] = [dict(w, preflight={"minBusBandwidthGbps": 1000}) for w in raw["workloads"]
                        if w["kind"] == "lws-inference"]          # a3-megagpu-8g's bandwidth: not in the catalog
    cfg = mconfig.load(raw, secrets)
    profile = fabric.profile_for(cfg, cfg.pool(cfg.workloads[0].node_pool))
    sidecar = next(s for s in profile.init_containers if s["name"] == "tcpxo-daemon")
    assert sidecar["startupProbe"]["exec"]["command"] == ["cat", gcp.TCPXO_HEALTH_FILE]
    assert {"name": "HEALTH_CHECK_LOG_FILE", "value": gcp.TCPXO_HEALTH_FILE} in sidecar["env"]
    assert "_" not in gcp.TCPXO_HEALTH_FILE.rsplit("/", 1)[1]          # upstream: no "_" in the file name
    specs = [s for o in wm.build(cfg, cfg.workloads[0]).objects for s in pf.fabric_pod_specs(o)]
    assert specs
    for spec in specs:
        names = [c["name"] for c in spec["initContainers"]]
        assert names.index("tcpxo-daemon") < names.index(pf.NCCL_NAME)
        assert spec["initContainers"][names.index("tcpxo-daemon")]["startupProbe"] == gcp.TCPXO_STARTUP_PROBE
