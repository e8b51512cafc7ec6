"""`multinode check-cluster`: each expectation of a stack checked against a cluster (a fake here; the box test is
conformance/cluster/tests/test_box_check_cluster.py)."""
from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from multinode import check_cluster as cc
from multinode import plan as mplan


@dataclass
class FakeCluster:
    gitversion: str = "v1.33.4"
    served: dict[str, set[str]] = field(default_factory=dict)
    rcs: set[str] = field(default_factory=set)
    node_list: list[cc.Node] = field(default_factory=list)
    classes: set[str] = field(default_factory=set)
    claims: set[tuple[str, str]] = field(default_factory=set)
    kyverno: list[str] = field(default_factory=list)

    def version(self) -> str:
        return self.gitversion

    def served_kinds(self, gv: str) -> set[str] | None:
        return self.served.get(gv)

    def runtime_classes(self) -> set[str]:
        return self.rcs

    def nodes(self) -> list[cc.Node]:
        return self.node_list

    def storage_classes(self) -> set[str]:
        return self.classes

    def claim_exists(self, ns: str, name: str) -> bool:
        return (ns, name) in self.claims

    def kyverno_images(self) -> list[str]:
        return self.kyverno


@pytest.fixture(scope="module")
def existing():
    result = mplan.plan("existing-dev", out_root=None)
    return result.config, cc.expectations(result.config, result.k8s_objects)


def _complete(exp) -> FakeCluster:
    served: dict[str, set[str]] = {}
    for gv, kind in exp["kinds"]:
        served.setdefault(gv, set()).add(kind)
    nodes = [cc.Node(f"n{i}", {"node.kubernetes.io/instance-type": "p5.48xlarge"},
                     {"nvidia.com/gpu": "8", "vpc.amazonaws.com/efa": "32"}) for i in range(8)]
    return FakeCluster(served=served, rcs={"nvidia"}, node_list=nodes, classes={"efs-sc"})


def _fails(lines):
    return [str(ln) for ln in lines if ln.status == cc.FAIL]


def test_a_complete_cluster_passes_and_each_missing_prerequisite_is_one_line(existing):
    cfg, exp = existing
    assert ("kubeflow.org/v2beta1", "MPIJob") in exp["kinds"]          # the MPI operator: not installed by the stack
    assert not any(gv.startswith(("leaderworkerset", "grove", "policies.kyverno", "batch.volcano"))
                   for gv, _ in exp["kinds"])                           # brought or installed by the stack
    assert _fails(cc.check(exp, _complete(exp))) == []
    c = _complete(exp)
    c.served["kubeflow.org/v2beta1"] = set()
    assert len(_fails(cc.check(exp, c))) == 1 and "MPIJob" in _fails(cc.check(exp, c))[0]
    c = _complete(exp)
    c.rcs = set()
    assert len(_fails(cc.check(exp, c))) == 1 and "RuntimeClass nvidia" in _fails(cc.check(exp, c))[0]
    c = _complete(exp)
    c.node_list[0] = cc.Node("n0", c.node_list[0].labels, {"nvidia.com/gpu": "8"})     # no EFA device plugin
    f = _fails(cc.check(exp, c))
    assert len(f) == 1 and "vpc.amazonaws.com/efa" in f[0] and "n0" in f[0]
    c = _complete(exp)
    c.classes = set()
    assert len(_fails(cc.check(exp, c))) == 1 and "efs-sc" in _fails(cc.check(exp, c))[0]
    c = _complete(exp)
    c.gitversion = "v1.31.2"
    lines = cc.check(exp, c)
    assert _fails(lines) == [] and lines[0].status == cc.WARN and "v1.31.2" in lines[0].detail


def test_a_provided_kyverno_is_checked_by_its_version(existing):
    _, exp = existing
    exp = {**exp, "kyverno_provided": True}
    c = _complete(exp)
    assert "no Kyverno admission controller" in _fails(cc.check(exp, c))[0]
    c.kyverno = ["reg.kyverno.io/kyverno/kyverno:v1.16.3"]
    assert "below 1.17.0" in _fails(cc.check(exp, c))[0]
    c.kyverno = ["reg.kyverno.io/kyverno/kyverno:v1.19.0"]
    assert _fails(cc.check(exp, c)) == []


def test_a_created_pool_is_not_required_before_up():
    result = mplan.plan("aws-dev", out_root=None)
    exp = cc.expectations(result.config, result.k8s_objects)
    assert exp["pools"] and all(p["created"] for p in exp["pools"])
    c = _complete(exp)
    c.node_list = []
    lines = cc.check(exp, c)
    assert _fails(lines) == [] and any("created by the stack" in ln.detail for ln in lines)


def test_an_unreachable_cluster_is_exit_2_without_a_traceback(tmp_path, capsys):
    from .conftest import run_command
    kc = tmp_path / "kubeconfig"
    kc.write_text("apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'https://127.0.0.1:9'}}]\n"
                  "contexts: [{name: c, context: {cluster: c, user: u}}]\ncurrent-context: c\n"
                  "users: [{name: u, user: {token: x}}]\n")
    code, out, err = run_command(capsys, "check-cluster", "existing-dev", "--kubeconfig", str(kc))
    assert code == 2 and "cannot read the cluster" in err and "Traceback" not in err
