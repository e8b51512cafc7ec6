"""Tests for multinode/schema_check.py: each schema gets a valid object and a broken one."""
from __future__ import annotations

import copy

import pytest
import yaml

from multinode import schema_check as v
from multinode.schema_check import (
    SCHEMA_DIR,
    CrdIndex,
    UnknownKindError,
    helm_values_unknown_keys,
    kyverno_expressions,
    kyverno_jmespath_errors,
    validate_object,
    validate_pod_spec,
    validate_pod_template,
)


def _pod_spec(extra_container: dict | None = None) -> dict:
    container = {
        "name": "main",
        "image": "nvcr.io/nvidia/pytorch:25.01-py3",
        "command": ["torchrun"],
        "resources": {"limits": {"nvidia.com/gpu": 8, "vpc.amazonaws.com/efa": 32, "memory": "1Ti"}},
        "env": [{"name": "NCCL_NET", "value": "AWS Libfabric"}],
    }
    container.update(extra_container or {})
    return {"containers": [container], "restartPolicy": "Never"}


def _template(labels: dict | None = None) -> dict:
    return {"metadata": {"labels": labels or {"app": "trainer"}}, "spec": _pod_spec()}


def _has(errors: list[str], *needles: str) -> bool:
    return any(all(n in e for n in needles) for e in errors)


# ---------------------------------------------------------------------------- core kinds
def _deployment() -> dict:
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "router", "namespace": "inference", "labels": {"app.kubernetes.io/name": "router"}},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "router"}},
                 "template": {"metadata": {"labels": {"app": "router"}},
                              "spec": {"containers": [{"name": "router", "image": "nginx:1.27"}]}}},
    }


def test_deployment_valid():
    assert validate_object(_deployment()) == []


def test_deployment_unknown_field_is_an_error_and_all_errors_are_collected():
    d = _deployment()
    d["spec"]["template"]["spec"]["containers"][0]["imagePullPolicyy"] = "Always"
    d["spec"]["replicass"] = 3
    errors = validate_object(d)
    assert _has(errors, "spec.template.spec.containers.0", "imagePullPolicyy")
    assert _has(errors, "spec", "replicass")
    assert len(errors) == 2


def test_deployment_bad_label_value_and_missing_name():
    d = _deployment()
    d["metadata"] = {"labels": {"bad key!": "x" * 70}}
    errors = validate_object(d)
    assert _has(errors, "metadata.name or metadata.generateName is required")
    assert _has(errors, "bad key!", "invalid key")
    assert _has(errors, "invalid label value")


def test_unknown_kind_raises():
    with pytest.raises(UnknownKindError):
        validate_object({"apiVersion": "monitoring.coreos.com/v1", "kind": "ServiceMonitor",
                         "metadata": {"name": "x"}})


def test_a_kind_too_long_for_a_schema_file_name_is_an_unknown_kind():
    # the strict core schemas are files named after the kind: a 300-character kind is ENAMETOOLONG, not a crash
    # (found by tests/fuzz_hostile.py seed 7, object-46)
    with pytest.raises(UnknownKindError):
        validate_object({"apiVersion": "v1", "kind": "Secret" * 50, "metadata": {"name": "x"}})


def test_k8s_version_outside_bundled_range():
    with pytest.raises(ValueError):
        validate_object(_deployment(), k8s_version="1.99")
    assert validate_object(_deployment(), k8s_version="1.25") == []


def test_pod_template_and_pod_spec():
    assert validate_pod_template(_template()) == []
    assert validate_pod_spec(_pod_spec()) == []
    bad = _template()
    bad["spec"]["containers"][0]["gpus"] = 8
    assert _has(validate_pod_template(bad), "template.spec.containers.0", "gpus")
    assert _has(validate_pod_spec(_pod_spec({"gpus": 8})), "spec.containers.0", "gpus")
    assert _has(validate_pod_template(_template({"app": "has space"})), "template.metadata.labels.app")


# ---------------------------------------------------------------------------- LeaderWorkerSet
def _lws() -> dict:
    return {
        "apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
        "metadata": {"name": "llama-405b", "namespace": "inference"},
        "spec": {"replicas": 1, "startupPolicy": "LeaderCreated",
                 "leaderWorkerTemplate": {"size": 2, "restartPolicy": "RecreateGroupOnPodRestart",
                                          "leaderTemplate": _template(), "workerTemplate": _template()}},
    }


def test_lws_valid():
    assert validate_object(_lws()) == []


def test_lws_invalid():
    obj = _lws()
    obj["spec"]["leaderWorkerTemplate"]["restartPolicy"] = "Always"          # not in the enum
    obj["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0]["gpu"] = 1  # pruned
    del obj["spec"]["leaderWorkerTemplate"]["workerTemplate"]               # required
    obj["spec"]["leaderWorkerTemplate"]["leaderTemplate"]["spec"]["containers"][0]["gpu"] = 1
    errors = validate_object(obj)
    assert _has(errors, "spec.leaderWorkerTemplate.restartPolicy", "Always")
    assert _has(errors, "'workerTemplate' is a required property")
    assert _has(errors, "spec.leaderWorkerTemplate.leaderTemplate.spec.containers.0", "'gpu'", "prune")


# ---------------------------------------------------------------------------- Volcano
def _vcjob() -> dict:
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
        "metadata": {"name": "pretrain"},
        "spec": {"schedulerName": "volcano", "queue": "training", "minAvailable": 4,
                 "plugins": {"pytorch": ["--master=master", "--worker=worker"], "svc": []},
                 "networkTopology": {"mode": "hard", "highestTierAllowed": 1},
                 "tasks": [{"name": "worker", "replicas": 4, "template": _template()}]},
    }


def test_volcano_job_valid():
    assert validate_object(_vcjob()) == []


def test_volcano_job_invalid():
    obj = _vcjob()
    obj["spec"]["networkTopology"]["mode"] = "strict"
    obj["spec"]["minAvailable"] = "4"
    obj["spec"]["tasks"][0]["replica"] = 4
    container = obj["spec"]["tasks"][0]["template"]["spec"]["containers"][0]
    container["restartPolicyRules"] = [{"action": "Restart", "exitCodes": {"operator": "In", "values": [137, 137]}}]
    errors = validate_object(obj)
    assert _has(errors, "spec.networkTopology.mode", "strict")
    assert _has(errors, "spec.minAvailable", "not of type 'integer'")
    assert _has(errors, "spec.tasks.0", "'replica'")
    assert _has(errors, "restartPolicyRules.0.exitCodes.values", "duplicate entry 137")


def test_volcano_queue_and_hypernode():
    queue = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": "training"},
             "spec": {"weight": 1, "reclaimable": False, "capability": {"nvidia.com/gpu": 64, "cpu": "512"}}}
    assert validate_object(queue) == []
    bad_queue = copy.deepcopy(queue)
    bad_queue["spec"]["reclaimable"] = "no"
    bad_queue["spec"]["capability"]["memory"] = 1.5          # int-or-string: a float is neither
    errors = validate_object(bad_queue)
    assert _has(errors, "spec.reclaimable", "boolean")
    assert _has(errors, "spec.capability.memory")

    hypernode = {"apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode", "metadata": {"name": "s0"},
                 "spec": {"tier": 1, "members": [
                     {"type": "Node", "selector": {"labelMatch": {
                         "matchLabels": {"topology.k8s.aws/network-node-layer-3": "nn-1"}}}}]}}
    assert validate_object(hypernode) == []
    bad = copy.deepcopy(hypernode)
    del bad["spec"]["tier"]
    bad["spec"]["members"][0]["type"] = "Rack"
    errors = validate_object(bad)
    assert _has(errors, "'tier' is a required property")
    assert _has(errors, "spec.members.0.type", "Rack")


# ---------------------------------------------------------------------------- KAI
def test_kai_queue():
    q = {"apiVersion": "scheduling.run.ai/v2", "kind": "Queue", "metadata": {"name": "inference"},
         "spec": {"parentQueue": "default", "resources": {
             "gpu": {"quota": 16, "limit": -1, "overQuotaWeight": 1},
             "cpu": {"quota": -1, "limit": -1, "overQuotaWeight": 1},
             "memory": {"quota": -1, "limit": -1, "overQuotaWeight": 1}}}}
    assert validate_object(q) == []
    bad = copy.deepcopy(q)
    bad["spec"]["resources"]["nvidia.com/gpu"] = {"quota": 16}
    bad["spec"]["resources"]["gpu"]["quota"] = "16"
    errors = validate_object(bad)
    assert _has(errors, "spec.resources", "nvidia.com/gpu")
    assert _has(errors, "spec.resources.gpu.quota", "number")
    # the Volcano Queue of the same kind name is a different schema
    assert CrdIndex().has("scheduling.run.ai/v2", "Queue")
    assert not CrdIndex().has("scheduling.run.ai/v1", "Queue")


# ---------------------------------------------------------------------------- Kyverno
def _kyverno_policy() -> dict:
    return {
        "apiVersion": "kyverno.io/v1", "kind": "ClusterPolicy",
        "metadata": {"name": "efa-fabric", "annotations": {"policies.kyverno.io/title": "EFA fabric"}},
        "spec": {
            "background": False,
            "rules": [
                {"name": "add-efa",
                 "match": {"any": [{"resources": {"kinds": ["Pod"], "selector": {
                     "matchLabels": {"multinode.dev/fabric": "efa"}}}}]},
                 "mutate": {"foreach": [{
                     "list": "request.object.spec.containers",
                     "patchStrategicMerge": {"spec": {"containers": [{
                         "(name)": "{{ element.name }}",
                         "env": [{"name": "FI_PROVIDER", "value": "efa"},
                                 {"name": "POD", "value": "{{ request.object.metadata.name }}"},
                                 {"name": "GPUS", "value": "{{ to_string(length(request.object.spec.containers)) }}"}],
                     }]}}}]}},
                {"name": "require-efa",
                 "match": {"any": [{"resources": {"kinds": ["Pod"]}}]},
                 "validate": {"failureAction": "Enforce",
                              "message": "pods need EFA, literal \\{{ not a variable }}",
                              "deny": {"conditions": {"all": [{
                                  "key": "{{ request.object.spec.containers[].resources.limits."
                                         "\"vpc.amazonaws.com/efa\" || `[]` | length(@) }}",
                                  "operator": "Equals", "value": 0}]}}}},
            ],
        },
    }


def test_kyverno_policy_valid():
    assert validate_object(_kyverno_policy()) == []


def test_kyverno_policy_invalid():
    p = _kyverno_policy()
    p["spec"]["rules"][1]["validate"]["failureAction"] = "Block"
    p["spec"]["rules"][0]["mutate"]["foreach"][0]["patchStrategicMergee"] = {}
    del p["spec"]["rules"][1]["match"]
    errors = validate_object(p)
    assert _has(errors, "spec.rules.1.validate.failureAction", "Block")
    assert _has(errors, "spec.rules.0.mutate.foreach.0", "patchStrategicMergee")
    assert _has(errors, "spec.rules.1", "'match' is a required property")


def test_kyverno_expressions_and_jmespath():
    p = _kyverno_policy()
    exprs = kyverno_expressions(p)
    assert "{{ element.name }}" in exprs
    assert "{{ request.object.metadata.name }}" in exprs
    assert not any("not a variable" in e for e in exprs)      # escaped \{{ is literal
    assert len(exprs) == 4
    assert kyverno_jmespath_errors(p) == []                   # custom functions only need to parse

    assert kyverno_jmespath_errors({"a": "{{@}}", "b": "{{ divide(`10`, `2`) }}",
                                    "c": "{{ request.object.spec.{n: name} }}"}) == []
    bad = {"spec": {"x": "{{ request.object.metadata.name[ }}", "y": "{{ request.object.metadata.name"}}
    errors = kyverno_jmespath_errors(bad)
    assert len(errors) == 2
    assert _has(errors, "spec.x", "request.object.metadata.name[")
    assert _has(errors, "spec.y", "never closed")
    quote = kyverno_jmespath_errors({"z": "{{ 'unclosed }} and {{ ok }}"})
    assert len(quote) == 1 and "Unclosed ' delimiter" in quote[0]


# ---------------------------------------------------------------------------- NicClusterPolicy
def _nic_policy() -> dict:
    return {
        "apiVersion": "mellanox.com/v1alpha1", "kind": "NicClusterPolicy",
        "metadata": {"name": "nic-cluster-policy"},
        "spec": {
            "ofedDriver": {"image": "doca-driver", "repository": "nvcr.io/nvidia/mellanox",
                           "version": "25.04-0.6.1.0-2",
                           "upgradePolicy": {"autoUpgrade": True, "maxParallelUpgrades": 1}},
            "rdmaSharedDevicePlugin": {
                "image": "k8s-rdma-shared-dev-plugin", "repository": "ghcr.io/mellanox", "version": "v1.5.3",
                "config": '{"configList": [{"resourceName": "rdma_shared_device_a", "rdmaHcaMax": 63,'
                          ' "selectors": {"ifNames": ["ib0"]}}]}'},
        },
    }


def test_nic_cluster_policy():
    assert validate_object(_nic_policy()) == []
    bad = _nic_policy()
    del bad["spec"]["rdmaSharedDevicePlugin"]["image"]
    bad["spec"]["rdmaSharedDevicePlugin"]["config"] = {"configList": []}   # must be a JSON string
    errors = validate_object(bad)
    assert _has(errors, "spec.rdmaSharedDevicePlugin", "'image' is a required property")
    assert _has(errors, "spec.rdmaSharedDevicePlugin.config", "not of type 'string'")


# ---------------------------------------------------------------------------- Grove
def _pcs() -> dict:
    def clique(name: str, role: str, replicas: int) -> dict:
        return {"name": name, "spec": {"roleName": role, "replicas": replicas, "minAvailable": replicas,
                                       "podSpec": _pod_spec()}}
    return {
        "apiVersion": "grove.io/v1alpha1", "kind": "PodCliqueSet",
        "metadata": {"name": "disagg"},
        "spec": {"replicas": 1, "template": {
            "cliqueStartupType": "CliqueStartupTypeAnyOrder",
            "cliques": [clique("leader", "leader", 1), clique("worker", "worker", 3)],
            "podCliqueScalingGroups": [{"name": "prefill", "cliqueNames": ["leader", "worker"], "replicas": 1}],
            "topologyConstraint": {"pack": {"required": "rack"}},
        }},
    }


def test_grove_podcliqueset():
    assert validate_object(_pcs()) == []
    bad = _pcs()
    del bad["spec"]["template"]["cliques"][1]["spec"]["roleName"]
    bad["spec"]["template"]["cliqueStartupType"] = "InOrder"
    bad["spec"]["template"]["cliques"][0]["spec"]["podSpec"]["schedulerName"] = 5
    errors = validate_object(bad)
    assert _has(errors, "spec.template.cliques.1.spec", "'roleName' is a required property")
    assert _has(errors, "spec.template.cliqueStartupType", "InOrder")
    assert _has(errors, "spec.template.cliques.0.spec.podSpec.schedulerName", "string")


# ---------------------------------------------------------------------------- Dynamo
def _dynamo_examples() -> list[dict]:
    docs = []
    for path in sorted((SCHEMA_DIR / "dynamo" / "examples").glob("*.yaml")):
        docs += [d for d in yaml.load_all(path.read_text(), Loader=yaml.CSafeLoader) if d]
    return docs


def test_dynamo_upstream_examples_validate():
    docs = _dynamo_examples()
    assert len(docs) == 3
    assert {d["apiVersion"] for d in docs} == {"nvidia.com/v1alpha1", "nvidia.com/v1beta1"}
    for d in docs:
        assert d["kind"] == "DynamoGraphDeployment"
        assert validate_object(d) == [], d["metadata"]["name"]


def test_dynamo_invalid():
    doc = next(d for d in _dynamo_examples() if d["metadata"]["name"] == "vllm-disagg")
    doc = copy.deepcopy(doc)
    decode = next(c for c in doc["spec"]["components"] if c["name"] == "decode")
    decode["multinode"]["nodeCount"] = "2"
    decode["multinode"]["nodes"] = 2
    doc["spec"]["services"] = {}                                # v1alpha1 field, not in v1beta1
    errors = validate_object(doc)
    assert _has(errors, "spec.components.1.multinode.nodeCount", "integer")
    assert _has(errors, "spec.components.1.multinode", "'nodes'")
    assert _has(errors, "spec: unknown field(s) 'services'")
    assert CrdIndex().deprecation("nvidia.com/v1alpha1", "DynamoGraphDeployment")
    assert CrdIndex().deprecation("nvidia.com/v1beta1", "DynamoGraphDeployment") is None


# ---------------------------------------------------------------------------- MPIJob
def _mpijob() -> dict:
    return {
        "apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob", "metadata": {"name": "nccl-tests"},
        "spec": {"slotsPerWorker": 8, "runPolicy": {"cleanPodPolicy": "Running"},
                 "mpiReplicaSpecs": {"Launcher": {"replicas": 1, "template": _template()},
                                     "Worker": {"replicas": 2, "template": _template()}}},
    }


def test_mpijob():
    assert validate_object(_mpijob()) == []
    bad = _mpijob()
    bad["spec"]["slotsPerWorker"] = "8"
    bad["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["resources"]["limit"] = {}
    bad["spec"]["mpiImplementation"] = "MVAPICH"
    errors = validate_object(bad)
    assert _has(errors, "spec.slotsPerWorker", "integer")
    assert _has(errors, "spec.mpiReplicaSpecs.Worker.template.spec.containers.0.resources", "'limit'")
    assert _has(errors, "spec.mpiImplementation", "MVAPICH")


# ---------------------------------------------------------------------------- CRD generic rules
def test_crd_metadata_and_list_map_rules():
    obj = _lws()
    obj["metadata"] = {"name": "Bad_Name", "labels": {"ok": "yes"}, "annotationz": {}}
    containers = obj["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"]
    containers.append(dict(containers[0]))                     # duplicate list-map key "name"
    errors = validate_object(obj)
    assert _has(errors, "metadata.name", "DNS-1123")
    assert _has(errors, "metadata", "annotationz")
    assert _has(errors, "workerTemplate.spec.containers", "duplicate entry", "name='main'")


_SYNTHETIC_CRD = """\
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  names: {kind: Widget, plural: widgets}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            required: [size, note]
            properties:
              size: {type: integer}
              note: {type: string, nullable: true}
              port: {x-kubernetes-int-or-string: true}
              extra: {type: object, x-kubernetes-preserve-unknown-fields: true}
              inner: {type: object, x-kubernetes-embedded-resource: true, properties: {spec: {type: object}}}
              ports:
                type: array
                x-kubernetes-list-type: map
                x-kubernetes-list-map-keys: [name]
                items: {type: object, properties: {name: {type: string}, number: {type: integer}}}
  - name: v0
    served: false
    storage: false
    schema: {openAPIV3Schema: {type: object}}
"""


def test_generic_crd_rules_on_a_synthetic_crd(tmp_path):
    (tmp_path / "example.com_widgets.yaml").write_text(_SYNTHETIC_CRD)
    idx = CrdIndex(tmp_path)
    assert idx.kinds() == [("example.com", "Widget")]
    good = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"},
            "spec": {"size": 1, "note": None, "port": "http", "extra": {"anything": {"goes": 1}},
                     "inner": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}},
                     "ports": [{"name": "a", "number": 1}, {"name": "b", "number": 1}]}}
    assert idx.validate(good) == []
    bad = copy.deepcopy(good)
    bad["spec"]["size"] = None                                   # not nullable: pruned -> required
    bad["spec"]["port"] = 1.5
    bad["spec"]["inner"]["metadata"]["nam"] = "c"
    bad["spec"]["ports"].append({"number": 3})                   # list-map key missing
    bad["spec"]["ports"].append({"name": "a"})                   # duplicate key
    errors = idx.validate(bad)
    assert _has(errors, "spec: 'size' is a required property")
    assert _has(errors, "spec.port")
    assert _has(errors, "spec.inner.metadata", "'nam'")
    assert _has(errors, "spec.ports", "lacks list-map key(s) name")
    assert _has(errors, "spec.ports", "duplicate entry (name='a')")
    assert len(errors) == 5
    assert _has(idx.validate(dict(good, apiVersion="example.com/v0")), "not served")
    with pytest.raises(UnknownKindError):
        idx.validate(dict(good, apiVersion="example.com/v2"))


def test_null_for_non_nullable_field_is_pruned_not_an_error():
    obj = _vcjob()
    obj["spec"]["priorityClassName"] = None
    assert validate_object(obj) == []


def test_index_is_lazy_and_knows_kinds():
    idx = CrdIndex()
    kinds = idx.kinds()
    assert ("leaderworkerset.x-k8s.io", "LeaderWorkerSet") in kinds
    assert ("grove.io", "PodCliqueSet") in kinds
    assert ("scheduling.run.ai", "Queue") in kinds and ("scheduling.volcano.sh", "Queue") in kinds
    assert not idx.has("apps/v1", "Deployment")
    rules = idx.cel_rules("topology.volcano.sh/v1alpha1", "HyperNode")
    assert rules and all(r[1] for r in rules)


# ---------------------------------------------------------------------------- x-kubernetes-validations (CEL)
def test_crd_cel_rules_are_evaluated_at_every_instance():
    """HyperNode's selector rules (one of exactMatch / regexMatch / labelMatch, exactly one) run on every
    spec.members[] entry; the messages are the CRD's own."""
    ok = {"apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode", "metadata": {"name": "s0"},
          "spec": {"tier": 1, "members": [{"type": "Node", "selector": {"exactMatch": {"name": "n1"}}},
                                          {"type": "Node", "selector": {"regexMatch": {"pattern": "n.*"}}}]}}
    assert validate_object(ok) == []
    none = copy.deepcopy(ok)
    none["spec"]["members"][1]["selector"] = {}
    assert validate_object(none) == ["spec.members[1].selector: Either ExactMatch or RegexMatch or LabelMatch must "
                                     "be specified (x-kubernetes-validations)"]
    two = copy.deepcopy(ok)
    two["spec"]["members"][0]["selector"]["regexMatch"] = {"pattern": "x"}
    assert validate_object(two) == ["spec.members[0].selector: Only one of ExactMatch, RegexMatch, or LabelMatch "
                                    "can be specified (x-kubernetes-validations)"]


def test_optional_old_self_rules_run_on_create_and_transition_rules_do_not():
    """Grove's packDomain rules are `optionalOldSelf: true` (oldSelf.hasValue() || ...): on CREATE oldSelf is
    optional.none(), so a new PodCliqueSet with the deprecated packDomain is refused. `self == oldSelf` rules
    (immutability) exist only on UPDATE and are listed as not evaluated."""
    pcs = {"apiVersion": "grove.io/v1alpha1", "kind": "PodCliqueSet", "metadata": {"name": "g"},
           "spec": {"replicas": 1, "template": {"cliques": [{"name": "c", "spec": {
               "roleName": "c", "replicas": 1, "podSpec": {"containers": [{"name": "x", "image": "i"}]}}}]}}}
    assert validate_object(pcs) == []
    old = copy.deepcopy(pcs)
    old["spec"]["template"]["topologyConstraint"] = {"packDomain": "rack"}
    errors = validate_object(old)
    assert errors == ["<root>: packDomain is deprecated and cannot be used on new workloads; use pack.required "
                      "(x-kubernetes-validations)"]
    from multinode.schema_check import cel_rules_skipped
    CrdIndex().cel_rule_errors({"apiVersion": "kai.scheduler/v1alpha1", "kind": "Topology", "metadata": {"name": "t"},
                                "spec": {"levels": [{"nodeLabel": "a"}]}})
    assert cel_rules_skipped()["self == oldSelf"].startswith("transition rule")


# ---------------------------------------------------------------------------- Helm values
def test_helm_values_known_typo_and_free_form():
    assert helm_values_unknown_keys("kyverno", {"admissionController": {"replicas": 3}}) == []
    assert helm_values_unknown_keys("kyverno", {"admissionController": {"replicaz": 3}}) == \
        ["admissionController.replicaz"]
    free = {"admissionController": {
        "nodeSelector": {"node.kubernetes.io/role": "system"},
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}],
        "container": {"resources": {"limits": {"memory": "1Gi", "ephemeral-storage": "1Gi"}}},
    }}
    assert helm_values_unknown_keys("kyverno", free) == []
    assert helm_values_unknown_keys("lws", {"nodeSelector": {"a": "b"}, "image": {"manager": {"tagg": "x"}}}) == \
        ["image.manager.tagg"]
    # free-form by name (upstream lws resources only has requests) and by an empty upstream {}
    assert helm_values_unknown_keys("lws", {
        "resources": {"limits": {"nvidia.com/gpu": 0}},
        "gangSchedulingManagement": {"schedulerProvider": "volcano"},
    }) == []
    with pytest.raises(ValueError):
        helm_values_unknown_keys("no-such-chart", {})


def test_helm_values_subchart_and_scalar_mismatch():
    assert helm_values_unknown_keys("gpu-operator", {"node-feature-discovery": {"worker": {"anything": 1}}}) == []
    assert helm_values_unknown_keys("volcano", {"basic": {"image_tag_version": {"x": 1}}}) == \
        ["basic.image_tag_version.x"]


def test_module_cache_makes_second_validation_cheap():
    import time

    validate_object(_mpijob())
    t = time.perf_counter()
    for _ in range(5):
        validate_object(_mpijob())
    assert (time.perf_counter() - t) / 5 < 0.5
    assert v._VALIDATORS, "validators are cached at module level"
