"""Planted defects for `make sdks` (issue 33): the TypeScript example is type-checked by tsc against the nodejs SDK
Pulumi's code generator made from `multinode schema`; a misspelt key or a value outside an enum must fail it. They
need what `make sdks` builds (build/sdks/nodejs, examples/typescript/node_modules): without it they skip and say
why; `make sdks` generates the SDKs, builds the examples, then runs them."""
from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent.parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))

import sdks  # noqa: E402

EXAMPLE = ROOT / sdks.TS_EXAMPLE / "index.ts"
TSC = ROOT / sdks.TS_EXAMPLE / "node_modules" / ".bin" / "tsc"
SDK = ROOT / sdks.OUT / "nodejs" / "index.ts"
pytestmark = pytest.mark.skipif(not (TSC.exists() and SDK.exists()),
                                reason="needs `make sdks` (the generated nodejs SDK and examples/typescript's npm "
                                       "packages); `make sdks` runs these tests after building them")


# Each planted program: (the edit to examples/typescript/index.ts, the errors tsc must report for it).
PLANTED = {
    "misspelt-key": (("nodeCount: 2, zone", "nodeCont: 2, zone"),
                     [r"error TS2561: .*'nodeCont' does not exist in type 'NodePoolArgs'"]),
    "wrong-kind": (('kind: "lws-inference"', 'kind: "lws-infrence"'),
                   [r"error TS2820: Type '\"lws-infrence\"' is not assignable to type 'WorkloadKind'"]),
    "wrong-cloud": (('cloud: "gcp"', 'cloud: "gke"'),
                    [r"error TS\d+: Type '\"gke\"' is not assignable to type 'Cloud'"] * 2),
}


@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> tuple[int, dict[str, list[str]]]:
    """One tsc run over the example as it is and each planted copy (tsc takes ~30 s here): (its exit code, the
    error lines by program)."""
    folder = tmp_path_factory.mktemp("ts")
    source = EXAMPLE.read_text()
    programs = {"as-is": source}
    for name, ((old, new), _) in PLANTED.items():
        assert old in source, old
        programs[name] = source.replace(old, new)
    paths = []
    for name, text in programs.items():
        paths.append(folder / f"{name}.ts")
        paths[-1].write_text(text)
    done = sdks.tsc(ROOT, paths, folder / "tsconfig.json")
    errors: dict[str, list[str]] = {name: [] for name in programs}
    for line in (done.stdout + done.stderr).splitlines():
        m = re.match(r".*?([\w-]+)\.ts\(\d+,\d+\): (error .*)", line)
        if m and m.group(1) in errors:
            errors[m.group(1)].append(m.group(2))
    return done.returncode, errors


def test_the_example_compiles_as_it_is(compiled):
    assert compiled[1]["as-is"] == []


@pytest.mark.parametrize("planted", sorted(PLANTED))
def test_a_planted_defect_fails_tsc(compiled, planted):
    code, errors = compiled
    assert code != 0
    expected = PLANTED[planted][1]
    assert len(errors[planted]) == len(expected), errors[planted]
    for pattern, line in zip(expected, errors[planted], strict=True):
        assert re.search(pattern, line), line
