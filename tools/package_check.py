"""`make package-check`: the package as a team gets it, checked from outside this checkout (issue 45).

1. `uv build` makes the sdist and, from it, the wheel (into a temporary folder).
2. The wheel must carry every file the package reads at run time (`wheel_problems`): every file of schemas/ as
   multinode/schemas/, the stack templates, the NCCL topology files, the policy pack's files, the program.
3. A fresh venv in a temporary folder outside the checkout gets the wheel (`uv pip install`, the dependencies pinned
   by this checkout's uv.lock through `uv export`; uv's cache serves what it holds, the package index the rest).
   From that venv, with the working folder outside the checkout:
   - `multinode --version` must print pyproject.toml's version, as must the schema (`multinode schema`);
   - `import components, policy, multinode.program` must work, and must come from the venv, not the checkout;
   - per cloud (aws azure gcp oci existing): `multinode new` writes a project, `multinode plan dev` run inside it must
     exit 0 with 0 mandatory and 0 advisory policy findings, and nothing written may name this checkout;
   - `multinode policy-path` names the pack executable, which must start and print its gRPC port (as the engine
     reads it); `pulumi-resource-multinode` (the provider) likewise.
4. The planted failure: the same wheel without one data file the plan reads (a CRD of schemas/), installed into a
   second venv, must fail the plan; the check fails if it does not (the check proves it can fail).
5. With --engine DIR (the Pulumi CLI and kubernetes provider of `make pulumi-tools`; `make package-preview`): the new
   `existing` project's `pulumi preview --policy-pack $(multinode policy-path)` on the real engine, run by the venv's
   interpreter from the project folder (tools/project_preview.py: the Automation API's inline program, the Python
   language host being unavailable here; add-ons marked provided, as no chart can be fetched offline) must pass;
   the same project with a planted mandatory violation (a hand-written Deployment setting LOG_LEVEL twice, rule
   env-defined-once) must fail the preview naming the rule.

Exit 0 when everything holds; 1 with one `package-check: FAIL ...` line per problem. Prints its wall time.
    python tools/package_check.py [--uv UV] [--keep] [--engine conformance/pulumi/bin]
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
import zipfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def _engine_module() -> Any:
    """conformance/pulumi/engine.py (stdlib imports only), for what the engine preview shares with the engine tests."""
    spec = importlib.util.spec_from_file_location("multinode_engine", ROOT / "conformance" / "pulumi" / "engine.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


CLOUDS = ("aws", "azure", "gcp", "oci", "existing")
# The data file the planted run removes: the LeaderWorkerSet CRD (multinode/manifests/crds.py), which the new gcp
# project's plan reads (its vLLM workload runs on LWS; the aws project's nccl-test does not install LWS since LWS
# comes only where used); were it not read, the planted run would plan clean and the check would fail.
PLANTED_MISSING = "multinode/schemas/lws/leaderworkerset.x-k8s.io_leaderworkersets.yaml"
# The engine preview's project (--engine): `existing` registers only Kubernetes resources, whose provider is built
# here (the cloud providers' plugins are not: conformance/pulumi/README.md).
ENGINE_CLOUD = "existing"
# The planted mandatory violation no config check sees (the pack's env-defined-once), as in conformance/pulumi's
# engine tests: a hand-written Deployment whose container sets LOG_LEVEL twice.
PLANTED_DEPLOYMENT = {
    "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "tools", "namespace": "multinode"},
    "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "tools"}}, "template": {
        "metadata": {"labels": {"app": "tools"}},
        "spec": {"containers": [{"name": "tools", "image": "busybox:1.36", "command": ["sleep", "3600"],
                                 "env": [{"name": "LOG_LEVEL", "value": "info"},
                                         {"name": "LOG_LEVEL", "value": "debug"}]}]}}}}


def pyproject_version() -> str:
    with (ROOT / "pyproject.toml").open("rb") as f:
        return str(tomllib.load(f)["project"]["version"])


def wheel_problems(wheel: Path) -> list[str]:
    """What the wheel lacks of the files the package reads at run time (empty: nothing)."""
    names = set(zipfile.ZipFile(wheel).namelist())
    tracked = subprocess.run(["git", "ls-files", "schemas", "multinode/templates", "multinode/data", "policy",
                              "components", "multinode"], cwd=ROOT, capture_output=True, text=True, check=True)
    problems = []
    for rel in tracked.stdout.split():
        if rel.startswith("schemas/"):
            want = "multinode/" + rel
        else:
            want = rel
        if want not in names:
            problems.append(f"the wheel has no {want} (from {rel})")
    for required in ("multinode/program.py", "policy/PulumiPolicy.yaml", "policy/analyzer.py"):
        if required not in names:
            problems.append(f"the wheel has no {required}")
    dist = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
    scripts = zipfile.ZipFile(wheel).read(dist[0]).decode() if dist else ""
    for script in ("multinode", "pulumi-resource-multinode", "multinode-policy-pack"):
        if not re.search(rf"^{re.escape(script)} = ", scripts, re.M):
            problems.append(f"the wheel installs no {script} executable (entry_points.txt)")
    return problems


def without(wheel: Path, member: str, out_dir: Path) -> Path:
    """A copy of `wheel` without `member` (its RECORD line too, so the installer accepts it)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    out = out_dir / wheel.name
    with zipfile.ZipFile(wheel) as src, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst:
        if member not in src.namelist():
            raise SystemExit(f"package-check: the planted run found no {member} in the wheel")
        for info in src.infolist():
            if info.filename == member:
                continue
            data = src.read(info)
            if info.filename.endswith(".dist-info/RECORD"):
                data = b"".join(line for line in data.splitlines(keepends=True)
                                if not line.startswith(member.encode() + b","))
            dst.writestr(info, data)
    return out


class Check:
    def __init__(self, uv: list[str], work: Path) -> None:
        self.uv = uv
        self.work = work
        self.failures: list[str] = []
        # the venvs' processes see nothing of this checkout: no PYTHONPATH, no active venv, a working folder outside
        self.env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV",
                                                                      "UV_PROJECT_ENVIRONMENT")}
        self.env["MULTINODE_CACHE_DIR"] = str(work / "cache")

    def fail(self, message: str) -> None:
        self.failures.append(message)
        print(f"package-check: FAIL {message}", flush=True)

    def run(self, cmd: list[str], cwd: Path, env: dict[str, str] | None = None,
            timeout: float = 600) -> subprocess.CompletedProcess[str]:
        return subprocess.run(cmd, cwd=cwd, env=env or self.env, capture_output=True, text=True, timeout=timeout)

    def build(self) -> Path:
        dist = self.work / "dist"
        r = self.run([*self.uv, "build", "--quiet", "--out-dir", str(dist)], cwd=ROOT)
        if r.returncode != 0:
            raise SystemExit(f"package-check: uv build failed:\n{r.stderr}")
        wheels = sorted(dist.glob("*.whl"))
        if len(wheels) != 1 or not list(dist.glob("*.tar.gz")):
            raise SystemExit(f"package-check: uv build made {[p.name for p in dist.iterdir()]}, not one wheel "
                             f"and one sdist")
        return wheels[0]

    def install(self, wheel: Path, venv: Path) -> Path:
        constraints = self.work / "constraints.txt"
        if not constraints.exists():
            r = self.run([*self.uv, "export", "--frozen", "--no-dev", "--no-emit-project", "--no-hashes", "--quiet",
                          "--output-file", str(constraints)], cwd=ROOT)
            if r.returncode != 0:
                raise SystemExit(f"package-check: uv export failed:\n{r.stderr}")
        r = self.run([*self.uv, "venv", "--quiet", "--python", getattr(sys, "_base_executable", sys.executable),
                      str(venv)], cwd=self.work)
        if r.returncode != 0:
            raise SystemExit(f"package-check: uv venv failed:\n{r.stderr}")
        env = {**self.env, "VIRTUAL_ENV": str(venv)}
        r = self.run([*self.uv, "pip", "install", "--quiet", "-c", str(constraints), str(wheel)], cwd=self.work,
                     env=env)
        if r.returncode != 0:
            raise SystemExit(f"package-check: installing {wheel.name} failed:\n{r.stderr}")
        return venv / "bin"

    def installed(self, bin_dir: Path, wheel: Path) -> None:
        want = pyproject_version()
        r = self.run([str(bin_dir / "multinode"), "--version"], cwd=self.work)
        if r.stdout.strip() != f"multinode {want}":
            self.fail(f"`multinode --version` printed {r.stdout.strip()!r} {r.stderr.strip()!r}, "
                      f"not 'multinode {want}' (pyproject.toml)")
        if f"-{want}-" not in wheel.name:
            self.fail(f"the wheel {wheel.name} is not version {want}")
        probe = ("import json, components, components.platform, policy, multinode.program, multinode.schemafiles as s;"
                 "print(json.dumps([components.__file__, policy.__file__, str(s.SCHEMA_DIR)]))")
        r = self.run([str(bin_dir / "python"), "-c", probe], cwd=self.work)
        if r.returncode != 0:
            self.fail(f"importing the package from the venv failed: {r.stderr.strip()[-400:]}")
        elif str(ROOT) in r.stdout or str(bin_dir.parent) not in r.stdout:
            self.fail(f"the venv imports the package from outside itself: {r.stdout.strip()}")
        r = self.run([str(bin_dir / "multinode"), "schema"], cwd=self.work)
        if r.returncode != 0 or f'"version": "{want}"' not in r.stdout:
            self.fail(f"`multinode schema` does not carry version {want}: {r.stderr.strip()[-300:]}")
        if not (bin_dir / "pulumi-resource-multinode").is_file():
            self.fail("no pulumi-resource-multinode executable in the venv")

    def projects(self, bin_dir: Path, wheel: Path) -> None:
        for cloud in CLOUDS:
            project = self.work / "projects" / f"gpu-{cloud}"
            r = self.run([str(bin_dir / "multinode"), "new", str(project), "--cloud", cloud, "--package", str(wheel)],
                         cwd=self.work)
            if r.returncode != 0:
                self.fail(f"`multinode new --cloud {cloud}` exited {r.returncode}: {r.stderr.strip()[-400:]}")
                continue
            for f in sorted(p for p in project.rglob("*") if p.is_file()):
                if str(ROOT) in f.read_text():
                    self.fail(f"{f.relative_to(self.work)} names this checkout ({ROOT})")
            start = time.monotonic()
            r = self.run([str(bin_dir / "multinode"), "plan", "dev"], cwd=project)
            took = time.monotonic() - start
            clean = "policy: 0 mandatory violation(s);" in r.stdout   # advisories are listed with ids (advisories.json)
            if r.returncode != 0 or not clean:
                tail = (r.stdout + r.stderr).strip().splitlines()[-4:]
                self.fail(f"`multinode plan dev` of the new {cloud} project exited {r.returncode}"
                          f"{'' if clean else ' without a clean policy line'}: {' | '.join(tail)}")
            else:
                print(f"package-check: {cloud}: new project planned clean ({took:.1f} s)", flush=True)

    def pack(self, bin_dir: Path) -> None:
        r = self.run([str(bin_dir / "multinode"), "policy-path"], cwd=self.work)
        path = Path(r.stdout.strip())
        if r.returncode != 0 or path != bin_dir / "multinode-policy-pack":
            self.fail(f"`multinode policy-path` printed {r.stdout.strip()!r} {r.stderr.strip()!r}, "
                      f"not {bin_dir / 'multinode-policy-pack'}")
            return
        # started as the engine starts a binary analyzer plugin: its first stdout line is the gRPC port
        self.serves(path, [], "the policy pack")
        # the provider as the engine starts a resource plugin: the engine's address as its argument (loopback, where
        # nothing listens: serving does not need the engine until a request comes), the port on stdout
        self.serves(bin_dir / "pulumi-resource-multinode", ["127.0.0.1:9"], "the provider")

    def serves(self, exe: Path, args: list[str], what: str) -> None:
        proc = subprocess.Popen([str(exe), *args], cwd=self.work / "projects" / "gpu-aws", env=self.env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            line = proc.stdout.readline().strip() if proc.stdout else ""
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if not line.isdigit():
            err = proc.stderr.read() if proc.stderr else ""
            self.fail(f"{what} ({exe.name}) printed {line!r}, not its port: {err.strip()[-400:]}")
        else:
            print(f"package-check: {what} ({exe.name}) served on port {line}", flush=True)

    def planted(self, wheel: Path) -> None:
        broken = without(wheel, PLANTED_MISSING, self.work / "planted")
        bin_dir = self.install(broken, self.work / "venv-planted")
        project = self.work / "projects" / "gpu-gcp"
        r = self.run([str(bin_dir / "multinode"), "plan", "dev", "--out", str(self.work / "planted-build")],
                     cwd=project)
        if r.returncode == 0:
            self.fail(f"the planted wheel (no {PLANTED_MISSING}) planned with exit 0: the check cannot see a "
                      f"missing data file")
        else:
            last = (r.stdout + r.stderr).strip().splitlines()[-1:]
            print(f"package-check: planted: without {PLANTED_MISSING} the plan fails (exit {r.returncode}: "
                  f"{' '.join(last)[:200]})", flush=True)


    def engine_preview(self, bin_dir: Path, pulumi_bin: Path) -> None:
        """The new project's `pulumi preview --policy-pack $(multinode policy-path)` on the real engine: clean, then
        with the planted violation (tools/project_preview.py, run by the venv's interpreter outside the checkout)."""
        import yaml

        for exe in ("pulumi", "pulumi-resource-kubernetes"):
            if not (pulumi_bin / exe).is_file():
                self.fail(f"--engine {pulumi_bin}: no {exe} there (make pulumi-tools)")
                return
        r = self.run([str(bin_dir / "multinode"), "policy-path"], cwd=self.work)
        pack = r.stdout.strip()
        work = self.work / "engine"
        work.mkdir()
        driver = work / "project_preview.py"
        shutil.copy(ROOT / "tools" / "project_preview.py", driver)
        kubeconfig = work / "kubeconfig"
        kubeconfig.write_text(_engine_module().UNREACHABLE_KUBECONFIG)   # the engine tests' unreachable cluster
        for variant in ("clean", "planted"):
            project = work / variant
            shutil.copytree(self.work / "projects" / f"gpu-{ENGINE_CLOUD}", project)
            if variant == "planted":
                sf = project / "Pulumi.dev.yaml"
                doc = yaml.safe_load(sf.read_text())
                doc["config"]["multinode:manifests"] = [PLANTED_DEPLOYMENT]
                sf.write_text(yaml.safe_dump(doc, sort_keys=False))
            start = time.monotonic()
            r = self.run([str(bin_dir / "python"), str(driver), str(project), "dev", "--pulumi", str(pulumi_bin),
                          "--pack", pack, "--kubeconfig", str(kubeconfig), "--state", str(work / f"{variant}-state"),
                          "--addons-provided"], cwd=project, timeout=1200)
            took = time.monotonic() - start
            out = r.stdout + r.stderr
            lines = [ln for ln in out.splitlines() if ln.startswith("project-preview:")]
            source = next((ln for ln in lines if "the multinode package from" in ln), "")
            if str(bin_dir.parent) not in source or str(ROOT) in source:
                self.fail(f"the {variant} project's preview did not run the venv's package: {source or out[-600:]}")
            if variant == "clean":
                ok = r.returncode == 0 and any(": dev: passed" in ln for ln in lines)
            else:
                fails = [ln for ln in lines if ln.startswith("project-preview: FAIL mandatory policy")]
                ok = (r.returncode == 1 and len(fails) == 1 and "env-defined-once" in fails[0]
                      and any("(env-defined-once), preview failed" in ln for ln in lines))
            if not ok:
                self.fail(f"the {variant} `multinode new --cloud {ENGINE_CLOUD}` project's pulumi preview on the "
                          f"engine exited {r.returncode}: {out.strip()[-1500:]}")
            else:
                print(f"package-check: engine: the {variant} {ENGINE_CLOUD} project's pulumi preview --policy-pack "
                      f"$(multinode policy-path): {lines[-1].removeprefix('project-preview: ')} ({took:.0f} s)",
                      flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--uv", default=os.environ.get("UV", "uv"), help="the uv command (default $UV or uv)")
    ap.add_argument("--keep", action="store_true", help="keep the temporary folder (printed)")
    ap.add_argument("--engine", metavar="DIR", help="also preview a new project on the real engine with the Pulumi CLI "
                                                    "and kubernetes provider in DIR (make pulumi-tools)")
    opts = ap.parse_args(argv)
    uv = shlex.split(opts.uv)
    if "/" in uv[0]:
        uv[0] = str(Path(uv[0]).resolve())        # the Makefile's .uv-bootstrap/bin/uv: the checks run elsewhere
    if shutil.which(uv[0]) is None and not Path(uv[0]).is_file():
        print(f"package-check: no uv at {opts.uv!r}", file=sys.stderr)
        return 2
    start = time.monotonic()
    work = Path(tempfile.mkdtemp(prefix="multinode-package-check-"))
    if work.resolve().is_relative_to(ROOT):
        print(f"package-check: the temporary folder {work} is inside the checkout; set TMPDIR", file=sys.stderr)
        return 2
    check = Check(uv, work)
    try:
        wheel = check.build()
        for p in wheel_problems(wheel):
            check.fail(p)
        bin_dir = check.install(wheel, work / "venv")
        check.installed(bin_dir, wheel)
        check.projects(bin_dir, wheel)
        check.pack(bin_dir)
        if opts.engine:
            check.engine_preview(bin_dir, Path(opts.engine).resolve())
        check.planted(wheel)
    finally:
        if opts.keep:
            print(f"package-check: kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    took = time.monotonic() - start
    if check.failures:
        print(f"package-check: {len(check.failures)} problem(s) ({took:.0f} s wall)")
        return 1
    engine_note = ("; the existing project previewed clean on the engine and its planted violation failed it"
                   if opts.engine else "")
    print(f"package-check: ok: {wheel.name} installed outside the checkout, {len(CLOUDS)} new projects planned "
          f"clean, the planted missing file failed the plan{engine_note} ({took:.0f} s wall)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
