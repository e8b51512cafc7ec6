"""build/<stack>/k8s/ a reviewer can diff (issue 46): file names from each object alone, the apply order in
k8s/apply-order.txt, and apiVersion/kind/metadata first in every YAML plan writes."""
from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from multinode import k8sfiles
from multinode import plan as mplan
from multinode.stackfile import stack_path


def _plan(tmp_path: Path, name: str, doc: dict) -> Path:
    f = tmp_path / f"Pulumi.{name}.yaml"
    f.write_text(yaml.safe_dump(doc, sort_keys=False))
    result = mplan.plan(name, tmp_path / "build", path=f)
    assert result.exit_code == 0, result.error or result.violations
    return tmp_path / "build" / name / "k8s"


def test_adding_an_object_leaves_every_other_file_name_unchanged(tmp_path):
    doc = yaml.safe_load(stack_path("existing-dev").read_text())
    before = _plan(tmp_path, "before", doc)
    grown = copy.deepcopy(doc)
    wl = grown["config"]["multinode:workloads"]
    # a copy of the first workload under a name that sorts before every other: with numbered files every later
    # file would have been renamed
    extra = {**copy.deepcopy(wl[0]), "name": "aaa-extra"}
    wl.insert(0, extra)
    grown["config"]["multinode:nodePools"][0]["nodeCount"] += extra["nodes"]     # room for it
    after = _plan(tmp_path, "after", grown)
    old = set(k8sfiles.read_index(before) or [])
    new = set(k8sfiles.read_index(after) or [])
    assert old and old < new, sorted(old - new)
    added = new - old
    assert added and all("aaa-extra" in n for n in added), sorted(added)
    # the same file name holds the same object (kind, namespace, name) in both plans
    for n in old:
        a, b = yaml.safe_load((before / n).read_text()), yaml.safe_load((after / n).read_text())
        assert (a["kind"], a["metadata"].get("namespace"), a["metadata"]["name"]) == \
            (b["kind"], b["metadata"].get("namespace"), b["metadata"]["name"]), n


@pytest.mark.parametrize("stack", ["existing-dev", "aws-dev"])
def test_every_yaml_starts_with_apiversion_kind_metadata_and_the_index_is_the_apply_order(tmp_path, stack):
    result = mplan.plan(stack, tmp_path)
    assert result.exit_code == 0, result.error or result.violations
    out = tmp_path / stack
    checked = 0
    for f in sorted(out.rglob("*.yaml")):
        doc = yaml.safe_load(f.read_text())
        if not isinstance(doc, dict) or "metadata" not in doc:
            continue                      # helm/<release>.yaml: a release's settings, not an object
        head = [k for k in doc if k in mplan.HEAD_KEYS]
        assert list(doc)[:len(head)] == head == [k for k in mplan.HEAD_KEYS if k in doc], f
        assert list(doc["metadata"])[0] == "name" or "name" not in doc["metadata"], f
        checked += 1
    assert checked > 20
    docs = [yaml.safe_load(f.read_text()) for f in k8sfiles.ordered_files(out / "k8s")]
    assert [(d["kind"], d["metadata"]["name"]) for d in docs] == \
        [(o["kind"], o["metadata"]["name"]) for o in result.k8s_objects]      # the plan's apply order
    # dependencies first: the CRDs before every other object, a Namespace before every object in it
    kinds = [d["kind"] for d in docs]
    crds = [i for i, k in enumerate(kinds) if k == "CustomResourceDefinition"]
    assert crds and crds == list(range(len(crds)))
    for i, d in enumerate(docs):
        if d["kind"] == "Namespace":
            assert all(j > i for j, e in enumerate(docs) if e["metadata"].get("namespace") == d["metadata"]["name"])


def test_the_index_must_list_exactly_the_folder(tmp_path):
    k8s = tmp_path / "k8s"
    k8s.mkdir()
    for n in ("b.yaml", "a.yaml"):
        (k8s / n).write_text("kind: X\n")
    assert [p.name for p in k8sfiles.ordered_files(k8s)] == ["a.yaml", "b.yaml"]     # no index: name order
    (k8s / k8sfiles.INDEX).write_text(k8sfiles.index_text(["b.yaml", "a.yaml"]))
    assert [p.name for p in k8sfiles.ordered_files(k8s)] == ["b.yaml", "a.yaml"]     # the index's order
    (k8s / "c.yaml").write_text("kind: X\n")
    with pytest.raises(ValueError, match="not listed: \\['c.yaml'\\]"):
        k8sfiles.ordered_files(k8s)


def test_names_from_the_object_alone_and_distinct():
    ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "multinode"}}
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "train", "namespace": "team-a"}}
    twin = {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {"name": "train",
                                                                                  "namespace": "team-a"}}
    assert k8sfiles.base_name(ns) == "Namespace-multinode.yaml"
    assert k8sfiles.base_name(job) == "Job-team-a-train.yaml"
    names = k8sfiles.file_names([(ns, "", "urn:ns"), (job, "", "urn:job"), (twin, "", "urn:twin")])
    assert names[0] == "Namespace-multinode.yaml" and len(set(names)) == 3
    # the suffix depends on the object, not on its neighbours' order
    assert k8sfiles.file_names([(twin, "", "urn:twin"), (job, "", "urn:job")]) == names[:0:-1]
    # the same object registered twice (a fleet applies it to two clusters): told apart by the registration
    two = k8sfiles.file_names([(ns, "", "urn:a"), (ns, "", "urn:b")])
    assert len(set(two)) == 2 and all(n.startswith("Namespace-multinode-") for n in two)


def test_the_fleet_stack_writes_one_file_per_registration(tmp_path):
    result = mplan.plan("fleet-dev", tmp_path)
    k8s = tmp_path / "fleet-dev" / "k8s"
    index = k8sfiles.read_index(k8s) or []
    assert len(index) == len(set(index)) == len(result.k8s_objects) == len(list(k8s.glob("*.yaml")))
    assert k8sfiles.ordered_files(k8s)
