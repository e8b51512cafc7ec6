"""Kyverno itself on the fabric policies a stack renders (issue 27, "Kyverno itself").

For each build/<stack>/ that renders policies.kyverno.io/v1 MutatingPolicies or a ValidatingPolicy:

1. inputs: every fabric pod template of the stack as the Pod the API server hands the webhook on CREATE, written to
   build/<stack>/engines/kyverno/in/<stem>.yaml, where <stem> is the name plan gives its effective/<stem>.yaml
   (multinode.plan.fabric_pod_templates: the same templates, the same names, the pods the Python evaluation starts
   from);
2. `kubectl-kyverno apply` (Kyverno's own CLI, built from conformance/kyverno/go.mod) of the stack's rendered
   MutatingPolicies and ValidatingPolicy on those pods, as a CREATE: every policy must compile; the mutated pod must
   equal effective/<stem>.yaml field by field; the ValidatingPolicy must admit it;
3. negative controls built from a real pod of the stack: a GPU pod on a fabric pool without the fabric label (and
   without the single-node opt-out) must be denied; a user NCCL_NET override must be denied by require-fabric (the
   mutation never rewrites a container's own NCCL_NET), and Kyverno and our Python evaluation
   (multinode.manifests.kyverno) must agree on what happens to both;
4. build/<stack>/engines/kyverno.txt: one line per finding (file: object: field path: message) and a summary;
   exit 1 on any finding.

Facts about the CLI (kyverno/kyverno@v1.19.0, cmd/cli/kubectl-kyverno):
- `apply <policy files...> --resource <file>`: positional args are policy paths (commands/apply/command.go:153),
  --resource/-r the resources (:218); without --cluster the resources are served by a fake client (:364-378).
- The admission operation defaults to CREATE: object = the resource, oldObject = null (processor/operation.go:41-51;
  resolveOperation :58-68, used for MutatingPolicies at processor/policy_processor.go:351 and ValidatingPolicies at
  :557). The MutatingPolicies run first and each one's patched resource is the next one's input (:370-396); the
  ValidatingPolicies then evaluate that mutated resource (:500-590), as the API server calls validating webhooks
  after the mutating ones.
- A MutatingPolicy or ValidatingPolicy that does not compile aborts the run with "failed to compile policy <name>
  (<errors>)" (pkg/cel/policies/mpol/engine/provider.go:166-169, returned by policy_processor.go:318-321 and
  commands/apply/command.go:609).
- `-o <dir>` appends the patched resource after every MutatingPolicy response to <dir>/<name>-mutated.yaml
  (processor/policy_processor.go:948-1007, file name :988, append :994): the last document is the final pod.
- `-p --output-format json` prints the policy report as JSON (commands/apply/print.go:54-75); the mutation lines
  ("Mutation has been applied successfully.", policy_processor.go:944) are printed on the same stdout.
- namespaceObject is null unless a values file declares the namespace (variables/variables.go:46-71); our policies
  do not read it and our Python evaluation binds it to null (multinode/manifests/kyverno.py _variables).
"""
from __future__ import annotations

import argparse
import copy
import json
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from multinode import k8sfiles, pools  # noqa: E402 - the project root on sys.path first
from multinode import plan as mplan  # noqa: E402
from multinode.manifests import cel, effective_pod, kyverno  # noqa: E402

DEFAULT_BIN = Path(__file__).resolve().parent / "bin" / "kubectl-kyverno"
NCCL_OVERRIDE = "Socket"          # the value a user might set: NCCL over TCP sockets, what the pin is there to stop


# ------------------------------------------------------------------------------------------- findings
@dataclass
class Findings:
    lines: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def add(self, file: str, obj: str, path: str, message: str) -> None:
        self.lines.append(f"{file}: {obj}: {path or '-'}: {message}")


# ------------------------------------------------------------------------------------------- inputs
def load_objects(stack_dir: Path) -> list[tuple[Path, dict[str, Any]]]:
    """Every object plan rendered into k8s/, in apply order, with its file."""
    out: list[tuple[Path, dict[str, Any]]] = []
    for f in k8sfiles.ordered_files(stack_dir / "k8s"):     # k8s/apply-order.txt
        for doc in yaml.safe_load_all(f.read_text(encoding="utf-8")):
            if isinstance(doc, dict):
                out.append((f, doc))
    return out


def policy_files(objects: list[tuple[Path, dict[str, Any]]]) -> tuple[list[Path], list[Path]]:
    muts = [f for f, o in objects if kyverno.is_cel_policy(o, kyverno.MUTATING_KIND)]
    vals = [f for f, o in objects if kyverno.is_cel_policy(o, kyverno.VALIDATING_KIND)]
    return muts, vals


def _stringify_quantities(node: Any) -> None:
    """Quantities reach admission as strings (the API server serialises resource.Quantity as a string): every
    number under a resources' limits/requests (containers, init containers, pod-level resources) and an emptyDir
    sizeLimit becomes its decimal string. The API server's canonical form (1024Mi -> 1Gi) is not applied: that is
    the API server's decode, checked by the apiserver conformance module."""
    if isinstance(node, dict):
        for k, v in node.items():
            if k in ("limits", "requests") and isinstance(v, dict):
                for q, amount in list(v.items()):
                    if isinstance(amount, int | float) and not isinstance(amount, bool):
                        v[q] = str(amount)
            elif k == "sizeLimit" and isinstance(v, int | float) and not isinstance(v, bool):
                node[k] = str(v)
            else:
                _stringify_quantities(v)
    elif isinstance(node, list):
        for v in node:
            _stringify_quantities(v)


def admitted_pod(stem: str, owner: dict[str, Any], template: dict[str, Any]) -> dict[str, Any]:
    """The Pod a controller creates from the template, as the API server hands it to the webhook on CREATE: the
    template's metadata (labels, annotations) and spec, the owner's namespace. The name is the effective/ file
    stem (a controller would send generateName; no policy reads the name, and the CLI names its output after it)."""
    meta = copy.deepcopy(template.get("metadata") or {})
    meta.pop("creationTimestamp", None)
    meta["name"] = stem
    meta["namespace"] = (owner.get("metadata") or {}).get("namespace") or "default"
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": copy.deepcopy(template.get("spec") or {})}
    _stringify_quantities(pod["spec"])
    return pod


def input_pods(objects: list[tuple[Path, dict[str, Any]]]) -> list[tuple[str, dict[str, Any]]]:
    """(stem, Pod) for every fabric pod template, named as plan names its effective/ file."""
    return [(stem, admitted_pod(stem, owner, tmpl))
            for stem, owner, _path, tmpl in mplan.fabric_pod_templates([o for _, o in objects])]


def expected_pod(pod: dict[str, Any], effective: dict[str, Any]) -> dict[str, Any]:
    """What Kyverno's output must be: the effective pod (metadata + spec, as plan writes it) with the identity the
    input pod carries (apiVersion, kind, name, namespace), which the Python evaluation does not write."""
    meta = dict(effective.get("metadata") or {})
    meta["name"] = pod["metadata"]["name"]
    meta["namespace"] = pod["metadata"]["namespace"]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": effective.get("spec") or {}}


# ------------------------------------------------------------------------------------------- comparison
def diff(a: Any, b: Any, path: str = "") -> Iterator[tuple[str, Any, Any]]:
    """Every JSON path where a and b differ (a missing key: the sentinel '<absent>'), with both values."""
    if isinstance(a, dict) and isinstance(b, dict):
        for k in list(a) + [k for k in b if k not in a]:
            p = f"{path}.{k}" if path else str(k)
            if k not in b:
                yield p, a[k], "<absent>"
            elif k not in a:
                yield p, "<absent>", b[k]
            else:
                yield from diff(a[k], b[k], p)
    elif isinstance(a, list) and isinstance(b, list):
        for i in range(max(len(a), len(b))):
            p = f"{path}[{i}]"
            if i >= len(b):
                yield p, a[i], "<absent>"
            elif i >= len(a):
                yield p, "<absent>", b[i]
            else:
                yield from diff(a[i], b[i], p)
    elif a != b or type(a) is not type(b):
        yield path, a, b


def _short(v: Any) -> str:
    s = json.dumps(v, sort_keys=True)
    return s if len(s) <= 200 else s[:197] + "..."


# ------------------------------------------------------------------------------------------- the engine
@dataclass
class Verdict:
    """What one `kubectl-kyverno apply` says about one pod."""
    rc: int
    stdout: str
    stderr: str
    mutated: dict[str, Any] | None           # the pod after the last MutatingPolicy response (None: none printed)
    results: list[dict[str, Any]]            # policy report results (policy, rule, result, message)

    def denials(self, policy: str) -> list[dict[str, Any]]:
        return [r for r in self.results if r.get("policy") == policy and r.get("result") in ("fail", "error")]

    def error(self) -> str | None:
        """The CLI's own error (a policy that does not compile, a resource it cannot take): its 'Error:' lines."""
        lines = [ln.strip() for ln in (self.stderr + "\n" + self.stdout).splitlines() if ln.strip().startswith("Error")]
        if lines:
            return _elide_expressions(" | ".join(lines))
        if self.rc != 0 and not self.results:
            tail = (self.stderr.strip() or self.stdout.strip()).splitlines()[-3:]
            return f"exit {self.rc}: " + " | ".join(tail)
        return None


_INVALID_VALUE = re.compile(r'Invalid value: "((?:[^"\\]|\\.)*)"')


def _elide_expressions(message: str) -> str:
    """Kyverno echoes the whole expression in a compile error (field.Invalid): keep its first 60 characters, the
    field path before it and the CEL error after it name the rest."""
    def short(m: re.Match[str]) -> str:
        e = m.group(1)
        return f'Invalid value: "{e[:60]}..." ({len(e)} chars)' if len(e) > 60 else m.group(0)
    return _INVALID_VALUE.sub(short, message)


def _report_results(stdout: str) -> list[dict[str, Any]]:
    """The results of the report(s) printed as JSON (openreports.io ClusterReport/Report in v1.19.0). A report may
    follow "Mutation has been applied successfully." on the same line (policy_processor.go:944 prints no newline),
    so every '{' that starts a JSON object is tried, not only those at a line start."""
    out: list[dict[str, Any]] = []
    dec = json.JSONDecoder()
    pos = stdout.find("{")
    while pos != -1:
        try:
            doc, end = dec.raw_decode(stdout, pos)
        except json.JSONDecodeError:
            pos = stdout.find("{", pos + 1)
            continue
        if isinstance(doc, dict) and str(doc.get("kind", "")).endswith("Report"):
            out.extend(r for r in doc.get("results") or [] if isinstance(r, dict))
        pos = stdout.find("{", end)
    return out


def run_apply(binary: Path, policies: list[Path], pods: list[dict[str, Any]], workdir: Path) -> dict[str, Verdict]:
    """kubectl-kyverno apply <policies> --resource <pod>... -o <dir> -p --output-format json, each pod a CREATE
    processed on its own (commands/apply/command.go:570-612): per pod name, its Verdict (the run's exit code and
    output, its mutated pod, the report results about it)."""
    workdir.mkdir(parents=True, exist_ok=True)
    outdir = workdir / "out"
    outdir.mkdir(exist_ok=True)
    cmd = [str(binary), "apply", *map(str, policies)]
    for pod in pods:
        name = pod["metadata"]["name"]
        res = workdir / f"{name}.yaml"
        res.write_text(yaml.safe_dump(pod, sort_keys=False), encoding="utf-8")
        (outdir / f"{name}-mutated.yaml").unlink(missing_ok=True)
        cmd += ["--resource", str(res)]
    cmd += ["-o", str(outdir), "--policy-report", "--output-format", "json", "--remove-color"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env={"PATH": "/usr/bin:/bin",
                                                                                 "HOME": str(workdir)})
    results = _report_results(proc.stdout)
    out: dict[str, Verdict] = {}
    for pod in pods:
        name = pod["metadata"]["name"]
        mutated_file = outdir / f"{name}-mutated.yaml"
        mutated = None
        if mutated_file.exists():
            docs = [d for d in yaml.safe_load_all(mutated_file.read_text(encoding="utf-8")) if isinstance(d, dict)]
            mutated = docs[-1] if docs else None
        mine = [r for r in results if any(isinstance(x, dict) and x.get("name") == name
                                          for x in r.get("resources") or [])]
        out[name] = Verdict(proc.returncode, proc.stdout, proc.stderr, mutated, mine)
    return out


# ------------------------------------------------------------------------------------------- our Python evaluation
def python_mutate(pod: dict[str, Any], mpols: list[dict[str, Any]]) -> dict[str, Any]:
    """The pod after the MutatingPolicies, as plan computes effective/ (effective_pod.apply_policies_to_template)."""
    t = effective_pod.apply_policies_to_template({"metadata": pod["metadata"], "spec": pod["spec"]}, mpols)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": t["metadata"], "spec": t["spec"]}


def python_denials(pod: dict[str, Any], vpols: list[dict[str, Any]]) -> list[str]:
    out: list[str] = []
    for vp in vpols:
        out.extend(kyverno.refused_by(vp, pod))
    return out


# ------------------------------------------------------------------------------------------- the check
def _gpu_containers(pod: dict[str, Any]) -> list[dict[str, Any]]:
    def gpus(c: dict[str, Any]) -> int:
        try:
            return int(str(((c.get("resources") or {}).get("limits") or {}).get(kyverno.GPU_RESOURCE, 0)))
        except ValueError:
            return 0
    return [c for c in (pod["spec"].get("containers") or []) if isinstance(c, dict) and gpus(c) > 0]


class StackCheck:
    def __init__(self, stack_dir: Path, binary: Path) -> None:
        self.dir = stack_dir
        self.name = stack_dir.name
        self.binary = binary
        self.findings = Findings()
        self.objects = load_objects(stack_dir)
        self.mut_files, self.val_files = policy_files(self.objects)
        self.mpols = [o for _, o in self.objects if kyverno.is_cel_policy(o, kyverno.MUTATING_KIND)]
        self.vpols = [o for _, o in self.objects if kyverno.is_cel_policy(o, kyverno.VALIDATING_KIND)]
        self.work = stack_dir / "engines" / "kyverno"
        self.pods_checked = 0
        self.controls = 0

    def rel(self, p: Path) -> str:
        try:
            return str(p.relative_to(self.dir.parent.parent))
        except ValueError:
            return str(p)

    def run(self) -> Findings:
        if self.work.exists():
            for f in sorted(self.work.rglob("*"), reverse=True):
                f.unlink() if f.is_file() else f.rmdir()
        (self.work / "in").mkdir(parents=True, exist_ok=True)
        pods = input_pods(self.objects)
        for stem, pod in pods:
            (self.work / "in" / f"{stem}.yaml").write_text(yaml.safe_dump(pod, sort_keys=False), encoding="utf-8")
        controls = self.negative_controls(pods)
        # One run of every pod and control (each is its own CREATE). Should the CLI fail as a whole (a policy that
        # does not compile, an evaluation it gives up on), each policy is compiled alone and each pod run alone,
        # so every finding names its policy, expression or pod.
        every = [p for _, p in pods] + [p for _, p, _ in controls]
        verdicts = run_apply(self.binary, self.mut_files + self.val_files, every, self.work / "run") if every else {}
        if not every or any(v.error() is not None for v in verdicts.values()):
            self.compile_each()
            verdicts = {p["metadata"]["name"]: run_apply(self.binary, self.mut_files + self.val_files, [p],
                                                         self.work / "run-each")[p["metadata"]["name"]]
                        for p in every}
        for stem, pod in pods:
            self.check_pod(stem, pod, verdicts[stem])
        for label, pod, must_deny in controls:
            self.control(label, pod, must_deny, verdicts[pod["metadata"]["name"]])
        return self.findings

    # --- 2a: each policy compiles (alone, so every policy that does not is named, not only the first)
    def compile_each(self) -> None:
        """Each policy alone, on a pod no policy matches (compiling happens before matching). Kyverno stops at the
        first expression that does not compile; when a policy fails, each of its mutations / validations is
        compiled alone too (the policy with only that entry), so every failing expression is named."""
        for f in self.mut_files + self.val_files:
            err = self._compile_error([f], self.work / "compile" / f.stem)
            if err is None:
                continue
            doc = yaml.safe_load(f.read_text(encoding="utf-8"))
            key = "mutations" if doc.get("kind") == kyverno.MUTATING_KIND else "validations"
            entries = (doc.get("spec") or {}).get(key) or []
            named = 0
            for i, entry in enumerate(entries if len(entries) > 1 else []):
                one = copy.deepcopy(doc)
                one["spec"][key] = [entry]
                part = self.work / "compile" / f"{f.stem}-{key}-{i}.yaml"
                part.parent.mkdir(parents=True, exist_ok=True)
                part.write_text(yaml.safe_dump(one, sort_keys=False), encoding="utf-8")
                e = self._compile_error([part], self.work / "compile" / f"{f.stem}-{i}")
                if e is not None:
                    named += 1
                    self.findings.add(self.rel(f), _obj_name(f), f"spec.{key}[{i}]", f"Kyverno refuses the policy: {e}")
            if not named:
                self.findings.add(self.rel(f), _obj_name(f), "spec", f"Kyverno refuses the policy: {err}")

    def _compile_error(self, files: list[Path], workdir: Path) -> str | None:
        probe = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "compile-probe", "namespace": "default"},
                 "spec": {"containers": [{"name": "c", "image": "busybox"}]}}
        return run_apply(self.binary, files, [probe], workdir)["compile-probe"].error()

    # --- 2b: mutated pod == effective/, admitted by the ValidatingPolicy
    def check_pod(self, stem: str, pod: dict[str, Any], v: Verdict) -> None:
        eff_file = self.dir / "effective" / f"{stem}.yaml"
        inp = self.rel(self.work / "in" / f"{stem}.yaml")
        self.pods_checked += 1
        err = v.error()
        if err is not None:
            self.findings.add(inp, f"Pod/{stem}", "-", f"kubectl-kyverno apply failed: {err}")
            return
        if self.mut_files:
            if not eff_file.exists():
                self.findings.add(self.rel(eff_file), f"Pod/{stem}", "-", "plan wrote no effective pod for this "
                                  "fabric pod template")
            elif v.mutated is None:
                self.findings.add(inp, f"Pod/{stem}", "-", "Kyverno printed no mutated pod")
            else:
                effective = yaml.safe_load(eff_file.read_text(encoding="utf-8")) or {}
                for path, got, want in diff(v.mutated, expected_pod(pod, effective)):
                    self.findings.add(self.rel(eff_file), f"Pod/{stem}", path,
                                      f"Kyverno {_short(got)} != effective {_short(want)}")
        for vp in self.vpols:
            name = vp["metadata"]["name"]
            for r in v.denials(name):
                self.findings.add(inp, f"Pod/{stem}", f"ValidatingPolicy/{name}",
                                  f"Kyverno {r.get('result')}s the mutated pod: {r.get('message', '')}")
        for m in self.mpols:
            name = m["metadata"]["name"]
            for r in v.results:
                if r.get("policy") == name and r.get("result") in ("fail", "error"):
                    self.findings.add(inp, f"Pod/{stem}", f"MutatingPolicy/{name}",
                                      f"Kyverno {r.get('result')}: {r.get('message', '')}")

    # --- 3: negative controls, Kyverno against our Python evaluation
    def negative_controls(self, pods: list[tuple[str, dict[str, Any]]]) -> list[tuple[str, dict[str, Any], str | None]]:
        """(label, pod, the rule that must deny it or None) for each control, built from the stack's first GPU fabric
        pod that selects a pool with spec.nodeSelector, and written to engines/kyverno/controls/."""
        if not self.vpols:
            return []
        base = next(((s, p) for s, p in pods if _gpu_containers(p) and (p["spec"].get("nodeSelector") or {})), None)
        if base is None:
            self.findings.notes.append("no GPU fabric pod with a nodeSelector: negative controls not built")
            return []
        stem, pod = base
        # (a) a GPU pod that selects the fabric pool but lacks the fabric label, NeMo's annotation and the opt-out
        nolabel = copy.deepcopy(pod)
        nolabel["metadata"]["name"] = f"control-nolabel-{stem}"[:63].lower()
        labels = nolabel["metadata"].setdefault("labels", {})
        labels.pop(pools.FABRIC_POD_LABEL, None)
        labels.pop(pools.SINGLE_NODE_POD_LABEL, None)
        (nolabel["metadata"].get("annotations") or {}).pop(pools.NEMO_ANNOTATION, None)
        # (b) a user NCCL_NET override in every GPU container
        override = copy.deepcopy(pod)
        override["metadata"]["name"] = f"control-ncclnet-{stem}"[:63].lower()
        for c in _gpu_containers(override):
            env = [e for e in c.get("env") or [] if not (isinstance(e, dict) and e.get("name") == "NCCL_NET")]
            c["env"] = [*env, {"name": "NCCL_NET", "value": NCCL_OVERRIDE}]
        out: list[tuple[str, dict[str, Any], str | None]] = [("no-fabric-label", nolabel, kyverno.SINGLE_NODE_RULE),
                                                             ("user-NCCL_NET", override, kyverno.FABRIC_RULE)]
        (self.work / "controls").mkdir(parents=True, exist_ok=True)
        for _, p, _ in out:
            (self.work / "controls" / f"{p['metadata']['name']}.yaml").write_text(
                yaml.safe_dump(p, sort_keys=False), encoding="utf-8")
        return out

    def control(self, label: str, pod: dict[str, Any], must_deny: str | None, v: Verdict) -> None:
        self.controls += 1
        name = pod["metadata"]["name"]
        where = self.rel(self.work / "controls" / f"{name}.yaml")
        err = v.error()
        if err is not None:
            self.findings.add(where, f"Pod/{name}", "-", f"control {label}: kubectl-kyverno apply failed: {err}")
            return
        # the engine's verdict: the ValidatingPolicy's failed rules on the mutated pod
        denials = [r for vp in self.vpols for r in v.denials(vp["metadata"]["name"])]
        engine_denied = sorted(set(_rule_names([str(r.get("message", "")) for r in denials])))
        engine_msgs = sorted({str(r.get("message", "")) for r in denials})
        try:
            py_mutated = python_mutate(pod, self.mpols)
            py_denied = sorted(set(python_denials(py_mutated, self.vpols)))
        except cel.CelError as e:
            self.findings.add(where, f"Pod/{name}", "-", f"control {label}: our Python evaluation fails: {e}")
            return
        engine_pod = v.mutated if v.mutated is not None else pod
        for path, got, want in diff(engine_pod, py_mutated):
            if path in ("metadata.name", "metadata.namespace"):
                continue
            self.findings.add(where, f"Pod/{name}", path, f"control {label}: Kyverno mutates to {_short(got)}, "
                              f"our Python evaluation to {_short(want)}")
        if bool(engine_denied) != bool(py_denied):
            self.findings.add(where, f"Pod/{name}", "ValidatingPolicy", f"control {label}: Kyverno "
                              f"{'denies ' + str(engine_msgs) if engine_denied else 'admits'}, our Python evaluation "
                              f"{'denies ' + str(py_denied) if py_denied else 'admits'}")
        if must_deny is not None:
            if not engine_denied:
                self.findings.add(where, f"Pod/{name}", "ValidatingPolicy", f"control {label}: Kyverno admits the pod "
                                  f"(it must be denied by {must_deny})")
            elif not any(must_deny in m for m in engine_msgs):
                self.findings.add(where, f"Pod/{name}", "ValidatingPolicy", f"control {label}: Kyverno denies it, "
                                  f"but not by {must_deny}: {engine_msgs}")
            outcome = "denied" if engine_denied else "ADMITTED"
        else:
            values = {e.get("value") for c in _gpu_containers(engine_pod) for e in c.get("env") or []
                      if isinstance(e, dict) and e.get("name") == "NCCL_NET"}
            if engine_denied:
                outcome = f"denied ({engine_msgs})"
            elif NCCL_OVERRIDE in values:
                outcome = "ADMITTED with the user's NCCL_NET"
                self.findings.add(where, f"Pod/{name}", "spec.containers[*].env[NCCL_NET]", f"control {label}: "
                                  f"Kyverno admits the pod with NCCL_NET={NCCL_OVERRIDE}")
            else:
                outcome = f"replaced by the mutation (NCCL_NET={sorted(map(str, values))}) and admitted"
        py_outcome = "denied" if py_denied else "admitted"
        self.findings.notes.append(f"control {label} on {name}: Kyverno: {outcome}; our Python evaluation: "
                                   f"{py_outcome}")


def _rule_names(messages: list[str]) -> list[str]:
    """Rule names from validation messages of the form "[rule] text", as kyverno.refused_by reads them."""
    return [m[1:m.index("]")] if m.startswith("[") and "]" in m else m for m in messages]


def _obj_name(f: Path) -> str:
    parts = f.stem.split("-", 2)
    return f"{parts[1]}/{parts[2]}" if len(parts) == 3 else f.stem


def stack_dirs(build: Path, names: list[str]) -> list[Path]:
    if names:
        return [build / n for n in names]
    return sorted(d for d in build.iterdir() if d.is_dir() and (d / "k8s").is_dir())


def check_stack(stack_dir: Path, binary: Path) -> tuple[Findings, StackCheck | None]:
    objects = load_objects(stack_dir)
    muts, vals = policy_files(objects)
    if not muts and not vals:
        return Findings(notes=["no fabric policies rendered: nothing to check"]), None
    sc = StackCheck(stack_dir, binary)
    return sc.run(), sc


def write_report(stack_dir: Path, findings: Findings, sc: StackCheck | None, version: str) -> Path:
    out = stack_dir / "engines" / "kyverno.txt"
    out.parent.mkdir(parents=True, exist_ok=True)
    lines = list(findings.lines)
    lines += [f"# {n}" for n in findings.notes]
    if sc is not None:
        lines.append(f"# kyverno {version}: {len(sc.mut_files)} MutatingPolicy, {len(sc.val_files)} "
                     f"ValidatingPolicy, {sc.pods_checked} fabric pods, {sc.controls} negative controls: "
                     f"{len(findings.lines)} finding(s)")
    else:
        lines.append(f"# kyverno {version}: 0 finding(s)")
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return out


def cli_version(binary: Path) -> str:
    try:
        p = subprocess.run([str(binary), "version"], capture_output=True, text=True, timeout=60)
    except OSError as e:
        return f"unknown ({e})"
    for line in p.stdout.splitlines():
        if line.strip().lower().startswith("version"):
            return line.split(":", 1)[-1].strip()
    return p.stdout.strip().splitlines()[0] if p.stdout.strip() else "unknown"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("stacks", nargs="*", help="stack names under --build (default: every stack there)")
    ap.add_argument("--build", type=Path, default=ROOT / "build")
    ap.add_argument("--kyverno", type=Path, default=DEFAULT_BIN, help="the kubectl-kyverno binary")
    args = ap.parse_args(argv)
    if not args.kyverno.exists():
        print(f"{args.kyverno}: not built (make -C conformance/kyverno bin/kubectl-kyverno)", file=sys.stderr)
        return 2
    version = cli_version(args.kyverno)
    total = 0
    dirs = stack_dirs(args.build, args.stacks)
    if not dirs:
        print(f"{args.build}: no stack output (run make plan-all first)", file=sys.stderr)
        return 2
    for d in dirs:
        findings, sc = check_stack(d, args.kyverno)
        report = write_report(d, findings, sc, version)
        for line in findings.lines:
            print(line)
        total += len(findings.lines)
        print(f"{d.name}: {len(findings.lines)} finding(s) ({report})")
    print(f"kyverno {version}: {len(dirs)} stack(s), {total} finding(s)")
    return 1 if total else 0


if __name__ == "__main__":
    sys.exit(main())
