"""The package as a team installs it (issue 45): the wheel carries every file read at run time, `multinode new`
writes a project per cloud that plans clean, `multinode --version` is pyproject's. The whole install into a fresh
venv outside the checkout is `make package-check` (tools/package_check.py); these are its fast parts."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

from multinode import scaffold, stackfile
from multinode.__main__ import main as cli

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import package_check  # noqa: E402


def _uv() -> list[str]:
    for candidate in (shutil.which("uv"), ROOT / ".uv-bootstrap" / "bin" / "uv"):
        if candidate and Path(candidate).is_file():
            return [str(candidate)]
    pytest.skip("no uv (make venv bootstraps it into .uv-bootstrap/)")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    subprocess.run([*_uv(), "build", "--wheel", "--quiet", "--out-dir", str(out)], cwd=ROOT, check=True)
    (found,) = out.glob("*.whl")
    return found


def test_the_wheel_carries_every_run_time_file_and_the_executables(wheel):
    assert package_check.wheel_problems(wheel) == []
    names = zipfile.ZipFile(wheel).namelist()
    assert "multinode/schemas/lws/leaderworkerset.x-k8s.io_leaderworkersets.yaml" in names
    assert {f"multinode/templates/{c}.yaml" for c in scaffold.CLOUDS} <= set(names)
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert f"multinode-{version}-py3-none-any.whl" == wheel.name


def test_a_wheel_without_a_data_file_is_named(wheel, tmp_path):
    broken = package_check.without(wheel, package_check.PLANTED_MISSING, tmp_path)
    assert package_check.wheel_problems(broken) == [
        f"the wheel has no {package_check.PLANTED_MISSING} (from {package_check.PLANTED_MISSING[len('multinode/'):]})"]


def test_version_flag_is_pyproject_version(capsys):
    assert cli(["--version"]) == 0
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert capsys.readouterr().out.strip() == f"multinode {version}"


@pytest.mark.parametrize("cloud", scaffold.CLOUDS)
def test_a_new_project_plans_clean_and_names_nothing_of_this_repository(cloud, tmp_path, monkeypatch, capsys):
    project = tmp_path / f"gpu-{cloud}"
    assert cli(["new", str(project), "--cloud", cloud]) == 0
    files = {p.relative_to(project).as_posix() for p in project.rglob("*") if p.is_file()}
    assert files == {"__main__.py", "Pulumi.yaml", "pyproject.toml", "Pulumi.dev.yaml", "policy-config.json",
                     ".github/workflows/pr-check.yml", ".gitignore"}
    for f in files:
        assert str(ROOT) not in (project / f).read_text(), f
    main_py = [ln for ln in (project / "__main__.py").read_text().splitlines() if ln and not ln.startswith('"""')]
    assert main_py == ["from multinode.program import main", "main()"]
    assert "toolchain: uv" in (project / "Pulumi.yaml").read_text()
    deps = tomllib.loads((project / "pyproject.toml").read_text())
    assert deps["project"]["dependencies"] == [f"multinode=={scaffold.version()}"]
    assert deps["tool"]["uv"]["sources"]["multinode"] == {"git": scaffold.REPOSITORY, "tag": f"v{scaffold.version()}"}
    assert json.loads((project / "policy-config.json").read_text()) == {"all": "mandatory"}
    capsys.readouterr()
    # plan by stack name from inside the project: the stack folder is the project's (stackfile.project_stacks_dir);
    # stackfile.STACKS_DIR is this checkout's stacks/, which an installed package does not have
    monkeypatch.setattr(stackfile, "STACKS_DIR", None)
    monkeypatch.chdir(project)
    assert cli(["plan", "dev", "--out", str(tmp_path / "build")]) == 0
    out = capsys.readouterr().out
    # no mandatory violation; the advisories a new project starts with (a spare node, NIC health monitoring the
    # cloud's NICs lack, node labels on existing clusters) are listed with ids for the team to fix or acknowledge
    assert "policy: 0 mandatory violation(s); advisories:" in out
    listed = json.loads((tmp_path / "build" / "dev" / "advisories.json").read_text())
    assert f"advisories: {listed['open']} open" in out and listed["open"] == len(listed["advisories"])


def test_new_refuses_a_folder_with_files_and_writes_nothing(tmp_path, capsys):
    (tmp_path / "keep.txt").write_text("mine")
    assert cli(["new", str(tmp_path), "--cloud", "aws"]) == 2
    assert [p.name for p in tmp_path.iterdir()] == ["keep.txt"]
    assert "not an empty folder" in capsys.readouterr().err


def test_the_stack_folder_is_pulumi_yaml_stack_config_dir(tmp_path):
    (tmp_path / "Pulumi.yaml").write_text("name: p\nruntime: python\nstackConfigDir: stacks\n")
    assert stackfile.project_stacks_dir(tmp_path) == tmp_path / "stacks"
    (tmp_path / "Pulumi.yaml").write_text("name: p\nruntime: python\n")
    assert stackfile.project_stacks_dir(tmp_path) == tmp_path


def test_the_pack_executable_gives_its_port_through_a_buffered_stdout(tmp_path):
    """The engine starts `multinode-policy-pack` with stdout a pipe and no PYTHONUNBUFFERED, reads its port from the
    first line and waits without a timeout: the port must come out at once (policy/analyzer.py
    port_goes_out_at_once), not when a buffer fills. Started the same way here, PYTHONUNBUFFERED removed."""
    import os
    import selectors
    import time

    exe = Path(sys.executable).parent / "multinode-policy-pack"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONUNBUFFERED", "MULTINODE_POLICY_CONFIG")}
    proc = subprocess.Popen([str(exe), "127.0.0.1:9"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            env=env, cwd=tmp_path)
    try:
        assert proc.stdout is not None
        sel = selectors.DefaultSelector()
        sel.register(proc.stdout, selectors.EVENT_READ)
        deadline, line = time.monotonic() + 180, b""
        while not line.endswith(b"\n") and time.monotonic() < deadline and proc.poll() is None:
            if sel.select(timeout=1):
                line += os.read(proc.stdout.fileno(), 64)
        assert line.strip().isdigit(), f"no port on the first stdout line within 180 s: {line!r}"
    finally:
        proc.kill()
        proc.wait()
