"""Resource rule: a container sets each environment variable once.

Kubernetes keeps the last of two same-named `env` entries (the kubelet builds the environment in order), so
a variable given twice -- ours, then a user's copy -- runs with a value no check saw.
"""
from __future__ import annotations

from collections import Counter
from typing import Iterator

from .. import objects
from ..engine import MANDATORY, Context, Resource, Rule


def check_env_once(res: Resource, ctx: Context) -> Iterator[str]:
    if not res.is_k8s:
        return
    for spec in objects.pod_specs_anywhere(res.props):
        for key in ("initContainers", "containers"):
            for c in spec.get(key) or []:
                if not isinstance(c, dict):
                    continue
                names = Counter(e.get("name") for e in c.get("env") or [] if isinstance(e, dict) and e.get("name"))
                twice = sorted(n for n, k in names.items() if k > 1)
                if twice:
                    yield (f"{res.label} container {c.get('name', '?')}: env "
                           + ", ".join(f"{n} ({names[n]} times)" for n in twice)
                           + "; Kubernetes uses the last one, so the value that was checked may not be the one that "
                             "runs: remove the duplicates and keep one entry each")


RULES = [
    Rule("env-defined-once", "A container sets each environment variable once (Kubernetes keeps the last).",
         MANDATORY, check_env_once),
]
