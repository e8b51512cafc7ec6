"""No literal secrets in container env: credentials come from Secrets (valueFrom), never from the object."""
from __future__ import annotations

import re
from collections.abc import Iterator

from multinode import credentials, limits

from .. import objects
from ..engine import MANDATORY, Context, Resource, Rule

NAME = "no-literal-secrets-in-env"
SECRET_WORDS = credentials.SECRET_WORDS      # one definition of "named like a credential" (multinode/credentials.py)
# Values that are plainly not credentials: booleans, small numbers, paths.
_HARMLESS = re.compile(r"^(true|false|yes|no|on|off|\d{1,6}|/.*)\Z", re.IGNORECASE)


looks_secret = credentials.looks_secret
# an env name or a ConfigMap key (ConfigMap keys: at most 253 characters, k8s.io/apimachinery
# pkg/util/validation/validation.go IsConfigMapKey uses DNS1123SubdomainMaxLength)
ALLOWED_NAME = {"type": "string", "maxLength": limits.DNS_SUBDOMAIN_CHARS}


def check_literal_secrets(res: Resource, ctx: Context) -> Iterator[str]:
    if not res.is_k8s or res.props.get("kind") in ("Secret", "ConfigMap"):
        return
    allowed = set(ctx.setting(NAME, "allowedNames", []) or [])
    for template, spec in objects.named_pod_specs(res.props):
        where = f" ({template})" if template else ""
        for c in objects.seq(spec.get("containers")) + objects.seq(spec.get("initContainers")):
            c = objects.mapping(c)
            for e in objects.seq(c.get("env")):
                if not isinstance(e, dict):
                    continue
                name, value = str(e.get("name", "")), e.get("value")
                if name in allowed or not looks_secret(name) or value is None or isinstance(value, bool):
                    continue
                if isinstance(value, (int, float)) and _HARMLESS.match(str(value)):
                    continue
                if isinstance(value, str) and (not value or value == objects.UNKNOWN or value.startswith("[secret]")
                                               or _HARMLESS.match(value)):
                    continue
                # never echo the value itself, whatever its type (a number, a map: the API server refuses those,
                # but the value is still written in the object)
                size = (f"{len(value)} characters" if isinstance(value, str) else "a map" if isinstance(value, dict)
                        else "a list" if isinstance(value, list) else "a number")
                yield (f"{res.label}{where}: container {c.get('name', '?')} sets env {name} to a literal value "
                       f"({size}); anyone who can read the object or the stack state reads the "
                       f"credential. Store it in a Secret and use valueFrom.secretKeyRef (name: <secret>, key: "
                       f"<key>) instead")


CONFIGMAP_RULE = "no-credentials-in-configmap"


def check_configmap_credentials(res: Resource, ctx: Context) -> Iterator[str]:
    """A ConfigMap key named like a credential (HF_TOKEN, dbPassword...) with a value that is not plainly
    harmless: ConfigMaps are readable by anyone who may read the namespace. Names the key, never the value."""
    if not res.is_k8s or res.props.get("kind") != "ConfigMap":
        return
    allowed = set(ctx.setting(CONFIGMAP_RULE, "allowedNames", []) or [])
    for field in ("data", "binaryData"):
        for name, value in objects.mapping(res.props.get(field)).items():
            name = str(name)
            if name in allowed or not credentials.looks_secret(name):
                continue
            if isinstance(value, str) and (not value or value == objects.UNKNOWN or _HARMLESS.match(value)):
                continue
            yield (f"{res.label}: {field} key {name} looks like a credential; a ConfigMap is readable by anyone who "
                   f"can read the namespace and the stack state. Put it in a Secret created outside the stack "
                   f"and mount it or use valueFrom.secretKeyRef")


RULES = [
    Rule(NAME,
         "Environment variables named like credentials (*TOKEN*, *KEY*, *PASSWORD*, *SECRET*) take their value "
         "from a Secret (valueFrom), not a literal `value`.",
         MANDATORY, check_literal_secrets,
         config={"allowedNames": {"type": "array", "items": ALLOWED_NAME, "maxItems": limits.LIST_ITEMS,
                                  "default": [], "description": "env names that look secret but are not"}}),
    Rule(CONFIGMAP_RULE,
         "ConfigMap keys named like credentials (*TOKEN*, *KEY*, *PASSWORD*, *SECRET*) do not hold a literal value: "
         "credentials live in Secrets.",
         MANDATORY, check_configmap_credentials,
         config={"allowedNames": {"type": "array", "items": ALLOWED_NAME, "maxItems": limits.LIST_ITEMS,
                                  "default": [], "description": "ConfigMap keys that look secret but are not"}}),
]
