"""Every pod spec inside a Kubernetes object (a Pod, any pod template, Grove cliques, Dynamo services), with its path.

Pure and imports nothing of ours: the admission check, the config checks of hand-written objects and the credential
rules all walk objects with it.
"""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any


def _map(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[dict[str, Any]]:
    return [x for x in value if isinstance(x, dict)] if isinstance(value, list) else []


# Objects whose nested `spec.containers` are patches, not pods (Kyverno's patchStrategicMerge).
NOT_PODS = ("kyverno.io/", "policies.kyverno.io/", "apiextensions.k8s.io/")   # policies and CRDs hold no pods


@dataclass
class PodSpecRef:
    where: str                   # path of the pod spec inside the object, e.g. spec.leaderWorkerTemplate.workerTemplate
    metadata: dict[str, Any]     # labels / annotations the pods get (what the fabric policies match)
    spec: dict[str, Any]


def pod_specs(obj: dict[str, Any]) -> Iterator[PodSpecRef]:
    """Every pod spec inside a rendered object: a Pod; pod templates ({metadata, spec.containers}) of
    Deployments, StatefulSets, DaemonSets, Jobs, LWS leader/worker, Volcano Job tasks, MPIJob /
    PyTorchJob replicas, Dynamo DGD v1beta1 components[].podTemplate; Grove PodCliqueSet cliques
    (labels + spec.podSpec); Dynamo DGD v1alpha1 services (extraPodSpec with its mainContainer, which
    the operator makes the pod's main container)."""
    if str(obj.get("apiVersion", "")).startswith(NOT_PODS):
        return
    yield from _walk(obj, "")


def _walk(node: Any, path: str) -> Iterator[PodSpecRef]:
    if isinstance(node, list):
        for i, v in enumerate(node):
            yield from _walk(v, f"{path}[{i}]")
        return
    if not isinstance(node, dict):
        return
    spec = node.get("spec")
    if isinstance(spec, dict) and isinstance(spec.get("containers"), list):
        yield PodSpecRef(path or "(object)", _map(node.get("metadata")), spec)
        return
    if isinstance(spec, dict) and isinstance(spec.get("podSpec"), dict):          # Grove clique
        meta = {k: node[k] for k in ("labels", "annotations") if isinstance(node.get(k), dict)}
        yield PodSpecRef(f"{path}.spec.podSpec", meta, spec["podSpec"])
        return
    extra = node.get("extraPodSpec")
    if isinstance(extra, dict):                                                   # DGD v1alpha1 service
        pod = dict(extra)
        main = extra.get("mainContainer")
        containers = _list(extra.get("containers"))
        if isinstance(main, dict):
            containers = [{"name": "main", **main}] + containers
        pod["containers"] = containers
        pod.pop("mainContainer", None)
        meta = {k: node[k] for k in ("labels", "annotations") if isinstance(node.get(k), dict)}
        yield PodSpecRef(f"{path}.extraPodSpec", meta, pod)
        return
    for k, v in node.items():
        yield from _walk(v, f"{path}.{k}" if path else k)
