"""Day two's model rollout through `pulumi up` on the real engine (issue 44 scenario 4; docs/day-two.md "The model
rollout"). The box (conformance/cluster `clusterbox --up ... --day-two --day-two-rollout-up ...`, target
`make day-two-up`) runs these steps with its kubeconfig in BOX_KUBECONFIG:

    rollout_up.py first <stack file> --out DIR
        the cluster's storage provided (e2e.py provide_storage), then `engine.py up` of the stack (every add-on
        `provided`: the box runs them), with e2e.py's harness setting FULL_STACK_SKIP_AWAIT
    rollout_up.py rollout <stack file> --out DIR [--plant-replace]
        a copy of the stack file (same stack name, as e2e.py's rename step) whose first lws-inference workload has
        its image changed (next_image: another tag of the same repository, the rule of the box's own apply,
        conformance/cluster/daytwo_rollout.go nextImage), then `engine.py up` of it while the box samples the set's
        pods; judged from the engine's steps (engine.py step_events, up.json `steps`): the LeaderWorkerSet is
        updated (op `update`, not a replace), its diff is the containers' images only, nothing else changes.
        --plant-replace: the planted defect, `pulumi up --replace <the LeaderWorkerSet's URN>`.
    rollout_up.py verdict <stack dir>
        the box's day-two.json: the rollout played through the command, no finding

Each judged line starts with "rollout-up:" (the box copies those into day-two.json `rollout.commandSays`).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import e2e  # noqa: E402  (beside this file)

LWS_TYPE = "kubernetes:leaderworkerset.x-k8s.io/v1:LeaderWorkerSet"
# the detailed diff keys of an image change of the LeaderWorkerSet's leader or worker template (the provider's
# property paths, pulumi-kubernetes provider/v4@v4.25.0 pkg/provider/provider.go Diff convertPatchToDiff)
IMAGE_PATH = re.compile(r"^spec\.leaderWorkerTemplate\.(leaderTemplate|workerTemplate)"
                        r"\.spec\.containers\[\d+\]\.image$")


def next_image(img: str) -> str:
    """Another tag of the same repository (the fake kubelet pulls nothing): daytwo_rollout.go nextImage."""
    img = img.split("@", 1)[0]
    if img.rfind(":") > img.rfind("/"):
        return img + "-rollout"
    return img + ":rollout"


def changed_copy(stack_file: Path, dst: Path) -> tuple[str, str, str]:
    """Write the stack file with the first lws-inference workload's image changed; (workload, old, new)."""
    doc = yaml.safe_load(stack_file.read_text())
    for w in doc["config"]["multinode:workloads"]:
        if w.get("kind") == "lws-inference":
            old = w["image"]
            w["image"] = next_image(old)
            dst.parent.mkdir(parents=True, exist_ok=True)
            dst.write_text(f"# {stack_file.name} with workload {w['name']}'s image changed (rollout_up.py)\n"
                           + yaml.safe_dump(doc, sort_keys=False))
            return w["name"], old, w["image"]
    raise SystemExit(f"rollout-up: FAIL {stack_file}: no lws-inference workload to roll")


def judge(steps: list[dict[str, Any]]) -> list[str]:
    """What is wrong with the engine's steps of an image change: empty when the LeaderWorkerSet alone is updated in
    place and its diff is the containers' images only."""
    lws = [s for s in steps if s["type"] == LWS_TYPE]
    others = [s for s in steps if s["type"] != LWS_TYPE]
    problems: list[str] = []
    if not lws:
        problems.append("the engine sent no step for the LeaderWorkerSet (no change)")
    for s in lws:
        if s["op"] != "update":
            problems.append(f"the engine's step of the LeaderWorkerSet is {s['op']!r}, not an update in place "
                            f"(replace keys {s['keys']})")
        beyond = sorted(k for k in s["detailedDiff"] if not IMAGE_PATH.match(k))
        if beyond:
            problems.append(f"the LeaderWorkerSet's diff is not the images only: also {beyond}")
        if s["op"] == "update" and not s["detailedDiff"]:
            problems.append("the LeaderWorkerSet's update carries no detailed diff")
    for s in others:
        problems.append(f"the up also {s['op']}s {s['urn'].rsplit('::', 1)[-1]} ({s['type']}): {s['diffs']}")
    return problems


def cmd_first(a: argparse.Namespace) -> int:
    from kubernetes import config

    kubeconfig = Path(os.environ["BOX_KUBECONFIG"])
    stack_file, out = Path(a.stack_file).resolve(), Path(a.out).resolve()
    api = config.new_client_from_config(config_file=str(kubeconfig))
    print("rollout-up: " + e2e.provide_storage(api, yaml.safe_load(stack_file.read_text())["config"]), flush=True)
    extra = [f"--skip-await={t}" for t in e2e.FULL_STACK_SKIP_AWAIT]
    rc, log, rep = e2e.engine("up", stack_file, kubeconfig, out, extra)
    print(f"rollout-up: {'ok  ' if rc == 0 else 'FAIL'} first pulumi up: {rep.get('summary') or log[-1500:]}",
          flush=True)
    return rc


def cmd_rollout(a: argparse.Namespace) -> int:
    kubeconfig = Path(os.environ["BOX_KUBECONFIG"])
    stack_file, out = Path(a.stack_file).resolve(), Path(a.out).resolve()
    copy = out / "rollout" / stack_file.name          # same stack name: the same stack's second up
    workload, old, new = changed_copy(stack_file, copy)
    extra = [f"--skip-await={t}" for t in e2e.FULL_STACK_SKIP_AWAIT]
    if a.plant_replace:
        urn = lws_urn(out)
        extra += ["--replace", urn]
        print(f"rollout-up: PLANTED: `pulumi up --replace {urn}`", flush=True)
    rc, log, rep = e2e.engine("up", copy, kubeconfig, out, extra)
    steps = rep.get("steps") or []
    (out / "rollout" / "steps.json").write_text(json.dumps(steps, indent=1) + "\n")
    problems = judge(steps)
    if rc != 0:
        problems.insert(0, "the up failed: " + " / ".join(engine_errors(str(rep.get("error") or log))))
    lws = [s for s in steps if s["type"] == LWS_TYPE]
    print(f"rollout-up: {'ok  ' if not problems else 'FAIL'} pulumi up of workload {workload}'s image {old} -> {new}: "
          f"summary {rep.get('summary')}; LeaderWorkerSet step(s) "
          f"{[(s['op'], sorted(s['detailedDiff'].items())) for s in lws]}"
          + "".join(f"; {p}" for p in problems), flush=True)
    return 1 if problems else 0


def engine_errors(text: str) -> list[str]:
    """The engine's and the provider's error lines of a failed up, each once (at most 6)."""
    seen: list[str] = []
    for ln in text.splitlines():
        ln = ln.strip()[:400]
        if (ln.startswith("error:") or "conflict" in ln) and ln not in seen:
            seen.append(ln)
    return seen[:6] or [text[-600:]]


def lws_urn(out: Path) -> str:
    """The LeaderWorkerSet's URN in the stack's state (the file backend under <out>/state)."""
    for f in sorted((out / "state").rglob("*.json")):
        try:
            doc = json.loads(f.read_text())
        except (ValueError, UnicodeDecodeError):
            continue
        for r in ((doc.get("checkpoint") or {}).get("latest") or {}).get("resources") or []:
            if r.get("type") == LWS_TYPE:
                return str(r["urn"])
    raise SystemExit(f"rollout-up: FAIL no {LWS_TYPE} in the stack's state under {out / 'state'}")


def cmd_verdict(a: argparse.Namespace) -> int:
    path = Path(a.stack_dir) / "day-two.json"
    if not path.exists():
        print(f"rollout-up: FAIL the box wrote no {path} (engines/cluster/observed.json `error` says why)")
        return 1
    rep = json.loads(path.read_text())
    ro = rep.get("rollout") or {}
    fails = list(rep.get("findings") or [])
    if not ro:
        fails.append("no rollout played")
    elif not ro.get("command"):
        fails.append("the rollout was not sent by the command (--day-two-rollout-up)")
    print(f"rollout-up: {ro.get('lws')}: command exit {ro.get('commandExit')} in {ro.get('commandSeconds', 0):.0f} s; "
          f"completed={ro.get('completed')}; order {ro.get('observedOrder')} (plan prints {ro.get('predictedOrder')}); "
          f"fewest ready groups {ro.get('fewestReadyGroups')} (allowed {ro.get('allowedFewestReadyGroups')}) over "
          f"{ro.get('samples')} samples, longest gap {ro.get('longestGapBetweenSamplesSeconds', 0):.1f} s; "
          f"live images {ro.get('liveImages')}")
    for f in fails:
        print(f"rollout-up: FAIL {f}")
    print(f"rollout-up of {rep.get('stack')}: {'passed' if not fails else f'{len(fails)} finding(s)'}")
    return 1 if fails else 0


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    for name in ("first", "rollout"):
        p = sub.add_parser(name)
        p.add_argument("stack_file")
        p.add_argument("--out", required=True, help="the engine's work folder (engine.py --out)")
        if name == "rollout":
            p.add_argument("--plant-replace", action="store_true",
                           help="planted defect: force the engine to replace the LeaderWorkerSet")
    v = sub.add_parser("verdict")
    v.add_argument("stack_dir")
    a = ap.parse_args(argv)
    return {"first": cmd_first, "rollout": cmd_rollout, "verdict": cmd_verdict}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
