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


# ------------------------------------------------------------------ literal credentials anywhere in a stack (issue 46)
# Token formats that are credentials whatever key holds them, each from its issuer's own description:
_TOKEN_FORMATS: tuple[tuple[str, re.Pattern[str]], ...] = (
    # Hugging Face user access tokens start with "hf_" (https://huggingface.co/docs/hub/security-tokens)
    ("Hugging Face token", re.compile(r"(?<![A-Za-z0-9])hf_[A-Za-z0-9]{30,}")),
    # NGC personal / API keys start with "nvapi-" (https://docs.nvidia.com/ngc/latest/ngc-user-guide.html, API keys)
    ("NGC API key", re.compile(r"(?<![A-Za-z0-9])nvapi-[A-Za-z0-9_-]{20,}")),
    # AWS access key ids: AKIA (long-term), ASIA (temporary), 20 characters
    # (https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_identifiers.html#identifiers-unique-ids)
    ("AWS access key id", re.compile(r"(?<![A-Z0-9])(?:AKIA|ASIA)[A-Z0-9]{16}(?![A-Z0-9])")),
    # GitHub tokens: ghp_/gho_/ghu_/ghs_/ghr_ + 36, fine-grained github_pat_
    # (https://github.blog/engineering/platform-security/behind-githubs-new-authentication-token-formats/)
    ("GitHub token", re.compile(r"(?<![A-Za-z0-9])(?:gh[pousr]_[A-Za-z0-9]{36}|github_pat_[A-Za-z0-9_]{22,})")),
    # GitLab personal access tokens: glpat- (https://docs.gitlab.com/security/tokens/#token-prefixes)
    ("GitLab token", re.compile(r"(?<![A-Za-z0-9])glpat-[A-Za-z0-9_-]{20,}")),
    # Slack tokens: xoxb- / xoxp- / xoxa- / xoxr- / xoxs- (https://api.slack.com/concepts/token-types)
    ("Slack token", re.compile(r"(?<![A-Za-z0-9])xox[abprs]-[A-Za-z0-9-]{10,}")),
    # Google API keys: AIza + 35; OAuth 2.0 access tokens: ya29. (https://cloud.google.com/docs/authentication/api-keys,
    # https://cloud.google.com/docs/authentication/token-types#access)
    ("Google API key", re.compile(r"(?<![A-Za-z0-9])AIza[0-9A-Za-z_-]{35}")),
    ("Google OAuth access token", re.compile(r"(?<![A-Za-z0-9])ya29\.[0-9A-Za-z_-]{20,}")),
    # OpenAI-style secret keys: sk- / sk-proj- (https://platform.openai.com/docs/api-reference/authentication)
    ("API secret key", re.compile(r"(?<![A-Za-z0-9-])sk-(?:proj-)?[A-Za-z0-9_-]{20,}")),
    # PEM private keys (RFC 7468: "-----BEGIN PRIVATE KEY-----", "-----BEGIN RSA PRIVATE KEY-----", ...)
    ("private key", re.compile(r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----")),
    # JSON Web Tokens (RFC 7519: base64url header "eyJ..." . payload . signature): Kubernetes service account tokens
    ("JSON Web Token", re.compile(r"(?<![A-Za-z0-9])eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}")),
    # Azure Storage connection strings carry the account key (https://learn.microsoft.com/azure/storage/common/
    # storage-configure-connection-string): AccountKey=<base64>; a SAS token's signature: sig=<base64>
    ("Azure storage account key", re.compile(r"AccountKey=[A-Za-z0-9+/]{20,}")),
    # a password in a URL's userinfo (RFC 3986 3.2.1: "user:password" is deprecated because it is sent in clear)
    # the scheme starts where no scheme character precedes it and is at most 32 characters: an unbounded
    # `[A-Za-z][A-Za-z0-9+.-]*` before `://` is tried from every position of a long word, quadratic in its length
    # (a 3 MiB script took hours; the hostile-input fuzz caught it)
    ("password in a URL", re.compile(r"(?<![A-Za-z0-9+.-])[A-Za-z][A-Za-z0-9+.-]{0,31}://[^\s/:@]+:(?!\$)[^\s/@]+@")),
)
# Values that are plainly not credentials (booleans, small numbers, absolute paths) and references that read one at
# run time: `$(NAME)` (Kubernetes expands it in command/args from the container's env), `$NAME` / `${NAME}` (a shell).
HARMLESS_VALUE = re.compile(r"^(true|false|yes|no|on|off|none|null|\d{1,6}|/.*|)\Z", re.IGNORECASE)
_REFERENCE = re.compile(r"^\$(\([A-Za-z_][A-Za-z0-9_]*\)|\{[A-Za-z_][A-Za-z0-9_]*\}|[A-Za-z_][A-Za-z0-9_]*)\Z")
# Names whose TOKEN is not a credential: the special tokens of a tokenizer (--pad-token, eos_token ...).
_TOKENIZER_TOKEN = re.compile(r"(^|_)(PAD|EOS|BOS|UNK|SEP|CLS|MASK|SPECIAL|START|END|STOP|IMAGE|AUDIO|VIDEO)_TOKENS?"
                              r"(_IDS?)?\Z", re.IGNORECASE)


def token_format(value: str) -> str | None:
    """The kind of credential `value` holds by its format alone (an `hf_...` token, a PEM key...), or None."""
    if len(value) < 16:
        return None
    for kind, pattern in _TOKEN_FORMATS:
        if pattern.search(value):
            return kind
    return None


def literal_value(value: Any) -> bool:
    """A literal a credential could be: text that is not plainly harmless and not a `$(NAME)` reference."""
    return isinstance(value, str) and not HARMLESS_VALUE.match(value.strip()) and not _REFERENCE.match(value.strip())


def names_credential(name: str) -> bool:
    """looks_secret without a tokenizer's special tokens (`--pad-token`, `eos_token_id`)."""
    snake = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name).replace("-", "_").strip("_")
    return looks_secret(name) and not _TOKENIZER_TOKEN.search(snake)


def names_credential_value(name: str) -> bool:
    """A key of a free-form map (labels, annotations, a chart's values) whose value is a credential: its last word is
    token / password / credential(s) / apiKey, or it ends with accessKey / secretKey / privateKey / clientSecret.
    Stricter than looks_secret on purpose: a chart's `existingSecret: my-secret` or `tokenSecretName` names a Secret,
    it does not hold one."""
    if not names_credential(name):
        return False
    snake = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name).upper().replace("-", "_").replace(".", "_")
    parts = [p for p in snake.split("_") if p]
    if not parts:
        return False
    last, pair = parts[-1], "_".join(parts[-2:])
    return last in ("TOKEN", "PASSWORD", "PASSWD", "CREDENTIAL", "CREDENTIALS", "APIKEY") or pair in (
        "API_KEY", "ACCESS_KEY", "SECRET_KEY", "PRIVATE_KEY", "CLIENT_SECRET", "AUTH_TOKEN", "ACCOUNT_KEY")


def arg_findings(args: list[str]) -> list[tuple[int, str]]:
    """(index, what) for every argument that passes a credential: `--api-key=abc`, `--hf-token abc`, `TOKEN=abc`
    (a shell assignment), or a token by its format. A `$(NAME)` reference is the fix, not a finding."""
    out: list[tuple[int, str]] = []
    for i, arg in enumerate(args):
        if not isinstance(arg, str):
            continue
        kind = token_format(arg)
        if kind:
            out.append((i, f"a {kind}"))
            continue
        flag, eq, value = arg.partition("=")
        name = flag.lstrip("-")
        if eq and name and re.fullmatch(r"[A-Za-z][A-Za-z0-9_.-]*", name) and names_credential(name) \
                and literal_value(value):
            out.append((i, f"the value of {flag}"))
        elif not eq and flag.startswith("-") and name and names_credential(name) and i + 1 < len(args) \
                and isinstance(args[i + 1], str) and not args[i + 1].startswith("-") and literal_value(args[i + 1]):
            out.append((i + 1, f"the value of {flag}"))
    return out


def _walk_strings(node: Any, path: str) -> Iterable[tuple[str, str]]:
    if isinstance(node, str):
        yield path, node
    elif isinstance(node, dict):
        for k, v in node.items():
            yield from _walk_strings(v, f"{path}.{k}" if path else str(k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _walk_strings(v, f"{path}[{i}]")


ENV_FIX = ("store it in a Secret created outside the stack (kubectl create secret generic, External Secrets, the "
           "Secrets Store CSI driver) and read it with env: {NAME: {valueFrom: {secretKeyRef: {name: <secret>, key: "
           "<key>}}}} or envFrom: [{secretRef: {name: <secret>}}]")
ARGS_FIX = ("pass it from the container's env instead: `$(NAME)` in the argument (Kubernetes expands it from the "
            "container's env) with env: {NAME: {valueFrom: {secretKeyRef: {name: <secret>, key: <key>}}}}")
WRITTEN = ("a literal here is written to build/<stack>/ (k8s/, effective/, resources.json), the Pulumi state and the "
           "object itself in clear text")


def stack_literal_findings(data: dict[str, Any], secret_keys: Iterable[str] = ()) -> list[tuple[str, str]]:
    """(key path, message) for every literal credential a stack's `multinode:` keys hold outside the secret keys:
    a token by its format in any text value (env of any name, args, script, labels, annotations, add-on values,
    hand-written objects), an env value named like a credential, a flag that passes one (`--api-key abc`), a
    label / annotation / add-on value keyed like one. Never the value itself. Run before anything is written."""
    out: list[tuple[str, str]] = []
    seen: set[str] = set()

    def add(path: str, msg: str) -> None:
        if path not in seen:
            seen.add(path)
            out.append((path, msg))

    skip = set(secret_keys)
    for top, value in data.items():
        if top in skip:
            continue
        for path, text in _walk_strings(value, top):
            kind = token_format(text)
            if kind:
                add(path, f"holds what looks like a {kind} ([secret]); {WRITTEN}: remove it and {_fix_for(path)}")
    for i, w in enumerate(data.get("workloads") or []):
        if not isinstance(w, dict):
            continue
        at = f"workloads[{i}]"
        env = w.get("env")
        for name, value in (env.items() if isinstance(env, dict) else []):
            if names_credential(str(name)) and literal_value(value):
                add(f"{at}.env.{name}", f"is named like a credential and holds a literal value ([secret]); {WRITTEN}: "
                                        f"remove the value and {ENV_FIX}")
        for field in ("extraArgs", "scriptArgs", "workerCommand"):
            args = w.get(field)
            if isinstance(args, list):
                for j, what in arg_findings(args):
                    add(f"{at}.{field}[{j}]", f"{what} looks like a credential ([secret]); {WRITTEN}: {ARGS_FIX}")
        script = w.get("script")
        if isinstance(script, str):
            import shlex
            try:
                # shlex grows each word one character at a time (quadratic in a word's length): a script past 64 KiB,
                # which no hand-written launch line reaches, is split on whitespace only
                words = shlex.split(script) if len(script) <= 65536 else script.split()
            except ValueError:
                words = script.split()
            if arg_findings(words):
                add(f"{at}.script", f"passes what looks like a credential ([secret]); {WRITTEN}: {ARGS_FIX}")
    for i, pool in enumerate(data.get("nodePools") or []):
        for field in ("labels", "nodeSelector"):
            labels = pool.get(field) if isinstance(pool, dict) else None
            for k, v in (labels.items() if isinstance(labels, dict) else []):
                if names_credential_value(str(k)) and literal_value(v):
                    add(f"nodePools[{i}].{field}.{k}", "is named like a credential ([secret]); node labels are "
                                                       "readable by every user of the cluster: remove it")
    addons = data.get("addons")
    for name, addon in (addons.items() if isinstance(addons, dict) else []):
        values = addon.get("values") if isinstance(addon, dict) else None
        for path, key, v in _keyed_values(values, f"addons.{name}.values"):
            if names_credential_value(key) and literal_value(v):
                add(path, f"is named like a credential and holds a literal value ([secret]); {WRITTEN} (the Helm "
                          f"release's values): create the Secret outside the stack and give the chart its name "
                          f"(most charts take an existingSecret-style key)")
    for i, obj in enumerate(data.get("manifests") or []):
        for where, msg in _manifest_literals(obj):
            add(f"manifests[{i}].{where}", msg)
    return out


def _fix_for(path: str) -> str:
    if ".env." in path:
        return ENV_FIX
    if re.search(r"\.(extraArgs|scriptArgs|workerCommand)\[\d+\]\Z|\.script\Z", path):
        return ARGS_FIX
    if path.startswith("addons."):
        return "create the Secret outside the stack and give the chart its name (an existingSecret-style key)"
    if path.startswith("manifests["):
        return ("create the Secret outside the stack and reference it (valueFrom.secretKeyRef, a volume, or the "
                "object's own secret-name field)")
    return "keep credentials out of the stack file (Pulumi secrets: `pulumi config set --secret`, or a Secret)"


def _keyed_values(node: Any, path: str) -> Iterable[tuple[str, str, Any]]:
    if isinstance(node, dict):
        for k, v in node.items():
            sub = f"{path}.{k}"
            if isinstance(v, (dict, list)):
                yield from _keyed_values(v, sub)
            else:
                yield sub, str(k), v
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _keyed_values(v, f"{path}[{i}]")


def _manifest_literals(obj: Any) -> list[tuple[str, str]]:
    """A hand-written object's labels / annotations keyed like a credential, and container env named like one with a
    literal text value (manifest_credentials already refuses Secret data and non-text env values)."""
    out: list[tuple[str, str]] = []
    if not isinstance(obj, dict):
        return out
    meta = obj.get("metadata")
    for field in ("labels", "annotations"):
        m = meta.get(field) if isinstance(meta, dict) else None
        for k, v in (m.items() if isinstance(m, dict) else []):
            if names_credential_value(str(k).rsplit("/", 1)[-1]) and literal_value(v):
                out.append((f"metadata.{field}.{k}", "is named like a credential ([secret]); labels and annotations "
                                                     "are readable by anyone who may list the object: remove it"))
    if obj.get("kind") in ("Secret", "ConfigMap"):
        return out
    from .podspecs import pod_specs
    for ref in pod_specs(obj):
        base = "spec" if ref.where == "(object)" else ref.where if ref.where.endswith(
            (".spec.podSpec", ".extraPodSpec")) else f"{ref.where}.spec"
        for field in ("initContainers", "containers", "ephemeralContainers"):
            seq = ref.spec.get(field)
            for i, c in enumerate(seq if isinstance(seq, list) else []):
                env = c.get("env") if isinstance(c, dict) else None
                for j, e in enumerate(env if isinstance(env, list) else []):
                    if isinstance(e, dict) and isinstance(e.get("name"), str) and names_credential(e["name"]) \
                            and literal_value(e.get("value")):
                        out.append((f"{base}.{field}[{i}].env[{j}].value",
                                    f"env {e['name']} is named like a credential and holds a literal value "
                                    f"([secret]); {WRITTEN}: use valueFrom.secretKeyRef"))
    return out
