"""The fleet's objects as plain dicts: the Karmada chart's values, member registration (push mode), the
Volcano Global install, queues and priority classes, and each workload with its PropagationPolicy and
OverridePolicy. Every custom resource validates against the upstream CRDs in schemas/ (Cluster, which has
no CRD, against Karmada's OpenAPI document); tests/test_fleet.py checks them. Pure: no Pulumi. Values that
only exist once resources do (a member's token, its API endpoint) are parameters: the component passes
Pulumi Outputs, the tests plain strings.

Sources (../shared/schemas/SOURCES.md for the versions):
  karmada-io/karmada v1.18.2   charts/karmada (values.yaml, templates/karmada-kubeconfig.yaml: the chart
                               writes the Karmada API kubeconfig to Secret <release>-kubeconfig, key kubeconfig),
                               pkg/karmadactl/join (push registration: a ServiceAccount token of the member,
                               stored on Karmada as Secret data `token` and `caBundle`, and the Cluster object)
  volcano-sh/volcano-global v0.3.0   docs/deploy/*.yaml and docs/deploy/README.md (the controller and
                               webhook managers on the host, their webhooks, the Volcano CRDs and the
                               all-queue ClusterPropagationPolicy on the Karmada API)
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlparse

import yaml

from .. import pools, schemafiles
from ..manifests.addons import ReleaseSpec
from ..manifests.workloads.common import SecretRef
from .config import FleetConfig, FleetWorkload
from .fit import WorkloadFit

SCHEMA_DIR = schemafiles.SCHEMA_DIR

KARMADA_RELEASE = "karmada"
# The chart repository karmada-io/karmada publishes (charts/index.yaml on master: chart `karmada`, versions
# named like the release tag, e.g. v1.17.2 -> karmada-chart-v1.17.2.tgz on the GitHub release).
KARMADA_CHART_REPO = "https://raw.githubusercontent.com/karmada-io/karmada/master/charts"
# Upstream values.yaml certs.auto.hosts (v1.18.2); Helm replaces a list, so ours repeats them and adds the
# external API endpoint's host (the apiserver's certificate must name what `pulumi up` connects to).
KARMADA_CERT_HOSTS = ["kubernetes.default.svc", "*.etcd.{{ .Release.Namespace }}.svc.{{ .Values.clusterDomain }}",
                      "*.{{ .Release.Namespace }}.svc.{{ .Values.clusterDomain }}", "*.{{ .Release.Namespace }}.svc",
                      "localhost", "127.0.0.1"]

CLUSTER_SECRET_NAMESPACE = "karmada-cluster"          # karmadactl join's namespace, on Karmada and the member
MEMBER_SERVICE_ACCOUNT = "karmada-controller"
VOLCANO_GLOBAL_NAMESPACE = "volcano-global"
WEBHOOK_SERVICE = "volcano-global-webhook"
KARMADA_CONFIG_SECRET = "karmada-webhook-config"      # upstream's name; mounted as /etc/kubeconfig/karmada.config
FLEET_LABEL = "multinode.dev/fleet"
STACK_LABEL = "multinode.dev/stack"
FABRIC_LABEL = pools.FABRIC_NODE_LABEL               # on a Cluster: the fabric of its GPU pools (the policy reads it)
GANG_SPREAD = {"spreadByField": "cluster", "maxGroups": 1, "minGroups": 1}


def _meta(name: str, namespace: str | None = None, labels: dict[str, str] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name}
    if namespace:
        out["namespace"] = namespace
    if labels:
        out["labels"] = dict(labels)
    return out


def _deep_merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for k, v in over.items():
        out[k] = _deep_merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else copy.deepcopy(v)
    return out


# ------------------------------------------------------------------ Karmada control plane (host cluster)
def karmada_release(cfg: FleetConfig) -> ReleaseSpec:
    k = cfg.fleet.karmada
    values: dict[str, Any] = {"installMode": "host", "systemNamespace": k.namespace,
                              "apiServer": {"serviceType": "LoadBalancer"}}
    if k.api_endpoint:
        host = urlparse(k.api_endpoint).hostname or ""
        values["certs"] = {"mode": "auto", "auto": {"hosts": KARMADA_CERT_HOSTS + [host]}}
    return ReleaseSpec("karmada", "karmada", "karmada", KARMADA_CHART_REPO, k.version, k.namespace,
                       _deep_merge(values, k.values), ("policy.karmada.io", "work.karmada.io", "config.karmada.io"))


def karmada_kubeconfig_secret(cfg: FleetConfig) -> tuple[str, str, str]:
    """(namespace, name, key) of the Secret the chart writes the Karmada API kubeconfig to."""
    return cfg.fleet.karmada.namespace, f"{KARMADA_RELEASE}-kubeconfig", "kubeconfig"


def external_kubeconfig(kubeconfig: str, api_endpoint: str | None) -> str:
    """The chart's kubeconfig with its in-cluster server replaced by the external endpoint."""
    if not api_endpoint:
        return kubeconfig
    doc = yaml.safe_load(kubeconfig) or {}
    for c in doc.get("clusters") or []:
        if isinstance(c, dict) and isinstance(c.get("cluster"), dict):
            c["cluster"]["server"] = api_endpoint
    return str(yaml.safe_dump(doc, sort_keys=False))


# ------------------------------------------------------------------ member registration (push mode)
def member_access_objects(member: str) -> list[dict[str, Any]]:
    """In the member: what `karmadactl join` creates there (a ServiceAccount whose token Karmada uses, bound
    to a ClusterRole over every resource: Karmada's controllers apply any propagated kind)."""
    role = f"karmada-controller-manager:{member}"
    labels = {FLEET_LABEL: "true"}
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": _meta(CLUSTER_SECRET_NAMESPACE, labels=labels)},
        {"apiVersion": "v1", "kind": "ServiceAccount",
         "metadata": _meta(MEMBER_SERVICE_ACCOUNT, CLUSTER_SECRET_NAMESPACE, labels)},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": _meta(role, labels=labels),
         "rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]},
                   {"nonResourceURLs": ["*"], "verbs": ["get"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
         "metadata": _meta(role, labels=labels),
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
         "subjects": [{"kind": "ServiceAccount", "name": MEMBER_SERVICE_ACCOUNT,
                       "namespace": CLUSTER_SECRET_NAMESPACE}]},
    ]


def member_token_secret() -> dict[str, Any]:
    """In the member: a long-lived token of that ServiceAccount (Kubernetes fills data.token and data.ca.crt)."""
    return {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/service-account-token",
            "metadata": {**_meta(f"{MEMBER_SERVICE_ACCOUNT}-token", CLUSTER_SECRET_NAMESPACE, {FLEET_LABEL: "true"}),
                         "annotations": {"kubernetes.io/service-account.name": MEMBER_SERVICE_ACCOUNT}}}


def cluster_secret(member: str, token_b64: Any, ca_b64: Any) -> dict[str, Any]:
    """On Karmada: the credentials a push-mode Cluster names in spec.secretRef (keys token and caBundle)."""
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": _meta(member, CLUSTER_SECRET_NAMESPACE, {FLEET_LABEL: "true"}),
            "data": {"token": token_b64, "caBundle": ca_b64}}


def cluster_object(cfg: FleetConfig, member: str, api_endpoint: Any) -> dict[str, Any]:
    """On Karmada: the member cluster. Its labels carry what placement reads: the fabric of its GPU pools
    (one per cluster stack) and the stack it runs, so a PropagationPolicy can select by fabric and the
    policy pack can check that a gang goes only where the fabric is."""
    m = cfg.member(member)
    mc = cfg.members.get(member)
    fabric = mc.fabric_kind() if mc is not None else "none"
    labels = {FLEET_LABEL: "true", FABRIC_LABEL: fabric}
    if m.stack:
        labels[STACK_LABEL] = m.stack
    spec: dict[str, Any] = {"syncMode": "Push", "apiEndpoint": api_endpoint,
                            "secretRef": {"namespace": CLUSTER_SECRET_NAMESPACE, "name": member}}
    if mc is not None and mc.cloud != "existing":
        spec["provider"] = mc.cloud
    if m.region:
        spec["region"] = m.region
    return {"apiVersion": "cluster.karmada.io/v1alpha1", "kind": "Cluster", "metadata": _meta(member, labels=labels),
            "spec": spec}


# ------------------------------------------------------------------ Volcano Global
def _crd(rel: str) -> dict[str, Any]:
    """An upstream CRD file of schemas/, applied to the Karmada API as Volcano Global's README says. The file is
    parsed once per process (schemafiles: shared, so only the top level and metadata are copied here)."""
    doc = schemafiles.crd_document(SCHEMA_DIR / rel)
    if doc is None:
        raise FileNotFoundError(f"{SCHEMA_DIR / rel}: not a CustomResourceDefinition")
    return {**{k: v for k, v in doc.items() if k != "status"}, "metadata": dict(doc.get("metadata") or {})}


# Volcano Global's README step 4 applies Volcano's release-1.10 Job and Queue CRDs and its HyperJob CRD to the
# Karmada API; ours are the Volcano 1.15.1 CRDs the members run (config.ADDON_VERSIONS), so the Karmada API
# accepts every field the members' Volcano does.
KARMADA_CRDS = ("volcano/batch.volcano.sh_jobs.yaml", "volcano/scheduling.volcano.sh_queues.yaml",
                "volcano-global/training.volcano.sh_hyperjobs.yaml")


def _image(name: str, version: str) -> str:
    # upstream's manifests say :latest; a pinned tag so a redeploy does not change what runs. Fully qualified
    # (issue 30): CRI-O in enforcing short-name mode (OKE >= 1.34) refuses `volcanosh/...`.
    return f"docker.io/volcanosh/{name}:{version}"


def _probe(scheme: str) -> dict[str, Any]:
    return {"httpGet": {"path": "/healthz", "port": 11251, "scheme": scheme}, "periodSeconds": 3,
            "timeoutSeconds": 5, "failureThreshold": 5, "successThreshold": 1}


_POD_IP = {"name": "MY_POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}
_KARMADA_CONFIG_VOLUME = {"name": "webhook-config", "secret": {"secretName": KARMADA_CONFIG_SECRET}}
_KARMADA_CONFIG_MOUNT = {"name": "webhook-config", "mountPath": "/etc/kubeconfig", "readOnly": True}


def _deployment(name: str, container: dict[str, Any], volumes: list[dict[str, Any]]) -> dict[str, Any]:
    labels = {"app": name}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": _meta(name, VOLCANO_GLOBAL_NAMESPACE, labels),
            "spec": {"replicas": 1, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels},
                                  "spec": {"automountServiceAccountToken": False, "containers": [container],
                                           "volumes": volumes}}}}


def volcano_global_host_objects(cfg: FleetConfig, karmada_config: Any) -> list[dict[str, Any]]:
    """On the host cluster (docs/deploy/volcano-global-{namespace,controller-manager,webhook-manager}.yaml).
    Differences from upstream: images pinned to the fleet's volcanoGlobal.version instead of :latest; the
    Karmada kubeconfig Secret is written here from the chart's own Secret (`karmada_config`, key
    karmada.config) instead of mirrored by kubernetes-reflector (upstream README step 3), so no extra
    controller runs; the controller's example `2>&1` argument (a shell redirection that reaches the binary
    as a literal argument when there is no shell) is left out."""
    v = cfg.fleet.volcano_global.version
    ns = VOLCANO_GLOBAL_NAMESPACE
    controller = {
        "name": "volcano-global-controllers-manager", "image": _image("volcano-global-controller-manager", v),
        "imagePullPolicy": "IfNotPresent",
        "args": ["--kubeconfig=/etc/kubeconfig/karmada.config", "--leader-elect=false",
                 f"--leader-elect-resource-namespace={ns}", "--logtostderr", "--enable-healthz=true",
                 "--healthz-address=$(MY_POD_IP):11251", "--listen-address=$(MY_POD_IP):9090",
                 "--dispatch-period=1s", "--controllers=dispatcher", "-v=4"],
        "livenessProbe": {**_probe("HTTP"), "initialDelaySeconds": 60},
        "readinessProbe": {**_probe("HTTP"), "initialDelaySeconds": 3},
        "volumeMounts": [_KARMADA_CONFIG_MOUNT], "env": [_POD_IP]}
    certs = "/admission.local.config/certificates"
    webhook = {
        "name": "volcano-global-webhook-manager", "image": _image("volcano-global-webhook-manager", v),
        "imagePullPolicy": "IfNotPresent",
        "args": ["--kubeconfig=/etc/kubeconfig/karmada.config",
                 "--enabled-admission=/resourcebindings/mutate,/jobs/mutate,/jobs/validate",
                 f"--tls-cert-file={certs}/tls.crt", f"--tls-private-key-file={certs}/tls.key",
                 f"--ca-cert-file={certs}/ca.crt", f"--webhook-service-name={WEBHOOK_SERVICE}",
                 f"--webhook-namespace={ns}", "--logtostderr", "--enable-healthz=true",
                 "--healthz-address=$(MY_POD_IP):11251", "--listen-address=$(MY_POD_IP)", "--port=8443", "-v=4"],
        "livenessProbe": {**_probe("HTTPS"), "initialDelaySeconds": 60},
        "readinessProbe": {**_probe("HTTPS"), "initialDelaySeconds": 3},
        "volumeMounts": [{"name": "admission-certs", "mountPath": certs, "readOnly": True}, _KARMADA_CONFIG_MOUNT],
        "env": [_POD_IP]}
    init = "volcano-global-admission-init"
    init_labels = {"app": init}
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": _meta(ns)},
        {"apiVersion": "v1", "kind": "Secret", "type": "Opaque", "metadata": _meta(KARMADA_CONFIG_SECRET, ns),
         "stringData": {"karmada.config": karmada_config}},
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": _meta("volcano-global-webhook-init-sa", ns,
                                                                         init_labels)},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
         "metadata": _meta("volcano-global-webhook-init-clusterrole", labels=init_labels),
         "rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["create", "get", "list"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
         "metadata": _meta("volcano-global-webhook-init-clusterrolebinding", labels=init_labels),
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                     "name": "volcano-global-webhook-init-clusterrole"},
         "subjects": [{"kind": "ServiceAccount", "name": "volcano-global-webhook-init-sa", "namespace": ns}]},
        {"apiVersion": "batch/v1", "kind": "Job", "metadata": _meta(init, ns, init_labels),
         "spec": {"backoffLimit": 3, "template": {"spec": {
             "serviceAccountName": "volcano-global-webhook-init-sa", "restartPolicy": "Never",
             "containers": [{"name": "main", "image": _image("volcano-global-webhook-manager", v),
                             "imagePullPolicy": "IfNotPresent",
                             "command": ["./gen-admission-secret.sh", "--service", WEBHOOK_SERVICE, "--namespace",
                                         ns, "--secret", "volcano-global-webhook-cert"]}]}}}},
        {"apiVersion": "v1", "kind": "Service",
         "metadata": _meta(WEBHOOK_SERVICE, ns, {"app": "volcano-global-webhook-manager"}),
         "spec": {"ports": [{"port": 443, "protocol": "TCP", "targetPort": 8443}],
                  "selector": {"app": "volcano-global-webhook-manager"}}},
        _deployment("volcano-global-controller-manager", controller, [_KARMADA_CONFIG_VOLUME]),
        _deployment("volcano-global-webhook-manager", webhook,
                    [_KARMADA_CONFIG_VOLUME, {"name": "admission-certs",
                                              "secret": {"secretName": "volcano-global-webhook-cert"}}]),
    ]


def _webhook(kind: str, name: str, path: str, group: str, version: str, resource: str, ops: list[str],
             side_effects: str, timeout: int) -> dict[str, Any]:
    hook: dict[str, Any] = {
        "name": name, "admissionReviewVersions": ["v1"],
        "clientConfig": {"url": f"https://{WEBHOOK_SERVICE}.{VOLCANO_GLOBAL_NAMESPACE}.svc:443{path}"},
        "failurePolicy": "Fail", "matchPolicy": "Equivalent", "sideEffects": side_effects, "timeoutSeconds": timeout,
        "rules": [{"operations": ops, "apiGroups": [group], "apiVersions": [version], "resources": [resource],
                   "scope": "Namespaced"}]}
    if kind == "MutatingWebhookConfiguration":
        hook["reinvocationPolicy"] = "Never"
    return {"apiVersion": "admissionregistration.k8s.io/v1", "kind": kind,
            "metadata": _meta(f"volcano-admission-service-{resource}-{path.rsplit('/', 1)[-1]}"), "webhooks": [hook]}


# Our own interpreter for a Volcano Job (Karmada runs these Lua functions; upstream's
# docs/deploy/vcjob-resource-interpreter-customization.yaml is the model). The job is placed whole
# (Duplicated into exactly one member), so: GetReplicas tells Karmada's scheduler every pod of the gang
# and the largest pod's requirements (its estimator then picks a member that has room for all of them);
# no replicaRevision (the fleet never divides a gang); the status is that one member's.
_VCJOB_REPLICAS = """local kube = require("kube")
function GetReplicas(obj)
  local total = 0
  local biggest = nil
  local most = -1
  for i = 1, #obj.spec.tasks do
    local t = obj.spec.tasks[i]
    total = total + (t.replicas or 0)
    local req = kube.accuratePodRequirements(t.template)
    local gpus = 0
    if req.resourceRequest ~= nil and req.resourceRequest["nvidia.com/gpu"] ~= nil then
      gpus = tonumber(req.resourceRequest["nvidia.com/gpu"]) or 0
    end
    if gpus > most then
      most = gpus
      biggest = req
    end
  end
  return total, biggest
end
"""
_VCJOB_HEALTH = """function InterpretHealth(observedObj)
  return observedObj ~= nil and observedObj.status ~= nil and observedObj.status.state ~= nil
    and observedObj.status.state.phase ~= "Failed" and observedObj.status.state.phase ~= "Aborted"
end
"""
_VCJOB_REFLECT = """function ReflectStatus(observedObj)
  if observedObj == nil or observedObj.status == nil then
    return {}
  end
  return observedObj.status
end
"""
_VCJOB_AGGREGATE = """function AggregateStatus(desiredObj, statusItems)
  if statusItems == nil or #statusItems == 0 then
    return desiredObj
  end
  desiredObj.status = statusItems[1].status
  return desiredObj
end
"""


def volcano_global_karmada_objects(cfg: FleetConfig) -> list[dict[str, Any]]:
    """On the Karmada API: the namespace for leader election, the Volcano CRDs, the admission webhooks
    (docs/deploy/volcano-global-webhooks.yaml), the Volcano Job interpreter and the ClusterPropagationPolicy
    that sends every Queue to every member (docs/deploy/volcano-global-all-queue-propagation.yaml; upstream
    asks to label it deletion-protected, done here in its metadata)."""
    out: list[dict[str, Any]] = [{"apiVersion": "v1", "kind": "Namespace", "metadata": _meta(VOLCANO_GLOBAL_NAMESPACE)}]
    out += [_crd(rel) for rel in KARMADA_CRDS]
    out += [
        _webhook("MutatingWebhookConfiguration", "mutateresourcebindings.volcano.sh", "/resourcebindings/mutate",
                 "work.karmada.io", "v1alpha2", "resourcebindings", ["CREATE"], "None", 3),
        _webhook("MutatingWebhookConfiguration", "mutatejob.volcano.sh", "/jobs/mutate", "batch.volcano.sh",
                 "v1alpha1", "jobs", ["CREATE"], "NoneOnDryRun", 10),
        _webhook("ValidatingWebhookConfiguration", "validatejob.volcano.sh", "/jobs/validate", "batch.volcano.sh",
                 "v1alpha1", "jobs", ["CREATE", "UPDATE"], "NoneOnDryRun", 10),
        {"apiVersion": "config.karmada.io/v1alpha1", "kind": "ResourceInterpreterCustomization",
         "metadata": _meta("multinode-vcjob"),
         "spec": {"target": {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job"},
                  "customizations": {"replicaResource": {"luaScript": _VCJOB_REPLICAS},
                                     "healthInterpretation": {"luaScript": _VCJOB_HEALTH},
                                     "statusReflection": {"luaScript": _VCJOB_REFLECT},
                                     "statusAggregation": {"luaScript": _VCJOB_AGGREGATE}}}},
        {"apiVersion": "policy.karmada.io/v1alpha1", "kind": "ClusterPropagationPolicy",
         "metadata": _meta("volcano-global-all-queue-propagation",
                           labels={"resourcetemplate.karmada.io/deletion-protected": "Always"}),
         "spec": {"resourceSelectors": [{"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue"}],
                  "placement": {"replicaScheduling": {"replicaSchedulingType": "Duplicated"}}}},
    ]
    return out


def queue_objects(cfg: FleetConfig) -> list[dict[str, Any]]:
    """Volcano Queues on Karmada: weight = each tenant's fair share, priority = which queue Volcano Global's
    dispatcher serves first, capability = the GPUs a tenant may hold across the fleet."""
    out = []
    for q in cfg.fleet.queues:
        spec: dict[str, Any] = {"weight": q.weight, "reclaimable": True}
        if q.priority is not None:
            spec["priority"] = q.priority
        if q.gpus is not None:
            spec["capability"] = {"nvidia.com/gpu": str(q.gpus)}
        out.append({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
                    "metadata": _meta(q.name, labels={FLEET_LABEL: "true"}), "spec": spec})
    return out


def priority_class_objects(cfg: FleetConfig) -> list[dict[str, Any]]:
    """PriorityClasses on Karmada (the dispatcher orders jobs by them) and their propagation to every member
    (the members' Volcano schedulers resolve the same names)."""
    if not cfg.fleet.priority_classes:
        return []
    out: list[dict[str, Any]] = [
        {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
         "metadata": _meta(c.name, labels={FLEET_LABEL: "true"}), "value": c.value, "globalDefault": False,
         "preemptionPolicy": "PreemptLowerPriority"} for c in cfg.fleet.priority_classes]
    out.append({"apiVersion": "policy.karmada.io/v1alpha1", "kind": "ClusterPropagationPolicy",
                "metadata": _meta("multinode-priority-classes"),
                "spec": {"resourceSelectors": [{"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                                                "name": c.name} for c in cfg.fleet.priority_classes],
                         "placement": {"replicaScheduling": {"replicaSchedulingType": "Duplicated"}}}})
    return out


# ------------------------------------------------------------------ workloads
GANG_KINDS = {("batch.volcano.sh/v1alpha1", "Job"), ("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet")}


def _escape(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")      # RFC 6901 JSON pointer


ATOMIC_KEYS = frozenset({"nodeSelector"})      # replaced whole: a member's selector is its own, not a merge


def json_diff(base: Any, other: Any, path: str = "") -> list[dict[str, Any]]:
    """Karmada plaintext overriders (JSON patch operations) turning `base` into `other`."""
    if isinstance(base, dict) and isinstance(other, dict) and path.rsplit("/", 1)[-1] not in ATOMIC_KEYS:
        ops: list[dict[str, Any]] = []
        for k in base:
            if k not in other:
                ops.append({"path": f"{path}/{_escape(k)}", "operator": "remove"})
        for k, v in other.items():
            if k not in base:
                ops.append({"path": f"{path}/{_escape(k)}", "operator": "add", "value": copy.deepcopy(v)})
            else:
                ops += json_diff(base[k], v, f"{path}/{_escape(k)}")
        return ops
    if isinstance(base, list) and isinstance(other, list) and len(base) == len(other):
        return [op for i, (a, b) in enumerate(zip(base, other, strict=True)) for op in json_diff(a, b, f"{path}/{i}")]
    if base == other:
        return []
    return [{"path": path, "operator": "replace", "value": copy.deepcopy(other)}]


@dataclass
class FleetWorkloadObjects:
    name: str
    namespace: str
    objects: list[dict[str, Any]]                  # on Karmada: the workload's objects, then its policies
    secrets: list[SecretRef] = field(default_factory=list)
    members: list[str] = field(default_factory=list)


def _selector(obj: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": obj["apiVersion"], "kind": obj["kind"], "name": obj["metadata"]["name"],
            "namespace": obj["metadata"].get("namespace")}


def failover_spec(w: FleetWorkload) -> dict[str, Any]:
    """PropagationPolicy spec.failover (karmada-io/karmada v1.18.2 policy.karmada.io_propagationpolicies.yaml):
    application failover after tolerationSeconds of unhealthy, the failed copy purged as purgeMode says. Only
    the members in clusterAffinity (those that hold the gang) can receive it; with one such member Karmada has
    nowhere to move it (fleet plan says so)."""
    f = w.failover
    assert f is not None
    app: dict[str, Any] = {"decisionConditions": {"tolerationSeconds": f.toleration_seconds},
                           "purgeMode": f.purge_mode}
    if f.grace_period_seconds is not None:
        app["gracePeriodSeconds"] = f.grace_period_seconds
    return {"application": app}


def workload_objects(cfg: FleetConfig, w: FleetWorkload, fit: WorkloadFit) -> FleetWorkloadObjects:
    """The workload as the first member that holds it builds it, submitted once to Karmada, with:
      PropagationPolicy <name>       the gang (Volcano Job / LeaderWorkerSet) Duplicated into exactly one of
                                     the members that hold it: clusterAffinity = those members, spreadConstraints
                                     spreadByField cluster, maxGroups = minGroups = 1 (Karmada picks one cluster;
                                     a Divided policy would split the replicas, i.e. the gang, across clusters)
      PropagationPolicy <name>-deps  its Secrets, ConfigMaps and Services Duplicated to every such member (Karmada
                                     schedules each object on its own, so they must be wherever the gang lands)
      OverridePolicy <name>          per member, what its own build of the workload differs in: the node
                                     selector of its pool, its image, the fabric env its cloud sets
    """
    from ..manifests import workloads as wbuild
    from .fit import member_config, member_workload
    fitting = fit.fitting
    first = fitting[0]
    members = fit.members()
    base = [copy.deepcopy(o) for o in first.objects]
    wl = member_workload(cfg, w, first.member, first.pool)
    secrets = wbuild.build(member_config(cfg, cfg.members[first.member], wl), wl).secrets
    gang = [o for o in base if (o["apiVersion"], o["kind"]) in GANG_KINDS]
    deps = [o for o in base if (o["apiVersion"], o["kind"]) not in GANG_KINDS]
    for o in gang:
        spec = o.setdefault("spec", {})
        if o["kind"] == "Job":
            spec["queue"] = w.queue or "default"
            if w.priority_class_name:
                spec["priorityClassName"] = w.priority_class_name
    name, ns = w.name, w.namespace
    labels = {FLEET_LABEL: "true"}
    placement = {"clusterAffinity": {"clusterNames": members}, "spreadConstraints": [dict(GANG_SPREAD)],
                 "replicaScheduling": {"replicaSchedulingType": "Duplicated"}}
    pp: dict[str, Any] = {"resourceSelectors": [_selector(o) for o in gang], "placement": placement}
    if w.priority_class_name:
        pp["schedulePriority"] = {"priorityClassSource": "KubePriorityClass",
                                  "priorityClassName": w.priority_class_name}
    if w.failover is not None:
        pp["failover"] = failover_spec(w)
    policies: list[dict[str, Any]] = [
        {"apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy", "metadata": _meta(name, ns, labels),
         "spec": pp}]
    dep_selectors = [_selector(o) for o in deps] + [
        {"apiVersion": "v1", "kind": "Secret", "name": s.name, "namespace": ns} for s in secrets]
    if dep_selectors:
        policies.append({"apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy",
                         "metadata": _meta(f"{name}-deps", ns, labels),
                         "spec": {"resourceSelectors": dep_selectors,
                                  "placement": {"clusterAffinity": {"clusterNames": members},
                                                "replicaScheduling": {"replicaSchedulingType": "Duplicated"}}}})
    rules = []
    for member in members:
        cand = next(c for c in fitting if c.member == member)
        built = {(o["kind"], o["metadata"]["name"]): o for o in cand.objects}
        for o in gang:
            theirs = copy.deepcopy(built.get((o["kind"], o["metadata"]["name"]), o))
            theirs.setdefault("spec", {}).update({k: v for k, v in o["spec"].items()
                                                  if k in ("queue", "priorityClassName")})
            ops = [op for op in json_diff(o, theirs) if not op["path"].startswith("/metadata")]
            ops += _node_selector_ops(theirs, ops)
            if ops:
                rules.append({"targetCluster": {"clusterNames": [member]}, "overriders": {"plaintext": ops}})
    if rules:
        policies.append({"apiVersion": "policy.karmada.io/v1alpha1", "kind": "OverridePolicy",
                         "metadata": _meta(name, ns, labels),
                         "spec": {"resourceSelectors": [_selector(o) for o in gang], "overrideRules": rules}})
    return FleetWorkloadObjects(name, ns, deps + gang + policies, secrets, members)


def _node_selector_ops(obj: dict[str, Any], have: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each pod template's nodeSelector, stated for the member even when it equals the base: which pool of
    that member the gang lands on is the OverridePolicy's point, so it is explicit, not implied."""
    ops = []
    done = {op["path"] for op in have}
    for parts, tmpl in pod_templates(obj):
        sel = (tmpl.get("spec") or {}).get("nodeSelector")
        if not isinstance(sel, dict):
            continue
        pointer = "".join(f"/{_escape(p)}" for p in parts) + "/spec/nodeSelector"
        if not any(d == pointer or d.startswith(pointer + "/") for d in done):
            ops.append({"path": pointer, "operator": "replace", "value": dict(sel)})
    return ops


def pod_templates(node: Any, parts: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], dict[str, Any]]]:
    """Every pod template ({metadata, spec with containers}) inside an object, with its key path."""
    if isinstance(node, dict):
        spec = node.get("spec")
        if "metadata" in node and isinstance(spec, dict) and isinstance(spec.get("containers"), list):
            return [(parts, node)]
        return [x for k, v in node.items() for x in pod_templates(v, parts + (str(k),))]
    if isinstance(node, list):
        return [x for i, v in enumerate(node) for x in pod_templates(v, parts + (str(i),))]
    return []
