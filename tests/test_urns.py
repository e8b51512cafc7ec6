"""Plan's URNs are the engine's (issue 29, round one's finding): a resource's URN type is its parent's whole
type chain + `$` + its own type, and the root stack adds no type (pulumi/pulumi sdk/v3@v3.274.0
go/common/resource/urn/urn.go New). Pulumi's MockMonitor.make_urn kept only the parent's last type and the
stack's. The engine side is checked by conformance/pulumi/tests/test_engine_preview.py (same URN in the
engine's policy finding and in plan's policy.json)."""
from __future__ import annotations

from .cloudrun import run
from .conftest import example_raw


def _chain(urn: str) -> str:
    return urn.split("::")[2]


def test_urns_carry_the_whole_parent_type_chain_and_no_stack_type():
    raw, secrets = example_raw("existing-dev")
    r = run(raw, secrets, "existing-dev")
    by_urn = {x.urn: x for x in r.registrations}
    nested = 0
    for reg in r.registrations:
        assert "pulumi:pulumi:Stack$" not in reg.urn, reg.urn
        assert reg.urn == f"urn:pulumi:existing-dev::multinode::{_chain(reg.urn)}::{reg.name}"
        parent = reg.parent
        if not parent or _chain(parent) == "pulumi:pulumi:Stack":
            assert _chain(reg.urn) == reg.type, reg.urn
            continue
        assert parent in by_urn or _chain(parent).startswith("multinode:"), parent
        assert _chain(reg.urn) == f"{_chain(parent)}${reg.type}", (reg.urn, parent)
        nested += _chain(reg.urn).count("$") >= 2
    assert nested, "existing-dev has resources two components deep (Platform > Workload > Job)"
    job = next(x for x in r.registrations if x.type == "kubernetes:batch/v1:Job")
    assert _chain(job.urn) == "multinode:index:Platform$multinode:index:Workload$kubernetes:batch/v1:Job"
