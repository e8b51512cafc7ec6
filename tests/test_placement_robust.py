"""The placement simulation and the new rules never raise on badly typed objects (a reader must not crash
`plan` or `pulumi preview`: the schema checks name the bad field)."""
from __future__ import annotations

import copy

from hypothesis import given, settings
from hypothesis import strategies as st

from multinode import placement
from policy.engine import Resource, build_context
from policy.rules import env, gangs
from policy.rules import placement as placement_rule
from tests import policy_fixtures as F
from tests.test_policy_rules import cfg

JUNK = st.sampled_from([None, 3, "x", [], {}, [1, "a"], {"a": [1]}, 2.5, True])


def _paths(node, path=()):
    yield path
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _paths(v, path + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _paths(v, path + (i,))


def _replace(obj, path, value):
    if not path:
        return value
    out = copy.deepcopy(obj)
    node = out
    for k in path[:-1]:
        node = node[k]
    node[path[-1]] = value
    return out


@settings(max_examples=150, deadline=None)
@given(st.sampled_from([o for o in F.good_objects() + [F.pod_group(), F.indexed_job(gang="volcano")] if "spec" in o]),
       st.data(), JUNK)
def test_badly_typed_objects_never_raise(obj, data, junk):
    # metadata stays well-formed: every rule names its resource by it (policy.objects.object_name)
    paths = [p for p in _paths(obj) if p and p[0] == "spec"]
    bad = _replace(obj, data.draw(st.sampled_from(paths)), junk)
    c = cfg(node_count=4)
    res = placement.simulate([bad, F.lws()], placement.pools_from_config(c))
    placement.as_json(res)
    placement.table(res)
    r = Resource(f"kubernetes:{bad.get('apiVersion')}:{bad.get('kind')}", "x", "urn:x", bad)
    ctx = build_context(c, [r])
    list(gangs.check_pod_group_size([r], ctx))
    list(gangs.check_indexed_job_gang([r], ctx))
    list(placement_rule.check_stack_fits([r], ctx))
    list(env.check_env_once(r, ctx))
