"""The only code that touches pulumi.automation and the kubernetes client (both imported when called).

NOT RUN HERE: the machines this project is built on have no Pulumi CLI, no cloud account and no
cluster, so nothing in this file has run against a real Pulumi engine or API server. The method names
and parameters were checked against the installed pulumi 3.272 SDK (pulumi/automation/_stack.py,
_local_workspace.py, events.py) and kubernetes 37.0.2; the tests exercise everything else with fakes.
"""
from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .bandwidth import ConfigMapReading, PodLog
from .health import NodeInfo
from .pipeline import Outcome, PolicyFinding, StackMissing, StepFailed

_CHECKOUT = Path(__file__).resolve().parent.parent.parent
_IN_CHECKOUT = (_CHECKOUT / "Pulumi.yaml").is_file() and (_CHECKOUT / "policy" / "PulumiPolicy.yaml").is_file()
# The Pulumi project (Pulumi.yaml): this repository run from its checkout; installed from the wheel, the project
# in the working folder (one `multinode new` wrote).
ROOT = _CHECKOUT if _IN_CHECKOUT else Path.cwd()
# The pack: policy/ of the checkout (started by the Python language host), else the pack executable installed with
# the package (a binary analyzer plugin: multinode/entry_points.py; None when it is not installed).
POLICY_PACK: Path | None = _CHECKOUT / "policy" if _IN_CHECKOUT else None
if POLICY_PACK is None:
    from ..entry_points import policy_pack_path
    POLICY_PACK = policy_pack_path()
INSTALL_HINT = "install it with `curl -fsSL https://get.pulumi.com | sh` (https://www.pulumi.com/docs/install/)"
ERROR_TAIL = 1500       # characters of a failed command's stderr kept in the report


def pulumi_cli() -> str | None:
    return shutil.which("pulumi")


def _short(err: BaseException) -> str:
    """A Pulumi CommandError's str() is the whole stdout+stderr; keep the stderr tail."""
    text = str(err)
    if "stderr:" in text:            # CommandResult.__str__: " code: ..\n stdout: ..\n stderr: .."
        text = text.split("stderr:", 1)[1]
    text = text.strip()
    return text[-ERROR_TAIL:] if text else type(err).__name__


class AutomationStack:
    """pulumi.automation.Stack behind pipeline.StackOps, with progress streamed to `out`."""

    def __init__(self, stack: Any, out: Callable[[str], None] = print):
        self._stack = stack
        self.name = stack.name
        self._out = out

    def _policy_collector(self) -> tuple:
        found: list[PolicyFinding] = []

        def on_event(event: Any) -> None:
            p = getattr(event, "policy_event", None)
            if p is not None:
                found.append(PolicyFinding(policy=p.policy_name, pack=p.policy_pack_name,
                                           level=p.enforcement_level, message=p.message.strip(),
                                           urn=p.resource_urn))
        return found, on_event

    def _run(self, fn: Callable[..., Any], summary: Callable[[Any], dict[str, int]], **kwargs: Any) -> Outcome:
        from pulumi.automation import errors as auto_errors

        found, on_event = self._policy_collector()
        try:
            result = fn(on_output=self._out, on_error=self._out, on_event=on_event, color="never", **kwargs)
        except auto_errors.CommandError as e:
            # a mandatory policy violation makes preview/up exit non-zero: the findings say why
            return Outcome(policy=found, error=_short(e))
        return Outcome(changes=dict(summary(result) or {}), policy=found)

    def refresh(self) -> Outcome:
        return self._run(self._stack.refresh, lambda r: r.summary.resource_changes, show_secrets=False)

    def preview(self, policy_packs: list[str], refresh: bool = False) -> Outcome:
        return self._run(self._stack.preview, lambda r: r.change_summary, policy_packs=policy_packs or None,
                         refresh=True if refresh else None)

    def up(self, policy_packs: list[str], replace: list[str]) -> Outcome:
        return self._run(self._stack.up, lambda r: r.summary.resource_changes, policy_packs=policy_packs or None,
                         replace=replace or None, show_secrets=False)

    def outputs(self) -> dict[str, Any]:
        from pulumi.automation import errors as auto_errors
        try:
            return {k: v.value for k, v in self._stack.outputs().items()}
        except auto_errors.CommandError as e:
            raise StepFailed(_short(e)) from None

    def state_resources(self) -> list[dict[str, Any]]:
        from pulumi.automation import errors as auto_errors
        try:
            deployment = self._stack.export_stack().deployment or {}
        except auto_errors.CommandError as e:
            raise StepFailed(_short(e)) from None
        return list(deployment.get("resources") or [])

    def get_tag(self, key: str) -> str | None:
        from pulumi.automation import errors as auto_errors
        try:   # list, not get: `stack tag get` fails for a missing tag, indistinguishable from other errors
            return (self._stack.list_tags() or {}).get(key)
        except auto_errors.CommandError as e:
            raise StepFailed(_short(e)) from None

    def set_tag(self, key: str, value: str) -> None:
        self._stack.set_tag(key, value)


def open_stack_factory(work_dir: Path = ROOT,
                       out: Callable[[str], None] = print) -> Callable[[str, bool], AutomationStack]:
    """open_stack(name, create): the stack in this project (Pulumi.yaml: stackConfigDir stacks)."""

    def open_stack(name: str, create: bool) -> AutomationStack:
        from pulumi import automation as auto

        opts = auto.LocalWorkspaceOptions(work_dir=str(work_dir))
        try:
            if create:
                stack = auto.create_or_select_stack(stack_name=name, work_dir=str(work_dir), opts=opts)
            else:
                stack = auto.select_stack(stack_name=name, work_dir=str(work_dir), opts=opts)
        except auto.StackNotFoundError:
            raise StackMissing(f"stack {name} not found") from None
        except auto.CommandError as e:
            raise StepFailed(_short(e)) from None
        return AutomationStack(stack, out)

    return open_stack


class KubernetesCluster:
    """bandwidth.ClusterReader on the official kubernetes client, built from the stack's kubeconfig."""

    def __init__(self, kubeconfig: Any):
        import yaml
        from kubernetes import client, config

        doc = yaml.safe_load(kubeconfig) if isinstance(kubeconfig, str) else kubeconfig   # YAML or JSON text
        if not isinstance(doc, dict):
            raise StepFailed("the kubeconfig output is not a kubeconfig mapping")
        # persist_config=False: never write refreshed credentials back anywhere
        api = config.new_client_from_config_dict(doc, persist_config=False)
        self._core = client.CoreV1Api(api)
        self._api_exception = client.exceptions.ApiException

    def read_configmap(self, namespace: str, name: str) -> ConfigMapReading | None:
        try:
            cm = self._core.read_namespaced_config_map(name=name, namespace=namespace)
        except self._api_exception as e:
            if e.status == 404:
                return None
            raise
        # the client types metadata as optional; without it the age is unknown (bandwidth._fresh: not stale)
        created_at = cm.metadata.creation_timestamp if cm.metadata is not None else None
        return ConfigMapReading(data=dict(cm.data or {}), created_at=created_at)

    def finished_pod_logs(self, namespace: str, selector: str) -> list[PodLog]:
        pods = self._core.list_namespaced_pod(namespace=namespace, label_selector=selector).items
        out = []
        for pod in pods:
            phase = (pod.status.phase if pod.status else None) or ""
            if phase not in ("Succeeded", "Failed"):
                continue
            meta = pod.metadata
            if meta is None or not meta.name:
                continue          # a pod without a name has no log to read
            text = self._core.read_namespaced_pod_log(name=meta.name, namespace=namespace, tail_lines=500)
            out.append(PodLog(name=meta.name, phase=phase, text=text or "", created_at=meta.creation_timestamp))
        return out

    def list_nodes(self) -> list[NodeInfo]:
        out = []
        for node in self._core.list_node().items:
            meta, spec = node.metadata, node.spec
            if meta is None or not meta.name:
                continue
            taints = [{"key": t.key, "effect": t.effect, "value": t.value} for t in ((spec.taints if spec else None)
                                                                                   or [])]
            out.append(NodeInfo(name=meta.name, labels=dict(meta.labels or {}), taints=taints,
                                unschedulable=bool(spec.unschedulable) if spec else False))
        return out
