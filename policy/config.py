"""The team's policy configuration: one JSON file in the format CrossGuard's `--policy-pack-config` takes, read by
`multinode plan` (`--policy-config FILE`, else `policy-config.json` next to the stack file) and by the pack under
`pulumi preview` (policy/__main__.py passes the default file as the pack's initial config; a file given to the
CLI with `--policy-pack-config` is applied by the CLI on top of it).

The format is the Pulumi CLI's (pulumi/pulumi pkg/v3@v3.274.0 resource/analyzer/config.go): a JSON object whose
keys are policy names and whose values are an enforcement level (`"advisory"`) or an object with an optional
`enforcementLevel` and the policy's own settings (`{"enforcementLevel": "advisory", "sizeHint": "32Gi"}`)
(parsePolicyConfigs, extractEnforcementLevel); the key `all` sets every policy's level (applyConfig); a numeric
`version: 2` nests the policies under `policies` (parsePolicyPackConfigV2); `environments` names ESC
environments (ignored here: they need Pulumi Cloud); an empty file is no config. Levels are apitype's
(advisory, mandatory, remediate, disabled); the Python SDK runs a validation policy set to `remediate` as
mandatory (pulumi_policy 1.21.0 policy.py, _PolicyAnalyzerServicer.Analyze), and so does plan. Settings are
checked against the rule's config schema as the CLI checks them (validatePolicyPackConfig: JSON schema,
`type` of each declared property).

Stricter than the CLI, on purpose, because plan is where a team finds its mistakes before CrossGuard runs:
* a policy name the pack does not have, or a setting the rule does not declare, is refused (the CLI keeps it
  and nothing reads it: a typo would silently change nothing);
* `disabled` is refused for every rule that is not a team choice (Rule.team_choice, the "team choice" column
  of docs/policy-pack.md): the topology contract can be made advisory, never switched off. The CLI cannot
  be stopped from disabling a policy given in its own `--policy-pack-config`; the pack refuses to load with
  such a default file, and `plan` refuses the same file in CI.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from multinode import limits, safefile
from multinode.errors import ConfigError, Problem

from .engine import ADVISORY, MANDATORY, Rule

FILE_NAME = "policy-config.json"
DISABLED, REMEDIATE = "disabled", "remediate"
LEVELS = (ADVISORY, MANDATORY, REMEDIATE, DISABLED)
ALL = "all"
_JSON_TYPES: dict[str, tuple[type, ...]] = {"string": (str,), "boolean": (bool,), "array": (list,),
                                             "object": (dict,), "number": (int, float), "integer": (int,)}


class PolicyConfigError(ConfigError):
    def render(self) -> str:
        return "\n".join([self.head() + " in the policy config (CrossGuard's format)"] + self.lines())


@dataclass(frozen=True)
class PolicyConfig:
    source: str
    levels: dict[str, str] = field(default_factory=dict)             # rule -> mandatory | advisory | disabled
    settings: dict[str, dict[str, Any]] = field(default_factory=dict)   # rule -> its settings from the file
    # issue 46: advisory id -> the team's reason (`"acknowledged": {"config-1a2b3c4d": "why"}`); plan prints an
    # acknowledged advisory as such and counts it apart (multinode/advisories.py)
    acknowledged: dict[str, str] = field(default_factory=dict)

    def level(self, rule: Rule) -> str:
        return self.levels.get(rule.name, rule.level)

    def changed(self, rules: list[Rule]) -> list[str]:
        """'rule: from -> to' for each rule whose level the file changes (plan prints them)."""
        return [f"{r.name} {r.level} -> {self.level(r)}" for r in rules if self.level(r) != r.level]


def _rules(rules: list[Rule] | None) -> list[Rule]:
    if rules is not None:
        return rules
    from .rules import RULES
    return list(RULES)


def _type_ok(value: Any, schema: dict[str, Any]) -> bool:
    want = schema.get("type")
    if not isinstance(want, str) or want not in _JSON_TYPES:
        return True
    if want in ("number", "integer") and isinstance(value, bool):
        return False
    return isinstance(value, _JSON_TYPES[want])


def _shown(value: Any) -> str:
    """A value from the file as a message repeats it: short (a 1 MB string is cut), control characters escaped
    when the problem is rendered (multinode.errors.printable)."""
    text = repr(value) if isinstance(value, (str, int, float, bool)) or value is None else type(value).__name__
    return text if len(text) <= 60 else text[:50] + f"... ({len(text)} characters)"


def _schema_problems(value: Any, schema: dict[str, Any], key: str) -> list[Problem]:
    """The JSON-schema keywords the pack's rule settings use, checked as the Pulumi CLI checks them
    (validatePolicyPackConfig with gojsonschema): type, items, maxItems, maxLength, pattern. A wrong item type
    (`allowedNames: [[1]]`) is one config error naming the key (issue 48), not a rule that fails on every object."""
    if not _type_ok(value, schema):
        return [Problem(key, f"{_shown(value)} is not of type {schema.get('type')}")]
    out: list[Problem] = []
    if isinstance(value, str):
        most = schema.get("maxLength")
        if isinstance(most, int) and len(value) > most:
            out.append(Problem(key, f"{_shown(value)} is longer than {most} characters"))
        pattern = schema.get("pattern")
        # Go's regexp (the CLI's) reads a final `$` as the end of the text; Python's also matches before a final
        # newline: read it as \Z here, so "64Gi\n" is refused as the CLI refuses it
        if not out and isinstance(pattern, str):
            go = pattern[:-1] + "\\Z" if pattern.endswith("$") and not pattern.endswith("\\$") else pattern
            if not re.search(go, value):
                out.append(Problem(key, f"{_shown(value)} does not match the setting's pattern {pattern} "
                                        f"({schema.get('description', 'see docs/policy-pack.md')})"))
    elif isinstance(value, list):
        most = schema.get("maxItems")
        if isinstance(most, int) and len(value) > most:
            out.append(Problem(key, f"{len(value)} items, over the {most} this setting takes"))
            return out
        items = schema.get("items")
        if isinstance(items, dict):
            for i, item in enumerate(value):
                out += _schema_problems(item, items, f"{key}[{i}]")
                if len(out) >= 10:
                    break
    return out


def parse(data: Any, source: str, rules: list[Rule] | None = None) -> PolicyConfig:
    """The file's decoded JSON -> PolicyConfig; every problem in one PolicyConfigError naming its key."""
    by_name = {r.name: r for r in _rules(rules)}
    problems: list[Problem] = []
    if data is None:
        return PolicyConfig(source)
    if not isinstance(data, dict):
        raise PolicyConfigError([Problem("", f"the file holds a {type(data).__name__}; it must be a JSON object of "
                                             f"policy names, e.g. {{\"indexed-job-gang-scheduled\": \"advisory\"}}")],
                                source)
    entries = dict(data)
    acknowledged = _acknowledged(entries.pop(ACKNOWLEDGED, None), problems)
    prefix = ""
    if isinstance(entries.get("version"), (int, float)) and not isinstance(entries.get("version"), bool):
        if entries["version"] != 2:
            raise PolicyConfigError([Problem("version", f"{entries['version']} is not supported; use 2 (policies "
                                                        f"under `policies`) or leave `version` out")], source)
        policies = entries.get("policies") or {}
        if not isinstance(policies, dict):
            raise PolicyConfigError([Problem("policies", "must be an object of policy names")], source)
        entries, prefix = dict(policies), "policies."
    else:
        entries.pop("environments", None)           # ESC environments: Pulumi Cloud's, nothing plan can read
    levels: dict[str, str] = {}
    settings: dict[str, dict[str, Any]] = {}
    team = sorted(n for n, r in by_name.items() if r.team_choice)

    def level_of(key: str, value: Any) -> str | None:
        if not isinstance(value, str) or value not in LEVELS:
            problems.append(Problem(key, f"{_shown(value)} is not an enforcement level; use one of "
                                         f"{', '.join(LEVELS)}"))
            return None
        return MANDATORY if value == REMEDIATE else value

    if ALL in entries:
        raw = entries.pop(ALL)
        value = raw.get("enforcementLevel") if isinstance(raw, dict) else raw
        lvl = level_of(f"{prefix}{ALL}", value) if value is not None else None
        if lvl == DISABLED:
            problems.append(Problem(f"{prefix}{ALL}", f"`disabled` for every policy would switch off the topology "
                                                      f"contract; disable only team-choice rules by name: "
                                                      f"{', '.join(team)}"))
        elif lvl is not None:
            levels.update({n: lvl for n in by_name})
    for name, value in entries.items():
        key = f"{prefix}{name}"
        rule = by_name.get(name)
        if rule is None:
            problems.append(Problem(key, f"the pack has no policy {_shown(name)}; the policy names are in "
                                         f"docs/policy-pack.md (e.g. {', '.join(team[:2])})"))
            continue
        if isinstance(value, str):
            lvl = level_of(key, value)
            props: dict[str, Any] = {}
        elif isinstance(value, dict):
            props = {k: v for k, v in value.items() if k != "enforcementLevel"}
            lvl = level_of(f"{key}.enforcementLevel", value["enforcementLevel"]) if "enforcementLevel" in value \
                else None
        else:
            problems.append(Problem(key, f"must be an enforcement level or an object with enforcementLevel and the "
                                         f"policy's settings, not {type(value).__name__}"))
            continue
        if lvl == DISABLED and not rule.team_choice:
            problems.append(Problem(key, f"{name} is part of the topology contract and cannot be disabled; set it to "
                                         f"advisory to see its findings without failing, or fix what it reports. "
                                         f"Rules a team may disable: {', '.join(team)}"))
            continue
        if lvl is not None:
            levels[name] = lvl
        for k, v in props.items():
            schema = rule.config.get(k)
            if schema is None:
                declared = ", ".join(sorted(rule.config)) or "none"
                problems.append(Problem(f"{key}.{k}", f"{name} has no setting {_shown(k)} (its settings: {declared})"))
            else:
                problems += _schema_problems(v, schema, f"{key}.{k}")
        if props:
            settings[name] = props
    if problems:
        raise PolicyConfigError(problems, source)
    return PolicyConfig(source, levels, settings, acknowledged)


ACKNOWLEDGED = "acknowledged"
_ADVISORY_ID = re.compile(r"^(config|policy)-[0-9a-f]{8}\Z")
REASON_CHARS = 500


def _acknowledged(value: Any, problems: list[Problem]) -> dict[str, str]:
    """`"acknowledged": {"<advisory id>": "<reason>"}`: the ids plan prints and writes to advisories.json, each with
    the team's reason (required: an acknowledgement nobody can explain is a silenced finding). Not a policy name:
    the Pulumi CLI keeps it as an unknown policy's settings and nothing reads it there."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        problems.append(Problem(ACKNOWLEDGED, f"must be an object of advisory ids and reasons, e.g. "
                                              f"{{\"config-1a2b3c4d\": \"spare capacity is reserved elsewhere\"}}, "
                                              f"not {type(value).__name__}"))
        return {}
    if len(value) > limits.LIST_ITEMS:
        problems.append(Problem(ACKNOWLEDGED, f"{len(value)} entries, over the {limits.LIST_ITEMS} it takes"))
        return {}
    out: dict[str, str] = {}
    for k, reason in value.items():
        key = f"{ACKNOWLEDGED}.{k}"
        if not isinstance(k, str) or not _ADVISORY_ID.match(k):
            problems.append(Problem(key, f"{_shown(k)} is not an advisory id; copy the id plan prints after the "
                                         f"advisory (`[id config-1a2b3c4d]`) or from build/<stack>/advisories.json"))
        elif not isinstance(reason, str) or not reason.strip():
            problems.append(Problem(key, "give the reason the team accepts this advisory (a non-empty text)"))
        elif len(reason) > REASON_CHARS:
            problems.append(Problem(key, f"the reason is {len(reason)} characters; keep it under {REASON_CHARS}"))
        else:
            out[k] = reason.strip()
    return out


def load(path: Path, rules: list[Rule] | None = None) -> PolicyConfig:
    # issue 48: a regular file, size-checked before it is read, UTF-8 (a UTF-16 BOM is named), JSON with bounded
    # nesting and numbers; each refusal one PolicyConfigError naming the path and the fix (plan exits 2)
    text = safefile.read_text(path, "the policy config", limits.POLICY_CONFIG_BYTES, PolicyConfigError,
                              fix=f"give a JSON file in CrossGuard's --policy-pack-config format (or remove "
                                  f"{FILE_NAME} from the stack's folder)")
    if not text.strip():
        return PolicyConfig(str(path))                  # the CLI accepts an empty file as no config
    data = safefile.load_json(text, "the policy config", str(path), PolicyConfigError)
    return parse(data, str(path), rules)


def default_path(stack_file: Path) -> Path:
    """Where plan looks when no --policy-config is given: next to the stack file."""
    return Path(stack_file).parent / FILE_NAME


def for_stack(stack_file: Path | None, explicit: Path | None = None,
              rules: list[Rule] | None = None) -> PolicyConfig | None:
    """The config plan applies: `explicit` (must exist), else the default file next to the stack file, else None."""
    if explicit is not None:
        return load(explicit, rules)
    # picked up by name whatever it is: a folder, a FIFO or a dangling link named policy-config.json is refused
    # (loudly: the team meant a config), not skipped
    if stack_file is not None and os.path.lexists(default_path(stack_file)):
        return load(default_path(stack_file), rules)
    return None


PACK_CONFIG_ENV = "MULTINODE_POLICY_CONFIG"


def pack_default_path() -> Path:
    """The file the CrossGuard pack reads when it loads: $MULTINODE_POLICY_CONFIG, else policy-config.json in the
    stack folder: this repository's stacks/ in its checkout, else the stack folder of the Pulumi project the CLI
    runs in (Pulumi.yaml's stackConfigDir, or the project folder: what `multinode new` writes). The default `plan`
    reads for those stacks."""
    import os

    from multinode import stackfile
    env = os.environ.get(PACK_CONFIG_ENV)
    return Path(env) if env else stackfile.stacks_dir() / FILE_NAME


def for_pack(rules: list[Rule] | None = None) -> PolicyConfig | None:
    """The config the pack starts with (None when there is no file; a named file that is missing is an error)."""
    import os
    path = pack_default_path()
    if os.environ.get(PACK_CONFIG_ENV) or path.is_file():
        return load(path, rules)
    return None


def initial_config(cfg: PolicyConfig | None, rules: list[Rule] | None = None) -> dict[str, Any]:
    """The file as pulumi_policy's PolicyPack(initial_config=...) takes it: rule -> EnforcementLevel, or a dict of
    its settings with `enforcementLevel` (an EnforcementLevel: the SDK maps the enum, not its string).

    Every entry carries a level, the rule's own when the file sets only settings: the CLI reads an initial config
    entry's level from the proto field, whose zero value is ADVISORY (pulumi/pulumi pkg/v3@v3.274.0
    resource/plugin/analyzer_plugin.go convertPolicyConfig:878 and convertEnforcementLevel:764), so an entry
    without one would quietly make a mandatory rule advisory."""
    if cfg is None:
        return {}
    from pulumi_policy import EnforcementLevel
    by_name = {r.name: r for r in _rules(rules)}
    out: dict[str, Any] = {}
    for name in sorted(set(cfg.levels) | set(cfg.settings)):
        lvl = EnforcementLevel(cfg.level(by_name[name]))
        props = cfg.settings.get(name)
        out[name] = dict(props, enforcementLevel=lvl) if props else lvl
    return out
