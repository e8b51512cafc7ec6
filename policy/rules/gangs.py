"""Gang rules for the gang forms the workload readers do not see: pod groups joined by annotation, and Indexed
Jobs that need a gang scheduler.

- A Volcano PodGroup (scheduling.volcano.sh) is joined by pods annotated scheduling.k8s.io/group-name: <name>
  (Volcano's KubeGroupNameAnnotationKey); a KAI PodGroup (scheduling.run.ai) by pods annotated
  pod-group-name: <name> (KAI's PodGroupAnnotationForPod, pkg/common/constants). The pods of every template
  that joins one are counted the way their controller creates them (multinode.placement.gangs_of: one
  source for pod counts). minMember below that count lets a partial gang start and hold GPUs; above it, the
  gang never starts.
- KAI gives a plain batch/v1 Job a PodGroup with minMember 1 unless the Job carries
  kai.scheduler/batch-min-member (KAI docs/batch/README.md; KAI-Scheduler PR #1308).
- A multi-node Indexed Job (parallelism > 1 GPU pods) is refused unless it is gang-scheduled: Volcano with
  a group-name annotation, or KAI with a pod group annotation or batch-min-member.
- A gang object (a custom resource the placement readers count: LWS, PodCliqueSet, DGD, Volcano Job, MPIJob,
  PyTorchJob, the Trainer runtimes) is checked against its stored CustomResourceDefinition (schemas/, with its
  CEL rules; multinode.schema_check) and reported when it fails: the readers never raise, so a wrong-typed
  field reads as absent and the other rules would find nothing to say (issue 32: 30 of 150 such objects got no
  finding under CrossGuard). `plan` refuses such hand-written objects earlier; this is the same check where
  only the pack runs (`pulumi preview --policy-pack`).
"""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator

from multinode import placement

from .. import objects
from ..engine import MANDATORY, Context, Resource, Rule

VOLCANO_GROUP = "scheduling.k8s.io/group-name"
KAI_GROUP = "pod-group-name"
KAI_MIN_MEMBER = "kai.scheduler/batch-min-member"
POD_GROUP_KINDS = {("scheduling.volcano.sh", "PodGroup"): VOLCANO_GROUP, ("scheduling.run.ai", "PodGroup"): KAI_GROUP}


def _ns(props: dict) -> str:
    return str(objects.get(props, "metadata", "namespace") or "default")


def _members(resources: list[Resource]) -> dict[tuple[str, str, str], list[tuple[str, int]]]:
    """(annotation key, namespace, group name) -> [(object label, pods of it that join)]."""
    out: dict[tuple[str, str, str], list[tuple[str, int]]] = defaultdict(list)
    for r in resources:
        if not r.is_k8s or r.kind in POD_GROUP_KINDS:
            continue
        counts: dict[tuple[str, str], int] = defaultdict(int)
        for g in placement.gangs_of(r.props):
            for pod in g.pods:
                meta = pod.template.get("metadata")
                ann = meta.get("annotations") if isinstance(meta, dict) else None
                ann = ann if isinstance(ann, dict) else {}
                for key in (VOLCANO_GROUP, KAI_GROUP):
                    if isinstance(ann.get(key), str) and ann[key]:
                        counts[(key, ann[key])] += 1
        for (key, name), n in counts.items():
            out[(key, _ns(r.props), name)].append((r.label, n))
    return out


def check_pod_group_size(resources: list[Resource], ctx: Context) -> Iterator[tuple[Resource | None, str]]:
    members = _members(resources)
    for r in resources:
        key = POD_GROUP_KINDS.get(r.kind) if r.is_k8s else None
        if key is None:
            continue
        name = str(objects.get(r.props, "metadata", "name") or "")
        joined = members.get((key, _ns(r.props), name))
        min_member = objects.as_int(objects.get(r.props, "spec", "minMember"))
        if not joined or min_member is None:
            continue
        size = sum(n for _, n in joined)
        if min_member == size:
            continue
        who = " + ".join(f"{label} ({n})" for label, n in joined)
        if min_member < size:
            yield r, (f"{r.label}: minMember {min_member}, but the pods that join it by {key} ({who}) are {size}; "
                      f"a partial gang starts and holds its GPUs while the rest wait: set minMember {size}")
        else:
            yield r, (f"{r.label}: minMember {min_member}, but only {size} pods join it by {key} ({who}); the gang "
                      f"can never start: set minMember {size}")
    for r in resources:
        if not (r.is_k8s and r.kind == ("batch", "Job")):
            continue
        declared = objects.as_int(objects.get(r.props, "metadata", "annotations", KAI_MIN_MEMBER))
        pods = objects.as_int(objects.get(r.props, "spec", "parallelism"))
        if declared is not None and pods is not None and declared != pods and pods > 1:
            yield r, (f"{r.label}: {KAI_MIN_MEMBER} {declared}, but the Job runs {pods} pods at once (parallelism); "
                      f"set it to \"{pods}\"")


def _gang_scheduled(job: dict) -> bool:
    tmpl = objects.get(job, "spec", "template") or {}
    scheduler = objects.get(tmpl, "spec", "schedulerName") or "default-scheduler"
    ann = objects.get(tmpl, "metadata", "annotations")
    ann = ann if isinstance(ann, dict) else {}
    if scheduler == "volcano":
        return bool(ann.get(VOLCANO_GROUP))
    if scheduler == "kai-scheduler":
        return bool(ann.get(KAI_GROUP)) or objects.get(job, "metadata", "annotations", KAI_MIN_MEMBER) is not None
    return False


def check_indexed_job_gang(resources: list[Resource], ctx: Context) -> Iterator[tuple[Resource | None, str]]:
    for r in resources:
        if not (r.is_k8s and r.kind == ("batch", "Job")) or objects.get(r.props, "spec", "completionMode") != "Indexed":
            continue
        pods = objects.as_int(objects.get(r.props, "spec", "parallelism"))
        spec = objects.get(r.props, "spec", "template", "spec")
        gpus = int(placement.pod_requests(spec if isinstance(spec, dict) else {}).get(placement.GPU, 0))
        if pods is None or pods <= 1 or gpus <= 0 or _gang_scheduled(r.props):
            continue
        scheduler = objects.get(r.props, "spec", "template", "spec", "schedulerName") or "default-scheduler"
        yield r, (f"{r.label}: {pods} indexed pods x {gpus} GPUs are not gang-scheduled (schedulerName {scheduler}, "
                  f"no pod group); one rank can hold its GPUs while the others wait: set schedulerName volcano with a "
                  f"PodGroup (minMember {pods}) joined by the pod annotation {VOLCANO_GROUP}, or schedulerName "
                  f"kai-scheduler with the Job annotation {KAI_MIN_MEMBER}: \"{pods}\"")


GANG_SCHEMA = "gang-object-schema"
_CORE = ("", "apps", "batch")
# The components whose children are the project's own renderings (manifests/workloads, fleet/manifests.py): their
# gang objects are validated against the CRDs by tests/test_scale.py on every example and guide stack, and the
# values a stack puts in them are typed and checked by config.load first. Validating each again at every plan cost
# ~3 ms an object (jsonschema over the CRD's schema; the validator is compiled once per CRD version,
# schema_check._VALIDATORS): 1.2 s of a 400-workload plan. Hand-written objects (multinode:manifests, registered
# under Platform itself) and anything another program registers are still validated, at plan and under CrossGuard.
RENDERING_COMPONENTS = frozenset({"multinode:index:Workload", "multinode:index:Fleet"})


def rendered_by_project(urn: str) -> bool:
    """The resource's parent (read from its URN's type chain, `...::parent$...$type::name`) is one of the
    project's rendering components."""
    parts = urn.split("::")
    chain = parts[2].split("$") if len(parts) >= 4 else []
    return len(chain) >= 2 and chain[-2] in RENDERING_COMPONENTS


def check_gang_schema(res: Resource, ctx: Context) -> Iterator[str]:
    if not res.is_k8s:
        return
    group, kind = res.kind
    if group in _CORE or (group, kind) not in placement.READERS:
        return
    if rendered_by_project(res.urn):
        return
    from multinode import credentials, schema_check
    api_version = res.props.get("apiVersion")
    if not schema_check._default_index().has(api_version, kind):
        return
    if any(v == objects.UNKNOWN for v in _leaves(res.props)):
        return                  # values known only after `pulumi up` (preview): nothing to judge yet
    errors = schema_check.validate_object(res.props)
    if errors:
        shown = "; ".join(credentials.redacted_schema_error(res.props, e)[:200] for e in errors[:3])
        more = f" (+{len(errors) - 3} more)" if len(errors) > 3 else ""
        yield (f"{res.label}: not a valid {kind} ({api_version}) against its CustomResourceDefinition: {shown}{more}; "
               f"the API server refuses it, and the rules that read its gangs take the wrong-typed field for absent. "
               f"Fix the field named")


def _leaves(node: object, depth: int = 0) -> Iterator[object]:
    if depth > 64:
        return
    if isinstance(node, dict):
        for v in node.values():
            yield from _leaves(v, depth + 1)
    elif isinstance(node, list):
        for v in node:
            yield from _leaves(v, depth + 1)
    else:
        yield node


RULES = [
    Rule(GANG_SCHEMA,
         "A gang object (LeaderWorkerSet, PodCliqueSet, DynamoGraphDeployment, Volcano Job, MPIJob, PyTorchJob, "
         "Trainer runtimes) matches its CustomResourceDefinition: a wrong-typed field is reported, never read as "
         "absent.",
         MANDATORY, check_gang_schema),
    Rule("pod-group-min-member",
         "A Volcano or KAI PodGroup's minMember equals the pods that join it (scheduling.k8s.io/group-name / "
         "pod-group-name annotations, counted per controller), and kai.scheduler/batch-min-member equals a Job's "
         "parallelism.",
         MANDATORY, check_pod_group_size, scope="stack"),
    Rule("indexed-job-gang-scheduled",
         "A multi-node Indexed Job with GPUs is gang-scheduled (Volcano pod group or KAI).",
         # a team choice: the Kubernetes training guides run a plain Indexed Job on the default scheduler
         MANDATORY, check_indexed_job_gang, scope="stack", team_choice=True),
]
