"""CustomResourceDefinitions applied as their own resources, from the pinned release's files.

Why: Helm installs a chart's `crds/` folder on the first install only; it never upgrades nor deletes
those CRDs (Helm's chart best practices, "Custom Resource Definitions: some caveats and explanations").
A version bump then runs a new operator against the old CRDs: ai-dynamo/grove#809 (Grove v0.1.0-alpha.13
adds `status.lastScheduled` to the PodClique CRD; with the alpha.12 CRD the API server prunes it from
every status write) and ai-dynamo/grove#436. So the CRDs of the pinned version are applied by the
program itself, ordered before the release and before every custom resource of their kinds, and a
version bump updates them like any other resource.

Who owns a chart's CRDs depends on how the chart ships them at the pinned version. One owner each:
two writers of the same CRD fight over its fields (server-side-apply conflicts, a failed atomic release).

  add-on            the chart's CRDs (pinned version)                                  owner
  lws               crds/ only (v0.10.0 has no crdUpgrade hook: schemas/lws/values.yaml)   us (CRD resources)
  grove             crds/ only (crdInstaller.enabled: false by default, values.yaml)       us (CRD resources)
  volcano           templates reading crd/bases (templates/batch_v1alpha1_job.yaml, ...)   Helm (upgraded with it)
  kyverno           the `crds` sub-chart's templates (values `crds.install`)             Helm (upgraded with it)
  kai               crds/ plus the pre-install/pre-upgrade hook Job `crd-upgrader`
                    (deployments/kai-scheduler/templates/hooks/pre/crd-upgrader.yaml)    the chart's hook
  dynamo            the operator's crd-apply init container (`dynamo-operator.upgradeCRD`) the operator
  networkOperator   crds/ plus pre-install/pre-upgrade hooks (`upgradeCRDs: true`)       the chart's hooks
  gpuOperator       crds/ plus the upgrade hook (`operator.upgradeCRD: true`)            the chart's hook
  efaDevicePlugin, nvidiaDevicePlugin: no CRDs.

The files are the ones schema validation reads (schemas/<folder>/, provenance in schemas/PROVENANCE.md):
one copy in the project. A CRD set is registered only for the exact release it was copied from; a
stack that overrides the version to one we do not store falls back to Helm's install-once `crds/` and
gets an advisory (`advisories`).

`skip_crds` (Helm installs none of `crds/`) only when the stored files are every CRD of the chart's
`crds/`; otherwise Helm keeps creating the ones we lack and, as Helm's install skips CRDs that already
exist ("CRDs are installed if not already present", helm.v3.Release `skip_crds`), leaves ours alone.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..config import ADDON_VERSIONS, StackConfig, installs
from ..errors import Problem

# Annotation of the pulumi-kubernetes provider: take over fields another field manager owns instead of
# failing the update. A CRD that Helm created from crds/ on an earlier install is owned by Helm's field
# manager; the first update from us conflicts on `spec.versions` (ai-dynamo/grove PR #527 needs
# `kubectl apply --server-side --force-conflicts` for the same reason).
PATCH_FORCE = "pulumi.com/patchForce"
# Which add-on release the CRD came from (ours; upstream's CRD carries only controller-gen's annotation).
SOURCE_ANNOTATION = "multinode.dev/crd-source"


@dataclass(frozen=True)
class CrdSet:
    """The CRD files of one add-on release, stored under schemas/<folder>/."""
    key: str                        # config key under addons
    version: str                    # the release the files were copied from (ADDON_VERSIONS form)
    folder: str                     # under schemas/
    files: tuple[str, ...]          # CRD files in that folder
    chart_crds_complete: bool       # the files are every CRD of the chart's crds/ -> skip_crds
    note: str = ""                  # why not complete
    # The release whose files these are, when older than `version` (issue 40): the pin moved to a release whose
    # CRDs are not stored (../shared/schemas is read-only), so the files applied and validated against are the older
    # release's. Never empty: read_at == version when the files are the pinned release's own.
    read_at: str = ""

    @property
    def files_version(self) -> str:
        return self.read_at or self.version

    @property
    def behind(self) -> bool:
        """The stored files are an older release's than the pin."""
        return self.files_version != self.version

    def paths(self) -> list[Any]:
        from ..schemafiles import SCHEMA_DIR
        return [SCHEMA_DIR / self.folder / f for f in self.files]


_GROVE_FILES = ("grove.io_podcliquesets.yaml", "grove.io_podcliques.yaml", "grove.io_podcliquescalinggroups.yaml",
                "grove.io_clustertopologybindings.yaml", "scheduler.grove.io_podgangs.yaml")

# key -> version -> files. Add a version here when its files are copied into schemas/ (the test
# tests/test_addons.py::test_pinned_crds_are_stored fails when a pin of an add-on we own has none).
STORED: dict[str, dict[str, CrdSet]] = {
    "lws": {"0.10.0": CrdSet(
        "lws", "0.10.0", "lws", ("leaderworkerset.x-k8s.io_leaderworkersets.yaml",),
        chart_crds_complete=False,
        note="the chart's crds/ also holds the DisaggregatedSet CRDs (its values.yaml: `The CRD (under crds/)` "
             "of enableDisaggregatedSet), which are not stored here")},
    "grove": {
        "0.1.0-alpha.11": CrdSet(
            "grove", "0.1.0-alpha.11", "grove", _GROVE_FILES, chart_crds_complete=False,
            note="Grove's CRD folders also hold grove.io_clustertopologies.yaml and grove.io_podgangmaps.yaml at "
                 "some commits; whether the alpha.11 chart carries them was not checked, so Helm installs what we "
                 "lack"),
        # issue 40: the pin (config.ADDON_VERSIONS, the floor Dynamo 1.5 documents) with alpha.11's files, the
        # newest stored. What that leaves out, from upstream's own reports: alpha.13's PodClique CRD adds
        # `status.lastScheduled` (ai-dynamo/grove#809: scale-up from zero broken in alpha.12, fixed in alpha.13), and
        # alpha.12 adds the PodGangMap CRD of its epoch-based PodGangs (grove#808), which Helm's install-once crds/
        # never adds on an upgrade. So Grove's own CRD installer is turned on (values `crdInstaller.enabled`, an init
        # container of the operator that server-side-applies every Grove CRD of its release with ForceOwnership:
        # ai-dynamo/grove operator/internal/crdinstaller/installer.go; ai-dynamo/dynamo PR #14553 enables it for the
        # same reason) and brings alpha.13's CRDs at each operator start, after ours (the release depends on them).
        # The files stay registered so an upgrade from alpha.11 never deletes the CRDs (and every PodCliqueSet with
        # them); their source annotation names alpha.11, so the bump changes nothing of them.
        "0.1.0-alpha.13": CrdSet(
            "grove", "0.1.0-alpha.13", "grove", _GROVE_FILES, chart_crds_complete=False, read_at="0.1.0-alpha.11",
            note="alpha.13's CRDs are not stored: Grove's CRD installer applies them"),
    },
}

# Add-ons whose CRDs the program owns (the table above); the others are owned by their chart.
OWNED = tuple(STORED)


def pinned_version(cfg: StackConfig, key: str) -> str:
    """The add-on's version as ADDON_VERSIONS writes it (the stack's override wins; a leading "v" of an
    override of a bare-versioned add-on is dropped so "v0.10.0" finds the 0.10.0 files)."""
    addon = getattr(cfg.addons, key)
    v = addon.version or ADDON_VERSIONS[key]
    return v[1:] if v.startswith("v") and not ADDON_VERSIONS[key].startswith("v") else v


def crd_set(cfg: StackConfig, key: str) -> CrdSet | None:
    """The stored CRDs of this stack's version of add-on `key`, or None (not ours, or not stored)."""
    return STORED.get(key, {}).get(pinned_version(cfg, key))


def crd_objects(crds: CrdSet) -> list[dict[str, Any]]:
    """The CRDs as Kubernetes objects: the upstream files unchanged except two annotations (PATCH_FORCE,
    SOURCE_ANNOTATION, see above). The parsed file is cached by schemafiles and shared: only the
    top level and metadata are copied, spec is the cached object (never mutated)."""
    from ..schemafiles import crd_document
    out = []
    for path in crds.paths():
        doc = crd_document(path)
        if doc is None:
            raise FileNotFoundError(f"{path}: not a CustomResourceDefinition")
        meta = dict(doc["metadata"])
        meta["annotations"] = {**(meta.get("annotations") or {}), PATCH_FORCE: "true",
                               SOURCE_ANNOTATION: f"{crds.key}@{crds.files_version}"}
        out.append({"apiVersion": doc["apiVersion"], "kind": doc["kind"], "metadata": meta, "spec": doc["spec"]})
    return out


def crd_list_text(objects: list[dict[str, Any]]) -> str:
    """CRD objects (crd_objects) as the text of one `v1` List object in JSON, the `yaml` input of the add-on's
    `kubernetes:yaml/v2:ConfigGroup` (components/kubernetes/addons.py). JSON because it is both YAML and the
    one form the provider's decoder (apimachinery's YAMLOrJSONDecoder) reads without guessing, and Python
    writes it in C; a List because the provider registers each item of a List as its own resource
    (pulumi-kubernetes provider/pkg/provider/yaml/v2/yaml.go, parseUnstructured)."""
    import json
    return json.dumps({"apiVersion": "v1", "kind": "List", "items": objects})


def is_crd(obj: Any) -> bool:
    """A CustomResourceDefinition object. Its spec is an OpenAPI schema (~24,000 nodes for the LWS and Grove
    CRDs together) that holds no pod, so the walkers looking for pods skip it."""
    return (isinstance(obj, dict) and obj.get("kind") == "CustomResourceDefinition"
            and str(obj.get("apiVersion", "")).startswith("apiextensions.k8s.io/"))


def group_kind(crd: dict[str, Any]) -> tuple[str, str]:
    return crd["spec"]["group"], crd["spec"]["names"]["kind"]


def advisories(cfg: StackConfig) -> list[Problem]:
    """An add-on whose CRDs we own, enabled at a version whose CRDs are not stored: Helm installs them
    once from the chart and never upgrades them."""
    out = []
    for key in OWNED:
        addon = getattr(cfg.addons, key)
        stored_set = crd_set(cfg, key)
        if installs(addon) and stored_set is not None and stored_set.behind:
            out.append(Problem(f"addons.{key}.version",
                               f"{key} {stored_set.version} runs with CRDs read at {stored_set.files_version} (the "
                               f"newest stored in schemas/): the program applies those and checks every {key} "
                               f"object against them, not against {stored_set.version}'s; {stored_set.note} "
                               f"(docs/addons-fabric.md, CRD upgrades)"))
        if installs(addon) and stored_set is None:
            stored = ", ".join(sorted(STORED[key]))
            out.append(Problem(f"addons.{key}.version",
                               f"no CRDs of {key} {addon.version} are stored in schemas/ (stored: {stored}), so "
                               f"the program does not apply them: Helm installs the chart's crds/ on the first "
                               f"install only and never upgrades them; apply them yourself on every upgrade "
                               f"(docs/addons-fabric.md, CRD upgrades) or use a stored version"))
    return out
