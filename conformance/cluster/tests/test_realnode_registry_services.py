"""realnode_check.py on hand-made observations (no Go, no box): the box's registry (a pull it cannot serve) and the
connections to Services' ports (svcconn.go), each finding planted, and the agreeing cases."""
from __future__ import annotations

import copy
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from realnode_check import normalize_image, real_node_findings  # noqa: E402
from test_realnode_check import _obs, _pod  # noqa: E402

REGISTRY = {"address": "10.2.0.253:5000",
            "held": ["docker.io/mpioperator/tensorflow-benchmarks:latest", "public.ecr.aws/hpc-cloud/nccl-tests:latest",
                     "registry.k8s.io/pause:3.10"],
            "manifests": [{"ref": "public.ecr.aws/hpc-cloud/nccl-tests:latest", "method": "HEAD", "status": 200}],
            "blobs": 3, "misses": []}


def test_normalize_image_as_containerd():
    assert normalize_image("ubuntu") == "docker.io/library/ubuntu:latest"
    assert normalize_image("mpioperator/tensorflow-benchmarks:latest") == \
        "docker.io/mpioperator/tensorflow-benchmarks:latest"
    assert normalize_image("public.ecr.aws/hpc-cloud/nccl-tests") == "public.ecr.aws/hpc-cloud/nccl-tests:latest"
    assert normalize_image("localhost:5000/x") == "localhost:5000/x:latest"
    assert normalize_image("nvcr.io/nim/x@sha256:" + "0" * 64) == "nvcr.io/nim/x@sha256:" + "0" * 64


def _pull_failed(image: str) -> dict[str, Any]:
    p = _pod("a")
    p["pod"]["spec"]["containers"][0]["image"] = image
    p["pod"]["status"]["containerStatuses"] = [{"name": "main", "state": {"waiting": {
        "reason": "ErrImagePull", "message": f'failed to pull and unpack image "{image}": not found'}}}]
    p.pop("env")
    return p


def test_pull_the_registry_does_not_hold_names_it():
    obs = _obs([_pull_failed("nvcr.io/nim/x@sha256:" + "0" * 64)])
    obs["registry"] = copy.deepcopy(REGISTRY)
    obs["registry"]["misses"] = ["nvcr.io/nim/x@sha256:" + "0" * 64]
    findings, report = real_node_findings(obs)
    assert len(findings) == 1, findings
    assert "container main: waiting:ErrImagePull" in findings[0]
    assert "the box's registry 10.2.0.253:5000 holds no image nvcr.io/nim/x@sha256:" + "0" * 64 in findings[0]
    assert report["registry"]["misses"] == ["nvcr.io/nim/x@sha256:" + "0" * 64]
    assert report["registry"]["manifestRequests"] == 1 and report["registry"]["held"] == 3


def test_pull_failure_of_a_held_image_gets_no_registry_hint():
    obs = _obs([_pull_failed("public.ecr.aws/hpc-cloud/nccl-tests:latest")])
    obs["registry"] = copy.deepcopy(REGISTRY)
    findings, _ = real_node_findings(obs)
    assert len(findings) == 1 and "ErrImagePull" in findings[0] and "holds no image" not in findings[0], findings


def _conn(listening: list[int] | None, connected: bool = True, target: str = "8000", target_num: int = 8000,
          ready: bool = True, error: str = "") -> dict[str, Any]:
    return {"service": "multinode/llama-leader", "clusterIP": "10.96.3.4", "port": 80, "targetPort": target,
            "pods": [{"pod": "multinode/a", "ip": "10.245.1.2", "ready": ready, "targetPort": target_num,
                      "listening": listening}],
            "client": "multinode/b main",
            "attempts": [{"dial": "llama-leader:80", "via": "clusterIP", "connected": connected, "error": error}]}


def _obs_conns(*conns: dict[str, Any]) -> dict[str, Any]:
    obs = _obs([_pod("a"), _pod("b", "gpu-1")])
    obs["phases"][0]["serviceConnections"] = list(conns)
    return obs


def test_service_port_that_answers_passes():
    findings, report = real_node_findings(_obs_conns(_conn([8000])))
    assert findings == []
    assert report["serviceConnections"] == [{"phase": "services", "service": "multinode/llama-leader", "port": 80,
                                             "connected": True}]


def test_service_port_where_nothing_listens_on_the_target_port():
    err = "ConnectionRefusedError [Errno 111] Connection refused (exit status 1)"
    findings, report = real_node_findings(_obs_conns(_conn([8001], connected=False, error=err)))
    assert len(findings) == 1, findings
    f = findings[0]
    assert f.startswith("phase services: Service multinode/llama-leader port 80 (targetPort 8000), selecting pods "
                        "['multinode/a']: "), f
    assert "connecting to llama-leader:80 (clusterIP) from pod multinode/b main: ConnectionRefusedError" in f
    assert "nothing listens on 8000 in pod multinode/a (listening: [8001])" in f
    assert report["serviceConnections"][0]["connected"] is False


def test_service_port_not_listening_on_one_pod_even_when_the_dial_answered():
    c = _conn([8000])
    c["pods"].append({"pod": "multinode/b", "ip": "10.245.2.2", "ready": True, "targetPort": 8000, "listening": []})
    findings, _ = real_node_findings(_obs_conns(c))
    assert len(findings) == 1 and "nothing listens on 8000 in pod multinode/b (listening: [])" in findings[0], findings
    assert "multinode/a (listening" not in findings[0]


def test_service_named_target_port_no_pod_declares_and_no_ready_pod():
    findings, _ = real_node_findings(_obs_conns(_conn([8000], connected=False, target="http", target_num=0,
                                                      ready=False, error="ConnectionRefusedError")))
    assert len(findings) == 1, findings
    assert "pods ['multinode/a'] declare no container port named 'http'" in findings[0]
    assert "no selected pod is Ready, so kube-proxy has no endpoint for it" in findings[0]


def test_service_pods_not_running_are_not_judged_on_ports():
    # no process read (listening None): the container's own failure is the finding, not the port
    findings, _ = real_node_findings(_obs_conns(_conn(None)))
    assert findings == []
