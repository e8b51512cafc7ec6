"""The c10d rendezvous's store host (issue 43): the pod the endpoint names hosts torchrun's TCP store, decided from
its own host name (`--rdzv_conf=is_host=...`), never from whether its DNS record exists yet.

Without it torchrun's c10d backend guesses: it compares the endpoint's host with the machine's host name, then with
the addresses the host resolves to (pytorch/pytorch torch/distributed/elastic/rendezvous/utils.py
_matches_machine_hostname). With `setHostnameAsFQDN` the pod's name is its FQDN, not the endpoint's
`<job>-0.<svc>`, and its DNS record can be missing when the launcher starts: then no pod hosts the store and every
launcher fails (RendezvousConnectionError). torchrun-recipe's Indexed Job preflight failed so on real nodes
(conformance/realnode/README.md). Each test runs the rendered shell lines with bash, as the pod would, for every
pod of the gang."""
from __future__ import annotations

import shlex
import shutil
import subprocess
from typing import Any

import pytest

from multinode import config as mconfig
from multinode.manifests import workloads as wm
from multinode.manifests.workloads import preflight as pf
from multinode.manifests.workloads import training
from tests.conftest import example_raw
from tests.test_guides import find, planned, script

pytestmark = pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")


def _store_host(text: str, hostname: str, env: dict[str, str] | None = None) -> str:
    """What the rendered script's launch line passes as is_host on a pod with this host name: the script up to
    its `exec` line, run by bash with HOSTNAME as the runtime sets it, then the launch line's --rdzv_conf echoed
    after the shell's expansion."""
    lines = text.splitlines()
    at = next(i for i, ln in enumerate(lines) if ln.startswith("exec ") and "--rdzv_backend=c10d" in ln)
    conf = next((a for a in shlex.split(lines[at]) if a.startswith("--rdzv_conf=")), None)
    assert conf is not None, f"no --rdzv_conf on the launch line: {lines[at]}"
    start = next((i for i, ln in enumerate(lines[:at]) if ln.startswith("RDZV_HOST=")), at)
    prog = "set -u\n" + "\n".join(lines[start:at]) + f'\necho "{conf}"\n'
    out = subprocess.run(["bash", "-c", prog], env={"PATH": "/usr/bin:/bin", "HOSTNAME": hostname, **(env or {})},
                         capture_output=True, text=True, check=True).stdout.strip()
    opts = dict(kv.split("=", 1) for kv in out.removeprefix("--rdzv_conf=").split(","))
    return opts.get("is_host", "")


def _endpoint_host(text: str) -> str:
    line = next(ln for ln in text.splitlines() if ln.startswith("exec ") and "--rdzv_backend=c10d" in ln)
    ep = next(a for a in shlex.split(line) if a.startswith("--rdzv_endpoint="))
    return ep.split("=", 1)[1].rpartition(":")[0]


# ------------------------------------------------------------------ Indexed Job (torchrun-recipe)
def test_indexed_job_pod_0_hosts_the_store_by_its_name(tmp_path_factory):
    res = planned("torchrun-recipe", tmp_path_factory)
    job = find(res, "Job", "llm-finetune")
    pod = job["spec"]["template"]["spec"]
    ns = job["metadata"]["namespace"]
    scripts = {"trainer": script(pod["containers"][0]),
               pf.NCCL_NAME: script(next(c for c in pod["initContainers"] if c["name"] == pf.NCCL_NAME))}
    assert pod["setHostnameAsFQDN"] is True
    for name, text in scripts.items():
        assert _endpoint_host(text) == f"llm-finetune-0.{pod['subdomain']}", name
        for i in range(job["spec"]["completions"]):
            # the Job controller names pod i `<job>-<i>`; setHostnameAsFQDN makes its host name the FQDN
            fqdn = f"llm-finetune-{i}.{pod['subdomain']}.{ns}.svc.cluster.local"
            want = "1" if i == 0 else "0"
            assert _store_host(text, fqdn) == want, (name, fqdn)
            assert _store_host(text, f"llm-finetune-{i}") == want, (name, i)
        assert _store_host(text, "llm-finetune-10.llm-finetune.multinode.svc.cluster.local") == "0", name


# ------------------------------------------------------------------ Volcano Job and LeaderWorkerSet (aws-dev)
def _aws() -> mconfig.StackConfig:
    raw, _ = example_raw("aws-dev")
    raw["workloads"] = [dict(w, preflight={"dcgm": "embedded"}) for w in raw["workloads"]
                        if w["kind"] in ("volcano-training", "lws-inference")]
    return mconfig.load(raw, {k for k in raw if k in mconfig.SECRET_KEYS})


def _tasks(job: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {t["name"]: t["template"]["spec"] for t in job["spec"]["tasks"]}


def test_volcano_master_pod_hosts_the_store():
    cfg = _aws()
    w = next(x for x in cfg.workloads if x.kind == "volcano-training")
    job = next(o for o in wm.build(cfg, w).objects if o.get("kind") == "Job")
    tasks = _tasks(job)
    assert set(tasks) == {"master", "worker"}
    for task, spec in tasks.items():
        texts = [script(spec["containers"][0]),
                 script(next(c for c in spec["initContainers"] if c["name"] == pf.NCCL_NAME))]
        for text in texts:
            assert _endpoint_host(text) == f"{w.name}-master-0.{w.name}"
            # Volcano's svc plugin names the pods `<job>-<task>-<index>`
            assert _store_host(text, f"{w.name}-master-0") == "1"
            assert _store_host(text, f"{w.name}-worker-0") == "0"
            assert _store_host(text, f"{w.name}-worker-1") == "0"


def test_lws_preflight_leader_hosts_the_store():
    cfg = _aws()
    w = next(x for x in cfg.workloads if x.kind == "lws-inference")
    lws = next(o for o in wm.build(cfg, w).objects if o.get("kind") == "LeaderWorkerSet")
    lwt = lws["spec"]["leaderWorkerTemplate"]
    for role in ("leaderTemplate", "workerTemplate"):
        nccl = next(c for c in lwt[role]["spec"]["initContainers"] if c["name"] == pf.NCCL_NAME)
        text = nccl["command"][-1]
        assert _endpoint_host(text) == "$LWS_LEADER_ADDRESS"
        # LWS: leader `<lws>-<group>`, workers `<lws>-<group>-<index>`, LWS_LEADER_ADDRESS `<lws>-<group>.<lws>.<ns>`
        lead = {"LWS_LEADER_ADDRESS": f"{w.name}-1.{w.name}.{w.namespace}"}
        assert _store_host(text, f"{w.name}-1", lead) == "1"
        assert _store_host(text, f"{w.name}-1-1", lead) == "0"
        assert _store_host(text, f"{w.name}-0", lead) == "0"          # another group's leader


def test_static_rendezvous_gets_no_store_host_lines():
    """TrainJob's static rendezvous (--master_addr) has no c10d store to place."""
    raw, _ = example_raw("aws-dev")
    cfg = mconfig.load(raw, {k for k in raw if k in mconfig.SECRET_KEYS})
    w = next(x for x in cfg.workloads if x.kind in ("volcano-training", "indexed-job"))
    text = training.launch_script(cfg, w, "t-0.t:29500", node_rank="$PET_NODE_RANK", static=True)
    assert training.STORE_HOST_VAR not in text and "--master_addr=t-0.t" in text
