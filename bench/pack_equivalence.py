"""The pack's answers under the analyzer protocol, with and without policy/wire.py: they must be identical.

policy/wire.py makes pulumi_policy's servicer convert a resource's properties once per request instead of once per
policy, and skips converting CRD schemas no rule reads (issue 35). This compares, request by request, the
AnalyzeResponse the servicer gives with pulumi_policy's own code (wire uninstalled: every policy converts the
properties itself, as before issue 35) and with wire installed: every diagnostic (policy, message, URN, level) and
its order, for one `Analyze` per registration and one `AnalyzeStack` per stack.

What it compares:
* every stack file the tests use: stacks/ (the example stacks), tests/guides/ (the guide stacks), tests/negative/,
  tests/corpus/ (the broken-stack corpus: each fails with its rule), each as bench/pack_bench.py sends it (the
  plan's registrations; unknowns as Pulumi's unknown sentinel, secrets as the placeholder string);
* hostile objects: tests/fuzz_hostile.py's object family (every object of the corpus and its extra objects with
  fields of the wrong type, seeded), each as its own Analyze and all of them in one AnalyzeStack;
* edge cases of the CRD shortcut (wire.without_crd_schemas): unknown values at each level it looks at, a spec /
  versions / version of the wrong type, a secret-wrapped version, a CRD without schemas, beside a workload.

    python bench/pack_equivalence.py [--families stacks,guides,negative,corpus,hostile,crd] [--hostile 150]
exit 0 when every answer is identical, 1 otherwise (the differences printed).

Across versions of the code (e.g. the rules before and after a speed change): `--tree DIR --dump FILE` writes the
answers of the pack in DIR (its multinode, policy, bench/pack_bench.py and tests; its policy/wire.py installed, as
its policy/__main__.py runs the pack) for the same families, and `--compare A B` compares two such files:

    python bench/pack_equivalence.py --tree /tmp/old --dump old.pkl
    python bench/pack_equivalence.py --tree . --dump new.pkl
    python bench/pack_equivalence.py --compare old.pkl new.pkl
"""
from __future__ import annotations

import argparse
import contextlib
import io
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

CRD = "kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinition"


def servicer() -> Any:
    from pulumi_policy import EnforcementLevel
    from pulumi_policy import policy as pp

    from policy.pack import policies
    return pp._PolicyAnalyzerServicer("multinode", "0.0.1", policies(), EnforcementLevel.MANDATORY, None, "d",
                                      None, None, None, None, None)


@contextlib.contextmanager
def wire_installed(on: bool) -> Iterator[None]:
    """pulumi_policy with (on) or without policy/wire.py, restored afterwards."""
    from policy import wire
    was = bool(wire._originals)
    if on:
        wire.install()
    else:
        wire.uninstall()
    try:
        yield
    finally:
        if was:
            wire.install()
        else:
            wire.uninstall()


def answers(per: list[Any], whole: Any, installed: bool) -> tuple[list[Any], Any]:
    with wire_installed(installed):
        sv = servicer()
        return [sv.Analyze(r, None) for r in per], sv.AnalyzeStack(whole, None)


def differences(name: str, per: list[Any], whole: Any) -> tuple[list[str], int]:
    """(the differences between the two servicers' answers, the number of diagnostics compared)."""
    want, want_stack = answers(per, whole, installed=False)
    got, got_stack = answers(per, whole, installed=True)
    out = [f"{name}: Analyze {r.type} {r.urn}:\n  without wire: {list(w.diagnostics)}\n  with wire:    "
           f"{list(g.diagnostics)}" for r, w, g in zip(per, want, got, strict=True) if w != g]
    if want_stack != got_stack:
        out.append(f"{name}: AnalyzeStack:\n  without wire: {list(want_stack.diagnostics)}\n  with wire:    "
                   f"{list(got_stack.diagnostics)}")
    return out, sum(len(w.diagnostics) for w in want) + len(want_stack.diagnostics)


def stack_files(families: list[str], root: Path = ROOT) -> list[tuple[str, str, Path]]:
    """(family, stack name, file) for every stack file of these families in the tree `root`."""
    where = {"stacks": root / "stacks", "guides": root / "tests" / "guides", "negative": root / "tests" / "negative"}
    out: list[tuple[str, str, Path]] = []
    for fam in families:
        if fam in where:
            out += [(fam, p.name.split(".")[1], p) for p in sorted(where[fam].glob("Pulumi.*.yaml"))]
        elif fam == "corpus":
            out += [(fam, p.stem, p) for p in sorted((root / "tests" / "corpus").glob("*.yaml"))]
    return out


def _request(obj: Any, name: str, type_: str | None = None) -> tuple[Any, Any] | None:
    """(AnalyzeRequest, AnalyzerResource) for one object, or None when protobuf's Struct cannot hold it."""
    from google.protobuf import struct_pb2
    from pulumi.runtime.proto import analyzer_pb2 as pb
    if type_ is None:
        api = obj.get("apiVersion") if isinstance(obj, dict) else None
        kind = obj.get("kind") if isinstance(obj, dict) else None
        type_ = f"kubernetes:{api if isinstance(api, str) and '/' in api else 'core/' + str(api)}:{kind}"
    props = struct_pb2.Struct()
    try:
        props.update(obj)
    except (ValueError, TypeError, AttributeError):
        return None
    urn = f"urn:pulumi:eq::multinode::{type_}::{name}"
    return (pb.AnalyzeRequest(type=type_, properties=props, urn=urn, name=name),
            pb.AnalyzerResource(type=type_, properties=props, urn=urn, name=name))


def _batch(pairs: list[tuple[Any, Any]]) -> tuple[list[Any], Any]:
    from pulumi.runtime.proto import analyzer_pb2 as pb
    return [a for a, _ in pairs], pb.AnalyzeStackRequest(resources=[b for _, b in pairs])


def hostile_requests(n: int, seed: int) -> tuple[list[Any], Any]:
    """tests/fuzz_hostile.py's hostile objects (wrong types at random fields), each one resource."""
    import copy
    import random

    from tests import fuzz_hostile as fz
    rng = random.Random(seed)
    objs = fz.object_cases()
    pairs = []
    for i in range(n):
        _, obj = objs[i % len(objs)] if i < len(objs) else rng.choice(objs)
        mutated, _ = fz.mutate_object(copy.deepcopy(obj), rng)
        req = _request(mutated, f"hostile-{i}")
        if req is not None:
            pairs.append(req)
    return _batch(pairs)


def crd_edge_requests() -> tuple[list[Any], Any]:
    """CRDs at the edges of wire.without_crd_schemas (each beside a workload that reads pods), plus a Job."""
    from pulumi.runtime import rpc

    from tests import policy_fixtures as F
    unknown = rpc.UNKNOWN
    schema = {"openAPIV3Schema": {"type": "object", "properties": {"spec": {"type": "object", "properties": {
        "template": {"type": "object", "properties": {"spec": {"type": "object"}}}}}}}}

    def crd(spec: Any = None, **top: Any) -> dict[str, Any]:
        base = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                "metadata": {"name": "things.example.com"},
                "spec": {"group": "example.com", "names": {"kind": "Thing", "plural": "things"},
                         "scope": "Namespaced",
                         "versions": [{"name": "v1", "served": True, "storage": True, "schema": schema},
                                      {"name": "v2", "served": True, "storage": False, "schema": schema}]}}
        if spec is not None:
            base["spec"] = spec
        base.update(top)
        return base

    good = crd()["spec"]
    secret_sig = {"4dabf18193072939515e22adb298388d": "1b47061264138c4ac30d75fd1eb44270"}
    cases = {
        "plain": crd(),
        "no-schemas": crd({**good, "versions": [{"name": "v1", "served": True, "storage": True}]}),
        "unknown-top": crd(status=unknown),
        "unknown-metadata": crd(metadata=unknown),
        "unknown-spec": crd(unknown),
        "unknown-in-spec": crd({**good, "scope": unknown}),
        "unknown-versions": crd({**good, "versions": unknown}),
        "unknown-version": crd({**good, "versions": [unknown, good["versions"][1]]}),
        "unknown-version-field": crd({**good, "versions": [{**good["versions"][0], "served": unknown}]}),
        "unknown-schema": crd({**good, "versions": [{**good["versions"][0], "schema": unknown}]}),
        "unknown-in-schema": crd({**good, "versions": [{**good["versions"][0], "schema": {
            "openAPIV3Schema": unknown}}]}),
        "spec-list": crd([good]),
        "versions-map": crd({**good, "versions": {"v1": good["versions"][0]}}),
        "version-text": crd({**good, "versions": ["v1", good["versions"][0]]}),
        "secret-version": crd({**good, "versions": [{**secret_sig, "value": good["versions"][0]}]}),
        "secret-spec": crd({**secret_sig, "value": good}),
        "schema-secret-text": crd({**good, "versions": [{**good["versions"][0], "schema": {
            "openAPIV3Schema": {"description": "hf_plaintext token"}}}]}),
    }
    pairs = [p for name, obj in cases.items() if (p := _request(obj, f"crd-{name}", CRD)) is not None]
    job = F.mount_claim(F.lws(), "checkpoints")
    pairs += [p for p in [_request(job, "lws")] if p is not None]
    return _batch(pairs)


def dump(tree: Path, out: Path, families: list[str], hostile: int, seed: int) -> int:
    """The answers of the pack of `tree` (wire installed) per case: {case: ([Analyze bytes], AnalyzeStack bytes)}."""
    import os
    import pickle
    tree = tree.resolve()
    for mod in [m for m in sys.modules if m.split(".")[0] in ("multinode", "policy", "tests", "pack_bench",
                                                              "plan_bench")]:
        del sys.modules[mod]
    sys.path[:0] = [str(tree), str(tree / "bench")]
    os.chdir(tree)
    import pack_bench

    import multinode
    import policy
    from policy.wire import install
    assert Path(multinode.__file__).is_relative_to(tree) and Path(policy.__file__).is_relative_to(tree)
    install()
    answers: dict[str, tuple[list[bytes], bytes]] = {}
    for fam, name, f in stack_files(families, tree):
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            per, whole = pack_bench.requests(name, f)
        answers[f"{fam}/{name}"] = _served(per, whole)
    if "hostile" in families:
        answers["hostile"] = _served(*hostile_requests(hostile, seed))
    if "crd" in families:
        answers["crd"] = _served(*crd_edge_requests())
    out.write_bytes(pickle.dumps(answers))
    print(f"{len(answers)} cases, {sum(len(a) for a, _ in answers.values())} Analyze requests -> {out}")
    return 0


def _served(per: list[Any], whole: Any) -> tuple[list[bytes], bytes]:
    sv = servicer()
    return ([sv.Analyze(r, None).SerializeToString(deterministic=True) for r in per],
            sv.AnalyzeStack(whole, None).SerializeToString(deterministic=True))


def compare(a: Path, b: Path) -> int:
    import pickle

    from pulumi.runtime.proto import analyzer_pb2 as pb
    old, new = pickle.loads(a.read_bytes()), pickle.loads(b.read_bytes())
    bad = sorted(k for k in old.keys() | new.keys() if old.get(k) != new.get(k))
    diags = sum(len(pb.AnalyzeResponse.FromString(x).diagnostics) for per, st in old.values() for x in [*per, st])
    print(f"{len(old)} cases, {sum(len(p) for p, _ in old.values())} Analyze requests and {len(old)} AnalyzeStack, "
          f"{diags} diagnostics; different: {bad or 'none'}")
    return 1 if bad else 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--families", default="stacks,guides,negative,corpus,hostile,crd")
    ap.add_argument("--hostile", type=int, default=150, help="hostile objects (tests/fuzz_hostile.py)")
    ap.add_argument("--seed", type=int, default=35)
    ap.add_argument("--tree", type=Path, help="with --dump: the source tree whose pack answers")
    ap.add_argument("--dump", type=Path, help="write the answers of --tree's pack to this file")
    ap.add_argument("--compare", type=Path, nargs=2, metavar=("OLD", "NEW"), help="compare two --dump files")
    args = ap.parse_args(argv)
    families = [f for f in args.families.split(",") if f]
    if args.compare:
        return compare(*args.compare)
    if args.dump:
        return dump(args.tree or ROOT, args.dump, families, args.hostile, args.seed)
    import pack_bench
    problems: list[str] = []
    totals: dict[str, list[int]] = {}
    t0 = time.perf_counter()
    cases: list[tuple[str, str, Any]] = [(fam, name, f) for fam, name, f in stack_files(families)]
    for fam, name, f in cases:
        with contextlib.redirect_stdout(io.StringIO()):
            per, whole = pack_bench.requests(name, f)
        diffs, diags = differences(name, per, whole)
        problems += diffs
        t = totals.setdefault(fam, [0, 0, 0, 0])
        t[0] += 1
        t[1] += len(per)
        t[2] += diags
        t[3] += len(diffs)
    extra = {"hostile": lambda: hostile_requests(args.hostile, args.seed), "crd": crd_edge_requests}
    for fam in families:
        if fam in extra:
            per, whole = extra[fam]()
            diffs, diags = differences(fam, per, whole)
            problems += diffs
            totals[fam] = [1, len(per), diags, len(diffs)]
    print(f"{'family':<10}{'stacks':>7}{'requests':>10}{'diagnostics':>13}{'different':>11}")
    for fam, (n, reqs, diags, bad) in totals.items():
        print(f"{fam:<10}{n:>7}{reqs:>10}{diags:>13}{bad:>11}")
    print(f"{len(problems)} different answers ({time.perf_counter() - t0:.0f} s)")
    for p in problems:
        print(p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
