"""The Pulumi program: load the stack config, build the Platform, export what pipelines read.
A fleet stack (`multinode:fleet`, docs/multicluster.md) builds the Fleet of components/fleet.py instead.

A project's `__main__.py` (this repository's, or one `multinode new` writes) only calls `main()`; `plan` runs this
file under Pulumi's mocks (multinode/recording.py PROGRAM). It is part of the package, so a project that installs
the wheel runs the same program as this repository."""
from __future__ import annotations

import importlib

import pulumi

from multinode import checks, stackfile
from multinode.config import NAMESPACE
from multinode.errors import ConfigError


def main() -> None:
    # components/ is outside mypy's `files` (pyproject.toml); importing it by name keeps it so
    if pulumi.Config(NAMESPACE).get("fleet") is not None:
        importlib.import_module("components.fleet").run()
        return
    try:
        raw, secrets = stackfile.read_pulumi_config(stackfile.program_stack_file(pulumi.get_stack()))
        cfg = checks.load(raw, secrets, source=f"stack {pulumi.get_stack()}")
    except ConfigError as e:
        # RunError ends the program with this message and no traceback, before any resource exists.
        raise pulumi.RunError(str(e)) from None

    if not stackfile.under_plan():       # plan prints them once, with their ids (multinode/advisories.py)
        from .advisories import CONFIG, advisory_id
        for problem in checks.advisories(cfg):
            pulumi.log.warn(f"{problem} [id {advisory_id(CONFIG, problem.path, problem.message)}]")

    platform = importlib.import_module("components.platform").Platform("multinode", cfg)
    pulumi.export("cloud", cfg.cloud)
    pulumi.export("kubeconfig", platform.cluster.kubeconfig)
    pulumi.export("nodePools", {n: {"machine": p.machine, "nodeCount": p.node_count, "gpusPerNode": p.gpus_per_node,
                                    "nodeSelector": p.node_selector, "fabric": p.fabric}
                                for n, p in platform.node_pools.items()})
    if platform.storage is not None:
        pulumi.export("checkpointClaim", platform.storage.claim_name)


if __name__ == "__main__":
    main()
