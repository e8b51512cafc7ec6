"""The budget guard of .ci/run (.ci/steps.sh, issue 41): a step that cannot fit, or runs past the budget, fails the
run with its name; only CI_ALLOW_SKIP lets a step be skipped, and a skipped step is said. Run with a fake `make`."""
import os
import subprocess
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run_steps(tmp_path, script, **env):
    fake = tmp_path / "fake-make"
    # the fake make: `ok` passes, `bad` exits 2, `slow` sleeps past any small budget
    fake.write_text(textwrap.dedent("""\
        #!/bin/sh
        case "$1" in ok) echo ran-ok;; bad) exit 2;; slow) exec sleep 30;; esac
        """))
    fake.chmod(0o755)
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("CI_")}
    full_env.update(MAKE_CMD=str(fake), **env)
    body = f"set -euo pipefail\nsource {ROOT}/.ci/steps.sh\n{script}\necho skipped=${{skipped[*]:-}}\n"
    return subprocess.run(["bash", "-c", body], capture_output=True, text=True, env=full_env, timeout=120)


def test_a_step_that_fits_runs(tmp_path):
    r = run_steps(tmp_path, "step one 1 ok", CI_BUDGET_MIN="5")
    assert r.returncode == 0, r.stderr
    assert "ran-ok" in r.stdout and "== make ok took" in r.stdout


def test_a_step_that_cannot_fit_fails_with_its_name(tmp_path):
    r = run_steps(tmp_path, "step one 1 ok\nstep cluster-check 50 ok", CI_BUDGET_MIN="30")
    assert r.returncode == 1
    assert "FAIL: make ok cannot fit" in r.stderr and "CI_ALLOW_SKIP='cluster-check'" in r.stderr
    assert "skipped=" not in r.stdout          # the run stopped there


def test_only_ci_allow_skip_lets_a_step_be_skipped_and_it_is_said(tmp_path):
    r = run_steps(tmp_path, "step cluster-check 50 ok\nstep two 1 ok", CI_BUDGET_MIN="30",
                  CI_ALLOW_SKIP="e2e cluster-check")
    assert r.returncode == 0, r.stderr
    assert "SKIPPED (CI_ALLOW_SKIP names it): make ok" in r.stdout
    assert "skipped=cluster-check" in r.stdout


def test_a_failing_step_fails_the_run(tmp_path):
    r = run_steps(tmp_path, "step one 1 bad\nstep two 1 ok", CI_BUDGET_MIN="5")
    assert r.returncode == 2
    assert "FAIL: make bad exited 2" in r.stderr and "ran-ok" not in r.stdout


def test_a_step_past_the_budget_is_stopped_and_named(tmp_path):
    r = run_steps(tmp_path, "step slow-one 0 slow", CI_BUDGET_S="2")
    assert r.returncode == 1
    assert "FAIL: make slow ran past the" in r.stderr
