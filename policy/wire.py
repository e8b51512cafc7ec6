"""Once per resource, not once per policy: the properties' protobuf -> dict step of pulumi_policy's servicer.

pulumi_policy 1.21.0's `_PolicyAnalyzerServicer.Analyze` / `AnalyzeStack` (pulumi_policy/policy.py:997, 1049) call
`json_format.MessageToDict(request.properties)` inside their loop over policies, so a resource's properties are
converted from protobuf once per policy (14 resource policies, 15 stack policies): measured with cProfile on
existing-dev about a third of the pack's time under the analyzer protocol (bench/pack_bench.py). `install()`
gives that module a json_format whose MessageToDict keeps its last results keyed by the message's type and its
serialized bytes (the same content gives the same dict), everything else being google.protobuf.json_format.
Safe to share: the servicer only reads the dict (deserialize_properties builds new dicts and lists from it, and
each policy still gets its own deserialized copy and proxy). Used by policy/__main__.py only (the offline plan
never goes through pulumi_policy's servicer).
"""
from __future__ import annotations

from collections import OrderedDict
from typing import Any

from google.protobuf import json_format

_KEEP = 256      # results kept: more than the resources one AnalyzeStack call sends for the example stacks


class _CachingJsonFormat:
    def __init__(self) -> None:
        self._memo: OrderedDict[tuple[Any, ...], Any] = OrderedDict()

    def __getattr__(self, name: str) -> Any:
        return getattr(json_format, name)

    def MessageToDict(self, message: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: N802 - json_format's name
        try:
            key = (message.DESCRIPTOR.full_name, message.SerializeToString(deterministic=True), args,
                   tuple(sorted(kwargs.items())))
        except Exception:  # noqa: BLE001 - anything unusual: the plain call
            return json_format.MessageToDict(message, *args, **kwargs)
        hit = self._memo.get(key)
        if hit is not None:
            self._memo.move_to_end(key)
            return hit
        value = self._memo[key] = json_format.MessageToDict(message, *args, **kwargs)
        if len(self._memo) > _KEEP:
            self._memo.popitem(last=False)
        return value


def install() -> bool:
    """Put the caching json_format into pulumi_policy.policy (if it has the attribute it reads); True if done."""
    from pulumi_policy import policy as pp
    if getattr(pp, "json_format", None) is not json_format:
        return False
    setattr(pp, "json_format", _CachingJsonFormat())  # noqa: B010 - a module attribute of pulumi_policy
    return True
