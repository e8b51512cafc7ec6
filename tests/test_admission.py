"""Admission check (multinode.admission): each broken pod shape is refused with its rule's name, a
well-formed pod passes, every pod spec of every example stack passes (before and after the fabric
policies), and the walker finds the pod specs inside each workload kind we render."""
from __future__ import annotations

import copy

import pytest

from multinode import admission as adm
from multinode import plan as mplan

from .conftest import EXAMPLE_STACKS


def good_pod():
    return {
        "containers": [{
            "name": "main", "image": "x",
            "resources": {"requests": {"nvidia.com/gpu": "8", "cpu": "64", "memory": "512Gi"},
                          "limits": {"nvidia.com/gpu": "8", "vpc.amazonaws.com/efa": "32"}},
            "env": [{"name": "NCCL_NET", "value": "AWS Libfabric"}],
            "ports": [{"name": "http", "containerPort": 8000}],
            "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"}],
        }],
        "initContainers": [{"name": "sidecar", "image": "y", "restartPolicy": "Always"}],
        "volumes": [{"name": "dshm", "emptyDir": {"medium": "Memory"}}],
    }


def rules_of(spec):
    return {f.rule for f in adm.check_pod_spec(spec)}


def test_well_formed_pod_is_admitted():
    assert adm.check_pod_spec(good_pod()) == []


def _main(spec):
    return spec["containers"][0]


def hugepages_without_cpu_or_memory(s):
    _main(s)["resources"] = {"limits": {"nvidia.com/gpu": "8", "hugepages-2Mi": "5120Mi"}}


def hugepages_not_a_page_multiple(s):
    _main(s)["resources"]["limits"]["hugepages-2Mi"] = "5Mi"


def duplicate_env(s):
    _main(s)["env"].append({"name": "NCCL_NET", "value": "Socket"})


def mount_without_volume(s):
    _main(s)["volumeMounts"].append({"name": "checkpoints", "mountPath": "/checkpoints"})


def duplicate_mount_path(s):
    s["volumes"].append({"name": "other", "emptyDir": {}})
    _main(s)["volumeMounts"].append({"name": "other", "mountPath": "/dev/shm"})


def gpu_request_above_limit(s):
    _main(s)["resources"]["requests"]["nvidia.com/gpu"] = "16"


def gpu_request_below_limit(s):
    _main(s)["resources"]["requests"]["nvidia.com/gpu"] = "4"


def efa_request_without_limit(s):
    _main(s)["resources"]["requests"]["rdma/ib"] = "1"


def cpu_request_above_limit(s):
    _main(s)["resources"]["limits"]["cpu"] = "32"


def fractional_gpu(s):
    _main(s)["resources"]["requests"]["nvidia.com/gpu"] = "0.5"
    _main(s)["resources"]["limits"]["nvidia.com/gpu"] = "0.5"


def unknown_unprefixed_resource(s):
    _main(s)["resources"]["limits"]["gpu"] = "1"


def duplicate_container_names(s):
    s["containers"].append({"name": "main", "image": "z"})


def init_container_shares_a_name(s):
    s["initContainers"].append({"name": "main", "image": "z"})


def duplicate_volume_names(s):
    s["volumes"].append({"name": "dshm", "emptyDir": {}})


def duplicate_port_names(s):
    _main(s)["ports"].append({"name": "http", "containerPort": 8001})


def no_containers(s):
    s["containers"] = []


BROKEN = [
    (hugepages_without_cpu_or_memory, adm.HUGEPAGES_NEED_CPU_OR_MEMORY),
    (hugepages_not_a_page_multiple, adm.RESOURCE_QUANTITY),
    (duplicate_env, adm.ENV_VAR_SET_ONCE),
    (mount_without_volume, adm.MOUNT_NAMES_A_VOLUME),
    (duplicate_mount_path, adm.UNIQUE_MOUNT_PATHS),
    (gpu_request_above_limit, adm.EXTENDED_REQUEST_EQUALS_LIMIT),
    (gpu_request_below_limit, adm.EXTENDED_REQUEST_EQUALS_LIMIT),
    (efa_request_without_limit, adm.EXTENDED_REQUEST_EQUALS_LIMIT),
    (cpu_request_above_limit, adm.REQUEST_WITHIN_LIMIT),
    (fractional_gpu, adm.RESOURCE_QUANTITY),
    (unknown_unprefixed_resource, adm.RESOURCE_NAME),
    (duplicate_container_names, adm.UNIQUE_CONTAINER_NAMES),
    (init_container_shares_a_name, adm.UNIQUE_CONTAINER_NAMES),
    (duplicate_volume_names, adm.UNIQUE_VOLUME_NAMES),
    (duplicate_port_names, adm.UNIQUE_PORT_NAMES),
    (no_containers, adm.CONTAINERS_REQUIRED),
]


@pytest.mark.parametrize("breaker,rule", BROKEN, ids=[b.__name__ for b, _ in BROKEN])
def test_each_broken_shape_is_refused_with_its_rule(breaker, rule):
    spec = good_pod()
    breaker(spec)
    assert rule in rules_of(spec)


def test_every_rule_has_a_broken_shape():
    assert {r for _, r in BROKEN} == set(adm.RULES)


def test_limit_only_extended_resource_is_admitted_after_defaulting():
    # SetDefaults_Pod copies the limit into requests: a GPU in limits only is fine.
    spec = good_pod()
    _main(spec)["resources"] = {"limits": {"nvidia.com/gpu": "8", "hugepages-2Mi": "5120Mi", "memory": "32000Mi"}}
    assert adm.check_pod_spec(spec) == []


def test_memory_request_alone_satisfies_hugepages():
    # the aws-samples nccl-tests.yaml shape: hugepages-2Mi 5120Mi with memory 32000Mi, no cpu
    spec = good_pod()
    _main(spec)["resources"] = {"requests": {"hugepages-2Mi": "5120Mi", "memory": "32000Mi"},
                                "limits": {"hugepages-2Mi": "5120Mi", "memory": "32000Mi"}}
    assert adm.check_pod_spec(spec) == []


@pytest.mark.parametrize("text,value", [("8", 8), ("500m", 0.5), ("5120Mi", 5120 * 2 ** 20), ("1e3", 1000),
                                        ("2Gi", 2 * 2 ** 30), ("1.5", 1.5), (4, 4)])
def test_parse_quantity(text, value):
    assert float(adm.parse_quantity(text)) == value


def test_parse_quantity_rejects_garbage():
    assert adm.parse_quantity("8 GPUs") is None and adm.parse_quantity("") is None


def _lws(spec):
    tmpl = {"metadata": {"labels": {"a": "b"}}, "spec": spec}
    return {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
            "metadata": {"name": "w", "namespace": "ns"},
            "spec": {"leaderWorkerTemplate": {"leaderTemplate": tmpl, "workerTemplate": copy.deepcopy(tmpl)}}}


def test_walker_finds_pod_specs_in_each_shape():
    spec = good_pod()
    lws = list(adm.pod_specs(_lws(spec)))
    assert [r.where for r in lws] == ["spec.leaderWorkerTemplate.leaderTemplate",
                                      "spec.leaderWorkerTemplate.workerTemplate"]
    grove = {"apiVersion": "grove.io/v1alpha1", "kind": "PodCliqueSet", "metadata": {"name": "g"},
             "spec": {"template": {"cliques": [{"name": "c", "labels": {"x": "y"},
                                                "spec": {"replicas": 1, "podSpec": spec}}]}}}
    (ref,) = adm.pod_specs(grove)
    assert ref.where == "spec.template.cliques[0].spec.podSpec" and ref.metadata == {"labels": {"x": "y"}}
    dgd_v1alpha1 = {"apiVersion": "nvidia.com/v1alpha1", "kind": "DynamoGraphDeployment", "metadata": {"name": "d"},
                    "spec": {"services": {"decode": {"extraPodSpec": {"mainContainer": {"image": "i"}}}}}}
    (ref,) = adm.pod_specs(dgd_v1alpha1)
    assert ref.spec["containers"] == [{"name": "main", "image": "i"}]
    policy = {"apiVersion": "kyverno.io/v1", "kind": "ClusterPolicy", "metadata": {"name": "p"},
              "spec": {"rules": [{"mutate": {"patchStrategicMerge": {"spec": {"containers": [{"name": "x"}]}}}}]}}
    assert list(adm.pod_specs(policy)) == []


def test_findings_name_object_container_and_rule():
    spec = good_pod()
    hugepages_without_cpu_or_memory(spec)
    (v,) = adm.findings([_lws(spec)])[:1]
    assert v["enforcementLevel"] == "mandatory"
    assert v["policy"] == f"pod-admission/{adm.HUGEPAGES_NEED_CPU_OR_MEMORY}"
    assert v["resource"] == "LeaderWorkerSet ns/w" and v["container"] == "main"
    assert "container 'main'" in v["message"] and adm.HUGEPAGES_NEED_CPU_OR_MEMORY in v["message"]


def test_plan_exits_1_on_an_admission_finding(monkeypatch):
    """The hook in plan: a broken pod spec is a mandatory finding and exit 1."""
    real = adm.findings

    def broken(objects, *memo):
        objects = copy.deepcopy(objects)
        for o in objects:
            for ref in adm.pod_specs(o):
                for c in ref.spec["containers"]:
                    c.setdefault("volumeMounts", []).append({"name": "no-such-volume", "mountPath": "/nowhere"})
        return real(objects, *memo)

    monkeypatch.setattr(adm, "findings", broken)
    result = mplan.plan("aws-dev", None)
    assert result.exit_code == mplan.EXIT_POLICY
    assert any(v["policy"] == f"pod-admission/{adm.MOUNT_NAMES_A_VOLUME}" for v in result.violations)


@pytest.mark.parametrize("stack", EXAMPLE_STACKS)
def test_every_pod_of_every_example_stack_is_admitted(stack):
    result = mplan.plan(stack, None)
    objects = result.k8s_objects
    refs = [r for o in objects for r in adm.pod_specs(o)]
    assert refs, "the walker found no pod spec"
    bad = adm.findings(objects)
    assert bad == [], "\n".join(v["resource"] + " " + v["message"] for v in bad)
    # the fabric pods were checked after injection too: at least one pod spec is changed by a policy
    policies = [o for o in objects if o.get("kind") == "MutatingPolicy"]
    assert policies, "every example stack has a fabric pool"
    assert any(adm.effective_spec(r, policies) is not None for r in refs)


def test_aws_fabric_pods_request_cpu_memory_and_no_hugepages():
    """Issue 14, AWS: every GPU container of every aws-dev pod, after the fabric policy, requests cpu and
    memory (the per-GPU share from the catalog) and no hugepages."""
    result = mplan.plan("aws-dev", None)
    policies = [o for o in result.k8s_objects if o.get("kind") == "MutatingPolicy"]
    seen = 0
    for o in result.k8s_objects:
        for ref in adm.pod_specs(o):
            eff = adm.effective_spec(ref, policies)
            if eff is None:
                continue
            for c in eff["containers"]:
                limits = (c.get("resources") or {}).get("limits") or {}
                if "nvidia.com/gpu" not in limits:
                    continue
                seen += 1
                req = c["resources"]["requests"]
                assert req["cpu"] == "144" and req["memory"] == "1536Gi", (ref.where, req)
                assert not any(k.startswith("hugepages-") for k in list(req) + list(limits))
                env = {e["name"]: e.get("value") for e in c.get("env", [])}
                assert env["FI_EFA_USE_HUGE_PAGE"] == "0" and env["NCCL_NET"] == "AWS Libfabric"
    assert seen >= 4      # LWS leader + worker, the trainer and the NCCL check


def test_wrong_typed_names_and_paths_never_raise():
    """Found by the hostile-input fuzz: a mount path, volume, container or port name of the wrong type (and
    labels that are not a map, seen by the fabric policy's match) is left to the schema check, never a crash."""
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": ["not", "a", "map"]},
           "spec": {"volumes": [{"name": ["x"]}, {"name": "ckpt", "emptyDir": {}}],
                    "containers": [{"name": {"n": 1}, "image": "i",
                                    "ports": [{"name": ["p"], "containerPort": 1}],
                                    "volumeMounts": [{"name": {"v": 1}, "mountPath": {"p": 1}},
                                                     {"name": "ckpt", "mountPath": "/c"},
                                                     {"name": "missing", "mountPath": "/m"}]}]}}
    policy = {"apiVersion": "policies.kyverno.io/v1", "kind": "MutatingPolicy", "metadata": {"name": "f"},
              "spec": {"matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                                                               "operations": ["CREATE"], "resources": ["pods"]}]},
                       "matchConditions": [{"name": "a",
                                            "expression": "object.metadata.?labels[?'a'].orValue('') == 'b'"}],
                       "mutations": [{"patchType": "JSONPatch", "jsonPatch": {"expression": "[]"}}]}}
    found = adm.findings([policy, pod])
    # the readable problem is still reported
    assert [f["rule"] for f in found] == [adm.MOUNT_NAMES_A_VOLUME], found


def test_plan_runs_each_pod_template_through_the_policies_once(monkeypatch, tmp_path):
    """Issue 19: admission.findings and the effective-pod writer share one TemplateMemo per plan, so a pod
    template is evaluated once, and the effective pods written are those a plan without the memo writes."""
    from multinode.manifests import effective_pod
    real = effective_pod.apply_policies_to_template
    asked: list[tuple[list, str]] = []

    def counting(template, policies, *prepared):
        asked.append((policies, repr((template.get("metadata") or {}, template.get("spec") or {}))))
        return real(template, policies, *prepared)

    monkeypatch.setattr(effective_pod, "apply_policies_to_template", counting)
    result = mplan.plan("aws-dev", tmp_path)
    assert result.exit_code == 0 and result.effective is not None
    written = sorted((tmp_path / "aws-dev" / "effective").iterdir())
    assert written, "aws-dev has fabric pods: effective pods are written"
    # the stack's policies (placement also evaluates templates, under one pool's policy each: not counted here)
    calls = [key for policies, key in asked if policies is result.effective.policies]
    assert calls and len(calls) == len(set(calls)), "a template was evaluated twice"
    result.effective = None                               # the writer on its own (a memo of its own)
    fresh = mplan.write_effective_pods(result, tmp_path / "fresh")
    assert [p.name for p in sorted(fresh)] == [p.name for p in written]
    assert [p.read_text() for p in sorted(fresh)] == [p.read_text() for p in written]


def test_effective_spec_leaves_the_written_pod_alone_and_defaults_requests_as_a_deep_copy_would():
    """effective_spec copies only the containers it gives requests: the pod as written is unchanged after it, and
    the result is the one the whole pod deep-copied and defaulted gives."""
    from multinode.manifests import effective_pod
    result = mplan.plan("aws-dev", None)
    policies = [o for o in result.k8s_objects if o.get("kind") == "MutatingPolicy"]
    seen = 0
    for o in result.k8s_objects:
        for ref in adm.pod_specs(o):
            before = copy.deepcopy(ref.spec)
            eff = adm.effective_spec(ref, policies)
            assert ref.spec == before and repr(ref.spec) == repr(before), ref.where
            spec = copy.deepcopy(ref.spec)
            for c in adm.all_containers(spec):
                if isinstance(c.get("resources"), dict) and (c["resources"].get("limits") or {}):
                    c["resources"]["requests"] = adm.defaulted_requests(c)
            want = effective_pod.apply_policies_to_template({"metadata": ref.metadata, "spec": spec}, policies)
            want_spec = want["spec"] if want["spec"] != spec else None
            assert repr(eff) == repr(want_spec), ref.where
            seen += eff is not None and spec != ref.spec
    assert seen, "a fabric pod with a limit and no request was checked"
