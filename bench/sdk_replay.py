"""The Pulumi SDK's own cost for a stack: register exactly what `plan` registered, with no project code.

`python bench/sdk_replay.py <modules.json> <registrations.json>` runs in a fresh process: it sets the plan
command's garbage-collector thresholds (multinode/gcpolicy.py's, copied here so no project module runs;
tests/test_bench.py checks they are equal), imports the same Pulumi modules as the benchmark's floor
(modules.json, read from the plan's `-X importtime`), then, under Pulumi's own mock monitor and a mock that
answers as plan's does (inputs echoed as outputs; custom resources their identity only, the registration's
identityOutputs flag), registers every resource of registrations.json (written by plan_bench.py from an
in-process plan: full inputs, the CRD groups' manifest text included; not the objects a provider constructs,
plan_bench.program_registrations) with its type, name, parent, dependencies, provider,
protect / retainOnDelete / deleteBeforeReplace / ignoreChanges: generic `pulumi.CustomResource` /
`pulumi.ComponentResource` / `pulumi.ProviderResource`.

So its CPU time is the floor plus what the SDK and its mock engine spend on these registrations. The plan's
CPU time above it is the project's own: its imports (config models, policy pack), the program's code, the
recording monitor, the checks, the placement simulation and writing build/. Reading registrations.json
(json.load, C) is the one cost here that the plan has not.
"""
from __future__ import annotations

import gc
import importlib
import json
import sys
from pathlib import Path
from typing import Any

BATCH_THRESHOLDS = (50_000, 20, 100)    # multinode/gcpolicy.py (checked equal by tests/test_bench.py)
REMOTE = ("kubernetes:yaml/v2:ConfigGroup",)   # the multi-language components the program registers


def replay(regs: list[dict[str, Any]], stack: str) -> int:
    import asyncio

    import pulumi
    from pulumi.runtime import mocks as pmocks
    from pulumi.runtime.stack import run_pulumi_func
    from pulumi.runtime.sync_await import _sync_await

    identity = {(r["type"], r["name"]) for r in regs if r.get("identityOutputs")}

    class Echo(pmocks.Mocks):
        """Outputs as plan's mock gives them: the inputs, or for the registrations marked identityOutputs
        (multinode.recording.identity_only_outputs) apiVersion, kind and metadata only."""
        def new_resource(self, args: pmocks.MockResourceArgs) -> tuple[str, dict[str, Any]]:
            if (args.typ, args.name) in identity:
                return f"{args.name}-id", {k: args.inputs[k] for k in ("apiVersion", "kind", "metadata")
                                           if k in args.inputs}
            return f"{args.name}-id", dict(args.inputs)

        def call(self, args: pmocks.MockCallArgs) -> tuple[dict[str, Any], list[tuple[str, str]]]:
            return {}, []

    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    pmocks.set_mocks(Echo(), project="multinode", stack=stack, preview=False)
    by_urn = {r["urn"]: r for r in regs}
    made: dict[str, Any] = {}

    def make(urn: str) -> Any:
        if urn in made or urn not in by_urn:
            return made.get(urn)
        r = by_urn[urn]
        made[urn] = None                          # a cycle would stop here, not recurse forever
        parent = make(r["parent"])
        deps = [d for d in (make(u) for u in r["dependencies"]) if d is not None]
        provider = make(r["provider"].split("::", 1)[0]) if r["provider"] else None
        opts = pulumi.ResourceOptions(parent=parent, depends_on=deps or None, provider=provider,
                                      protect=r["protect"] or None, retain_on_delete=r["retainOnDelete"] or None,
                                      delete_before_replace=r["deleteBeforeReplace"] or None,
                                      ignore_changes=r["ignoreChanges"] or None)
        if r["type"].startswith("pulumi:providers:"):
            res = pulumi.ProviderResource(r["type"].split(":")[2], r["name"], r["inputs"], opts)
        elif r["custom"]:
            res = pulumi.CustomResource(r["type"], r["name"], r["inputs"], opts)
        elif r["type"] in REMOTE:
            # a component a provider constructs: the SDK sends its inputs (the program's CRD manifest text)
            res = pulumi.ComponentResource(r["type"], r["name"], r["inputs"], opts, remote=True)
        else:
            res = pulumi.ComponentResource(r["type"], r["name"], None, opts)
        made[urn] = res
        return res

    def program() -> None:
        for r in regs:
            make(r["urn"])

    _sync_await(run_pulumi_func(program))
    loop.close()
    return len([v for v in made.values() if v is not None])


def main(argv: list[str]) -> int:
    gc.set_threshold(*BATCH_THRESHOLDS)
    for m in json.loads(Path(argv[0]).read_text(encoding="utf-8")):
        gc.freeze()             # as the floor imports them (bench/plan_bench.py floor_argv)
        importlib.import_module(m)
    regs = json.loads(Path(argv[1]).read_text(encoding="utf-8"))
    gc.freeze()                 # what is alive now is kept to the end, as plan's gcpolicy.settle() before its run
    n = replay(regs, Path(argv[1]).stem)
    if n != len(regs):
        print(f"replayed {n} of {len(regs)} registrations", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
