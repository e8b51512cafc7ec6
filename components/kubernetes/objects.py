"""Turn a plain manifest dict (from multinode.manifests) into the matching Pulumi resource.

Core kinds become the typed pulumi_kubernetes classes; custom resources become
`apiextensions.CustomResource`. The dict is passed through unchanged (camelCase wire names), so
what `plan` records is exactly the object Kubernetes gets.
"""
from __future__ import annotations

import importlib
from typing import Any

import pulumi

from multinode.config import to_snake
from multinode.manifests import CORE_API_GROUPS


def resource_class(api_version: str, kind: str) -> type | None:
    group, _, version = api_version.rpartition("/")
    mod = CORE_API_GROUPS.get(group)
    if mod is None:
        return None
    module = importlib.import_module(f"pulumi_kubernetes.{mod}.{version}")
    return getattr(module, kind, None)


def k8s_object(name: str, obj: dict[str, Any], opts: pulumi.ResourceOptions) -> pulumi.CustomResource:
    """Register `obj` as a Kubernetes resource named `name` (the Pulumi logical name)."""
    api_version, kind = obj["apiVersion"], obj["kind"]
    cls = resource_class(api_version, kind)
    body = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind")}
    if cls is not None:
        return cls(name, opts=opts, **{to_snake(k): v for k, v in body.items()})
    from pulumi_kubernetes.apiextensions import CustomResource
    return CustomResource(name, api_version=api_version, kind=kind, opts=opts, **body)


def makes_pods(obj: dict[str, Any]) -> bool:
    """Whether the object creates pods (a Pod, or a pod template anywhere in it: Deployments, Jobs, LWS, Volcano
    Jobs, Grove cliques, Dynamo graphs, any custom workload with a template), as the admission check finds them."""
    from multinode import podspecs
    return next(iter(podspecs.pod_specs(obj)), None) is not None
