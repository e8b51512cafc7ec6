"""Offline schema validation for everything multinode generates.

Three kinds of checks, all offline and all against schemas this project did not write:

* Custom resources (LeaderWorkerSet, Volcano Job/Queue/HyperNode, Grove PodCliqueSet, KAI Queue,
  Kyverno MutatingPolicy / ValidatingPolicy / ClusterPolicy, NicClusterPolicy, MPIJob, DynamoGraphDeployment, ...)
  are checked against the upstream CRD schemas copied unchanged into ``schemas/`` (see ``schemas/PROVENANCE.md``).
  The check mirrors what the API server does with a custom resource on CREATE, minus ``format``, defaulting and
  admission webhooks:

  - the served version's ``openAPIV3Schema`` (types, enums, required, bounds, patterns, anyOf ...),
    read as JSON Schema draft 4 with OpenAPI 3.0 ``nullable``;
  - **unknown fields are errors**: the API server *prunes* fields that a structural schema does
    not list, silently, so a typo would vanish. ``x-kubernetes-preserve-unknown-fields: true``
    opens a node; ``x-kubernetes-embedded-resource: true`` adds apiVersion/kind/metadata
    (metadata checked as ObjectMeta); properties listed only inside allOf/anyOf/oneOf/not do not
    count as declared (that is how pruning works);
  - ``x-kubernetes-int-or-string``; duplicates in ``x-kubernetes-list-type: set|map`` and missing
    list-map keys that have no default;
  - a ``null`` for a field that is not ``nullable`` counts as absent (the API server prunes it);
  - root metadata: name or generateName required, name a DNS-1123 subdomain, namespace a DNS
    label, label/annotation keys qualified names, label values valid, no unknown ObjectMeta field;
  - the apiVersion must be served by the CRD (``CrdIndex.deprecation`` reports deprecated ones);
  - once the schema holds, the ``x-kubernetes-validations`` CEL rules (``CrdIndex.cel_rule_errors``, with the
    engine of multinode.manifests.cel): each at every value its schema node describes; transition rules
    (``oldSelf``, UPDATE only) and rules the engine cannot evaluate are skipped (``cel_rules_skipped``).

* Core kinds (Deployment, Service, PodTemplate, ...) are checked with the ``kubernetes-validate``
  package's *strict* schemas (``additionalProperties: false`` everywhere), collecting all errors,
  plus the same root-metadata checks except the name format (which differs per core kind).

* Helm values (``helm_values_unknown_keys``) and Kyverno ``{{ }}`` JMESPath expressions
  (``kyverno_expressions`` / ``kyverno_jmespath_errors``).

Schemas are loaded lazily, one CRD file per (group, kind) on first use, and the converted
validators are cached at module level, so repeated calls (e.g. across tests) are cheap.
"""
from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from .helm_values import (
    FREE_FORM_KEYS,
    FREE_FORM_SUFFIXES,
    HELM_CHARTS,
    HELM_STORED_SUBCHARTS,
    HELM_SUBCHARTS,
)
from .helm_values import unknown_keys as helm_values_unknown_keys
from .schemafiles import SCHEMA_DIR, crd_document

__all__ = [
    "SCHEMA_DIR",
    "HELM_CHARTS",
    "FREE_FORM_KEYS",
    "UnknownKindError",
    "CrdIndex",
    "crd_document",
    "validate_object",
    "validate_pod_template",
    "validate_pod_spec",
    "helm_values_unknown_keys",
    "FREE_FORM_SUFFIXES",
    "HELM_STORED_SUBCHARTS",
    "HELM_SUBCHARTS",
    "kyverno_expressions",
    "kyverno_jmespath_errors",
]


_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_LOCK = threading.RLock()


class UnknownKindError(LookupError):
    """Neither a CRD in ``schemas/`` nor kubernetes-validate knows this apiVersion/kind."""

    def __init__(self, api_version: Any, kind: Any, k8s_version: str | None = None):
        self.api_version = api_version
        self.kind = kind
        self.k8s_version = k8s_version
        where = f" (Kubernetes {k8s_version})" if k8s_version else ""
        super().__init__(
            f"no schema for apiVersion={api_version!r} kind={kind!r}{where}: not a CRD in "
            f"{SCHEMA_DIR} and not a core kind known to kubernetes-validate")


# --------------------------------------------------------------------------------------------
# metadata rules (k8s.io/apimachinery validation)
# --------------------------------------------------------------------------------------------
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\Z")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?\Z")
_QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]\Z")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?\Z")

# ObjectMeta fields, as JSON Schema; content rules are in _metadata_errors.
_OBJECT_META: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "generateName": {"type": "string"},
        "namespace": {"type": "string"},
        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
        "annotations": {"type": "object", "additionalProperties": {"type": "string"}},
        "finalizers": {"type": "array", "items": {"type": "string"}},
        "ownerReferences": {"type": "array", "items": {
            "type": "object", "required": ["apiVersion", "kind", "name", "uid"],
            "properties": {"apiVersion": {"type": "string"}, "kind": {"type": "string"},
                           "name": {"type": "string"}, "uid": {"type": "string"},
                           "controller": {"type": "boolean"},
                           "blockOwnerDeletion": {"type": "boolean"}},
            "additionalProperties": False}},
        "uid": {"type": "string"},
        "resourceVersion": {"type": "string"},
        "generation": {"type": "integer"},
        "selfLink": {"type": "string"},
        "creationTimestamp": {"type": ["string", "null"]},
        "deletionTimestamp": {"type": ["string", "null"]},
        "deletionGracePeriodSeconds": {"type": "integer"},
        "managedFields": {"type": "array"},
    },
    "additionalProperties": False,
}


def _qualified_name_errors(key: Any) -> str | None:
    """Label/annotation key: optional DNS-subdomain prefix (<=253) + '/' + name (<=63)."""
    if not isinstance(key, str) or not key:
        return "key must be a non-empty string"
    prefix, _, name = key.rpartition("/")
    if "/" in key and (not prefix or len(prefix) > 253 or not _DNS_SUBDOMAIN.match(prefix)):
        return "prefix must be a DNS-1123 subdomain of at most 253 characters"
    if len(name) > 63 or not _QUALIFIED_NAME.match(name):
        return ("name part must be at most 63 characters, alphanumeric, '-', '_' or '.', "
                "starting and ending with an alphanumeric character")
    return None


def _metadata_errors(meta: Any, where: str, *, require_name: bool, check_name_format: bool) -> list[str]:
    if meta is None:
        return [f"{where}: metadata.name or metadata.generateName is required"] if require_name else []
    if not isinstance(meta, dict):
        return [f"{where}: must be a mapping"]
    errors: list[str] = []
    name = meta.get("name")
    if require_name and not (name or meta.get("generateName")):
        errors.append(f"{where}: metadata.name or metadata.generateName is required")
    if check_name_format and isinstance(name, str) and name:
        if len(name) > 253 or not _DNS_SUBDOMAIN.match(name):
            errors.append(f"{where}.name: {name!r} is not a DNS-1123 subdomain "
                          "(lower case alphanumeric, '-' or '.', at most 253 characters)")
    ns = meta.get("namespace")
    if isinstance(ns, str) and ns and (len(ns) > 63 or not _DNS_LABEL.match(ns)):
        errors.append(f"{where}.namespace: {ns!r} is not a DNS-1123 label")
    for field in ("labels", "annotations"):
        mapping = meta.get(field)
        if not isinstance(mapping, dict):
            continue
        for k, v in mapping.items():
            problem = _qualified_name_errors(k)
            if problem:
                errors.append(f"{where}.{field}.{k}: invalid key: {problem}")
            if field == "labels" and isinstance(v, str) and (len(v) > 63 or not _LABEL_VALUE.match(v)):
                errors.append(f"{where}.labels.{k}: invalid label value {v!r} (at most 63 characters, "
                              "alphanumeric, '-', '_' or '.', starting and ending alphanumeric)")
        if field == "annotations":
            size = sum(len(str(k)) + len(str(v)) for k, v in mapping.items())
            if size > 256 * 1024:
                errors.append(f"{where}.annotations: total size {size} bytes exceeds 256 KiB")
    return errors


# --------------------------------------------------------------------------------------------
# CRD structural schema -> JSON Schema draft 4
# --------------------------------------------------------------------------------------------
_SUBSCHEMA_KEYS = ("properties", "items", "additionalProperties", "allOf", "anyOf", "oneOf", "not")


def _convert(node: Any, in_junctor: bool = False) -> Any:
    """Convert one structural-schema node (OpenAPI v3 as used by CRDs) to JSON Schema draft 4.

    ``in_junctor``: inside allOf/anyOf/oneOf/not, where a schema only adds value validation and
    never declares fields, so no pruning (``additionalProperties: false``) is added there.
    """
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {k: v for k, v in node.items()
                           if k not in _SUBSCHEMA_KEYS and k not in ("description", "x-kubernetes-validations")}
    props = node.get("properties")
    if isinstance(props, dict):
        out["properties"] = {k: _convert(v, in_junctor) for k, v in props.items()}
    items = node.get("items")
    if isinstance(items, list):
        out["items"] = [_convert(i, in_junctor) for i in items]
    elif isinstance(items, dict):
        out["items"] = _convert(items, in_junctor)
    if "additionalProperties" in node:
        ap = node["additionalProperties"]
        out["additionalProperties"] = _convert(ap, in_junctor) if isinstance(ap, dict) else ap
    for k in ("allOf", "anyOf", "oneOf"):
        if isinstance(node.get(k), list):
            out[k] = [_convert(s, True) for s in node[k]]
    if isinstance(node.get("not"), dict):
        out["not"] = _convert(node["not"], True)

    if node.get("nullable") is True:
        if "type" in out:
            t = out["type"]
            out["type"] = (list(t) if isinstance(t, list) else [t]) + ["null"]
        if isinstance(out.get("enum"), list) and None not in out["enum"]:
            out["enum"] = out["enum"] + [None]
    if node.get("x-kubernetes-int-or-string") is True:
        out.pop("type", None)
        if "anyOf" not in node and "oneOf" not in node:
            out["anyOf"] = [{"type": "integer"}, {"type": "string"}]
    if node.get("x-kubernetes-embedded-resource") is True:
        p = out.setdefault("properties", {})
        p["apiVersion"] = {"type": "string"}
        p["kind"] = {"type": "string"}
        p["metadata"] = _OBJECT_META
    # Pruning: fields a structural object node does not declare are dropped by the API server.
    if (not in_junctor and "additionalProperties" not in node
            and not node.get("x-kubernetes-preserve-unknown-fields")
            and (node.get("type") == "object" or "properties" in node)):
        out["additionalProperties"] = False
    return out


def _list_type_check(validator: Any, value: Any, instance: Any,
                     schema: dict[str, Any]) -> Iterator[jsonschema.ValidationError]:
    if not isinstance(instance, list):
        return
    if value == "set":
        seen_items: set[str] = set()
        for i, item in enumerate(instance):
            key = json.dumps(item, sort_keys=True, default=str)
            if key in seen_items:
                yield jsonschema.ValidationError(
                    f"duplicate entry {item!r} at index {i} (x-kubernetes-list-type=set)")
            seen_items.add(key)
    elif value == "map":
        keys = schema.get("x-kubernetes-list-map-keys") or []
        defaults = {k: (schema.get("items") or {}).get("properties", {}).get(k, {}).get("default")
                    for k in keys}
        seen: dict[tuple[str, ...], int] = {}
        for i, item in enumerate(instance):
            if not isinstance(item, dict):
                continue
            missing = [k for k in keys if k not in item and defaults.get(k) is None]
            if missing:
                yield jsonschema.ValidationError(
                    f"entry {i} lacks list-map key(s) {', '.join(missing)} (x-kubernetes-list-type=map)")
                continue
            ident = tuple(json.dumps(item.get(k, defaults.get(k)), sort_keys=True, default=str)
                          for k in keys)
            if ident in seen:
                desc = ", ".join(f"{k}={item.get(k, defaults.get(k))!r}" for k in keys)
                yield jsonschema.ValidationError(
                    f"duplicate entry ({desc}) at index {i} and {seen[ident]} (x-kubernetes-list-type=map)")
            seen.setdefault(ident, i)


_CrdValidator = jsonschema.validators.extend(
    jsonschema.Draft4Validator, {"x-kubernetes-list-type": _list_type_check})


def _drop_nulls(inst: Any, sch: Any) -> Any:
    """Return a copy of ``inst`` without nulls for non-nullable fields (the API server prunes
    them before validation). Walks along the converted schema."""
    if not isinstance(sch, dict):
        return inst
    if isinstance(inst, dict):
        props = sch.get("properties") or {}
        ap = sch.get("additionalProperties")
        out = {}
        for k, v in inst.items():
            sub = props.get(k, ap if isinstance(ap, dict) else None)
            if sub is None:
                out[k] = v  # unknown (will be reported) or free-form content
                continue
            if v is None:
                t = sub.get("type")
                if isinstance(t, list) and "null" in t:
                    out[k] = v
                continue
            out[k] = _drop_nulls(v, sub)
        return out
    if isinstance(inst, list) and isinstance(sch.get("items"), dict):
        return [_drop_nulls(i, sch["items"]) for i in inst]
    return inst


_PRUNED = "(the API server would silently prune them)"
_DROPPED = "(the API server drops them with a warning, or rejects them under strict field validation)"


def _format_error(err: jsonschema.ValidationError, unknown_note: str) -> str:
    path = ".".join(str(p) for p in err.absolute_path) or "<root>"
    msg = err.message
    if err.validator == "additionalProperties" and err.validator_value is False and isinstance(err.instance, dict):
        declared = set(err.schema.get("properties") or {})
        extra = sorted(set(err.instance) - declared)
        msg = f"unknown field(s) {', '.join(map(repr, extra))}: not in the schema {unknown_note}"
    elif err.context:
        msg += " [" + "; ".join(sorted({c.message for c in err.context})) + "]"
    return f"{path}: {msg}"


def _sorted_errors(errors: Iterable[jsonschema.ValidationError]) -> list[jsonschema.ValidationError]:
    return sorted(errors, key=lambda e: [str(p) for p in e.absolute_path])


# --------------------------------------------------------------------------------------------
# CRD index
# --------------------------------------------------------------------------------------------
# Module-level caches shared by every CrdIndex over the same folder.
_HEADS: dict[Path, dict[tuple[str, str], list[Path]]] = {}   # dir -> (group, kind) -> files
_VALIDATORS: dict[tuple[Path, str], Any] = {}                  # (file, version) -> validator
_CEL_NODES: dict[int, tuple[dict, list[tuple[str, dict]]]] = {}  # id(CRD version) -> (it, its CEL rule nodes)

_VERSIONS_LINE = re.compile(r"^\s*versions:\s*$")


def _head_scan(path: Path) -> tuple[str, str] | None:
    """(group, kind) of a CRD file without parsing its (multi-MB) schema: parse only the part
    before ``versions:`` (the last key of ``spec`` in controller-gen output). Falls back to a full
    parse when that does not work."""
    head: list[str] = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if _VERSIONS_LINE.match(line):
                break
            head.append(line)
    doc = None
    try:
        doc = yaml.load("".join(head), Loader=_LOADER)
    except yaml.YAMLError:
        pass
    if not (isinstance(doc, dict) and isinstance(doc.get("spec"), dict)
            and doc["spec"].get("group") and (doc["spec"].get("names") or {}).get("kind")):
        doc = crd_document(path)
    if not isinstance(doc, dict) or doc.get("kind") != "CustomResourceDefinition":
        return None
    return doc["spec"]["group"], doc["spec"]["names"]["kind"]


def _split_api_version(api_version: Any) -> tuple[str, str]:
    if not isinstance(api_version, str):
        return "", ""
    group, _, version = api_version.rpartition("/")
    return group, version


class CrdIndex:
    """Index of the CRDs under ``schema_dir`` (default ``SCHEMA_DIR``).

    Construction only reads the head of each CRD file (group and kind); a CRD's full schema is
    parsed the first time that (group, kind) is asked about, and its converted validator is
    cached per (file, version) at module level.
    """

    def __init__(self, schema_dir: Path | None = None):
        self.schema_dir = Path(schema_dir or SCHEMA_DIR).resolve()
        with _LOCK:
            if self.schema_dir not in _HEADS:
                heads: dict[tuple[str, str], list[Path]] = {}
                for path in sorted(self.schema_dir.rglob("*.y*ml")):
                    if path.name.startswith("values") or "examples" in path.relative_to(self.schema_dir).parts:
                        continue
                    gk = _head_scan(path)
                    if gk:
                        heads.setdefault(gk, []).append(path)
                _HEADS[self.schema_dir] = heads
        self._heads = _HEADS[self.schema_dir]

    # -- lookup ------------------------------------------------------------------------------
    def kinds(self) -> list[tuple[str, str]]:
        """(group, kind) pairs known, without loading any schema."""
        return sorted(self._heads)

    def _version(self, api_version: Any, kind: Any) -> tuple[Path, dict] | None:
        group, version = _split_api_version(api_version)
        for path in self._heads.get((group, kind), []):
            crd = crd_document(path)
            for v in (crd or {}).get("spec", {}).get("versions", []):
                if v.get("name") == version:
                    return path, v
        return None

    def has(self, api_version: Any, kind: Any) -> bool:
        """True when a CRD here defines ``kind`` at ``api_version`` (served or not)."""
        if (_split_api_version(api_version)[0], kind) not in self._heads:
            return False
        return self._version(api_version, kind) is not None

    def versions(self, group: str, kind: str) -> list[dict]:
        """[{name, served, storage, deprecated}] for a (group, kind)."""
        out = []
        for path in self._heads.get((group, kind), []):
            for v in (crd_document(path) or {}).get("spec", {}).get("versions", []):
                out.append({"name": v.get("name"), "served": bool(v.get("served")),
                            "storage": bool(v.get("storage")), "deprecated": bool(v.get("deprecated"))})
        return out

    def deprecation(self, api_version: str, kind: str) -> str | None:
        """The CRD's deprecation warning for this version, or None."""
        found = self._version(api_version, kind)
        if not found or not found[1].get("deprecated"):
            return None
        return found[1].get("deprecationWarning") or f"{api_version} {kind} is deprecated"

    def cel_rules(self, api_version: str, kind: str) -> list[tuple[str, str, str]]:
        """(schema path, rule, message) of every ``x-kubernetes-validations`` CEL rule of this
        version (``validate`` evaluates them with ``cel_rule_errors``)."""
        return [(path, str(r.get("rule", "")), str(r.get("message", "")))
                for path, r in self._cel_rule_nodes(api_version, kind)]

    def _cel_rule_nodes(self, api_version: Any, kind: Any) -> list[tuple[str, dict]]:
        """(schema path, rule) of every x-kubernetes-validations rule of the version's schema. The walk over the
        schema (~1,400 nodes for Volcano's Job) is done once per CRD version, not once per object validated
        (issue 35: it was a third of the pack's per-resource CPU on a stack of Volcano jobs); a copy of the list
        is returned, so a caller cannot change the cached one."""
        found = self._version(api_version, kind)
        if not found:
            raise UnknownKindError(api_version, kind)
        version = found[1]
        with _LOCK:
            hit = _CEL_NODES.get(id(version))
        if hit is not None and hit[0] is version:
            return list(hit[1])
        out: list[tuple[str, dict]] = []

        def walk(n: Any, path: str) -> None:
            if not isinstance(n, dict):
                return
            for r in n.get("x-kubernetes-validations") or []:
                if isinstance(r, dict):
                    out.append((path or "<root>", r))
            for k, v in (n.get("properties") or {}).items():
                walk(v, f"{path}.{k}" if path else k)
            if isinstance(n.get("items"), dict):
                walk(n["items"], path + "[]")
            if isinstance(n.get("additionalProperties"), dict):
                walk(n["additionalProperties"], path + "{}")

        walk(version.get("schema", {}).get("openAPIV3Schema"), "")
        with _LOCK:
            _CEL_NODES[id(version)] = (version, out)     # keeps `version` alive: its id names it
        return list(out)

    def cel_rule_errors(self, obj: dict) -> list[str]:
        """The object's ``x-kubernetes-validations`` rules that evaluate to false, as the API server checks them on
        CREATE: each rule with ``self`` bound to every value its schema node describes (absent values are not
        checked), "path: message" per failure. Evaluated with the CEL engine of the Kyverno policies
        (multinode.manifests.cel). A rule with ``optionalOldSelf: true`` is evaluated with oldSelf =
        optional.none(), as on CREATE. Not evaluated (listed by ``cel_rules_skipped``): other transition rules
        (they read ``oldSelf``, which exists only on UPDATE), and rules that engine cannot compile or evaluate (a
        Kubernetes-only function such as ``quantity()`` or ``format``): never a guess."""
        from .manifests import cel
        out: list[str] = []
        for path, rule in self._cel_rule_nodes(obj.get("apiVersion"), obj.get("kind")):
            expression = str(rule.get("rule", ""))
            if "oldSelf" in expression:
                if rule.get("optionalOldSelf") is not True:
                    _CEL_SKIPPED[expression] = "transition rule (oldSelf): UPDATE only"
                    continue
                # optionalOldSelf: evaluated on CREATE too, with oldSelf = optional.none() (the CRD field's doc)
                expression = f"cel.bind(oldSelf, optional.none(), {expression})"
            for where, value in _instances(obj, path):
                try:
                    ok = cel.evaluate(expression, self=value)
                except cel.CelError as e:
                    _CEL_SKIPPED[expression] = str(e).splitlines()[0]
                    break
                if ok is False:
                    out.append(f"{where}: {rule.get('message') or 'failed rule: ' + expression} "
                               f"(x-kubernetes-validations)")
        return out

    def _validator(self, path: Path, version: dict) -> Any:     # a jsonschema validator (untyped library)
        key = (path, version["name"])
        with _LOCK:
            if key not in _VALIDATORS:
                root = dict(version.get("schema", {}).get("openAPIV3Schema") or {})
                props = dict(root.get("properties") or {})
                crd_meta = props.pop("metadata", None)
                root["properties"] = props
                schema = _convert(root)
                schema["properties"]["apiVersion"] = {"type": "string"}
                schema["properties"]["kind"] = {"type": "string"}
                meta_schema: dict[str, Any] = _OBJECT_META
                if isinstance(crd_meta, dict) and (crd_meta.get("properties") or crd_meta.get("anyOf")
                                                   or crd_meta.get("allOf") or crd_meta.get("oneOf")):
                    extra = dict(crd_meta, **{"x-kubernetes-preserve-unknown-fields": True})
                    meta_schema = {"allOf": [_OBJECT_META, _convert(extra)]}
                schema["properties"]["metadata"] = meta_schema
                _VALIDATORS[key] = _CrdValidator(schema)
            return _VALIDATORS[key]

    # -- validation --------------------------------------------------------------------------
    def validate(self, obj: dict) -> list[str]:
        """Errors as "path: message" strings; [] when valid. Raises ``UnknownKindError`` when no
        CRD here defines the object's apiVersion/kind."""
        if not isinstance(obj, dict):
            return [f"<root>: object is a {type(obj).__name__}, not a mapping"]
        api_version, kind = obj.get("apiVersion"), obj.get("kind")
        found = self._version(api_version, kind)
        if not found:
            raise UnknownKindError(api_version, kind)
        path, version = found
        errors: list[str] = []
        if version.get("served") is False:
            errors.append(f"apiVersion: {api_version} {kind} is not served by the CRD")
        errors += _metadata_errors(obj.get("metadata"), "metadata", require_name=True,
                                   check_name_format=True)
        validator = self._validator(path, version)
        cleaned = _drop_nulls(obj, validator.schema)
        errors += [_format_error(e, _PRUNED) for e in _sorted_errors(validator.iter_errors(cleaned))]
        if not errors:        # the rules assume a structurally valid object (the API server checks both)
            errors += self.cel_rule_errors(cleaned)
        return errors


# rule -> why it was not evaluated (transition rule, or a function the CEL engine lacks); see cel_rule_errors
_CEL_SKIPPED: dict[str, str] = {}


def cel_rules_skipped() -> dict[str, str]:
    """The x-kubernetes-validations rules met so far that were not evaluated, with the reason."""
    return dict(_CEL_SKIPPED)


def _instances(obj: Any, path: str) -> list[tuple[str, Any]]:
    """(instance path, value) of every value a schema path ("spec.members[].selector", "<root>", "a{}") describes."""
    found: list[tuple[str, Any]] = [("", obj)]
    if path == "<root>":
        return [("<root>", obj)]
    for seg in path.split("."):
        name, suffix = seg, ""
        while name.endswith(("[]", "{}")):
            suffix = name[-2:] + suffix
            name = name[:-2]
        nxt: list[tuple[str, Any]] = []
        for where, value in found:
            if name:
                if not isinstance(value, dict) or name not in value or value[name] is None:
                    continue
                nxt.append((f"{where}.{name}" if where else name, value[name]))
            else:
                nxt.append((where, value))
        for mark in [suffix[i:i + 2] for i in range(0, len(suffix), 2)]:
            expanded: list[tuple[str, Any]] = []
            for where, value in nxt:
                if mark == "[]" and isinstance(value, list):
                    expanded += [(f"{where}[{i}]", v) for i, v in enumerate(value)]
                elif mark == "{}" and isinstance(value, dict):
                    expanded += [(f"{where}.{k}", v) for k, v in value.items()]
            nxt = expanded
        found = nxt
    return found


_DEFAULT_INDEX: CrdIndex | None = None


def _default_index() -> CrdIndex:
    global _DEFAULT_INDEX
    with _LOCK:
        if _DEFAULT_INDEX is None:
            _DEFAULT_INDEX = CrdIndex()
        return _DEFAULT_INDEX


# --------------------------------------------------------------------------------------------
# core kinds via kubernetes-validate (strict)
# --------------------------------------------------------------------------------------------
_CORE_VALIDATORS: dict[tuple[str, str], Any] = {}   # (schema dir, file name) -> validator
_CORE_REGISTRIES: dict[str, Any] = {}


def _core_validator(obj: dict, k8s_version: str) -> Any:     # a jsonschema validator or None
    """A jsonschema validator built from kubernetes-validate's bundled strict schema, the same
    way ``kubernetes_validate.validate`` builds it, so that ALL errors can be collected (the
    package's public ``validate`` raises on the first one). Returns None if the package's
    internals are not as expected (the caller then falls back to the public function).
    Raises UnknownKindError when there is no schema for the kind."""
    try:
        from kubernetes_validate import utils as kvu
        from packaging.version import Version
        from referencing import Registry, Resource
    except ImportError:  # pragma: no cover - dependency missing
        return None
    try:
        wanted = Version(kvu.major_minor(k8s_version.lstrip("v")))
        known = kvu.all_versions()
        candidates = [v for v in known if Version(kvu.major_minor(v)) <= wanted]
        if not candidates or wanted > Version(kvu.major_minor(known[-1])):
            raise ValueError(f"Kubernetes {k8s_version} is outside what kubernetes-validate bundles "
                             f"({kvu.major_minor(known[0])} to {kvu.major_minor(known[-1])})")
        schema_dir = f"v{candidates[-1]}-local-strict"
        api = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", str(obj.get("apiVersion")))
        fname = f"{str(obj.get('kind')).lower()}-{api}.json"
        key = (schema_dir, fname)
        with _LOCK:
            if key not in _CORE_VALIDATORS:
                try:
                    schema = kvu.schema_contents(f"kubernetes-json-schema/{schema_dir}/{fname}", k8s_version)
                except OSError:   # no such schema file, or a kind too long to be a file name (ENAMETOOLONG)
                    raise UnknownKindError(obj.get("apiVersion"), obj.get("kind"), k8s_version) from None
                if schema_dir not in _CORE_REGISTRIES:
                    defs = kvu.schema_contents(f"kubernetes-json-schema/{schema_dir}/_definitions.json",
                                               k8s_version)
                    _CORE_REGISTRIES[schema_dir] = Resource.from_contents(defs) @ Registry()
                registry = Resource.from_contents(schema) @ _CORE_REGISTRIES[schema_dir]
                _CORE_VALIDATORS[key] = jsonschema.validators.Draft202012Validator(schema, registry=registry)
            return _CORE_VALIDATORS[key]
    except (UnknownKindError, ValueError):
        raise
    except Exception:  # pragma: no cover - package internals changed
        return None


def _validate_core(obj: dict, k8s_version: str) -> list[str]:
    import kubernetes_validate as kv

    validator = _core_validator(obj, k8s_version)
    if validator is not None:
        errors = [_format_error(e, _DROPPED) for e in _sorted_errors(validator.iter_errors(obj))]
    else:  # pragma: no cover - fallback: public API, first error only
        try:
            kv.validate(obj, k8s_version, strict=True)
            errors = []
        except kv.SchemaNotFoundError:
            raise UnknownKindError(obj.get("apiVersion"), obj.get("kind"), k8s_version) from None
        except kv.ValidationError as e:
            errors = [f"{'.'.join(map(str, e.path)) or '<root>'}: {e.message}"]
    errors += _metadata_errors(obj.get("metadata"), "metadata", require_name=True, check_name_format=False)
    spec = obj.get("spec")
    template = obj.get("template") if obj.get("kind") == "PodTemplate" else (
        spec.get("template") if isinstance(spec, dict) else None)
    if isinstance(template, dict):
        where = "template.metadata" if obj.get("kind") == "PodTemplate" else "spec.template.metadata"
        errors += _metadata_errors(template.get("metadata"), where, require_name=False, check_name_format=False)
    return errors


def validate_object(obj: dict, k8s_version: str = "1.33") -> list[str]:
    """Validate one Kubernetes object; returns "path: message" errors ([] = valid).

    A CRD in ``schemas/`` for the apiVersion+kind wins; otherwise kubernetes-validate's strict
    schema for ``k8s_version`` (the newest bundled minor not newer than it; ``ValueError`` when
    ``k8s_version`` is outside the bundled range); ``UnknownKindError`` if neither knows the kind."""
    if not isinstance(obj, dict):
        return [f"<root>: object is a {type(obj).__name__}, not a mapping"]
    if not isinstance(obj.get("apiVersion"), str) or not isinstance(obj.get("kind"), str):
        return ["<root>: apiVersion and kind are required strings"]
    index = _default_index()
    if index.has(obj["apiVersion"], obj["kind"]):
        return index.validate(obj)
    aggregated = _aggregated_validator(obj["apiVersion"], obj["kind"])
    if aggregated is not None:
        return (_metadata_errors(obj.get("metadata"), "metadata", require_name=True, check_name_format=True)
                + [_format_error(e, _PRUNED) for e in _sorted_errors(aggregated.iter_errors(obj))])
    return _validate_core(obj, k8s_version)


# --------------------------------------------------------------------------------------------
# kinds served by an aggregated API server (no CRD): Karmada's Cluster, from its OpenAPI v2 document
# --------------------------------------------------------------------------------------------
#: OpenAPI (Swagger 2.0) documents whose definitions carry x-kubernetes-group-version-kind.
SWAGGER_FILES = ("karmada/swagger.json",)
_AGGREGATED_GROUPS = frozenset({"cluster.karmada.io"})    # only these: the others in the file have CRDs
_SWAGGER: dict[str, Any] = {}
_AGGREGATED: dict[tuple[str, str], Any] = {}


def _swagger_schema(node: Any, definitions: dict[str, Any], depth: int = 0) -> Any:
    """A Swagger definition as strict JSON Schema: $refs inlined, objects with properties closed (the
    aggregated API server drops unknown fields like a structural CRD does), ObjectMeta as ours."""
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    if isinstance(ref, str):
        name = ref.rsplit("/", 1)[-1]
        if name.endswith("apimachinery.pkg.apis.meta.v1.ObjectMeta"):
            return _OBJECT_META
        if name.endswith(("apimachinery.pkg.api.resource.Quantity", "apimachinery.pkg.util.intstr.IntOrString")):
            return {"anyOf": [{"type": "integer"}, {"type": "number"}, {"type": "string"}]}
        if name.endswith("apimachinery.pkg.apis.meta.v1.Time"):
            return {"type": ["string", "null"]}
        if depth > 40:
            return {}
        return _swagger_schema(definitions.get(name, {}), definitions, depth + 1)
    out: dict[str, Any] = {k: v for k, v in node.items()
                           if k not in ("description", "properties", "items", "additionalProperties",
                                        "x-kubernetes-group-version-kind", "default")}
    if isinstance(node.get("properties"), dict):
        out["properties"] = {k: _swagger_schema(v, definitions, depth + 1) for k, v in node["properties"].items()}
        if "additionalProperties" not in node:
            out["additionalProperties"] = False
    if isinstance(node.get("items"), dict):
        out["items"] = _swagger_schema(node["items"], definitions, depth + 1)
    if isinstance(node.get("additionalProperties"), dict):
        out["additionalProperties"] = _swagger_schema(node["additionalProperties"], definitions, depth + 1)
    return out


def _aggregated_validator(api_version: str, kind: str) -> Any:
    """A validator for an aggregated-API kind of SWAGGER_FILES, or None."""
    group, version = _split_api_version(api_version)
    if group not in _AGGREGATED_GROUPS:
        return None
    with _LOCK:
        if (api_version, kind) not in _AGGREGATED:
            found = None
            for rel in SWAGGER_FILES:
                if rel not in _SWAGGER:
                    with open(SCHEMA_DIR / rel, encoding="utf-8") as f:
                        _SWAGGER[rel] = json.load(f)
                defs = _SWAGGER[rel].get("definitions") or {}
                for d in defs.values():
                    gvks = d.get("x-kubernetes-group-version-kind") or []
                    if any(g.get("group") == group and g.get("version") == version and g.get("kind") == kind
                           for g in gvks):
                        schema = _swagger_schema(d, defs)
                        schema["properties"]["apiVersion"] = {"type": "string", "enum": [api_version]}
                        schema["properties"]["kind"] = {"type": "string", "enum": [kind]}
                        found = jsonschema.Draft4Validator(schema)
                        break
                if found is not None:
                    break
            _AGGREGATED[(api_version, kind)] = found
        return _AGGREGATED[(api_version, kind)]


def validate_pod_template(template: dict, k8s_version: str = "1.33") -> list[str]:
    """Strictly validate a PodTemplateSpec ({metadata, spec}) by wrapping it in a v1 PodTemplate.
    Error paths start with ``template.``."""
    wrapper = {"apiVersion": "v1", "kind": "PodTemplate",
               "metadata": {"name": "validation-wrapper"}, "template": template}
    return _validate_core(wrapper, k8s_version)


def validate_pod_spec(spec: dict, k8s_version: str = "1.33") -> list[str]:
    """Strictly validate a PodSpec by wrapping it in a v1 Pod. Error paths start with ``spec.``."""
    wrapper = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "validation-wrapper"}, "spec": spec}
    return _validate_core(wrapper, k8s_version)


# --------------------------------------------------------------------------------------------
# Helm values
# --------------------------------------------------------------------------------------------
# The walk lives in multinode/helm_values.py (light: `plan` runs it on the stack's own add-on values, issue 40);
# HELM_CHARTS, FREE_FORM_KEYS, helm_values_unknown_keys ... are re-exported from there (imports above).


# --------------------------------------------------------------------------------------------
# Kyverno {{ }} expressions
# --------------------------------------------------------------------------------------------
def _scan_expressions(text: str) -> Iterator[tuple[str, str | None]]:
    """Yield (expression, None) for each ``{{ ... }}`` in ``text`` and (fragment, "unterminated")
    for a ``{{`` that is never closed. ``\\{{`` (Kyverno's escape) is skipped. Braces inside
    JMESPath multiselect hashes and inside quoted strings/literals are balanced."""
    i, n = 0, len(text)
    while True:
        start = text.find("{{", i)
        if start < 0:
            return
        if start > 0 and text[start - 1] == "\\":
            i = start + 2
            continue
        j, depth, quote = start + 2, 0, None
        end = -1
        while j < n:
            c = text[j]
            if quote:
                if c == "\\":
                    j += 2
                    continue
                if c == quote:
                    quote = None
            elif c in "'\"`":
                quote = c
            elif c == "{":
                depth += 1
            elif c == "}":
                if depth:
                    depth -= 1
                elif j + 1 < n and text[j + 1] == "}":
                    end = j + 2
                    break
                # a lone '}' at depth 0: not a terminator, keep scanning
            j += 1
        if end < 0:
            # maybe an unbalanced quote or brace inside: fall back to the first plain '}}' so
            # that the JMESPath parser reports the real problem
            plain = text.find("}}", start + 2)
            if plain < 0:
                yield text[start:], "unterminated"
                return
            end = plain + 2
        yield text[start:end], None
        i = end


def _walk_strings(node: Any, path: str) -> Iterator[tuple[str, str]]:
    if isinstance(node, str):
        yield path or "<root>", node
    elif isinstance(node, dict):
        for k, v in node.items():
            p = f"{path}.{k}" if path else str(k)
            if isinstance(k, str):
                yield p + " (key)", k
            yield from _walk_strings(v, p)
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _walk_strings(v, f"{path}[{i}]")


def kyverno_expressions(policy: dict) -> list[str]:
    """Every ``{{ ... }}`` expression (braces included) in any string, key or value, of the
    policy, in document order. Escaped ``\\{{ ... }}`` is literal text and is skipped."""
    return [expr for _, s in _walk_strings(policy, "")
            for expr, problem in _scan_expressions(s) if problem is None]


def _jmespath_message(e: Exception) -> str:
    from jmespath.exceptions import IncompleteExpressionError, LexerError

    pos = getattr(e, "lex_position", None)
    if isinstance(e, LexerError):
        return f"{getattr(e, 'message', None) or e} at position {pos}"
    if isinstance(e, IncompleteExpressionError):
        return f"incomplete expression (ends at position {pos})"
    msg = getattr(e, "msg", None)
    if msg and pos is not None:
        return f"{msg} at position {pos}"
    return " ".join(str(e).split())


def kyverno_jmespath_errors(policy: dict) -> list[str]:
    """``"<path>: <expression>: <error>"`` for each ``{{ }}`` expression whose body does not
    parse with ``jmespath.compile``, and for each ``{{`` that is never closed.

    Only parsing is checked: Kyverno's custom functions (to_string, divide, lookup, items, ...)
    parse like any function call, and ``{{@}}`` is the current node."""
    import jmespath
    from jmespath.exceptions import JMESPathError

    errors: list[str] = []
    for path, s in _walk_strings(policy, ""):
        for expr, problem in _scan_expressions(s):
            if problem:
                errors.append(f"{path}: {expr!r}: '{{{{' is never closed with '}}}}'")
                continue
            body = expr[2:-2].strip()
            if not body:
                errors.append(f"{path}: {expr!r}: empty expression")
                continue
            try:
                jmespath.compile(body)
            except JMESPathError as e:
                errors.append(f"{path}: {expr!r}: {_jmespath_message(e)}")
            except Exception as e:  # noqa: BLE001 - parser bugs surface as other errors
                errors.append(f"{path}: {expr!r}: {type(e).__name__}: {e}")
    return errors
