"""NCCL bandwidth check (workload kind nccl-test): nccl-tests `all_reduce_perf` across the pool's nodes,
one rank per GPU, on a Volcano Job with the mpi/ssh/svc plugins, and a verdict a pipeline can read.

Shape: a `master` pod (node 0, runs mpirun and its own 8 local ranks) and `worker` pods running sshd;
every pod holds the same GPUs and carries the fabric label, so the Kyverno policies give all of them the
fabric (devices + the NCCL env pinned to the fabric transport); mpirun forwards that env (-x) to the
ranks it starts over ssh. Volcano's mpi plugin puts the worker host names in MPI_HOST
(volcano-sh/volcano pkg/controllers/job/plugins/distributed-framework/mpi).

Threshold (GB/s, the unit nccl-tests prints for busbw): minBusBandwidthGbps / 8 when set (Gbit/s, like
the catalog), else the catalog's per-node fabric bandwidth (Machine.bandwidth_gbps) / 8 x
busBandwidthEfficiency. A machine whose bandwidth the catalog does not confirm needs minBusBandwidthGbps
(config check). The measured value is the bus bandwidth at the largest message size (max of out-of-place
and in-place), where a fabric reaches its plateau; the small-message average would understate it.

Verdict, three ways (format in docs/workloads.md; `parse_verdict` reads it back):
  1. exit code of the master pod's container: 0 pass, 1 below the threshold, 2 the test did not run;
  2. one log line:  MULTINODE_NCCL_VERDICT {"version": 1, "pass": true, "busbw_GBps": ..., ...};
  3. ConfigMap `<name>-verdict` (created empty by Pulumi, patched by the check through a Role limited to
     that one ConfigMap): data.verdict.json = the same JSON, data.status = pass | fail | error.
"""
from __future__ import annotations

import json
import re
from typing import Any

from ... import fabric, images
from ...catalog import Machine
from ...config import StackConfig, Workload
from ...resolved import nccl_test_nodes
from . import common as c
from .mpijob import forward_env_snippet

VERDICT_TAG = "MULTINODE_NCCL_VERDICT"
VERDICT_VERSION = 1
EXIT_PASS, EXIT_BELOW, EXIT_ERROR = 0, 1, 2
DEFAULT_TEST_ARGS = ["-b", "8", "-e", "16G", "-f", "2", "-g", "1"]
MASTER, WORKER = "master", "worker"
SSH_PORT = 22


class ThresholdUnknown(ValueError):
    """No confirmed catalog bandwidth and no minBusBandwidthGbps: the check has nothing to compare to."""


def nodes(cfg: StackConfig, w: Workload) -> int:
    """`nodes` when set above 1, else every node of the pool."""
    return nccl_test_nodes(w.nodes, cfg.pool(w.node_pool).node_count)


def bandwidth_confirmed(m: Machine) -> bool:
    return m.bandwidth_gbps is not None and "bandwidth_gbps" not in m.unconfirmed


def threshold_gbytes(cfg: StackConfig, w: Workload) -> tuple[float, str]:
    """(threshold in GB/s, where it came from). Raises ThresholdUnknown."""
    if w.min_bus_bandwidth_gbps is not None:
        return round(w.min_bus_bandwidth_gbps / 8, 2), "minBusBandwidthGbps"
    return catalog_threshold(cfg.machine(cfg.pool(w.node_pool)), w.bus_bandwidth_efficiency)


def catalog_threshold(m: Machine, efficiency: float) -> tuple[float, str]:
    """(GB/s, source): the catalog's per-node fabric bandwidth of the machine / 8 x efficiency. The one floor the
    NCCL check and the preflight all-reduce (preflight.py) share. Raises ThresholdUnknown (not confirmed)."""
    gbps = m.bandwidth_gbps
    if gbps is None or not bandwidth_confirmed(m):
        raise ThresholdUnknown(m.name)
    return round(gbps / 8 * efficiency, 2), f"catalog {m.name} {gbps} Gbit/s x {efficiency}"


def verdict_name(w: Workload) -> str:
    return f"{w.name}-verdict"


# ------------------------------------------------------------------ the check's script
def programs(cfg: StackConfig, w: Workload) -> tuple[str, str]:
    """(mpirun, all_reduce_perf) as the image facts place them (multinode/images.py): nccl-tests images keep the
    binaries in their build folder, off PATH (AWS's /opt/nccl-tests/build, oci-hpc-oke's
    /workspace/nccl-tests/build). An image without facts gets the bare names, and `plan` advises on it."""
    image = c.image(cfg, w)
    return (images.program(image, "mpirun") or "mpirun", images.program(image, "all_reduce_perf") or "all_reduce_perf")


def master_script(cfg: StackConfig, w: Workload) -> str:
    """Bash run by the master pod. Pure text: tests run it with stub mpirun/ssh/curl."""
    n, gpn = nodes(cfg, w), cfg.gpus_per_node(w)
    threshold, source = threshold_gbytes(cfg, w)
    profile = fabric.profile_for(cfg, cfg.pool(w.node_pool))
    test_args = " ".join(w.extra_args or DEFAULT_TEST_ARGS)
    mpirun, perf = programs(cfg, w)
    static = json.dumps({"workload": w.name, "machine": cfg.machine(cfg.pool(w.node_pool)).name,
                         "fabric": profile.kind, "nccl_net": profile.nccl_net, "nodes": n,
                         "gpus_per_node": gpn, "ranks": n * gpn, "threshold_source": source})
    return f"""set -u
THRESHOLD={threshold}
NP={n * gpn}
SLOTS={gpn}
CM={verdict_name(w)}
STATIC='{static}'
LOG=/tmp/nccl-tests.log
HOSTS="$HOSTNAME:$SLOTS"
for h in $(echo "${{MPI_HOST:-}}" | tr ',' ' '); do HOSTS="$HOSTS,$h:$SLOTS"; done
# wait (at most 10 minutes) until every worker's sshd answers
for h in $(echo "${{MPI_HOST:-}}" | tr ',' ' '); do
  for i in $(seq 1 120); do ssh -o ConnectTimeout=5 -o StrictHostKeyChecking=no -p {SSH_PORT} "$h" true && break; sleep 5; done
done
{forward_env_snippet([]).strip()}
{mpirun} --allow-run-as-root -np "$NP" --host "$HOSTS" --bind-to none --map-by slot $MPI_FORWARD \\
  {perf} {test_args} 2>&1 | tee "$LOG"
RC=${{PIPESTATUS[0]}}
# data rows: size count type redop root time algbw busbw #wrong time algbw busbw #wrong
RESULT=$(awk '$1 ~ /^[0-9]+$/ && NF >= 12 {{ if ($1+0 >= size) {{ size = $1+0; o = $8+0; i = $12+0; bw = (o > i ? o : i) }} }}
              END {{ if (size > 0) printf "%.0f %.2f", size, bw }}' "$LOG")
if [ "$RC" -ne 0 ] || [ -z "$RESULT" ]; then
  STATUS=error; CODE={EXIT_ERROR}; PASS=false; BUSBW=null; SIZE=null
  REASON="nccl-tests did not produce a result (mpirun exit $RC)"
else
  SIZE=${{RESULT% *}}; BUSBW=${{RESULT#* }}
  if awk -v b="$BUSBW" -v t="$THRESHOLD" 'BEGIN {{ exit !(b >= t) }}'; then
    STATUS=pass; CODE={EXIT_PASS}; PASS=true; REASON="bus bandwidth at or above the threshold"
  else
    STATUS=fail; CODE={EXIT_BELOW}; PASS=false; REASON="bus bandwidth below the threshold"
  fi
fi
VERDICT="{{\\"version\\": {VERDICT_VERSION}, \\"pass\\": $PASS, \\"status\\": \\"$STATUS\\", \\"busbw_GBps\\": $BUSBW, \\"threshold_GBps\\": $THRESHOLD, \\"message_bytes\\": $SIZE, \\"exit_code\\": $CODE, \\"reason\\": \\"$REASON\\", \\"detail\\": $STATIC}}"
echo "{VERDICT_TAG} $VERDICT"
# record the verdict in the ConfigMap (needs curl or python3 in the image; the log line and exit code stand anyway)
SA=/var/run/secrets/kubernetes.io/serviceaccount
NS=$(cat "$SA/namespace" 2>/dev/null || echo {w.namespace})
ESC=$(printf '%s' "$VERDICT" | sed 's/\\\\/\\\\\\\\/g; s/"/\\\\"/g')
BODY="{{\\"data\\": {{\\"verdict.json\\": \\"$ESC\\", \\"status\\": \\"$STATUS\\"}}}}"
URL="https://kubernetes.default.svc/api/v1/namespaces/$NS/configmaps/$CM"
if command -v curl >/dev/null 2>&1; then
  curl -sS --fail -o /dev/null --cacert "$SA/ca.crt" -H "Authorization: Bearer $(cat "$SA/token" 2>/dev/null)" \\
    -H 'Content-Type: application/merge-patch+json' -X PATCH --data "$BODY" "$URL" || echo "warning: verdict ConfigMap $CM not written"
elif command -v python3 >/dev/null 2>&1; then
  BODY="$BODY" URL="$URL" SA="$SA" python3 -c '
import os, ssl, urllib.request
sa = os.environ["SA"]
req = urllib.request.Request(os.environ["URL"], data=os.environ["BODY"].encode(), method="PATCH", headers={{
    "Authorization": "Bearer " + open(sa + "/token").read().strip(),
    "Content-Type": "application/merge-patch+json"}})
urllib.request.urlopen(req, context=ssl.create_default_context(cafile=sa + "/ca.crt"))
' || echo "warning: verdict ConfigMap $CM not written"
else
  echo "warning: neither curl nor python3 in the image: verdict ConfigMap $CM not written"
fi
exit $CODE
"""  # noqa: E501 - the lines of the rendered script (kept whole: they are what the pod runs)


# ------------------------------------------------------------------ reading the verdict back
_LINE = re.compile(rf"^.*?{VERDICT_TAG} (\{{.*\}})\s*$", re.MULTILINE)


def parse_verdict(log_text: str) -> dict[str, Any]:
    """The verdict from the check's log (or from ConfigMap data.verdict.json, which is the bare JSON).

    Takes the last MULTINODE_NCCL_VERDICT line (a restarted pod may print several). Raises ValueError
    when there is none or it is not valid JSON with the required keys."""
    text = log_text.strip()
    if text.startswith("{"):
        candidates = [text]
    else:
        candidates = _LINE.findall(log_text)
    if not candidates:
        raise ValueError(f"no {VERDICT_TAG} line in the log")
    try:
        verdict = json.loads(candidates[-1])
    except json.JSONDecodeError as e:
        raise ValueError(f"{VERDICT_TAG} line is not valid JSON: {e}") from None
    if not isinstance(verdict, dict):
        raise ValueError(f"{VERDICT_TAG} JSON is not an object")
    missing = [k for k in ("version", "pass", "status", "busbw_GBps", "threshold_GBps", "exit_code")
               if k not in verdict]
    if missing:
        raise ValueError(f"{VERDICT_TAG} JSON lacks {', '.join(missing)}")
    return verdict


def busbw_from_output(nccl_output: str) -> tuple[int, float] | None:
    """(largest message size, its best busbw) from all_reduce_perf output: the rule the script applies."""
    best: tuple[int, float] | None = None
    for line in nccl_output.splitlines():
        f = line.split()
        if len(f) >= 12 and f[0].isdigit():
            size = int(f[0])
            if best is None or size >= best[0]:
                best = (size, max(_num(f[7]), _num(f[11])))
    return best


def _num(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        return 0.0


# ------------------------------------------------------------------ manifests
def build(cfg: StackConfig, w: Workload) -> c.WorkloadManifests:
    n, gpn = nodes(cfg, w), cfg.gpus_per_node(w)
    secrets = c.model_secrets(cfg, w, want_hf=False)
    sa = f"{w.name}-verdict-writer"
    cm = verdict_name(w)

    def template(role: str) -> dict[str, Any]:
        if role == MASTER:
            cmd = c.shell(master_script(cfg, w))
        else:
            cmd = c.shell(f"mkdir -p /var/run/sshd && exec /usr/sbin/sshd -D -p {SSH_PORT}")
        cont = c.container("nccl-tests", c.image(cfg, w), command=cmd, env=c.plain_env(w.env), gpus=gpn,
                           mounts=c.volume_mounts(cfg, with_data=False))
        spec = c.pod_spec(cfg, w, [cont], secrets=secrets, restart_policy="Never", with_data=False,
                          service_account=sa if role == MASTER else None)
        return {"metadata": {"labels": c.fabric_labels(w, role)}, "spec": spec}

    tasks: list[dict[str, Any]] = [{
        "name": MASTER, "replicas": 1, "minAvailable": 1, "template": template(MASTER),
        # the verdict stands: no retry of a failed check; done when the master finishes
        "policies": [{"event": "TaskCompleted", "action": "CompleteJob"},
                     {"events": ["PodFailed", "PodEvicted"], "action": "TerminateJob"}],
    }, {
        "name": WORKER, "replicas": n - 1, "minAvailable": n - 1, "template": template(WORKER),
        "policies": [{"events": ["PodFailed", "PodEvicted"], "action": "TerminateJob"}],
    }]
    job = {
        "apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": c.metadata(w),
        "spec": {"schedulerName": "volcano", "queue": c.volcano_queue(cfg, w), "minAvailable": n,
                 "maxRetry": 0,
                 "plugins": {"ssh": [], "svc": [],
                             "mpi": [f"--master={MASTER}", f"--worker={WORKER}", f"--port={SSH_PORT}"]},
                 "tasks": tasks},
    }
    verdict_cm = c.configmap(w, cm, {"status": "pending", "verdict.json": ""})
    account = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": c.metadata(w, sa)}
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": c.metadata(w, sa),
            "rules": [{"apiGroups": [""], "resources": ["configmaps"], "resourceNames": [cm],
                       "verbs": ["get", "patch"]}]}
    binding = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": c.metadata(w, sa),
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": sa},
               "subjects": [{"kind": "ServiceAccount", "name": sa, "namespace": w.namespace}]}
    return c.WorkloadManifests(w.name, w.kind, w.namespace, [verdict_cm, account, role, binding, job], secrets,
                               runtime_written=[cm])
