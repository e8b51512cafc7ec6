"""A seeded generator of hostile stack files, and a runner that plans each one the way `plan --file` does.

Two families (issue 16):
* stack files: the example stacks in stacks/ mutated at a random key path (a value of the wrong type,
  a deleted or unknown key, YAML oddities written as raw text: dates, 1:30, 017, yes/no, .nan, .inf,
  !!binary, !!set, aliases, an alias bomb, deep nesting, duplicate keys, huge numbers, unicode, secrets
  given as maps/lists/ints, plain provider credentials);
* hand-written objects (`multinode:manifests`): every kind the policy pack reads (the objects of
  tests/corpus/ plus a ConfigMap, a Secret and a Deployment) with one field swapped for a wrong type.

Each case runs in a long-lived worker process (`python -m tests.fuzz_hostile --worker`): it calls
multinode.plan.main(["<stack>", "--file", <file>, "--out", <dir>]) with stdout/stderr captured, under a
per-case alarm, and reports the exit code, whether a traceback was printed, the wall time and the worker's
peak RSS after the case (VmHWM, a high-water mark of the worker's own memory, so "peak after every case
< 1 GiB" bounds every case). A worker that dies or hangs is restarted and the case is reported as a failure.

Issue 32 adds four families (`--round2 N`: N cases of each):
* quantities: a container quantity (cpu, memory, nvidia.com/gpu, ephemeral-storage) of a hand-written object
  set to a huge exponent or an odd form, written quoted ("1e309", "1e999999999", "9Ei", "8.0", "1e4294967296");
* large gangs: an LWS / Deployment / Volcano Job / Indexed Job / PodCliqueSet with counts from 700 to 10^12;
* credential-named env: DB_PASSWORD / HF_TOKEN / API_KEY with a value that is not text (a map, a list, a number,
  each holding the SECRETVALUE marker) in workloads[].env or a hand-written object's container env;
* renames: a stack planned, then planned again in the same build folder with storage.name changed (with or
  without storage.resourceName, or storage removed): the case's `before` text is planned first.

Issue 48 adds six families (`--round3 N`: N cases of each; all on stacks/Pulumi.existing-dev.yaml, which imports no
cloud SDK):
* file: the stack file or the policy config next to it is a FIFO, a folder, /dev/zero, a dangling link, UTF-16/32
  (with or without a BOM), Latin-1, over its size bound, nested past the depth bound, or holds a very long number;
* count: priority classes, queues, env, workloads, pools, labels, args, pull secrets, manifests, long text, at and
  far past their bound in multinode/limits.py, and env + args over ARG_MAX;
* name: a name or label value Kubernetes refuses (a trailing newline, CR, ESC, U+202E, NUL, too long...) at each key
  that names something;
* contra: keys that cannot hold together (a bandwidth floor above the machine's, surge above the pool, /dev/shm
  above the node's memory, env + args above ARG_MAX);
* text: credentials in an image reference, control characters in keys and values, a multi-megabyte policy value;
* policy: a typed mistake in the policy config.
Beyond the common checks (exit 0/1/2, no traceback, no leak, < 60 s, < 1 GiB), a round-three case fails when its
output holds an unescaped control or format character or is over OUTPUT_CHARS, when a policy config mistake shows
as unreadable objects, or when a case that must be refused is not (`expect`).

    python -m tests.fuzz_hostile --stacks 300 --objects 150 --seed 16 [--round2 50] [--round3 170] [--out report.json]
"""
from __future__ import annotations

import argparse
import copy
import io
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
STACKS = sorted((ROOT / "stacks").glob("Pulumi.*.yaml"))
CORPUS = sorted((ROOT / "tests" / "corpus").glob("*.yaml"))
CASE_SECONDS = 60
CASE_RSS_MIB = 1024
OUTPUT_CHARS = 256 * 1024     # issue 48: what one plan may print (the largest example stack prints ~10 KB)

# ------------------------------------------------------------------ values
UNICODE = ["gp\u00fc", "\u202egpu", "\u2603" * 40, "\U0001F680", "a\u0000b", "x\u200by", "\ufeffname", "\u00e9" * 300]
WRONG_VALUES: list[Any] = [42, -1, 0, 1.5, -2.5e12, True, False, None, "", "x" * 5000, [], {}, [1, 2], {"a": 1},
                           [{"a": [1, {"b": None}]}], {"name": {"name": {"name": 1}}}, 2 ** 53, -(2 ** 53),
                           "8", "-8", "1e3", "null", *UNICODE]
RAW_YAML = ["2024-01-01", "2024-01-01T10:00:00Z", "1:30", "017", "0o17", "0x1F", "1_000", "yes", "no", "on", "off",
            "y", "n", "~", ".nan", ".inf", "-.inf", "1e309", "9" * 400, "-" + "9" * 30, "!!binary aGVsbG8=",
            "!!set {a, b}", "!!omap [{a: 1}]", "!!python/object/apply:os.system [echo]", "!!timestamp 2024-01-01",
            "!!float 1", "!!int '3'", "&a {x: *a}", "*undefined", "{<<: {a: 1}}", "{a: 1, a: 2}", "[1, [2, [3]]]",
            "'quoted: yes'", '"\\u0000"', '"\\ud800"', "{? [a, b] : c}", "{8: x, 010: y}", "|\n  multi\n  line",
            "@reserved", "`tick", "%percent", "'unterminated"]


def deep(n: int) -> str:
    return "[" * n + "]" * n


def alias_bomb(levels: int = 9, width: int = 9) -> str:
    parts = [f"a0: &a0 [{', '.join(['lol'] * width)}]"]
    for i in range(1, levels + 1):
        parts.append(f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * width)}]")
    return "{" + ", ".join(parts) + "}"


# ------------------------------------------------------------------ paths in a document
def paths(node: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield prefix
    if isinstance(node, dict):
        for k, v in node.items():
            yield from paths(v, prefix + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from paths(v, prefix + (i,))


def get_at(doc: Any, path: tuple[Any, ...]) -> Any:
    for p in path:
        doc = doc[p]
    return doc


def set_at(doc: Any, path: tuple[Any, ...], value: Any) -> Any:
    value = copy.deepcopy(value)      # never share a value between two places (a later mutation makes a cycle)
    if not path:
        return value
    get_at(doc, path[:-1])[path[-1]] = value
    return doc


def wrong_type_for(value: Any, rng: random.Random) -> Any:
    """A value of another JSON type than `value` (a map for a string, a string for a list...)."""
    if isinstance(value, dict):
        return rng.choice(["spec", 42, [value], True, None, ["a", "b"], 1.5])
    if isinstance(value, list):
        return rng.choice(["item", 7, {"0": value[:1]}, False, None, {}])
    if isinstance(value, bool):
        return rng.choice(["true", 1, {}, []])
    if isinstance(value, (int, float)):
        return rng.choice([str(value), {"value": value}, [value], True, -value - 1, 10 ** 12, 0.5])
    if isinstance(value, str):
        return rng.choice([{"value": value}, [value], 8, 0, True, value * 50, "", "\u202e" + value])
    return rng.choice(WRONG_VALUES)


# ------------------------------------------------------------------ stack-file mutations
PLACEHOLDER = "__FUZZRAW__"


def _dump(doc: Any) -> str:
    class NoAlias(yaml.SafeDumper):
        def ignore_aliases(self, data: Any) -> bool:
            return True
    return yaml.dump(doc, Dumper=NoAlias, sort_keys=False, allow_unicode=True, width=10 ** 6)


def mutate_stack(text: str, rng: random.Random) -> tuple[str, str]:
    """(mutated stack text, what was done)."""
    doc = yaml.safe_load(text)
    cfg = doc["config"]
    all_paths = [p for p in paths(doc) if len(p) >= 2]
    path = rng.choice(all_paths)
    op = rng.choice(["wrong", "wrong", "raw", "raw", "raw", "delete", "unknown", "secret", "credential", "deep",
                     "bomb", "dupkey", "text"])
    if op == "wrong":
        set_at(doc, path, wrong_type_for(get_at(doc, path), rng) if rng.random() < 0.6 else rng.choice(WRONG_VALUES))
        return _dump(doc), f"wrong value at {path}"
    if op == "delete":
        parent = get_at(doc, path[:-1])
        del parent[path[-1]]
        return _dump(doc), f"deleted {path}"
    if op == "unknown":
        parent = get_at(doc, path[:-1])
        if isinstance(parent, dict):
            parent[rng.choice(["tensorParalel", "nodecount", "x", "\u00fcber", "metadata"])] = rng.choice(WRONG_VALUES)
        return _dump(doc), f"unknown key under {path[:-1]}"
    if op == "secret":
        key = rng.choice(["multinode:kubeconfig", "multinode:hfToken", "multinode:ngcApiKey",
                          "multinode:imagePullSecret"])
        cfg[key] = rng.choice([{"apiVersion": "v1", "clusters": [{"name": "SECRETVALUE-abc123"}]},
                               ["SECRETVALUE-abc123"], 123456789, "SECRETVALUE-abc123", {"secure": 5},
                               {"secure": "v1:U0VDUkVUVkFMVUU="}, True])
        return _dump(doc), f"secret {key}"
    if op == "credential":
        key = rng.choice(["aws:secretKey", "aws:accessKey", "aws:token", "gcp:credentials", "oci:privateKey",
                          "azure-native:clientSecret", "kubernetes:kubeconfig"])
        cfg[key] = rng.choice(["SECRETVALUE-abc123", {"k": "SECRETVALUE-abc123"}, "apiVersion: v1\nclusters: []"])
        return _dump(doc), f"credential {key}"
    # raw YAML text at the path (a placeholder is dumped, then replaced by the raw snippet)
    if op == "deep":
        raw = deep(rng.choice([20, 63, 64, 65, 200, 3000]))
    elif op == "bomb":
        raw = alias_bomb(rng.choice([3, 6, 9]), rng.choice([3, 9]))
    elif op == "dupkey":
        raw = "{name: a, name: b}"
    elif op == "text":
        raw = rng.choice(["\t", "\ufeff", ": :", "- - -", "{", "]"])
    else:
        raw = rng.choice(RAW_YAML)
    set_at(doc, path, PLACEHOLDER)
    out = _dump(doc)
    if "\n" in raw:           # block scalar: indent under the key
        indent = " " * (len(out.split(PLACEHOLDER)[0].rsplit("\n", 1)[-1]) + 2)
        raw = raw.replace("\n", "\n" + indent)
    return out.replace(PLACEHOLDER, raw, 1), f"raw {raw[:40]!r} at {path}"


# ------------------------------------------------------------------ hand-written objects
EXTRA_OBJECTS = [
    {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm", "namespace": "default"},
     "data": {"MODEL": "llama", "config.json": "{}"}},
    {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "namespace": "default"},
     "type": "Opaque"},
    {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "namespace": "default"},
     "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "d"}},
              "template": {"metadata": {"labels": {"app": "d", "multinode.dev/fabric": "true"}},
                           "spec": {"nodeSelector": {"node.kubernetes.io/instance-type": "p5.48xlarge"},
                                    "containers": [{"name": "c", "image": "busybox",
                                                    "resources": {"limits": {"nvidia.com/gpu": 8}},
                                                    "env": [{"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {
                                                        "name": "hf", "key": "token"}}}]}]}}}},
]


def object_cases() -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(base stack doc without manifests, one object) for every object of the corpus and EXTRA_OBJECTS."""
    out = []
    base: dict[str, Any] | None = None
    for path in CORPUS:
        doc = yaml.safe_load(path.read_text())
        objs = doc["config"].pop("multinode:manifests", []) or []
        for o in objs:
            out.append((copy.deepcopy(doc), o))
        base = base or doc
    for o in EXTRA_OBJECTS:
        out.append((copy.deepcopy(base), o))
    return out


def mutate_object(obj: dict[str, Any], rng: random.Random) -> tuple[dict[str, Any], str]:
    obj = copy.deepcopy(obj)
    # keep apiVersion/kind/metadata.name most of the time: they decide which readers see the object
    keep = {("apiVersion",), ("kind",), ("metadata",), ("metadata", "name")}
    candidates = [p for p in paths(obj) if p and (p not in keep or rng.random() < 0.05)]
    n = rng.choice([1, 1, 1, 2, 3])
    done = []
    for _ in range(n):
        cands = [p for p in paths(obj) if p and p in set(candidates)] or candidates
        try:
            path = rng.choice(cands)
            set_at(obj, path, wrong_type_for(get_at(obj, path), rng))
        except (KeyError, IndexError, TypeError):
            continue
        done.append(path)
    return obj, f"wrong types at {done}"


# ------------------------------------------------------------------ issue 32 families
HUGE_QUANTITIES = ["1e309", "1e400", "1e999999999", "-1e999999999", "1e4294967296", "9Ei", "9223372036854775808",
                   "8.0", "1.5", "1e1", "0.9n", "1e-999999999", "9" * 400, "1K", "8 GPUs", "+", ".", "1ee3"]
SECRET_NAMES = ["DB_PASSWORD", "HF_TOKEN", "API_KEY", "awsSecretAccessKey", "client-secret"]
SECRET_VALUES: list[Any] = [{"value": "SECRETVALUE-abc123"}, ["SECRETVALUE-abc123"], {"nested": {"x": "SECRETVALUE-1"}},
                            7319264051, True, 1.5]


def _quoted(doc: dict[str, Any], path: tuple[Any, ...], text: str) -> str:
    """The doc dumped with `text` at `path` as a double-quoted YAML string (a plain 1e309 would read as a float)."""
    set_at(doc, path, PLACEHOLDER)
    return _dump(doc).replace(PLACEHOLDER, json.dumps(text), 1)


def _container_paths(obj: Any, prefix: tuple[Any, ...]) -> list[tuple[Any, ...]]:
    return [p for p in paths(obj, prefix) if p and p[-1] in ("containers", "initContainers")
            and isinstance(get_at_root(obj, prefix, p), list)]


def get_at_root(obj: Any, prefix: tuple[Any, ...], path: tuple[Any, ...]) -> Any:
    return get_at(obj, path[len(prefix):])


def quantity_case(rng: random.Random) -> tuple[str, str]:
    objs = [(d, o) for d, o in object_cases() if _container_paths(o, ())]
    base, obj = rng.choice(objs)
    doc = copy.deepcopy(base)
    doc["config"]["multinode:manifests"] = [copy.deepcopy(obj)]
    root = ("config", "multinode:manifests", 0)
    cpath = rng.choice(_container_paths(obj, ()))
    containers = get_at(obj, cpath)
    i = rng.randrange(len(containers)) if containers else 0
    if not containers:
        return _dump(doc), "no container"
    where = rng.choice(["limits", "requests"])
    name = rng.choice(["cpu", "memory", "nvidia.com/gpu", "ephemeral-storage"])
    c = get_at(doc, root + cpath + (i,))
    c.setdefault("resources", {})
    if not isinstance(c["resources"], dict):
        c["resources"] = {}
    c["resources"].setdefault(where, {})
    value = rng.choice(HUGE_QUANTITIES)
    return (_quoted(doc, root + cpath + (i, "resources", where, name), value),
            f"quantity {name} {where} {value[:20]!r} in {obj.get('kind')}")


def large_case(rng: random.Random) -> tuple[str, str]:
    base = yaml.safe_load((ROOT / "tests" / "corpus" / "lws-group-larger-than-pool.yaml").read_text())
    n = rng.choice([700, 2001, 2100, 10 ** 4, 10 ** 6, 10 ** 12])
    lws = base["config"]["multinode:manifests"][0]
    tmpl = copy.deepcopy(lws["spec"]["leaderWorkerTemplate"]["leaderTemplate"])
    kind = rng.choice(["lws", "deployment", "volcano", "indexed-job", "grove"])
    META = {"name": "big", "namespace": "research"}  # noqa: N806
    if kind == "lws":
        lws["spec"]["replicas"] = n
        # 700 x 3 is the case (2,100 pods: over the simulation's limit, decided by arithmetic)
        lws["spec"]["leaderWorkerTemplate"]["size"] = rng.choice([3, 8, n])
        obj = lws
    elif kind == "deployment":
        obj = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "big", "namespace": "research"},
               "spec": {"replicas": n, "selector": {"matchLabels": {"app": "big"}},
                        "template": {**tmpl, "metadata": {"labels": {"app": "big"}}}}}
    elif kind == "volcano":
        obj = {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": META,
               "spec": {"minAvailable": n, "schedulerName": "volcano",
                        "tasks": [{"name": "w", "replicas": n, "template": tmpl}]}}
    elif kind == "indexed-job":
        obj = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "big", "namespace": "research"},
               "spec": {"completionMode": "Indexed", "parallelism": n, "completions": n,
                        "template": {**tmpl, "spec": {**tmpl["spec"], "restartPolicy": "Never"}}}}
    else:
        clique = {"name": "w", "labels": tmpl.get("metadata", {}).get("labels", {}),
                  "spec": {"replicas": n, "minAvailable": n, "podSpec": tmpl["spec"]}}
        obj = {"apiVersion": "grove.io/v1alpha1", "kind": "PodCliqueSet", "metadata": META,
               "spec": {"replicas": rng.choice([1, n]), "template": {"cliques": [clique], "podCliqueScalingGroups": [
                   {"name": "sg", "cliqueNames": ["w"], "replicas": rng.choice([1, n]), "minAvailable": 1}]}}}
    base["config"]["multinode:manifests"] = [obj]
    return _dump(base), f"large {kind} count {n}"


def credential_env_case(rng: random.Random) -> tuple[str, str]:
    name, value = rng.choice(SECRET_NAMES), rng.choice(SECRET_VALUES)
    if rng.random() < 0.5:
        doc = yaml.safe_load(rng.choice([p for p in STACKS if "fleet" not in p.name]).read_text())
        wl = doc["config"].get("multinode:workloads") or []
        if wl:
            wl[0]["env"] = {name: value}
            return _dump(doc), f"workloads[0].env.{name} = {type(value).__name__}"
    base, obj = rng.choice([(d, o) for d, o in object_cases() if _container_paths(o, ())])
    doc = copy.deepcopy(base)
    obj = copy.deepcopy(obj)
    cpath = rng.choice(_container_paths(obj, ()))
    containers = get_at(obj, cpath)
    if containers and isinstance(containers[0], dict):
        containers[0]["env"] = [{"name": name, "value": value}]
    doc["config"]["multinode:manifests"] = [obj]
    return _dump(doc), f"{obj.get('kind')} env {name} = {type(value).__name__}"


def rename_case(rng: random.Random, light: bool = False) -> tuple[str, str, str]:
    """(the stack before, the stack after, what was done). `light`: only the stack that imports no cloud SDK
    (existing-dev), for the CI sample."""
    path = rng.choice([p for p in STACKS if "fleet" not in p.name and (not light or "existing" in p.name)])
    before = path.read_text()
    doc = yaml.safe_load(before)
    storage = doc["config"].get("multinode:storage")
    op = rng.choice(["rename", "rename-keep", "resource-name", "remove", "bad-name"])
    if storage is None or op == "remove":
        doc["config"].pop("multinode:storage", None)
        return before, _dump(doc), f"storage removed from {path.name}"
    old = storage.get("name", "checkpoints")
    if op == "rename":
        storage["name"] = rng.choice(["ckpt-v2", "checkpoints2", "x"])
    elif op == "rename-keep":
        storage["name"], storage["resourceName"] = "ckpt-v2", old
    elif op == "resource-name":
        storage["resourceName"] = rng.choice(["other", old])
    else:
        storage[rng.choice(["name", "resourceName"])] = rng.choice(["Bad_Name", "", "x" * 80, 7, ["a"]])
    return before, _dump(doc), f"{op} storage of {path.name}"


def generate_round2(n_each: int, seed: int, light: bool = False) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    cases: list[dict[str, Any]] = []
    for i in range(n_each):
        text, what = quantity_case(rng)
        cases.append({"id": f"quantity-{i}", "what": what, "text": text})
        text, what = large_case(rng)
        cases.append({"id": f"large-{i}", "what": what, "text": text})
        text, what = credential_env_case(rng)
        cases.append({"id": f"credenv-{i}", "what": what, "text": text})
        before, text, what = rename_case(rng, light)
        cases.append({"id": f"rename-{i}", "what": what, "text": text, "before": before})
    return cases


# ------------------------------------------------------------------ issue 48 families
# Each case may carry, beside `text` (the stack file): `file` (how the stack file is made: fifo, dir, devzero,
# dangling, or raw bytes in `file_b64`), `policy` (a policy-config.json next to the stack file: {kind, b64}) and
# `checks` (what else the case must satisfy: "text" = no control character and no credential in the output,
# "readable" = no "could not read this object" finding, both = every round-three case).
import base64  # noqa: E402

SECRET_MARK = "SECRETVALUE"
ROUND3_FAMILIES = ("file", "count", "name", "contra", "text", "policy")


def _existing() -> dict[str, Any]:
    return yaml.safe_load((ROOT / "stacks" / "Pulumi.existing-dev.yaml").read_text())


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def file_case(rng: random.Random) -> dict[str, Any]:
    """A stack file or a policy config plan should refuse without reading it whole, or decode as UTF-8 or not at all:
    a FIFO, a folder, /dev/zero, a dangling link, UTF-16 (with and without a BOM), Latin-1, a huge file, deep
    nesting, a very long number."""
    text = (ROOT / "stacks" / "Pulumi.existing-dev.yaml").read_text()
    where = rng.choice(["stack", "policy"])
    kind = rng.choice(["fifo", "dir", "devzero", "dangling", "utf16", "utf16-nobom", "utf32", "latin1", "huge",
                       "deep", "longnum", "longfloat", "bom8", "empty"])
    if kind in ("fifo", "dir", "devzero", "dangling"):
        data = None
    else:
        base = text if where == "stack" else json.dumps({"multinode-pod-shm": {"sizeHint": "32Gi"}})
        if kind == "deep":
            base = (text + "  multinode:x: " + deep(rng.choice([65, 5000, 100000])) + "\n" if where == "stack"
                    else '{"multinode-pod-shm": ' + "[" * rng.choice([65, 5000, 100000]) + "]" * 3 + "}")
        elif kind in ("longnum", "longfloat"):
            digits = "9" * rng.choice([41, 4301, 100000]) + (".5" if kind == "longfloat" else "")
            base = (text + f"  multinode:x: {digits}\n" if where == "stack"
                    else '{"multinode-pod-shm": {"sizeHint": ' + digits + "}}")
        elif kind == "huge":
            base = base + ("#" * 1023 + "\n") * (5 * 1024 if where == "stack" else 1100) if where == "stack" else \
                base[:-1] + ', "x": "' + "y" * (1100 * 1024) + '"}'
        elif kind == "empty":
            base = ""
        data = {"utf16": base.encode("utf-16"), "utf16-nobom": base.encode("utf-16-le"), "utf32": base.encode("utf-32"),
                "latin1": (base + "# caf\u00e9\n").encode("latin-1") if where == "stack" else
                base.replace("32Gi", "caf\u00e9").encode("latin-1"),
                "bom8": b"\xef\xbb\xbf" + base.encode()}.get(kind, base.encode())
    made = {"kind": kind if data is None else "bytes", **({"b64": _b64(data)} if data is not None else {})}
    case: dict[str, Any] = {"text": text, "what": f"{where} file: {kind}", "checks": ["text"]}
    if where == "stack":
        case["file"] = made
    else:
        case["policy"] = made
    return case


# counts: (key, list/map maker, sizes), each around its bound in multinode/limits.py and far beyond
def count_case(rng: random.Random) -> dict[str, Any]:
    from multinode import limits
    doc = _existing()
    c = doc["config"]
    w0 = c["multinode:workloads"][0]
    what = rng.choice(["priorityClasses", "queues", "env", "workloads", "nodePools", "labels", "extraArgs",
                       "manifests", "longText", "argMax", "imagePullSecrets"])
    if what == "priorityClasses":
        n = rng.choice([10, limits.PRIORITY_CLASSES, limits.PRIORITY_CLASSES + 1, 20_000, 100_000])
        c["multinode:priorityClasses"] = [{"name": f"pc-{i}", "value": i} for i in range(n)]
    elif what == "queues":
        n = rng.choice([10, limits.QUEUES, limits.QUEUES + 1, 20_000, 100_000])
        c["multinode:queues"] = [{"name": f"q-{i}"} for i in range(n)]
    elif what == "env":
        n = rng.choice([100, limits.ENV_ENTRIES, limits.ENV_ENTRIES + 1, 100_000])
        w0["env"] = {f"E{i}": "x" for i in range(n)}
    elif what == "workloads":
        n = rng.choice([20, limits.WORKLOADS + 1, 5000])
        w = c["multinode:workloads"][1]
        c["multinode:workloads"] = [dict(w, name=f"w-{i}") for i in range(n)]
    elif what == "nodePools":
        n = rng.choice([limits.NODE_POOLS + 1, 5000])
        pool = c["multinode:nodePools"][0]
        c["multinode:nodePools"] = [dict(pool, name=f"p-{i}") for i in range(n)]
    elif what == "labels":
        n = rng.choice([limits.LABELS + 1, 50_000])
        c["multinode:nodePools"][0]["labels"] = {f"k{i}": "v" for i in range(n)}
    elif what == "extraArgs":
        n = rng.choice([limits.ARGS + 1, 100_000])
        w0["extraArgs"] = [f"--a{i}" for i in range(n)]
    elif what == "imagePullSecrets":
        n = rng.choice([limits.LIST_ITEMS + 1, 10_000])
        w0["imagePullSecrets"] = [f"s-{i}" for i in range(n)]
    elif what == "manifests":
        n = rng.choice([limits.MANIFESTS + 1, 3000])
        c["multinode:manifests"] = [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"c-{i}"}}
                                    for i in range(n)]
    elif what == "longText":
        n = rng.choice([limits.TEXT_CHARS + 1, 3 * 1024 * 1024])
        key = rng.choice(["model", "script", "image", "namespace"])
        w0[key] = "a" * n
        what = f"longText {key}"
    else:    # argMax: env of 20 values of 120 KiB: each under MAX_ARG_STRLEN, together over ARG_MAX
        n = 20
        w0["env"] = {f"E{i}": "v" * (120 * 1024) for i in range(n)}
    return {"text": _dump(doc), "what": f"count {what} {n}", "checks": ["text"]}


HOSTILE_NAMES = ["gpu\n", "gpu\n\n", "gpu\r", "g\x1b[31mpu", "\u202egpu", "gpu\x00", "gp\tu", "a" * 64, "a" * 254,
                 "gpu\u200b", "-gpu", "gpu-", "Gpu", "g_pu", "g.pu", "\ufeffgpu", "gpu\x85", "gpu\u2028"]


def name_case(rng: random.Random) -> dict[str, Any]:
    """A name or a label value Kubernetes refuses, at every key that names an object (a trailing newline first)."""
    doc = _existing()
    c = doc["config"]
    bad = rng.choice(HOSTILE_NAMES)
    where = rng.choice(["pool", "workload", "namespace", "queue", "priorityClass", "storage", "label", "labelKey",
                        "selector", "manifest", "manifestLabel", "datasetClaim", "pullSecret"])
    w0 = c["multinode:workloads"][1]
    if where == "pool":
        c["multinode:nodePools"][0]["name"] = bad
    elif where == "workload":
        w0["name"] = bad
    elif where == "namespace":
        w0["namespace"] = bad
    elif where == "queue":
        c["multinode:queues"] = [{"name": bad}]
    elif where == "priorityClass":
        c["multinode:priorityClasses"] = [{"name": bad, "value": 10}]
    elif where == "storage":
        c["multinode:storage"]["name"] = bad
    elif where == "label":
        c["multinode:nodePools"][0]["labels"] = {"team": bad}
    elif where == "labelKey":
        c["multinode:nodePools"][0]["labels"] = {bad: "x"}
    elif where == "selector":
        c["multinode:nodePools"][0]["nodeSelector"] = {"node.kubernetes.io/instance-type": bad}
    elif where == "manifest":
        c["multinode:manifests"] = [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": bad}}]
    elif where == "manifestLabel":
        c["multinode:manifests"] = [{"apiVersion": "v1", "kind": "ConfigMap",
                                     "metadata": {"name": "cm", "labels": {"team": bad}}}]
    elif where == "datasetClaim":
        w0["dataset"] = {"claim": bad}
    else:
        w0["imagePullSecrets"] = [bad]
    case = {"text": _dump(doc), "what": f"name {where} {bad[:12]!r}", "checks": ["text"]}
    if not k8s_accepts(NAME_RULE[where], bad):
        case["expect"] = [2]
    return case


# What each key's name must be, judged here independently of multinode/config.py (re.fullmatch: the whole text, as
# the API server's Go regexps match it; k8s.io/apimachinery pkg/util/validation/validation.go): pools and workloads
# are DNS labels of at most 40 (the project's own, stricter bound: names derived from them get suffixes).
NAME_RULE = {"pool": "label40", "workload": "label40", "namespace": "dns-label", "queue": "dns-label",
             "priorityClass": "dns-label", "storage": "subdomain", "label": "label-value", "labelKey": "label-key",
             "selector": "label-value", "manifest": "subdomain", "manifestLabel": "label-value",
             "datasetClaim": "subdomain", "pullSecret": "subdomain"}


def k8s_accepts(rule: str, name: str) -> bool:
    import re
    label = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
    qualified = r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
    if rule in ("label40", "dns-label"):
        return len(name) <= (40 if rule == "label40" else 63) and re.fullmatch(label, name) is not None
    if rule == "subdomain":
        return len(name) <= 253 and re.fullmatch(rf"{label}(\.{label})*", name) is not None
    if rule == "label-value":
        return len(name) <= 63 and re.fullmatch(f"({qualified})?", name) is not None
    return len(name) <= 63 and re.fullmatch(qualified, name) is not None


def contradiction_case(rng: random.Random) -> dict[str, Any]:
    """Keys that cannot hold together: a bandwidth floor above the machine's, a surge above the pool, /dev/shm above
    the node's memory, env + args above ARG_MAX."""
    doc = _existing()
    c = doc["config"]
    w = c["multinode:workloads"]
    what = rng.choice(["preflightFloor", "ncclFloor", "surge", "shm", "argMax"])
    if what == "preflightFloor":
        w[0]["preflight"] = {"minBusBandwidthGbps": rng.choice([3201, 10_000, 999_999])}
    elif what == "ncclFloor":
        w[2]["minBusBandwidthGbps"] = rng.choice([3201, 50_000])
    elif what == "surge":
        c["multinode:nodePools"][0]["upgrade"] = {"surge": rng.choice([9, 50, 100])}
    elif what == "shm":     # every catalog machine has >= 768 GiB: a described machine with less
        pool = c["multinode:nodePools"][0]
        pool.pop("machine")
        pool["machineSpec"] = {"name": "small-mem", "gpus": 8, "gpuMemoryGb": 80, "fabric": "efa", "fabricNics": 32,
                               "bandwidthGbps": 3200, "vcpus": 192, "memoryGib": 256}
        w[1]["shmSizeGi"] = rng.choice([257, 512, 1024])
    else:
        w[1]["scriptArgs"] = ["x" * (120 * 1024)] * 18
    # refused: the floors and ARG_MAX; advised: surge above the pool, /dev/shm above the node (the kubelet caps it)
    return {"text": _dump(doc), "what": f"contradiction {what}", "checks": ["text"],
            **({"expect": [2]} if what in ("preflightFloor", "ncclFloor", "argMax") else {})}


def text_case(rng: random.Random) -> dict[str, Any]:
    """Hostile text that reaches messages: credentials in an image reference, control characters in keys and values,
    a multi-megabyte value from the policy config."""
    doc = _existing()
    c = doc["config"]
    w0 = c["multinode:workloads"][0]
    what = rng.choice(["imageCreds", "keyControl", "envKeyControl", "valueControl", "policyHuge", "policyKeyControl",
                       "unknownKeyHuge"])
    case: dict[str, Any] = {"checks": ["text"]}
    if what == "imageCreds":
        w0["image"] = rng.choice([f"alice:{SECRET_MARK}-1@registry.example.com/vllm:1",
                                  f"{SECRET_MARK}@ghcr.io/org/img:2", f"bob:{SECRET_MARK}@nvcr.io/nim/x:1"])
        case["expect"] = [2]
    elif what == "keyControl":
        c[rng.choice(["multinode:x\x1b[2J", "multinode:\u202ecloud", "multinode:a\nb"])] = 1
    elif what == "envKeyControl":
        w0["env"] = {rng.choice(["A\x1b]0;pwned\x07", "B\u202e", "C\r\nD"]): "1"}
    elif what == "valueControl":
        w0["model"] = "meta-llama/\x1b[31m" + "x" * rng.choice([10, 100_000])
    elif what == "unknownKeyHuge":
        w0["k" * rng.choice([1000, 100_000])] = 1
    else:
        key = "x\x1b[31m\u202e" if what == "policyKeyControl" else "multinode-pod-shm"
        value = {"sizeHint": "z" * rng.choice([100_000, 1_000_000])} if what == "policyHuge" else "advisory"
        case["policy"] = {"kind": "bytes", "b64": _b64(json.dumps({key: value}).encode())}
    case.update(text=_dump(doc), what=f"text {what}")
    return case


POLICY_MISTAKES: list[tuple[str, Any]] = [
    ("no-literal-secrets-in-env", {"allowedNames": [[1]]}), ("no-literal-secrets-in-env", {"allowedNames": [{"a": 1}]}),
    ("no-credentials-in-configmap", {"allowedNames": "HF_TOKEN"}), ("no-credentials-in-configmap",
                                                                     {"allowedNames": [None, 7]}),
    ("no-literal-secrets-in-env", {"allowedNames": ["x" * 300]}),
    ("multinode-pod-shm", {"sizeHint": 64}), ("multinode-pod-shm", {"sizeHint": "64Gi\n"}),
    ("multinode-pod-shm", {"sizeHint": ["64Gi"]}), ("multinode-pod-shm", {"sizeHint": "lots"}),
    ("checkpoint-storage-retained", {"allowDelete": "yes"}), ("multinode-pod-shm", {"enforcementLevel": 3}),
    ("multinode-pod-shm", 7), ("multinode-pod-shm", ["advisory"]), ("all", {"enforcementLevel": ["x"]}),
    ("multinode-pod-shm", {"sizeHnt": "1Gi"}), ("no-such-policy", "advisory"),
]


def policy_case(rng: random.Random) -> dict[str, Any]:
    """A typed mistake in the policy config: one config error naming the key, never a finding per object."""
    name, value = rng.choice(POLICY_MISTAKES)
    data = {name: value} if rng.random() < 0.7 else {"version": 2, "policies": {name: value}}
    return {"text": (ROOT / "stacks" / "Pulumi.existing-dev.yaml").read_text(),
            "what": f"policy {name}: {value!r}"[:90],
            "policy": {"kind": "bytes", "b64": _b64(json.dumps(data).encode())}, "checks": ["text", "readable"],
            "expect": [2]}


ROUND3_MAKERS = {"file": file_case, "count": count_case, "name": name_case, "contra": contradiction_case,
                 "text": text_case, "policy": policy_case}


def generate_round3(n_each: int, seed: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    cases: list[dict[str, Any]] = []
    for i in range(n_each):
        for family, make in ROUND3_MAKERS.items():
            case = make(rng)
            case["id"] = f"{family}-{i}"
            cases.append(case)
    return cases


# ------------------------------------------------------------------ cases
def generate(n_stacks: int, n_objects: int, seed: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    cases = []
    texts = [p.read_text() for p in STACKS]
    for i in range(n_stacks):
        text, what = mutate_stack(rng.choice(texts), rng)
        cases.append({"id": f"stack-{i}", "what": what, "text": text})
    objs = object_cases()
    for i in range(n_objects):
        base, obj = objs[i % len(objs)] if i < len(objs) else rng.choice(objs)
        mutated, what = mutate_object(obj, rng)
        doc = copy.deepcopy(base)
        doc["config"]["multinode:manifests"] = [mutated]
        cases.append({"id": f"object-{i}", "what": f"{obj.get('kind')}: {what}", "text": _dump(doc)})
    return cases


# ------------------------------------------------------------------ running
def _remove(path: Path) -> None:
    import shutil
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif os.path.lexists(path):
        path.unlink()


def _make(path: Path, made: dict[str, Any]) -> None:
    """The file a round-three case asks for (see file_case)."""
    kind = made["kind"]
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "dir":
        path.mkdir()
    elif kind == "devzero":
        path.symlink_to("/dev/zero")
    elif kind == "dangling":
        path.symlink_to(path.parent / "no-such-file")
    else:
        path.write_bytes(base64.b64decode(made["b64"]))


def run_case_inprocess(text: str, workdir: Path, before: str | None = None,
                       case: dict[str, Any] | None = None) -> dict[str, Any]:
    """Plan one stack file as `python -m multinode plan fuzz --file F --out D` does; capture everything. `before`:
    a stack planned first into the same build folder (renames: the second plan compares with the first's
    resources.json); its output counts too. `case`: a round-three case's `file` / `policy` / `checks`."""
    import signal

    from multinode import plan as mplan

    case = case or {}
    f = workdir / "Pulumi.fuzz.yaml"
    policy = workdir / "policy-config.json"
    _remove(f)
    _remove(policy)
    f.write_bytes(text.encode("utf-8", "surrogatepass"))
    if case.get("file"):
        _remove(f)
        _make(f, case["file"])
    if case.get("policy"):
        _make(policy, case["policy"])
    out, err = io.StringIO(), io.StringIO()

    def on_alarm(signum: int, frame: Any) -> None:
        raise TimeoutError(f"case took over {CASE_SECONDS} s")

    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(CASE_SECONDS)
    t0 = time.monotonic()
    import shutil
    shutil.rmtree(workdir / "build", ignore_errors=True)     # each case alone (renames compare with `before` only)
    try:
        with redirect_stdout(out), redirect_stderr(err):
            if before is not None:
                f.write_bytes(before.encode("utf-8", "surrogatepass"))
                mplan.main(["fuzz", "--file", str(f), "--out", str(workdir / "build")])
                f.write_bytes(text.encode("utf-8", "surrogatepass"))
            code = mplan.main(["fuzz", "--file", str(f), "--out", str(workdir / "build")])
    except TimeoutError as e:
        code, err = -1, io.StringIO(str(e))
    except BaseException as e:  # noqa: BLE001 - SystemExit, RecursionError... all count as failures
        import traceback
        code = -2
        err.write("Traceback (escaped plan.main)\n" + "".join(traceback.format_exception(type(e), e, e.__traceback__)))
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    seconds = time.monotonic() - t0
    text_out = out.getvalue() + err.getvalue()
    build = workdir / "build"
    files = ""
    if build.exists():
        files = "".join(p.read_text(errors="replace") for p in build.rglob("*") if p.is_file())
    res = {"exit": code, "traceback": "Traceback" in text_out, "seconds": round(seconds, 3),
           "maxrss_mib": _peak_rss_mib(), "output_bytes": len(text_out.encode("utf-8", "surrogatepass")),
           "output": text_out[-3000:], "secret_leak": "SECRETVALUE" in text_out or "SECRETVALUE" in files}
    res["bad"] = round3_problems(case, code, text_out)
    return res


def round3_problems(case: dict[str, Any], code: int, text_out: str) -> list[str]:
    """What a round-three case's output must not do beyond the common checks (`checks`, `expect`)."""
    bad: list[str] = []
    checks = case.get("checks") or ()
    if "text" in checks:
        shown = [ch for ch in text_out if not ch.isprintable() and ch != "\n"]
        if shown:
            bad.append(f"unescaped control/format characters in the output: {sorted(set(shown))[:5]!r}")
        if len(text_out) > OUTPUT_CHARS:
            bad.append(f"{len(text_out)} characters of output (over {OUTPUT_CHARS})")
    if "readable" in checks and "could not read this object" in text_out:
        bad.append("a policy config mistake reported as unreadable objects")
    if case.get("expect") and code not in case["expect"] and code in (0, 1, 2):
        bad.append(f"exit {code}, expected {case['expect']}")
    return bad


def _peak_rss_mib() -> float:
    """This process's own peak RSS. ru_maxrss survives execve (getrusage(2), NOTES: "resource usage metrics
    are preserved across an execve"), so a worker forked from a large pytest process reported the parent's
    peak at fork time, not its own; /proc/self/status VmHWM belongs to the worker's address space, which
    exec replaced. Falls back to ru_maxrss where /proc is missing."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return round(int(line.split()[1]) / 1024, 1)
    except (OSError, ValueError, IndexError):
        pass
    import resource
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def worker() -> None:
    """Read one JSON case per line on stdin, write one JSON result per line on stdout."""
    real_stdout = sys.stdout
    with tempfile.TemporaryDirectory(prefix="fuzz16-") as tmp:
        for line in sys.stdin:
            case = json.loads(line)
            res = run_case_inprocess(case["text"], Path(tmp), case.get("before"), case)
            res["id"] = case["id"]
            real_stdout.write(json.dumps(res) + "\n")
            real_stdout.flush()


def run_cases(cases: list[dict[str, Any]], log=None) -> list[dict[str, Any]]:
    """Run every case in worker processes; a dead or hung worker fails its case and is replaced."""
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    results: list[dict[str, Any]] = []
    proc = None
    for case in cases:
        if proc is None or proc.poll() is not None:
            proc = subprocess.Popen([sys.executable, "-m", "tests.fuzz_hostile", "--worker"], cwd=ROOT, env=env,
                                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                    text=True)
        proc.stdin.write(json.dumps(case) + "\n")
        proc.stdin.flush()
        line = proc.stdout.readline()      # the worker's own alarm bounds the case
        if not line:
            proc.kill()
            proc = None
            res = {"id": case["id"], "exit": -3, "traceback": False, "seconds": None, "maxrss_mib": None,
                   "output": "worker died", "secret_leak": False, "bad": []}
        else:
            res = json.loads(line)
        res["what"] = case["what"]
        results.append(res)
        if res["exit"] not in (0, 1, 2) and proc is not None:
            # a failed case may leave Pulumi's runtime state behind: start the next case in a fresh worker
            proc.kill()
            proc = None
        if log:
            log(res)
    if proc is not None:
        proc.stdin.close()
        proc.wait(timeout=30)
    return results


def failures(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in results
            if r["exit"] not in (0, 1, 2) or r["traceback"] or r["secret_leak"]
            or (r["seconds"] or 0) >= CASE_SECONDS or (r["maxrss_mib"] or 0) >= CASE_RSS_MIB or r.get("bad")]


def summarize(results: list[dict[str, Any]]) -> dict[str, Any]:
    from collections import Counter
    secs = [r["seconds"] for r in results if r["seconds"] is not None]
    rss = [r["maxrss_mib"] for r in results if r["maxrss_mib"] is not None]
    return {"cases": len(results), "exit_codes": dict(Counter(r["exit"] for r in results)),
            "tracebacks": sum(r["traceback"] for r in results), "secret_leaks": sum(r["secret_leak"] for r in results),
            "exit_3": sum(r["exit"] == 3 for r in results),
            "over_60s": sum((r["seconds"] or 0) >= CASE_SECONDS or r["exit"] == -1 for r in results),
            "other_problems": sum(bool(r.get("bad")) for r in results),
            "max_output_bytes": max((r.get("output_bytes") or 0 for r in results), default=0),
            "max_seconds": max(secs, default=0), "max_rss_mib": max(rss, default=0),
            "failures": len(failures(results))}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--stacks", type=int, default=300)
    ap.add_argument("--objects", type=int, default=150)
    ap.add_argument("--seed", type=int, default=16)
    ap.add_argument("--round2", type=int, default=0, help="issue 32: this many cases of each of its four families")
    ap.add_argument("--round3", type=int, default=0,
                    help="issue 48: this many cases of each of its six families (" + ", ".join(ROUND3_FAMILIES) + ")")
    ap.add_argument("--out", type=Path, help="write every result as JSON here")
    ap.add_argument("--keep", type=Path, help="write each failing case's stack file into this folder")
    args = ap.parse_args(argv)
    if args.worker:
        worker()
        return 0
    cases = (generate(args.stacks, args.objects, args.seed) + generate_round2(args.round2, args.seed)
             + generate_round3(args.round3, args.seed))
    by_id = {c["id"]: c for c in cases}
    t0 = time.time()
    results = run_cases(cases, log=lambda r: print(f"{r['id']:<11} exit {r['exit']:>2} {r['seconds']}s "
                                                    f"{r['maxrss_mib']}MiB {r['what'][:90]}", flush=True))
    summary = summarize(results)
    summary["wall_seconds"] = round(time.time() - t0, 1)
    print(json.dumps(summary, indent=1))
    if args.out:
        args.out.write_text(json.dumps({"summary": summary, "results": results}, indent=1))
    if args.keep:
        args.keep.mkdir(parents=True, exist_ok=True)
        for r in failures(results):
            (args.keep / f"{r['id']}.yaml").write_text(by_id[r["id"]]["text"])
            (args.keep / f"{r['id']}.out").write_text(r["output"])
    return 1 if summary["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
