"""Offline `plan`: what a stack would create, with no Pulumi CLI, cloud account or network.

    python -m multinode plan <stack> [--out build] [--quiet]

Reads stacks/Pulumi.<stack>.yaml, validates it, runs the real __main__.py under Pulumi's mock
monitor, and writes to build/<stack>/:
  k8s/<Kind>-<namespace>-<name>.yaml   every Kubernetes object, one per file, named after the object alone
                               (<Kind>-<name>.yaml when cluster-scoped; a CustomResourceDefinition's spec is cut
                               to a digest: see _crd_digest), apiVersion/kind/metadata first
  k8s/apply-order.txt          the apply order of those files, dependencies first (multinode/k8sfiles.py)
  helm/<name>.yaml             every Helm release (chart, version, namespace, values)
  resources.json               every registration (type, name, parent, inputs, protect, retainOnDelete,
                               dependencies, provider); secrets appear as "[secret]"; a yaml/v2 ConfigGroup's
                               manifest text is cut to its size and sha256, its objects being the
                               registrations under it (recording.config_group_children)
  graph.mmd                    a Mermaid graph of components, resources and dependencies
  policy.json                  the policy pack's findings on the recorded resources
  advisories.json              every advisory (config checks + the pack's advisory-level findings) with its id
                               and the team's acknowledgement (multinode/advisories.py)
  placement.json               every gang placed on the pools' nodes (multinode.placement), per-pool use
  critical-path.json           the deploy's longest chain of creations, weighted by assumed creation times,
                               and the chain the really needed dependencies force (multinode.deploy_path)
Exit status: 0 clean, 1 a mandatory policy violation, 2 bad config, 3 an internal error: a bug (please report
it with the traceback printed), or an incomplete installation (a data file of the package missing: the message
names it, no traceback).
"""
from __future__ import annotations

import hashlib
import importlib.util
import json
import re
import shutil
import stat
import sys
from collections import Counter, OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from . import (
    admission,
    advisories,
    checks,
    clusterwide,
    deploy_path,
    gcpolicy,
    k8sfiles,
    placement,
    renames,
    stackfile,
    upgrades,
)
from . import config as mconfig
from .errors import ConfigError, Problem, printable
from .manifests import crds
from .recording import CONFIG_GROUP, Registration, run_program

EXIT_OK, EXIT_POLICY, EXIT_CONFIG, EXIT_INTERNAL = 0, 1, 2, 3
HELM_RELEASE = "kubernetes:helm.sh/v3:Release"


@dataclass
class PlanResult:
    stack: str
    config: mconfig.StackConfig | None
    registrations: list[Registration] = field(default_factory=list)
    k8s_objects: list[dict[str, Any]] = field(default_factory=list)     # in apply order
    violations: list[dict[str, Any]] = field(default_factory=list)
    advisories: list[str] = field(default_factory=list)                # as printed: "path: message"
    advisory_findings: list[Any] = field(default_factory=list)          # the same, as Problems (path, message)
    advisory_report: Any = None     # advisories.Report: config + pack advisories with ids, acknowledgements
    # issue 32: protected / retained resources this plan would replace or delete, against build/'s previous run
    replacements: list[str] = field(default_factory=list)
    out_dir: Path | None = None
    exit_code: int = EXIT_OK
    error: str = ""
    placement: Any = None                                               # multinode.placement.Result
    fleet: Any = None                                                   # a fleet stack's FleetConfig
    effective: Any = None      # manifests.effective_pod.TemplateMemo over k8s_objects' MutatingPolicies (plan_config)
    policy_config: Any = None  # policy.config.PolicyConfig: the team's policy config file, or None
    deploy_path: Any = None    # deploy_path.Report: the deploy's weighted critical paths (critical-path.json)


def is_k8s_object(reg: Registration) -> bool:
    return (reg.custom and reg.type.startswith("kubernetes:") and reg.type != HELM_RELEASE
            and "apiVersion" in reg.inputs and "kind" in reg.inputs)


# Kubernetes kinds in the order Helm installs them (helm/helm v3 pkg/release/util/kind_sorter.go, InstallOrder):
# namespaces, accounts, config and storage before what uses them, even without an explicit dependency. Kinds
# not listed (custom resources) come after them, as Helm puts unknown kinds last.
INSTALL_ORDER = ("PriorityClass", "Namespace", "NetworkPolicy", "ResourceQuota", "LimitRange", "PodSecurityPolicy",
                 "PodDisruptionBudget", "ServiceAccount", "Secret", "SecretList", "ConfigMap", "StorageClass",
                 "PersistentVolume", "PersistentVolumeClaim", "CustomResourceDefinition", "ClusterRole",
                 "ClusterRoleList", "ClusterRoleBinding", "ClusterRoleBindingList", "Role", "RoleList", "RoleBinding",
                 "RoleBindingList", "Service", "DaemonSet", "Pod", "ReplicationController", "ReplicaSet", "Deployment",
                 "HorizontalPodAutoscaler", "StatefulSet", "Job", "CronJob", "IngressClass", "Ingress", "APIService")
_KIND_RANK = {k: i for i, k in enumerate(INSTALL_ORDER)}


def stable_order(regs: list[Registration]) -> list[Registration]:
    """The registrations in an order that does not depend on timing. Under the mock monitor the SDK registers
    resources from several threads, so the order they arrive in differs from run to run (and with it the
    k8s/apply-order.txt, resources.json and graph.mmd). Sorted instead: components and cloud resources first, then
    Kubernetes objects by INSTALL_ORDER; then parents before children (depth in the parent tree) and the URN
    (type and name) breaks ties."""
    parent = {r.urn: r.parent for r in regs}

    def depth(urn: str) -> int:
        d, seen = 0, set()
        while parent.get(urn) in parent and urn not in seen:
            seen.add(urn)
            urn, d = parent[urn], d + 1
        return d

    def key(r: Registration) -> Any:
        k8s = is_k8s_object(r)
        kind = str(r.inputs.get("kind")) if k8s else ""
        return (k8s, _KIND_RANK.get(kind, len(INSTALL_ORDER)) if k8s else 0, depth(r.urn), r.urn)
    return sorted(regs, key=key)


def apply_order(regs: list[Registration]) -> list[Registration]:
    """Topological order over explicit dependencies; the given order breaks ties (plan passes stable_order).
    A dependency on a component counts as one on everything under it: the SDK already expands a dependency on a
    component of the program into its children, but a provider-constructed component (a yaml/v2 ConfigGroup)
    stays one URN, whose children the engine waits for (recording.config_group_children)."""
    index = {r.urn: i for i, r in enumerate(regs)}
    children: dict[str, list[str]] = {}
    for r in regs:
        if r.parent in index:
            children.setdefault(r.parent, []).append(r.urn)

    def under(urn: str) -> list[str]:
        out = [urn]
        for c in children.get(urn, ()):
            out += under(c)
        return out

    deps = {r.urn: [u for d in r.dependencies if d in index for u in under(d)] for r in regs}
    done: OrderedDict[str, None] = OrderedDict()
    visiting = set()

    def visit(urn: str) -> None:
        if urn in done or urn in visiting:
            return
        visiting.add(urn)
        for d in sorted(deps[urn], key=index.__getitem__):
            visit(d)
        visiting.discard(urn)
        done[urn] = None

    for r in regs:
        visit(r.urn)
    by_urn = {r.urn: r for r in regs}
    return [by_urn[u] for u in done]


# libyaml's C emitter when PyYAML was built with it (the wheels are): the same YAML data ~5x faster than the
# pure-Python SafeDumper (tests/test_plan.py compares the loaded data of both). Same safe representers.
_YAML_DUMPER: Any = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
_STR, _MAP, _SEQ = "tag:yaml.org,2002:str", "tag:yaml.org,2002:map", "tag:yaml.org,2002:seq"
_Scalar = yaml.ScalarNode


class _FastDumper(_YAML_DUMPER):
    """_YAML_DUMPER with the same output, less Python per node. The emitter is C, but PyYAML builds the node tree
    in Python (represent_data: alias bookkeeping, a lookup through the type's MRO per value) and the emitter asks
    the Python resolver, twice per scalar, whether a plain string would read back as another type (a regex per
    call): at 160 workloads ~60% of writing build/. Here str, dict and list (nearly every node of a Kubernetes
    object) take a direct path that builds the nodes SafeRepresenter builds (a dict or list seen twice is the
    same node, so the emitter writes the same anchor and alias), and the resolver's answer per string is kept
    for the process (resolve: its rules are constants of the class). Every other type goes through
    SafeRepresenter. tests/test_plan.py compares the text with the stock dumper's, object by object."""

    _resolved: dict[str, Any] = {}

    def represent_data(self, data: Any) -> Any:
        t = type(data)
        if t is str:
            return _Scalar(_STR, data, style=self.default_style)
        if (t is not dict and t is not list) or self.default_flow_style is None or (t is dict and self.sort_keys):
            return super().represent_data(data)
        key = id(data)
        if key in self.represented_objects:
            return self.represented_objects[key]
        self.object_keeper.append(data)
        value: list[Any] = []
        node: Any
        # a str key or value (most nodes) is made here, as the str branch above makes it, without a call per node
        style = self.default_style
        if t is dict:
            node = yaml.MappingNode(_MAP, value, flow_style=self.default_flow_style)
            self.represented_objects[key] = node
            for k, v in data.items():
                value.append((_Scalar(_STR, k, style=style) if type(k) is str else self.represent_data(k),
                              _Scalar(_STR, v, style=style) if type(v) is str else self.represent_data(v)))
        else:
            node = yaml.SequenceNode(_SEQ, value, flow_style=self.default_flow_style)
            self.represented_objects[key] = node
            for v in data:
                value.append(_Scalar(_STR, v, style=style) if type(v) is str else self.represent_data(v))
        return node

    def resolve(self, kind: Any, value: Any, implicit: Any) -> Any:
        # BaseResolver.resolve for a scalar, with no path resolvers (the safe dumpers have none): the implicit
        # resolvers' regexes only when implicit[0], else, or when none matches, the default scalar tag. So the
        # answer depends on the value alone when implicit[0], and is the default tag otherwise.
        # A mapping or sequence node (asked once each) gets its default tag, as BaseResolver answers it.
        if self.yaml_path_resolvers:
            return super().resolve(kind, value, implicit)
        if kind is not _Scalar:
            if kind is yaml.MappingNode:
                return self.DEFAULT_MAPPING_TAG
            if kind is yaml.SequenceNode:
                return self.DEFAULT_SEQUENCE_TAG
            return super().resolve(kind, value, implicit)
        if not implicit[0]:
            return self.DEFAULT_SCALAR_TAG
        tag = self._resolved.get(value)
        if tag is None:
            if len(self._resolved) > 100_000:      # a long-lived process (the tests) writes many plans
                self._resolved.clear()
            tag = self._resolved[value] = super().resolve(kind, value, implicit)
        return tag


def dump_yaml(data: Any, dumper: Any = None) -> str:
    """`data` as YAML, keys in their given order (yaml.safe_dump's output, from the C emitter if present)."""
    return yaml.dump(data, Dumper=dumper or _FastDumper, sort_keys=False)


HEAD_KEYS = ("apiVersion", "kind", "metadata")


def head_first(obj: Any) -> Any:
    """A Kubernetes object (or pod template) with apiVersion, kind and metadata as its first keys, the rest in the
    given order: the recorded inputs come back from the mock monitor with their keys sorted (protobuf Struct), so
    every object started with its data and ended with apiVersion; a reviewer reads what it is first."""
    if not isinstance(obj, dict) or not any(k in obj for k in HEAD_KEYS):
        return obj
    out = {k: obj[k] for k in HEAD_KEYS if k in obj}
    md = out.get("metadata")
    if isinstance(md, dict):            # and inside metadata, name and namespace first
        out["metadata"] = {**{k: md[k] for k in ("name", "namespace") if k in md}, **md}
    out.update((k, v) for k, v in obj.items() if k not in out)
    return out


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9.-]+", "-", text).strip("-")[:80]


def mermaid(regs: list[Registration]) -> str:
    ids = {r.urn: f"n{i}" for i, r in enumerate(regs)}
    lines = ["graph TD"]
    for r in regs:
        label = f"{r.type.split(':')[-1]}<br/>{r.name}"
        shape = f'[["{label}"]]' if not r.custom else f'["{label}"]'
        lines.append(f"  {ids[r.urn]}{shape}")
    for r in regs:
        if r.parent in ids:
            lines.append(f"  {ids[r.parent]} --> {ids[r.urn]}")
        for d in r.dependencies:
            if d in ids and d != r.parent:
                lines.append(f"  {ids[d]} -.-> {ids[r.urn]}")
    return "\n".join(lines) + "\n"


def run_policies(regs: list[Registration], cfg: mconfig.StackConfig | None,
                 simulated: placement.Simulated | None = None, policy_config: Any = None) -> list[dict[str, Any]]:
    """The policy pack's rules on the recorded resources (once the pack exists in policy/). `simulated`: the
    placement plan has computed, reused by the pack's stack-fits-node-pools rule. `policy_config`: the team's
    policy config (policy.config.PolicyConfig), its levels and settings."""
    if importlib.util.find_spec("policy") is None or importlib.util.find_spec("policy.pack") is None:
        return []
    from policy import pack
    records = [r.as_dict() for r in regs]
    out = [v if isinstance(v, dict) else v.as_dict()
           for v in pack.evaluate(records, cfg, placement=simulated, policy_config=policy_config)]
    for v in out:      # issue 48: a message repeats object names and settings: escaped, bounded, no credentials
        if isinstance(v.get("message"), str):
            v["message"] = printable(v["message"])
    return out


def load_policy_config(src: Path | None, explicit: Path | None) -> Any:
    """The team's policy config for a stack file: `explicit` (--policy-config), else policy-config.json next to the
    stack file, else None (policy/config.py; a bad file is a ConfigError naming its key)."""
    if importlib.util.find_spec("policy") is None or importlib.util.find_spec("policy.config") is None:
        return None
    from policy import config as pconfig
    return pconfig.for_stack(src, explicit)


def plan(stack: str, out_root: Path | None = Path("build"), path: Path | None = None,
         policy_config: Path | None = None) -> PlanResult:
    """`policy_config`: the policy config file (CrossGuard's format) to apply; default: policy-config.json next to
    the stack file, when there is one."""
    src = Path(path) if path else stackfile.stack_path(stack)
    try:
        pc = load_policy_config(src, policy_config)
        raw, secrets, wire = stackfile.read_stack_file(src)
        if "fleet" in raw:
            return plan_fleet(stack, raw, secrets, wire, out_root, src, pc)
        cfg = checks.load(raw, secrets, source=str(src))
    except ConfigError as e:
        return PlanResult(stack, None, exit_code=EXIT_CONFIG, error=str(e))
    return plan_config(stack, cfg, wire, secrets, out_root, stack_file=src, policy_config=pc)


def _run(wire: dict[str, str], secrets: Any, stack: str, stack_file: Path | None) -> Any:
    """The program under mocks, with what is alive before and after frozen in the command (gcpolicy.settle: the
    command's imports, then the run's modules and registrations)."""
    gcpolicy.settle()
    run = run_program(wire, [f"{mconfig.NAMESPACE}:{k}" for k in secrets], stack, stack_file=stack_file)
    gcpolicy.settle()
    return run


def plan_fleet(stack: str, raw: dict[str, Any], secrets: set[str], wire: dict[str, str], out_root: Path | None,
               src: Path, policy_config: Any = None) -> PlanResult:
    """A fleet stack (multinode/fleet): its own checks and fit, the same program run, outputs and pack."""
    from .fleet import plan as fleet_plan
    result = PlanResult(stack, None, fleet=fleet_plan.load(raw, secrets, source=str(src)), policy_config=policy_config)
    fleet_plan.prepare_mocks()
    run = _run(wire, secrets, stack, src)
    result.registrations = stable_order(run.registrations)
    ordered = apply_order(result.registrations)
    result.k8s_objects = [r.inputs for r in ordered if is_k8s_object(r)]
    result.deploy_path = deploy_path.report([r.as_dict() for r in result.registrations])
    result.violations = run_policies(result.registrations, None, policy_config=policy_config)
    if any(v.get("enforcementLevel") == "mandatory" for v in result.violations):
        result.exit_code = EXIT_POLICY
    if out_root is not None:
        result.out_dir = write_outputs(result, ordered, Path(out_root) / stack)
        fleet_plan.write_extra(result.out_dir, result.fleet)
    return result


def plan_config(stack: str, cfg: mconfig.StackConfig, wire: dict[str, str], secrets: Any,
                out_root: Path | None = None, stack_file: Path | None = None, policy_config: Any = None) -> PlanResult:
    """Run the program for an already validated config (`wire` = config as Pulumi passes it)."""
    found = checks.advisories(cfg)
    result = PlanResult(stack, cfg, advisories=[str(p) for p in found], advisory_findings=list(found),
                        policy_config=policy_config)
    run = _run(wire, secrets, stack, stack_file)
    registrations = stable_order(run.registrations)
    ordered = apply_order(registrations)
    result.registrations = registrations
    result.k8s_objects = [r.inputs for r in ordered if is_k8s_object(r)]
    result.deploy_path = deploy_path.report([r.as_dict() for r in registrations], cfg)
    result.effective = _template_memo(result.k8s_objects)    # admission and the effective-pod writer share it
    # findings: rule stack-fits-node-pools, which reuses this simulation instead of running its own
    result.placement = placement.for_stack(cfg, result.k8s_objects)
    simulated = placement.Simulated(result.k8s_objects, result.placement)
    result.violations = (run_policies(registrations, cfg, simulated, policy_config)
                         + admission.findings(result.k8s_objects, result.effective))
    if any(v.get("enforcementLevel") == "mandatory" for v in result.violations):
        result.exit_code = EXIT_POLICY
    if out_root is not None:
        previous = renames.previous_records(Path(out_root) / stack / "resources.json")
        if previous is not None:
            result.replacements = renames.warnings(previous, [r.as_dict() for r in registrations])
        result.out_dir = write_outputs(result, ordered, Path(out_root) / stack)
    return result


CRD_KIND = "CustomResourceDefinition"


def _crd_digest(obj: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """A CustomResourceDefinition as written to build/: the object with `spec` cut to group, names, scope
    and each version's name/served/storage, plus the sha256 of the full spec (sorted-key JSON). The CRDs
    are the upstream files under schemas/ (manifests/crds.py, named by the multinode.dev/crd-source
    annotation); writing their multi-MB schemas for every stack made `plan --all` write 25 MB instead of
    1.4 MB and spend most of its time in the YAML emitter, while a version bump still shows up here as a
    changed source annotation and digest."""
    raw = obj.get("spec")
    spec: dict[str, Any] = raw if isinstance(raw, dict) else {}
    digest = hashlib.sha256(json.dumps(spec, sort_keys=True, default=str).encode()).hexdigest()
    versions = [{k: v.get(k) for k in ("name", "served", "storage")} for v in spec.get("versions") or []
                if isinstance(v, dict)]
    short = {k: spec[k] for k in ("group", "names", "scope") if k in spec}
    return {**obj, "spec": {**short, "versions": versions}}, digest


def _written(obj: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """(object, header comment) as build/ writes it: CRDs digested (see _crd_digest), the rest as is."""
    if obj.get("kind") != CRD_KIND or str(obj.get("apiVersion", "")).split("/")[0] != "apiextensions.k8s.io":
        return obj, ""
    short, digest = _crd_digest(obj)
    return short, (f"# spec cut to group/names/scope/versions; the full spec (sha256 {digest}) is the upstream "
                   f"file named by the multinode.dev/crd-source annotation (multinode/manifests/crds.py)\n")


class OutputFolder:
    """build/<stack>/ brought up to date in place: a file whose text is unchanged is left alone (its mtime too),
    the others are written, and what an earlier plan wrote that this one does not is removed. Why not delete the
    folder and write it again: measured on the development machine (ext4), creating a file cost ~0.85 ms CPU
    against ~0.04 ms to read and compare it, and removing a folder of 2,000 files took up to 4 s, so rewriting
    build/ from scratch was up to a third of a 640-workload plan. The folder ends the same either way."""

    def __init__(self, root: Path) -> None:
        self.root = root
        if root.exists() and not root.is_dir():
            root.unlink()
        self.files: set[Path] = set()
        self.dirs: set[Path] = set()

    def folder(self, path: Path) -> Path:
        """`path` made a folder (kept even when empty)."""
        if path not in self.dirs:
            if path.exists() and not path.is_dir():
                path.unlink()
            path.mkdir(parents=True, exist_ok=True)
            self.dirs.update([path, *path.parents])
        return path

    def write(self, path: Path, text: str) -> Path:
        self.files.add(path)
        self.folder(path.parent)
        data = text.encode("utf-8")
        try:
            # compared only when it is a regular file of the same size: a FIFO or a device left in build/ is
            # replaced, never read (issue 48: opening a FIFO for reading blocks until a writer comes)
            st = path.lstat()
            if stat.S_ISDIR(st.st_mode):
                shutil.rmtree(path)
            elif not stat.S_ISREG(st.st_mode):
                path.unlink()
            elif st.st_size == len(data) and path.read_bytes() == data:
                return path
        except OSError:
            pass
        path.write_bytes(data)
        return path

    def prune(self) -> None:
        """Remove what this plan did not write, deepest first."""
        for p in sorted(self.root.rglob("*"), key=lambda q: len(q.parts), reverse=True):
            if p.is_dir() and not p.is_symlink():
                if p not in self.dirs and not any(p.iterdir()):
                    p.rmdir()
            elif p not in self.files:
                p.unlink()


_ENCODE_STR = json.encoder.encode_basestring_ascii     # C: what json.dumps uses for every str


class _Unusual(Exception):
    """A value json_text leaves to json.dumps."""


def json_text(value: Any) -> str:
    """json.dumps(value, indent=1), the same text, about twice as fast. With an indent, json.dumps takes the
    pure-Python encoder (nested generators, a check per value); resources.json holds every registration's
    inputs, ~1 ms of writing per workload. Here one recursive walk appends to a list and strings go through the
    C escaper json.dumps uses. Anything but str keys and str/int/float/bool/None/dict/list values (a tuple,
    a float key...) goes to json.dumps whole. tests/test_plan.py compares both on every plan's files."""
    parts: list[str] = []
    append = parts.append

    def walk(v: Any, indent: str) -> None:
        if type(v) is str:
            append(_ENCODE_STR(v))
        elif type(v) is dict:
            if not v:
                append("{}")
                return
            inner = indent + " "
            sep = "{\n" + inner
            for k, item in v.items():
                if type(k) is not str:
                    raise _Unusual
                append(sep)
                append(_ENCODE_STR(k))
                append(": ")
                walk(item, inner)
                sep = ",\n" + inner
            append("\n" + indent + "}")
        elif type(v) is list:
            if not v:
                append("[]")
                return
            inner = indent + " "
            sep = "[\n" + inner
            for item in v:
                append(sep)
                walk(item, inner)
                sep = ",\n" + inner
            append("\n" + indent + "]")
        elif v is None or type(v) in (bool, int, float):
            append(json.dumps(v))
        else:
            raise _Unusual

    try:
        walk(value, "")
    except _Unusual:
        return json.dumps(value, indent=1)
    return "".join(parts)


def advisory_report(result: PlanResult) -> advisories.Report:
    """The plan's advisories as one list with ids and the team's acknowledgements (computed once, after the
    effective pods are written: a template that cannot be evaluated is one of them)."""
    if result.advisory_report is None:
        acks = getattr(result.policy_config, "acknowledged", None) or {}
        result.advisory_report = advisories.collect(result.advisory_findings, result.violations, acks)
    report: advisories.Report = result.advisory_report
    return report


def write_outputs(result: PlanResult, ordered: list[Registration], out: Path) -> Path:
    files = OutputFolder(out)
    files.folder(out / "k8s")
    written = [(_written(r.inputs), r) for r in ordered if is_k8s_object(r)]
    # file names from each object alone, the apply order in k8s/apply-order.txt (multinode/k8sfiles.py)
    names = k8sfiles.file_names((obj, r.name, r.urn) for (obj, _), r in written)
    for ((obj, header), _), fname in zip(written, names, strict=True):
        files.write(out / "k8s" / fname, header + dump_yaml(head_first(obj)))
    files.write(out / "k8s" / k8sfiles.INDEX, k8sfiles.index_text(names))
    for r in ordered:
        if r.type == HELM_RELEASE:
            files.write(out / "helm" / f"{_slug(r.name)}.yaml", dump_yaml(r.inputs))
    write_effective_pods(result, out / "effective", files)
    records = []
    for r in result.registrations:
        record = r.as_dict()
        if is_k8s_object(r):
            record["inputs"] = _written(r.inputs)[0]
        elif r.type == CONFIG_GROUP and isinstance(r.inputs.get("yaml"), str):
            # the manifest text, ~1.4 MB for Grove's CRDs: its objects are the records parented to the group
            data = r.inputs["yaml"].encode()
            record["inputs"] = {**r.inputs, "yaml": f"[{len(data)} bytes, sha256 {hashlib.sha256(data).hexdigest()}: "
                                                    f"registered as the resources whose parent is this group]"}
        records.append(record)
    files.write(out / "resources.json", json_text(records))
    files.write(out / "graph.mmd", mermaid(result.registrations))
    files.write(out / "policy.json", json_text(result.violations))
    # issue 46: every advisory (config checks and the pack's advisory-level findings) with its id and whether the
    # team acknowledged it (multinode/advisories.py)
    files.write(out / "advisories.json", json_text(advisory_report(result).as_json()))
    if result.placement is not None:
        files.write(out / "placement.json", json_text(placement.as_json(result.placement)))
    if result.config is not None:
        files.write(out / "upgrades.json", json_text(upgrades.as_json(result.config)))
    if result.deploy_path is not None:
        files.write(out / "critical-path.json", json_text(result.deploy_path.as_dict(records)))
    files.prune()
    return out


def _pod_templates(node: Any, path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    """Every pod template ({metadata, spec with containers}) inside a k8s object, with its path (a
    CustomResourceDefinition, a schema, holds none: not walked)."""
    if not path and crds.is_crd(node):
        return
    if isinstance(node, dict):
        spec = node.get("spec")
        if "metadata" in node and isinstance(spec, dict) and isinstance(spec.get("containers"), list):
            yield path, node
            return
        for k, v in node.items():
            yield from _pod_templates(v, f"{path}.{k}" if path else k)
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _pod_templates(v, f"{path}[{i}]")


def _map(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _mutating_policies(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    from .manifests import kyverno
    return [o for o in objects if kyverno.is_cel_policy(o, kyverno.MUTATING_KIND)]


def _template_memo(objects: list[dict[str, Any]]) -> Any:
    """Each pod template after the objects' MutatingPolicies, evaluated once per plan (effective_pod.TemplateMemo)."""
    from .manifests.effective_pod import TemplateMemo
    return TemplateMemo(_mutating_policies(objects))


def fabric_pod_templates(objects: list[dict[str, Any]]) -> Iterator[tuple[str, dict[str, Any], str, dict[str, Any]]]:
    """Each fabric-labelled (or NeMo-annotated) pod template of the objects, in order: (file stem of its
    effective/<stem>.yaml, the object holding it, the template's path in the object, the template). Shared by
    write_effective_pods and the Kyverno conformance check (conformance/kyverno), which writes the same pods as
    the engine's input under the same names."""
    from . import pools
    for obj in objects:
        for path, tmpl in _pod_templates(obj):
            meta = _map(tmpl.get("metadata"))
            if not pools.asks_for_fabric(meta.get("labels"), meta.get("annotations")):
                continue
            name = (obj.get("metadata") or {}).get("name", obj.get("kind", "object"))
            segs = [x for x in re.split(r"[.\[\]]+", path) if x and x not in ("spec", "template")]
            role = (segs[-1].replace("Template", "") if segs and not segs[-1].isdigit()
                    else "-".join(segs[-2:])) or "pod"
            if len(segs) >= 3 and segs[-1] == "podTemplate" and segs[-2].isdigit():
                # DynamoGraphDeployment spec.components[i].podTemplate: name the file after the component
                items = (obj.get("spec") or {}).get(segs[-3]) or []
                i = int(segs[-2])
                if i < len(items) and isinstance(items[i], dict) and items[i].get("name"):
                    role = str(items[i]["name"])
            yield f"{_slug(str(name))}-{role}", obj, path, tmpl


def write_effective_pods(result: PlanResult, out: Path, files: OutputFolder | None = None) -> list[Path]:
    """build/<stack>/effective/<workload>-<role>.yaml: each fabric-labelled (or NeMo-annotated) pod template after
    the Kyverno MutatingPolicies the stack renders, computed by evaluating their CEL (manifests.effective_pod)."""
    cfg = result.config
    if cfg is None:
        return []
    memo = result.effective
    if memo is None or memo.policies != _mutating_policies(result.k8s_objects):   # a PlanResult made elsewhere
        memo = _template_memo(result.k8s_objects)
    written: list[Path] = []
    for stem, obj, path, tmpl in fabric_pod_templates(result.k8s_objects):
        try:
            effective = memo.apply(tmpl)
        except Exception as e:  # noqa: BLE001 - a hand-written template of the wrong shape (see below)
            # The API server refuses a malformed pod before Kyverno sees it (and a CEL error under failurePolicy
            # Fail refuses it too), so there is no effective pod to show: say so (the policy pack reports the
            # object itself) instead of failing the plan.
            name = (obj.get("metadata") or {}).get("name", obj.get("kind", "object"))
            bad = Problem(f"{obj.get('kind')} {name} {path}", f"no effective pod written: the pod "
                                                                       f"template is not well-formed "
                                                                       f"({type(e).__name__}); fix its shape")
            result.advisories.append(str(bad))
            result.advisory_findings.append(bad)
            continue
        target = out / f"{stem}.yaml"
        if files is not None:
            files.write(target, dump_yaml(head_first(effective)))
        else:
            out.mkdir(parents=True, exist_ok=True)
            target.write_text(dump_yaml(head_first(effective)), encoding="utf-8")
        written.append(target)
    return written


def summary(result: PlanResult) -> str:
    if result.fleet is not None:
        from .fleet import plan as fleet_plan
        lines = fleet_plan.summary(result).split("\n")
        if result.deploy_path is not None:     # before the closing "wrote ..." line, as for a cluster stack
            lines.insert(len(lines) - 1 if lines[-1].startswith("wrote ") else len(lines), result.deploy_path.line())
        return "\n".join(printable(line) for line in lines)
    cfg = result.config
    assert cfg is not None
    lines = [f"stack {result.stack}: cloud {cfg.cloud}, {len(result.registrations)} resources"]
    comps = {r.urn: r for r in result.registrations if not r.custom}
    per: Counter[str] = Counter()
    for r in result.registrations:
        parent = comps.get(r.parent)
        per[f"{parent.type.split(':')[-1]} {parent.name}" if parent else "(stack)"] += 1
    lines.append("resources per component:")
    lines += [f"  {k}: {v}" for k, v in sorted(per.items())]
    total_gpus = 0
    for pool in cfg.node_pools:
        m = cfg.machine(pool)
        total_gpus += pool.node_count * m.gpus
        lines.append(f"pool {pool.name}: {pool.node_count} x {m.name} ({m.gpus} x {m.gpu_model}), fabric {m.fabric}")
    lines.append(f"nodes {sum(p.node_count for p in cfg.node_pools)}, GPUs {total_gpus}, fabric {cfg.fabric_kind()}")
    for w in cfg.workloads:
        rw = cfg.resolved(w)          # every default applied once (multinode/resolved.py)
        if rw.roles:
            roles = [f"{name} {g.nodes} nodes x {g.gpus_per_node} GPUs, tp {g.tensor_parallel} x pp "
                     f"{g.pipeline_parallel}" for name, g in rw.roles.items()]
            lines.append(f"workload {w.name}: {w.kind} {w.engine or ''} on {w.node_pool}, " + "; ".join(roles))
            continue
        lines.append(f"workload {w.name}: {w.kind} {w.engine or ''} on {w.node_pool}, {w.nodes} nodes x "
                     f"{rw.gpus_per_node} GPUs, {parallelism(w, rw)}".replace("  ", " "))
    if result.placement is not None:
        lines += placement.table(result.placement)
    lines += clusterwide.lines(cfg, result.registrations)
    lines += upgrades.report(cfg)
    from .manifests.workloads import preflight
    lines += preflight.report(cfg)
    report = advisory_report(result)
    lines += report.lines()
    if result.policy_config is not None:
        from policy.rules import RULES
        changed = result.policy_config.changed(list(RULES))
        lines.append(f"policy config {result.policy_config.source}: "
                     + ("; ".join(changed) if changed else "no level changed"))
    for warning in result.replacements:
        lines.append(f"WARNING (compared with the previous plan in {result.out_dir}): {warning}")
    mandatory = [v for v in result.violations if v.get("enforcementLevel") == "mandatory"]
    # the pack's advisory-level findings are in the advisory list above (with their ids); counted once, here
    lines.append(f"policy: {len(mandatory)} mandatory violation(s); {report.count_line()} "
                 f"(in {result.out_dir / 'advisories.json' if result.out_dir else 'advisories.json'})")
    for v in mandatory:
        # the message names its object itself (policy.pack.run_rules guarantees it): print it once
        lines.append(f"  [{v.get('enforcementLevel')}] {v.get('policy')}: {v.get('message')}")
    if result.deploy_path is not None:
        lines.append(result.deploy_path.line())
    if result.out_dir:
        lines.append(f"wrote {len(result.k8s_objects)} Kubernetes objects and resources.json to {result.out_dir}")
    # issue 48: names and values from the stack reach these lines: each escaped, bounded and credential-free
    return "\n".join(printable(line) for line in lines)


# Engines whose parallel sizes are the engine's own flags (--tensor-parallel-size, --pipeline-parallel-size); the
# others start one process per GPU and their model parallelism, if any, lives in the user's code or config
# (torchrun: --nnodes x --nproc-per-node, pytorch/pytorch torch/distributed/run.py; DeepSpeed the same launcher;
# mpirun: -np ranks).
TP_PP_ENGINES = ("vllm", "sglang", "nim", "trtllm")


def parallelism(w: Any, rw: Any) -> str:
    """The parallelism that applies to the workload's engine, as the summary shows it (issue 46: `tp 32` meant
    nothing for torchrun)."""
    if w.engine in TP_PP_ENGINES:
        return f"tp {rw.tensor_parallel} x pp {w.pipeline_parallel}"
    ranks = w.nodes * rw.gpus_per_node
    if w.kind == "nccl-test" or w.engine == "mpirun":
        return f"{ranks} MPI ranks ({w.nodes} nodes x {rw.gpus_per_node} ranks per node)"
    launcher = w.engine or "launcher"
    return f"{launcher} world size {ranks} ({w.nodes} nodes x {rw.gpus_per_node} procs per node)"


def stack_name_from_file(path: Path) -> str | None:
    """`Pulumi.<stack>.yaml` (or .yml) -> `<stack>`, the name the Pulumi CLI gives that file's stack."""
    m = re.fullmatch(r"Pulumi\.(.+)\.ya?ml", path.name)
    return m.group(1) if m else None


def package_roots() -> list[Path]:
    """The folders the package reads its own files from: multinode/ (its data, templates, schemas), components/ and
    policy/ beside it (site-packages when installed, the checkout otherwise), and schemas/ wherever schemafiles
    takes it from."""
    from .schemafiles import SCHEMA_DIR
    here = Path(__file__).resolve().parent
    return [here, here.parent / "components", here.parent / "policy", SCHEMA_DIR.resolve()]


def missing_package_file(exc: BaseException) -> str | None:
    """The path of a file of the package itself that `exc` (or an exception it was raised from) did not find, or
    None: an installation without its data (a wheel built without a file) is not a bug of the stack or of the
    code, and gets a message naming the file instead of a traceback."""
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        name = getattr(cur, "filename", None)
        if isinstance(cur, FileNotFoundError) and name:
            path = Path(str(name)).resolve()
            if any(path.is_relative_to(root) for root in package_roots()):
                return str(path)
        cur = cur.__cause__ or cur.__context__
    return None


def main(argv: list[str], prog: str = "python -m multinode plan") -> int:
    import argparse

    ap = argparse.ArgumentParser(prog=prog, description=(__doc__ or "").splitlines()[0])
    ap.add_argument("stack", nargs="?", help="stack name (stacks/Pulumi.<stack>.yaml); default aws-dev")
    ap.add_argument("--stack", dest="stack_option", metavar="NAME",
                    help="the stack name (same as the positional name); with --file, names the plan and "
                         "its output folder when the file is not called Pulumi.<stack>.yaml")
    ap.add_argument("--file", type=Path, help="plan this stack file instead of stacks/Pulumi.<stack>.yaml; "
                                              "the stack name comes from its file name (Pulumi.<stack>.yaml)")
    ap.add_argument("--out", type=Path, default=Path("build"), help="output folder (default build/)")
    ap.add_argument("--all", action="store_true", help="plan every stack in stacks/")
    ap.add_argument("--policy-config", type=Path, metavar="FILE",
                    help="the team's policy config (CrossGuard's --policy-pack-config JSON: per policy an "
                         "enforcementLevel and its settings); default: policy-config.json next to the stack file")
    args = ap.parse_args(argv)
    if args.stack and args.stack_option and args.stack != args.stack_option:
        ap.error(f"two stack names given ({args.stack!r} and --stack {args.stack_option!r}); give one")
    name = args.stack or args.stack_option
    if args.all:
        if args.file or name:
            ap.error("--all plans every stack in stacks/; it takes no stack name and no --file")
        stacks = stackfile.list_stacks()
    elif args.file:
        name = name or stack_name_from_file(args.file)
        if not name:
            ap.error(f"--file {args.file}: the stack name cannot be taken from a file not called "
                     f"Pulumi.<stack>.yaml; add --stack NAME")
        stacks = [name]
    else:
        stacks = [name or "aws-dev"]
    worst = EXIT_OK
    for stack in stacks:
        try:
            result = plan(stack, args.out, args.file, args.policy_config)
        except Exception as e:  # a bug, not bad input: keep it distinguishable from a policy violation
            missing = missing_package_file(e)
            if missing is not None:
                print(f"plan {stack}: the installed multinode package is incomplete (exit {EXIT_INTERNAL}): it has "
                      f"no {missing}, a file it reads at run time. Reinstall the package (e.g. `uv pip install "
                      f"--reinstall <the wheel or git URL>`); in a checkout, restore the file (`git checkout -- "
                      f"<its path>`)", file=sys.stderr)
                worst = max(worst, EXIT_INTERNAL)
                continue
            import traceback
            traceback.print_exc()
            print(f"plan {stack}: internal error (exit {EXIT_INTERNAL}); this is a bug in multinode, not in "
                  f"the stack file", file=sys.stderr)
            worst = max(worst, EXIT_INTERNAL)
            continue
        if result.exit_code == EXIT_CONFIG:
            print(result.error, file=sys.stderr)
        else:
            print(summary(result))
        worst = max(worst, result.exit_code)
    return worst
