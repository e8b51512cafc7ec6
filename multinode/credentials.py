"""What counts as a credential: one place for the stack-file reader, the config checks and the policy pack.

Rules (each refusal names the key, never the value):
* `multinode` secret keys (config.SECRET_KEYS) must be Pulumi secrets (`{secure: ...}`).
* Provider credentials (`aws:secretKey`, `gcp:credentials`, ...) must not sit in the stack file in plain text:
  `pulumi config set --secret`, or better short-lived credentials (Pulumi ESC with OIDC, instance roles).
* Objects passed through `multinode:manifests` carry no literal credentials: no Secret with `data` /
  `stringData`, no ConfigMap key named like a credential.
"""
from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

# Words that make an env / ConfigMap key name a credential (HF_TOKEN, NGC_API_KEY, DB_PASSWORD...).
SECRET_WORDS = {"TOKEN", "KEY", "APIKEY", "PASSWORD", "PASSWD", "SECRET", "CREDENTIALS", "CREDENTIAL"}
# ...except names where KEY/TOKEN mean something else (a cache key, a max-token count).
_NOT_SECRET = re.compile(r"(^|_)(MAX|NUM|N)_?(NEW_)?TOKENS?\Z|TOKENIZER|(^|_)KEY_?(PREFIX|NAME|ID|PATH|FILE)\Z"
                         r"|(^|_)(PUBLIC|PUB)_KEY", re.IGNORECASE)


def looks_secret(name: str) -> bool:
    """True for names like HF_TOKEN, ngcApiKey, DB_PASSWORD, client-secret (camelCase split too)."""
    if _NOT_SECRET.search(name.replace("-", "_")):
        return False
    snake = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name)
    parts = set(re.split(r"[^A-Za-z0-9]+", snake.upper()))
    return bool(parts & SECRET_WORDS) or name.upper().endswith(("_TOKEN", "_KEY", "APIKEY", "PASSWORD", "SECRET"))


# Provider config keys that hold a credential, per namespace (the providers' own config names:
# pulumi-aws accessKey/secretKey/token; pulumi-azure-native clientSecret, clientCertificatePassword,
# oidcToken; pulumi-gcp credentials/accessToken; pulumi-oci privateKey/privateKeyPassword;
# pulumi-kubernetes kubeconfig when it holds the file's contents rather than a path).
PROVIDER_CREDENTIALS = {
    "aws": ("accessKey", "secretKey", "token"),
    "azure-native": ("clientSecret", "clientCertificatePassword", "oidcToken", "oidcRequestToken",
                     "clientCertificate"),
    "gcp": ("credentials", "accessToken"),
    "oci": ("privateKey", "privateKeyPassword"),
    "kubernetes": ("kubeconfig",),
}
_PATH_LIKE = re.compile(r"^[~A-Za-z0-9_./\\:-]+\Z")

PROVIDER_FIX = {
    "aws": "let the provider take short-lived credentials (an OIDC role via Pulumi ESC `environment:`, "
           "AWS_PROFILE / AWS_* env vars, or the instance role)",
    "azure-native": "use OIDC (azure-native:useOidc with Pulumi ESC) or a managed identity",
    "gcp": "use workload identity federation (Pulumi ESC gcp-login) or GOOGLE_APPLICATION_CREDENTIALS",
    "oci": "point oci:privateKeyPath at the key file, or use instance / workload principals",
    "kubernetes": "point kubernetes:kubeconfig at a file path, or use multinode:kubeconfig as a secret",
}


# Provider keys that take a file path *or* the file's contents (issue 32): the path is no secret, the contents are.
# kubernetes:kubeconfig (pulumi-kubernetes: "either the path to a kubeconfig file or the contents"), gcp:credentials
# (pulumi-gcp: "Either the path to or the contents of a service account key file in JSON format").
PATH_OR_CONTENTS = {("kubernetes", "kubeconfig"), ("gcp", "credentials")}
# Keys named like a credential that hold file paths: aws:sharedCredentialsFiles (a list of paths, pulumi-aws),
# *Path / *File / *Paths / *Files (oci:privateKeyPath, azure-native:clientCertificatePath), ids and names.
_NOT_MATERIAL_SUFFIXES = ("Path", "File", "Paths", "Files", "Id", "Name")


def is_path(value: Any, bare_names: bool = False) -> bool:
    """A file path written as one line of path characters (`~/.config/gcloud/key.json`, `C:\\keys\\k.json`), never
    key material: no newline, no JSON, no PEM; and with a '/', '\\', '.' or a leading '~' in it, so a bare token
    (`ya29abc...`) is not taken for a file name, unless `bare_names` (a kubeconfig called `config`)."""
    if not isinstance(value, str) or "\n" in value or not _PATH_LIKE.match(value):
        return False
    return bare_names or value.startswith("~") or any(ch in value for ch in "/\\.")


def provider_credential(ns: str, key: str, value: Any) -> bool:
    """A provider key that holds a credential in this value. A path is not one: a kubeconfig or GCP key *path*, the
    files of aws:sharedCredentialsFiles (refused only inline key material: the contents, a PEM, a JSON key)."""
    if (ns, key) in PATH_OR_CONTENTS and is_path(value, bare_names=ns == "kubernetes"):
        return False
    if key in PROVIDER_CREDENTIALS.get(ns, ()):
        return True
    if ns in PROVIDER_CREDENTIALS and looks_secret(key) and key.endswith(_NOT_MATERIAL_SUFFIXES):
        items = value if isinstance(value, list) else [value]
        return not all(is_path(v) for v in items)      # a path list is fine; key material under it is not
    return ns in PROVIDER_CREDENTIALS and looks_secret(key)


def plain_provider_credential_message(full_key: str, ns: str) -> str:
    return (f"a provider credential in plain text in the stack file: anyone who reads the repository or the "
            f"plan output reads it; remove it and store it encrypted with `pulumi config set --secret "
            f"{full_key} ...`, or better {PROVIDER_FIX.get(ns, 'use short-lived credentials (Pulumi ESC with OIDC)')}")


def manifest_credentials(obj: Any) -> list[tuple[str, str]]:
    """(relative key path, message) for every literal credential in one hand-written object; never the value."""
    out: list[tuple[str, str]] = []
    if not isinstance(obj, dict):
        return out
    kind = obj.get("kind")
    if kind == "Secret":
        for field in ("data", "stringData"):
            data = obj.get(field)
            if isinstance(data, dict) and data:
                out.append((field, f"a Secret's {field} written in the stack file is stored and shown in clear "
                                   f"text (base64 is not encryption); create the Secret outside the stack (kubectl "
                                   f"create secret, External Secrets, Secrets Store CSI) and reference it by name, "
                                   f"or pass the value as a `pulumi config set --secret` key"))
            elif data not in (None, {}):
                out.append((field, "a Secret's data in the stack file is refused whatever its shape; create the "
                                   "Secret outside the stack and reference it by name"))
    else:
        out += _env_material(obj)
    if kind == "ConfigMap":
        for field in ("data", "binaryData"):
            data = obj.get(field)
            for name in _keys(data):
                if looks_secret(name):
                    out.append((f"{field}.{name}", f"a ConfigMap key named like a credential ({name}); "
                                                    f"ConfigMaps are readable by anyone with read access to the "
                                                    f"namespace: put it in a Secret created outside the stack "
                                                    f"and mount it / use secretKeyRef"))
    return out


def secret_path(obj: Any, path: Iterable[Any]) -> bool:
    """Whether the value at `path` inside a hand-written object (or a stack config) may hold a credential: any key
    on the way is named like one (data.DB_PASSWORD, env.HF_TOKEN), it is a Secret's data / stringData, or it is
    (inside) the `value` of an env entry whose name is named like one. Such a value is never shown, whatever its
    type (a number, a map)."""
    parts = list(path)
    if isinstance(obj, dict) and obj.get("kind") == "Secret" and parts and parts[0] in ("data", "stringData"):
        return True
    node = obj
    for part in parts:
        if isinstance(part, str) and not part.isdigit() and looks_secret(part):
            return True
        if isinstance(node, dict) and part == "value" and isinstance(node.get("name"), str) \
                and looks_secret(node["name"]):
            return True
        if isinstance(node, dict):
            node = node.get(part if part in node or not str(part).isdigit() else int(part))
        elif isinstance(node, list) and str(part).isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            node = None
    return False


def redacted_schema_error(obj: Any, error: str) -> str:
    """A schema error ("path: <value> is not of type ...") with the value replaced by [secret] when the path may
    hold a credential (secret_path)."""
    where, sep, rest = error.partition(": ")
    if not sep or not secret_path(obj, where.split(".")):
        return error
    verdicts = [m.start() for m in re.finditer(r" (?:is not|is too|does not|should not|must) ", rest)]
    return f"{where}: [secret]{rest[verdicts[-1]:]}" if verdicts else f"{where}: [secret] is refused by the schema"


def _env_material(obj: dict[str, Any]) -> list[tuple[str, str]]:
    """An env entry named like a credential whose literal `value` is not text (a number, a map, a list): the API
    server refuses it anyway (EnvVar.value is a string), and it is a credential written in the object. Refused
    before anything is written to build/; a text value is left to the pack's no-literal-secrets-in-env rule."""
    from .podspecs import pod_specs
    out: list[tuple[str, str]] = []
    for ref in pod_specs(obj):
        base = "spec" if ref.where == "(object)" else ref.where if ref.where.endswith(
            (".spec.podSpec", ".extraPodSpec")) else f"{ref.where}.spec"
        for field in ("initContainers", "containers", "ephemeralContainers"):
            seq = ref.spec.get(field)
            for i, c in enumerate(seq if isinstance(seq, list) else []):
                env = c.get("env") if isinstance(c, dict) else None
                for j, e in enumerate(env if isinstance(env, list) else []):
                    if not isinstance(e, dict) or not isinstance(e.get("name"), str) or not looks_secret(e["name"]):
                        continue
                    v = e.get("value")
                    if v is not None and not isinstance(v, str):
                        out.append((f"{base}.{field}[{i}].env[{j}].value",
                                    f"env {e['name']} is named like a credential and holds a literal value that is "
                                    f"not text ([secret]); the API server refuses it, and a credential does not "
                                    f"belong in the object: use valueFrom.secretKeyRef"))
    return out


def _keys(data: Any) -> Iterable[str]:
    return [str(k) for k in data] if isinstance(data, dict) else []
