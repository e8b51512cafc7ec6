"""`make sdk-pack`: the generated SDKs packed as their ecosystems take them, and the examples built against the packed
artifacts from a folder outside the checkout (issue 45). Runs after `make sdks` (build/sdks/{nodejs,go}).

    python conformance/sdkgen/pack.py --root . [--keep]

1. nodejs: build/sdks/nodejs compiled by tsc (the generator's own tsconfig.json; typescript, @types/node and
   @pulumi/pulumi from examples/typescript/node_modules, so no network), then `npm pack` of the compiled package:
   bin/ with package.json at its root (`main` index.js, `types` index.d.ts; the generator's postinstall, which
   compiles a local SDK at install time, and its build-only dependencies dropped) ->
   build/sdks/pack/pulumi-multinode-<version>.tgz
2. go: build/sdks/go as a Go module zip (the layout of the module proxy's .zip: every file under
   <module path>@v<version>/) -> build/sdks/pack/multinode-sdk-go-v<version>.zip; its go.mod must declare the path
   the schema's importBasePath names.
3. Outside the checkout (a temporary folder): examples/typescript copied, `npm ci` from its package-lock.json (npm's
   cache), `npm install` of the tarball (a `file:` dependency), `tsc --noEmit` of index.ts; the module
   @pulumi/multinode must resolve into that folder's node_modules. examples/go copied, the zip unpacked beside it,
   `go mod edit -replace` of the SDK's module path to the unpacked folder, `go build` with GOPROXY=off (the other
   modules from the module cache `make sdks` filled; nothing fetched); `go list -m` must name the unpacked folder.
Both versions must equal pyproject.toml's. Planted, so the check can fail: the same examples with `nodeCount`
misspelt (`nodeCont` / `NodeCont`) must fail tsc and go build against the packed artifacts, naming the key.
Prints one line per step; exit 1 with `sdk-pack: FAIL ...` lines.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
import zipfile
from pathlib import Path

OUT = Path("build") / "sdks"
TS_EXAMPLE = Path("examples") / "typescript"
GO_EXAMPLE = Path("examples") / "go"
# the Go SDK's module path: multinode/package_schema.py GO_IMPORT_PATH (the schema's importBasePath) minus the
# package folder the generator writes under the module root
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from multinode.package_schema import GO_IMPORT_PATH  # noqa: E402

GO_MODULE = GO_IMPORT_PATH.rsplit("/", 1)[0]
# what the generator's local-SDK package.json needs only to compile at install time (pkg/v3@v3.274.0
# codegen/nodejs/gen.go genNPMPackageMetadata: localSDK puts typescript and @types/node in dependencies and a
# postinstall that runs tsc); a compiled package needs neither
BUILD_ONLY = ("typescript", "@types/node")


def run(cmd: list[str], cwd: Path, env: dict[str, str] | None = None,
        timeout: float = 900) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


class Pack:
    def __init__(self, root: Path, work: Path) -> None:
        self.root, self.work = root, work
        self.out = root / OUT / "pack"
        self.failures: list[str] = []
        with (root / "pyproject.toml").open("rb") as f:
            self.version = str(tomllib.load(f)["project"]["version"])

    def fail(self, msg: str) -> None:
        self.failures.append(msg)
        print(f"sdk-pack: FAIL {msg}", flush=True)

    def npm_tarball(self) -> Path | None:
        src = self.root / OUT / "nodejs"
        stage = self.out / "nodejs"
        shutil.rmtree(stage, ignore_errors=True)
        shutil.copytree(src, stage, ignore=shutil.ignore_patterns("node_modules", "bin"))
        (stage / "node_modules").symlink_to(self.root / TS_EXAMPLE / "node_modules")
        r = run([str(self.root / TS_EXAMPLE / "node_modules" / ".bin" / "tsc"), "-p", "tsconfig.json"], stage)
        if r.returncode:
            self.fail(f"tsc of the nodejs SDK failed:\n{r.stdout[-2000:]}{r.stderr[-2000:]}")
            return None
        meta = json.loads((stage / "package.json").read_text())
        if meta.get("version") != self.version:
            self.fail(f"the nodejs SDK's package.json is version {meta.get('version')!r}, not {self.version}")
        meta["main"] = "index.js"
        meta["types"] = "index.d.ts"
        scripts = {k: v for k, v in (meta.get("scripts") or {}).items() if k not in ("postinstall", "build")}
        if scripts:
            meta["scripts"] = scripts
        else:
            meta.pop("scripts", None)
        meta["dependencies"] = {k: v for k, v in (meta.get("dependencies") or {}).items() if k not in BUILD_ONLY}
        meta.pop("devDependencies", None)
        bin_dir = stage / "bin"
        (bin_dir / "package.json").write_text(json.dumps(meta, indent=4) + "\n")
        for extra in ("README.md", "LICENSE"):
            if (src / extra).exists():
                shutil.copy(src / extra, bin_dir / extra)
        r = run(["npm", "pack", "--silent", "--pack-destination", str(self.out)], bin_dir)
        if r.returncode:
            self.fail(f"npm pack failed:\n{r.stdout[-1500:]}{r.stderr[-1500:]}")
            return None
        tgz = self.out / r.stdout.strip().splitlines()[-1]
        print(f"sdk-pack: npm tarball {tgz.relative_to(self.root)} ({meta['name']} {meta['version']}, "
              f"{tgz.stat().st_size // 1024} KiB)", flush=True)
        return tgz

    def go_zip(self) -> Path | None:
        src = self.root / OUT / "go"
        gomod = (src / "go.mod").read_text() if (src / "go.mod").exists() else ""
        declared = next((ln.split()[1] for ln in gomod.splitlines() if ln.startswith("module ")), "")
        if declared != GO_MODULE:
            self.fail(f"build/sdks/go/go.mod declares module {declared!r}, not {GO_MODULE} (the schema's "
                      f"importBasePath {GO_IMPORT_PATH})")
            return None
        zpath = self.out / f"multinode-sdk-go-v{self.version}.zip"
        prefix = f"{GO_MODULE}@v{self.version}/"
        with zipfile.ZipFile(zpath, "w", zipfile.ZIP_DEFLATED) as z:
            for f in sorted(p for p in src.rglob("*") if p.is_file()):
                z.write(f, prefix + f.relative_to(src).as_posix())
        print(f"sdk-pack: Go module zip {zpath.relative_to(self.root)} ({GO_MODULE} v{self.version})", flush=True)
        return zpath

    def typescript_example(self, tgz: Path) -> None:
        d = self.work / "typescript"
        d.mkdir()
        for name in ("index.ts", "package.json", "package-lock.json", "tsconfig.json"):
            shutil.copy(self.root / TS_EXAMPLE / name, d / name)
        shutil.copy(tgz, d / tgz.name)
        t = time.monotonic()
        for cmd in (["npm", "ci", "--no-audit", "--no-fund", "--ignore-scripts", "--prefer-offline",
                     "--loglevel=error"],
                    ["npm", "install", "--no-audit", "--no-fund", "--ignore-scripts", "--prefer-offline",
                     "--loglevel=error", f"./{tgz.name}"]):
            r = run(cmd, d)
            if r.returncode:
                self.fail(f"{' '.join(cmd)} outside the checkout failed:\n{r.stdout[-1500:]}{r.stderr[-1500:]}")
                return
        r = run(["node", "-e", "console.log(require.resolve('@pulumi/multinode'))"], d)
        where = r.stdout.strip()
        if not where.startswith(str(d / "node_modules" / "@pulumi" / "multinode")):
            self.fail(f"@pulumi/multinode resolves to {where or r.stderr.strip()!r}, not the installed tarball")
        r = run([str(d / "node_modules" / ".bin" / "tsc"), "-p", "tsconfig.json", "--noEmit"], d)
        if r.returncode:
            self.fail(f"tsc of examples/typescript against the packed SDK failed:\n{r.stdout[-2000:]}"
                      f"{r.stderr[-1000:]}")
            return
        dep = json.loads((d / "package.json").read_text())["dependencies"].get("@pulumi/multinode")
        print(f"sdk-pack: examples/typescript type-checked outside the checkout against {dep} "
              f"({time.monotonic() - t:.0f} s)", flush=True)
        index = d / "index.ts"
        index.write_text(index.read_text().replace("nodeCount:", "nodeCont:", 1))
        r = run([str(d / "node_modules" / ".bin" / "tsc"), "-p", "tsconfig.json", "--noEmit"], d)
        if r.returncode == 0 or "nodeCont" not in r.stdout:
            self.fail(f"planted: index.ts with nodeCount misspelt nodeCont passed tsc against the packed SDK "
                      f"(exit {r.returncode}): {r.stdout[-600:]}")
        else:
            print(f"sdk-pack: planted: nodeCont fails tsc against the packed SDK: {r.stdout.strip().splitlines()[0]}",
                  flush=True)

    def go_example(self, zpath: Path) -> None:
        mods = self.work / "gomod"
        with zipfile.ZipFile(zpath) as z:
            z.extractall(mods)
        unpacked = mods / f"{GO_MODULE}@v{self.version}"
        d = self.work / "go"
        d.mkdir()
        for name in ("main.go", "go.mod", "go.sum"):
            shutil.copy(self.root / GO_EXAMPLE / name, d / name)
        env = {**os.environ, "CGO_ENABLED": "0", "GOPROXY": "off", "GOFLAGS": "-mod=mod"}
        t = time.monotonic()
        for cmd in (["go", "mod", "edit", f"-replace={GO_MODULE}={unpacked}"],
                    ["go", "build", "-trimpath", "-o", str(self.work / "example-go"), "."]):
            r = run(cmd, d, env)
            if r.returncode:
                self.fail(f"{' '.join(cmd)} outside the checkout failed:\n{r.stdout[-1500:]}{r.stderr[-1500:]}")
                return
        r = run(["go", "list", "-m", "-f", "{{.Replace.Dir}}", GO_MODULE], d, env)
        if Path(r.stdout.strip()).resolve() != unpacked.resolve():
            self.fail(f"the Go example's {GO_MODULE} is {r.stdout.strip() or r.stderr.strip()!r}, not the unpacked "
                      f"module {unpacked}")
            return
        print(f"sdk-pack: examples/go built outside the checkout against {GO_MODULE} unpacked from {zpath.name}, "
              f"GOPROXY=off ({time.monotonic() - t:.0f} s)", flush=True)
        main_go = d / "main.go"
        main_go.write_text(main_go.read_text().replace("NodeCount:", "NodeCont:", 1))
        r = run(["go", "build", "-trimpath", "-o", str(self.work / "example-go-planted"), "."], d, env)
        if r.returncode == 0 or "NodeCont" not in r.stderr:
            self.fail(f"planted: main.go with NodeCount misspelt NodeCont built against the packed SDK "
                      f"(exit {r.returncode}): {r.stderr[-600:]}")
        else:
            first = next((ln for ln in r.stderr.splitlines() if "NodeCont" in ln), "")
            print(f"sdk-pack: planted: NodeCont fails go build against the packed SDK: {first.strip()}", flush=True)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--root", type=Path, default=Path.cwd())
    ap.add_argument("--keep", action="store_true", help="keep the temporary folder (printed)")
    a = ap.parse_args(argv)
    root = a.root.resolve()
    for need in (OUT / "nodejs" / "package.json", OUT / "go" / "go.mod", TS_EXAMPLE / "node_modules" / ".bin" / "tsc"):
        if not (root / need).exists():
            print(f"sdk-pack: no {need}: run `make sdks` first", file=sys.stderr)
            return 2
    start = time.monotonic()
    work = Path(tempfile.mkdtemp(prefix="multinode-sdk-pack-"))
    if work.resolve().is_relative_to(root):
        print(f"sdk-pack: the temporary folder {work} is inside the checkout; set TMPDIR", file=sys.stderr)
        return 2
    p = Pack(root, work)
    p.out.mkdir(parents=True, exist_ok=True)
    try:
        tgz = p.npm_tarball()
        zpath = p.go_zip()
        if tgz:
            p.typescript_example(tgz)
        if zpath:
            p.go_example(zpath)
    finally:
        if a.keep:
            print(f"sdk-pack: kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    took = time.monotonic() - start
    if p.failures:
        print(f"sdk-pack: {len(p.failures)} problem(s) ({took:.0f} s wall)")
        return 1
    print(f"sdk-pack: ok: the npm tarball and the Go module zip of version {p.version}, both examples built against "
          f"them outside the checkout ({took:.0f} s wall)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
