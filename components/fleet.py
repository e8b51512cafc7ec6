"""Fleet: Karmada + Volcano Global over this project's clusters, as one component tree (docs/multicluster.md).

host cluster  -> the Karmada chart, Volcano Global's controller and webhook managers
each member   -> the ServiceAccount Karmada's controllers use (push mode), its token
Karmada API   -> the member Clusters, the Volcano CRDs / webhooks / interpreter, queues, priority classes,
                 then each workload with its PropagationPolicy and OverridePolicy
The objects are the pure core's (multinode/fleet/manifests.py); this module only adds what needs Pulumi:
providers from the members' stack outputs (StackReference) or kubeconfig secrets, the Karmada kubeconfig the
chart writes, the Secrets made from Pulumi secrets, and the order. No cloud SDK is imported.
"""
from __future__ import annotations

import base64
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.clouds.base import TYPE_PREFIX
from components.kubernetes.addons import helm_release
from components.kubernetes.objects import k8s_object
from multinode import deploy_path
from multinode.config import NAMESPACE
from multinode.fleet import manifests as fm
from multinode.fleet.config import FleetConfig, FleetHost, FleetMember
from multinode.manifests import storage as sm

# Built-in groups the cluster stacks never register (components/kubernetes/objects.py maps the others):
# typed classes for them too, so they are not sent as untyped custom resources.
_MORE_BUILT_IN = {"admissionregistration.k8s.io": "admissionregistration", "apiextensions.k8s.io": "apiextensions"}


def fleet_object(name: str, obj: dict[str, Any], opts: pulumi.ResourceOptions) -> pulumi.CustomResource:
    group, _, version = obj["apiVersion"].rpartition("/")
    if group in _MORE_BUILT_IN:
        import importlib

        from multinode.config import to_snake
        cls = getattr(importlib.import_module(f"pulumi_kubernetes.{_MORE_BUILT_IN[group]}.{version}"), obj["kind"])
        body = {to_snake(k): v for k, v in obj.items() if k not in ("apiVersion", "kind")}
        return cls(name, opts=opts, **body)  # type: ignore[no-any-return]
    return k8s_object(name, obj, opts)


def stack_reference(name: str, stack: str, full: str | None) -> pulumi.StackReference:
    """The fully qualified name (organization/project/stack) of a member stack of this project (same organization
    and project unless given)."""
    ref = full or f"{pulumi.get_organization()}/{pulumi.get_project()}/{stack}"
    return pulumi.StackReference(name, stack_name=ref)


def _kubeconfig(name: str, entry: FleetHost | FleetMember,
                expected_pools: dict[str, int] | None = None) -> pulumi.Output[Any]:
    if entry.stack is not None:
        ref = stack_reference(f"{name}-stack", entry.stack, entry.stack_reference)
        if expected_pools is not None:
            ref.get_output("nodePools").apply(lambda pools: _check_pools(entry.stack or "", expected_pools, pools))
        return ref.require_output("kubeconfig")
    assert entry.kubeconfig_secret is not None
    return pulumi.Config(NAMESPACE).require_secret(entry.kubeconfig_secret)


def _check_pools(stack: str, expected: dict[str, int], exported: Any) -> None:
    """The fit check read the member's stack file; warn when the member's last `pulumi up` exported other
    pools (the file changed since, or the stack was not brought up from this file)."""
    if not isinstance(exported, dict):
        return      # not up yet, or an older stack without the output: nothing to compare
    got = {str(k): (v or {}).get("nodeCount") if isinstance(v, dict) else None for k, v in exported.items()}
    if got != expected:
        pulumi.log.warn(f"member stack {stack}: its exported nodePools {got} differ from its stack file {expected}; "
                        f"the fit check used the stack file: run `pulumi up` of {stack} first")


def _server(kubeconfig: str | None) -> str:
    """The API server URL of a kubeconfig's first cluster (push mode reaches the member there)."""
    import yaml
    try:
        doc = yaml.safe_load(kubeconfig or "") or {}
        return str(doc["clusters"][0]["cluster"]["server"])
    except (TypeError, KeyError, IndexError, yaml.YAMLError):
        return ""


def _decode(data: Any, key: str) -> str:
    value = (data or {}).get(key) if isinstance(data, dict) else None
    return base64.b64decode(value).decode() if value else ""


class Fleet(pulumi.ComponentResource):
    def __init__(self, name: str, cfg: FleetConfig, opts: pulumi.ResourceOptions | None = None):
        super().__init__(TYPE_PREFIX + "Fleet", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        host = k8s.Provider("host", kubeconfig=_kubeconfig("host", cfg.fleet.host), opts=child)
        on_host = pulumi.ResourceOptions(parent=self, provider=host)

        # Karmada control plane (the upstream chart); its kubeconfig Secret gives the Karmada API provider
        release = helm_release("karmada", fm.karmada_release(cfg), on_host)
        ns, secret_name, key = fm.karmada_kubeconfig_secret(cfg)
        chart_kubeconfig = k8s.core.v1.Secret.get(
            "karmada-kubeconfig", f"{ns}/{secret_name}",
            opts=pulumi.ResourceOptions(parent=self, provider=host, depends_on=[release]))
        in_cluster: pulumi.Output[str] = pulumi.Output.secret(chart_kubeconfig.data.apply(lambda d: _decode(d, key)))
        endpoint = cfg.fleet.karmada.api_endpoint
        karmada = k8s.Provider("karmada", kubeconfig=in_cluster.apply(lambda k: fm.external_kubeconfig(k, endpoint)),
                               opts=pulumi.ResourceOptions(parent=self, depends_on=[release]))
        on_karmada = pulumi.ResourceOptions(parent=self, provider=karmada)

        # Each object waits for what it needs, never for the object registered before it (issue 35): an object that
        # creates no pods (deploy_path.PASSIVE_KINDS: Namespace, Secret, RBAC, Service, CRD, webhook configuration,
        # Queue, Karmada policies...) for its Namespace and the CRD of its own kind when this stack registers them
        # on the same API server; any other object (Deployment, Job, Cluster, a Volcano Job...) for `after` and for
        # every passive object and every setup Job listed before it in its group (its pods mount, run as or are
        # admitted by them, a Karmada policy propagates it with its overrides at once; a batch/v1 Job run to
        # completion first, e.g. Volcano Global's admission init, writes the certificate later pods mount).
        known: dict[tuple[str, str, str], pulumi.Resource] = {}   # (API server, "Namespace"|group/kind, name)

        def register(prefix: str, objs: list[dict[str, Any]], opts: pulumi.ResourceOptions,
                     after: list[pulumi.Resource] | None = None, server: str = "") -> list[pulumi.Resource]:
            made: dict[int, pulumi.Resource] = {}

            def one(i: int, o: dict[str, Any], deps: list[pulumi.Resource]) -> None:
                meta = o["metadata"]
                logical = "-".join(x for x in (prefix, o["kind"].lower(), meta.get("namespace"), meta["name"]) if x)
                made[i] = fleet_object(logical, o, pulumi.ResourceOptions.merge(
                    opts, pulumi.ResourceOptions(depends_on=list(dict.fromkeys(deps)) or None)))
                if o["kind"] == "Namespace":
                    known[(server, "Namespace", meta["name"])] = made[i]
                elif o["kind"] == "CustomResourceDefinition":
                    spec = o.get("spec") or {}
                    known[(server, f"{spec.get('group')}/{(spec.get('names') or {}).get('kind')}", "crd")] = made[i]

            for i, o in enumerate(objs):          # passive objects first, each after its namespace and CRD
                if not deploy_path.creates_pods(o):
                    one(i, o, [known[k] for k in ((server, "Namespace", str(o["metadata"].get("namespace"))),
                                                  (server, f"{deploy_path.api_group(o)}/{o['kind']}", "crd"))
                               if k in known])
            passive = list(made.values())
            jobs: list[pulumi.Resource] = []
            for i, o in enumerate(objs):          # then the rest, after `after`, the passive ones and earlier Jobs
                if deploy_path.creates_pods(o):
                    one(i, o, list(after or []) + passive + jobs)
                    if o["kind"] == "Job" and o["apiVersion"] == "batch/v1":
                        jobs.append(made[i])
            return [made[i] for i in range(len(objs))]

        # Volcano Global: CRDs, webhooks, interpreter on Karmada; its managers on the host
        self.volcano_global: list[pulumi.Resource] = []
        karmada_ready: list[pulumi.Resource] = []        # Volcano Global's objects: what a fleet job waits for
        if cfg.fleet.volcano_global.enabled:
            on_api = register("vg", fm.volcano_global_karmada_objects(cfg), on_karmada, server="karmada")
            on_host_vg = register("vg-host", fm.volcano_global_host_objects(cfg, in_cluster), on_host, [release],
                                  server="host")
            self.volcano_global = on_api + on_host_vg
            karmada_ready = on_api + on_host_vg

        # members: push mode (karmadactl join's objects, then the Cluster on Karmada)
        self.clusters: dict[str, pulumi.Resource] = {}
        cluster_ns = register("karmada", [{"apiVersion": "v1", "kind": "Namespace",
                                           "metadata": {"name": fm.CLUSTER_SECRET_NAMESPACE}}], on_karmada,
                              server="karmada")
        for m in cfg.fleet.members:
            pools = {p.name: p.node_count for p in cfg.members[m.name].node_pools}
            kubeconfig = _kubeconfig(f"member-{m.name}", m, pools)
            provider = k8s.Provider(f"member-{m.name}", kubeconfig=kubeconfig, opts=child)
            on_member = pulumi.ResourceOptions(parent=self, provider=provider)
            access = register(f"member-{m.name}", fm.member_access_objects(m.name), on_member,
                              server=f"member-{m.name}")
            token = k8s.core.v1.Secret(f"member-{m.name}-token", opts=pulumi.ResourceOptions.merge(
                on_member, pulumi.ResourceOptions(depends_on=access)),
                **{k: v for k, v in fm.member_token_secret().items() if k not in ("apiVersion", "kind")})
            data = token.data
            secret = register(f"cluster-{m.name}", [fm.cluster_secret(
                m.name, pulumi.Output.secret(data.apply(lambda d: (d or {}).get("token", ""))),
                data.apply(lambda d: (d or {}).get("ca.crt", "")))], on_karmada, cluster_ns, server="karmada")
            api = pulumi.Output.unsecret(pulumi.Output.from_input(kubeconfig).apply(_server))   # a URL, not a secret
            self.clusters[m.name] = register(f"cluster-{m.name}", [fm.cluster_object(cfg, m.name, api)],
                                             on_karmada, secret, server="karmada")[0]

        # tenants: queues (sent to every member by the all-queue policy) and priority classes
        clusters = list(self.clusters.values())
        queues = register("fleet", fm.queue_objects(cfg) + fm.priority_class_objects(cfg), on_karmada,
                          karmada_ready + clusters, server="karmada")

        # workloads, submitted once to Karmada: namespace, Secrets, objects, then their policies
        secret_values = {"hfToken": cfg.hf_token, "ngcApiKey": cfg.ngc_api_key,
                         "imagePullSecret": cfg.image_pull_secret}
        self.workloads: dict[str, list[str]] = {}
        namespaces = sorted({w.namespace for w in cfg.fleet.workloads})
        ns_objs = register("fleet", [{"apiVersion": "v1", "kind": "Namespace",
                                      "metadata": {"name": n, "labels": dict(sm.MANAGED_BY)}} for n in namespaces],
                           on_karmada, clusters, server="karmada")
        for w in cfg.fleet.workloads:
            built = fm.workload_objects(cfg, w, cfg.fits[w.name])
            after = karmada_ready + clusters + queues + ns_objs
            secrets: list[pulumi.Resource] = []
            for ref in built.secrets:
                value = secret_values.get(ref.config_key)
                if value is None or ref.existing:     # an existing Secret the user named: never created
                    continue
                secrets.append(k8s.core.v1.Secret(
                    f"{w.name}-secret-{ref.name}", type=ref.secret_type,
                    metadata={"name": ref.name, "namespace": w.namespace, "labels": dict(sm.MANAGED_BY)},
                    string_data={ref.key: pulumi.Output.secret(value)},
                    opts=pulumi.ResourceOptions.merge(on_karmada, pulumi.ResourceOptions(
                        depends_on=[known[k] for k in [("karmada", "Namespace", w.namespace)] if k in known]))))
            register(w.name, built.objects, on_karmada, after + secrets, server="karmada")
            self.workloads[w.name] = built.members

        self.register_outputs({"clusters": list(self.clusters), "workloads": self.workloads})


def read_config() -> FleetConfig:
    """The fleet stack's config under the Pulumi engine (plan runs this under mocks): fleet checks.load on
    the keys of the stack, one ConfigError before any resource."""
    from multinode import stackfile
    from multinode.fleet import checks, config
    conf = pulumi.Config(NAMESPACE)
    raw: dict[str, Any] = {"fleet": conf.get("fleet")}
    path = stackfile.program_stack_file(pulumi.get_stack())
    names = set(config.top_level_keys(raw))
    secrets: set[str] = set()
    if path is not None:
        file_raw, file_secrets, _ = stackfile.read_stack_file(path)
        names |= set(file_raw)
        secrets |= file_secrets & set(file_raw)
    engine_secrets = set(pulumi.runtime.get_config_secret_keys_env())
    for key in sorted(names - {"fleet"}):
        value = conf.get(key)
        if value is None:
            continue
        raw[key] = value
        full = conf.full_key(key)
        if full in engine_secrets or pulumi.runtime.is_config_secret(full):
            secrets.add(key)
    return checks.load(raw, secrets, source=f"stack {pulumi.get_stack()}")


def run() -> None:
    """The program of a fleet stack (__main__.py dispatches here when the stack has multinode:fleet)."""
    from multinode.errors import ConfigError
    try:
        cfg = read_config()
    except ConfigError as e:
        raise pulumi.RunError(str(e)) from None
    fleet = Fleet("fleet", cfg)
    pulumi.export("clusters", sorted(fleet.clusters))
    pulumi.export("workloads", fleet.workloads)
