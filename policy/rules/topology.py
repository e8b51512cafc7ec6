"""Volcano network-topology rules (issue 18), from Volcano's network-topology-aware scheduling guide
(volcano-sh/volcano v1.15.1 docs/user-guide/how_to_use_network_topology_aware_scheduling.md):
- `mode: hard` keeps a job inside one HyperNode of tier <= highestTierAllowed, "otherwise the job will
  remain in the Pending state": with no HyperNode at all (none created, none discovered) it can never run;
- the scheduler honours networkTopology only with the `network-topology-aware` plugin in its config
  ("Add it to enable network-topology-aware plugin"); the chart's default config lacks it.
Both judge only what the stack shows: when Volcano is not installed by the stack (no volcano Release), its
config and HyperNodes are the cluster's and these rules say nothing.
"""
from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from .. import objects
from ..engine import MANDATORY, Context, Resource, Rule

TOPOLOGY_PLUGIN = "network-topology-aware"


def _volcano_release(resources: list[Resource]) -> Resource | None:
    for r in resources:
        if r.type == "kubernetes:helm.sh/v3:Release" and objects.text(r.props.get("chart")) == "volcano":
            return r
    return None


def _custom(release: Resource) -> dict[str, Any]:
    return objects.mapping(objects.get(release.props, "values", "custom"))


def _topology_jobs(resources: list[Resource]) -> Iterator[tuple[Resource, dict[str, Any]]]:
    for r in resources:
        if r.is_k8s and r.kind == ("batch.volcano.sh", "Job"):
            nt = objects.get(r.props, "spec", "networkTopology")
            if isinstance(nt, dict):
                yield r, nt


def _discovers(custom: dict[str, Any]) -> bool:
    sources = objects.seq(objects.get(custom, "controller_config_override", "networkTopologyDiscovery"))
    return any(isinstance(s, dict) and s.get("enabled") is True for s in sources)


def check_hard_topology(resources: list[Resource], ctx: Context) -> Iterator[tuple[Resource, str]]:
    release = _volcano_release(resources)
    if release is None:
        return
    has_hypernodes = any(r.is_k8s and r.kind == ("topology.volcano.sh", "HyperNode") for r in resources)
    if has_hypernodes or _discovers(_custom(release)):
        return
    for r, nt in _topology_jobs(resources):
        if nt.get("mode", "hard") == "hard":          # the CRD's default mode is hard
            yield r, (f"{r.label}: networkTopology mode hard, but the stack creates no HyperNode and configures "
                      f"no HyperNode discovery, so Volcano can never place it (it stays Pending); use mode soft, "
                      f"or run it on a pool the stack gives network tiers")


def check_topology_plugin(resources: list[Resource], ctx: Context) -> Iterator[tuple[Resource, str]]:
    release = _volcano_release(resources)
    if release is None:
        return
    conf = objects.text(_custom(release).get("scheduler_config_override")) or ""
    if TOPOLOGY_PLUGIN in conf:
        return
    for r, _ in _topology_jobs(resources):
        yield r, (f"{r.label}: asks for networkTopology, but the Volcano scheduler config in this stack does not "
                  f"enable the {TOPOLOGY_PLUGIN} plugin, so the constraint is ignored; add "
                  f"`- name: {TOPOLOGY_PLUGIN}` to the scheduler's plugins (custom.scheduler_config_override)")


RULES = [
    Rule("volcano-hard-topology-satisfiable",
         "A Volcano Job with networkTopology mode hard runs where the stack has HyperNodes (created, or discovered "
         "from node labels).",
         MANDATORY, check_hard_topology, scope="stack"),
    Rule("volcano-topology-plugin-enabled",
         "When a Volcano Job asks for networkTopology, the stack's Volcano scheduler enables the "
         "network-topology-aware plugin.",
         MANDATORY, check_topology_plugin, scope="stack"),
]
