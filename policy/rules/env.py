"""Resource rule: a container sets each environment variable once.

Kubernetes keeps the last of two same-named `env` entries (the kubelet builds the environment in order), so
a variable given twice -- ours, then a user's copy -- runs with a value no check saw.
"""
from __future__ import annotations

from collections.abc import Iterator

from multinode.admission import check_env_set_once

from .. import objects
from ..engine import MANDATORY, Context, Resource, Rule


def check_env_once(res: Resource, ctx: Context) -> Iterator[str]:
    """The admission module's env rule (one implementation) on every container of every pod spec the object
    holds; `plan` runs the same rule on the pods after the fabric policy mutates them."""
    if not res.is_k8s:
        return
    for template, spec in objects.named_pod_specs(res.props):
        where = f" ({template})" if template else ""
        for key in ("initContainers", "containers"):
            for c in spec.get(key) or []:
                if not isinstance(c, dict):
                    continue
                for problem in check_env_set_once(c, spec):
                    yield (f"{res.label}{where} container {c.get('name', '?')}: {problem}; Kubernetes uses the "
                           "last one, so the value that was checked may not be the one that runs: keep one entry each")


RULES = [
    Rule("env-defined-once", "A container sets each environment variable once (Kubernetes keeps the last).",
         MANDATORY, check_env_once),
]
