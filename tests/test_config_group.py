"""The plan's model of what the kubernetes provider registers for a yaml/v2 ConfigGroup
(recording.config_group_children), and the CRD groups the add-ons register with it (manifests/crds.py crd_list_text)."""
from __future__ import annotations

import json

import pytest

from multinode import recording
from multinode.manifests import crds
from multinode.recording import CONFIG_GROUP, Registration

GROUP_URN = "urn:pulumi:s::multinode::multinode:index:ClusterAddons$kubernetes:yaml/v2:ConfigGroup::g"


def _urn(parent: str, typ: str, name: str) -> str:
    return f"{parent}${typ}::{name}"


def _group(**inputs) -> Registration:
    return Registration(urn=GROUP_URN, type=CONFIG_GROUP, name="g", parent="p", custom=False, protect=False,
                        retain_on_delete=False, dependencies=["d"], provider="prov::id", inputs=inputs)


def test_a_list_becomes_one_resource_per_item_named_like_the_provider_names_them():
    text = json.dumps({"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "namespace": "ns"}, "data": {"k": "v"}},
        {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": "x.io"}},
    ]})
    kids = recording.config_group_children(_group(yaml=text, resourcePrefix="pre"), _urn)
    assert [(k.type, k.name) for k in kids] == [
        ("kubernetes:core/v1:ConfigMap", "pre-ns/a"),
        ("kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinition", "pre-x.io")]
    for k in kids:
        assert k.parent == GROUP_URN and k.custom and k.provider == "prov::id" and k.dependencies == []
        assert k.urn == _urn(GROUP_URN, k.type, k.name)
    assert kids[0].inputs["data"] == {"k": "v"}


def test_the_prefix_defaults_to_the_groups_name_and_yaml_documents_and_objs_are_read():
    text = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\n---\napiVersion: v1\nkind: Secret\n" \
           "metadata: {name: s}\nstringData: {token: hunter2}\n"
    objs = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "n"}}]
    kids = recording.config_group_children(_group(yaml=text, objs=objs, skipAwait=True), _urn)
    assert [k.name for k in kids] == ["g-a", "g-s", "g-n"]
    assert all(k.inputs["metadata"]["annotations"] == {"pulumi.com/skipAwait": "true"} for k in kids)
    # the provider marks a Secret's data secret: the plan records it masked, like every secret
    assert kids[1].inputs["stringData"] == {"token": "[secret]"}


def test_unknown_text_registers_nothing_and_bad_objects_or_files_are_refused():
    assert recording.config_group_children(_group(yaml=recording.UNKNOWN_PLACEHOLDER), _urn) == []
    with pytest.raises(ValueError, match="metadata.name"):
        recording.config_group_children(_group(objs=[{"apiVersion": "v1", "kind": "ConfigMap"}]), _urn)
    with pytest.raises(ValueError, match="files"):
        recording.config_group_children(_group(files=["x.yaml"]), _urn)


def test_the_crd_text_is_one_json_list_of_the_stored_crds():
    stored = crds.STORED["grove"]["0.1.0-alpha.11"]
    objects = crds.crd_objects(stored)
    doc = json.loads(crds.crd_list_text(objects))
    assert doc["apiVersion"] == "v1" and doc["kind"] == "List" and doc["items"] == objects
    assert len(objects) == len(stored.files)
    kids = recording.config_group_children(_group(yaml=crds.crd_list_text(objects), resourcePrefix="addons-crd"),
                                           _urn)
    assert [k.inputs for k in kids] == objects
    assert {k.name for k in kids} == {f"addons-crd-{o['metadata']['name']}" for o in objects}
