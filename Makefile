# Every target bootstraps .venv from uv.lock (`uv sync --locked`), installing uv first if it is missing.
# uv is found as `uv` on PATH, else as `$(PYTHON) -m uv`, else pip-installs it into .uv-bootstrap/
# (a small venv of its own). `uv sync` always targets the project's .venv, whichever interpreter started
# uv (unlike `python -m uv pip install`, which installs into that interpreter).
PYTHON ?= python3
# The interpreter .venv is built on: exactly the $(PYTHON) this make finds (uv's own search for
# `python3` skips virtual environments on PATH and could pick another Python).
PYTHON_EXE := $(shell $(PYTHON) -c 'import sys; print(sys.executable)' 2>/dev/null)
VENV := .venv
PY := $(VENV)/bin/python
UV_VERSION := 0.13.9
UV_BOOT := .uv-bootstrap
UV := $(shell if command -v uv >/dev/null 2>&1; then echo uv; \
              elif $(PYTHON) -m uv --version >/dev/null 2>&1; then echo "$(PYTHON) -m uv"; \
              else echo "$(UV_BOOT)/bin/uv"; fi)
STACK ?= aws-dev
# uv sync writes here whatever VIRTUAL_ENV the caller has active; never into the system Python.
export UV_PROJECT_ENVIRONMENT := $(CURDIR)/$(VENV)
# Use the Python 3.11+ this make runs with; never download one behind the user's back.
export UV_PYTHON_DOWNLOADS := never
# Python's default: keep compiled modules in __pycache__ (git-ignored). Where the environment sets
# PYTHONDONTWRITEBYTECODE (containers, this project's CI), every process compiled every project module again:
# `make test` starts a dozen processes, and spent ~110 s CPU instead of ~94 s (measured here).
unexport PYTHONDONTWRITEBYTECODE

.PHONY: go-download venv plan plan-all reference test lint bench clean package-check plan-guides conformance conformance-kyverno conformance-apiserver chart-check go-check cluster-check real-node-check gang-tests day-two-tests day-two-stacks day-two-up day-two-up-tests scale-check rotation-all pulumi-tools pulumi-preview pulumi-check e2e pr-check e2e-full release-e2e sdks bench-pack yaml-e2e yaml-host package-preview sdk-pack

$(UV_BOOT)/bin/uv:
	$(PYTHON) -m venv $(UV_BOOT)
	$(UV_BOOT)/bin/python -m pip install --quiet --disable-pip-version-check uv==$(UV_VERSION)

# Not a stamp file: `uv sync --locked` runs every time (a no-op in well under a second when .venv
# matches uv.lock) and repairs a half-made or stale .venv; --locked fails if uv.lock is out of date
# with pyproject.toml instead of re-resolving.
# --compile-bytecode: every installed module is compiled to .pyc once, when uv installs something (~55 s on a
# 2-core machine for the whole .venv; a sync with nothing to do compiles nothing). Without it a machine that
# sets PYTHONDONTWRITEBYTECODE (containers, CI) never keeps a .pyc, and every process compiles every module it
# imports: `multinode plan gcp-dev` took 7.9 s CPU that way against 3.2 s with the .pyc files (measured here).
# A .venv without a working interpreter (e.g. an empty folder) is removed and rebuilt; packages whose
# files went missing (which uv does not notice) are reinstalled (tools/venv_check.py).
venv: $(if $(filter $(UV_BOOT)/bin/uv,$(UV)),$(UV_BOOT)/bin/uv)
	@test -n "$(PYTHON_EXE)" || { echo "no $(PYTHON) found: install Python 3.11+ or run make PYTHON=/path/to/python3" >&2; exit 2; }
	@if [ -e $(VENV) ] && ! $(PY) -c '' 2>/dev/null; then echo "$(VENV) has no working Python: rebuilding it"; rm -rf $(VENV); fi
	$(UV) sync --locked --compile-bytecode --quiet --python $(PYTHON_EXE)
	@broken="$$($(PY) tools/venv_check.py)" || exit 2; \
	if [ -n "$$broken" ]; then \
	  echo "files missing from $(VENV), reinstalling:" $$broken; \
	  $(UV) sync --locked --compile-bytecode --quiet --python $(PYTHON_EXE) $$(for p in $$broken; do printf -- '--reinstall-package %s ' "$$p"; done) \
	  && $(PY) tools/venv_check.py --strict; \
	fi

## plan: render the offline plan of one example stack (STACK=aws-dev by default)
plan: venv
	$(VENV)/bin/multinode plan $(STACK)

## reference: write docs/config-reference.md from the config models (tests/test_reference.py compares it)
reference: venv
	$(VENV)/bin/multinode reference > docs/config-reference.md

## plan-all: render every stack in stacks/
plan-all: venv
	$(VENV)/bin/multinode plan --all

## test: the whole test suite, on every core (pytest-xdist; one test file stays on one worker so its module
## fixtures run once; files start in the order tests/conftest.py gives, costliest first). TEST_WORKERS=0 runs
## it in one process; MULTINODE_LONG_TESTS=1 runs the randomized tests at full size (README, Tests).
TEST_WORKERS ?= auto
test: venv
	$(PY) -m pytest -q -p no:cacheprovider -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder tests

## lint: ruff and mypy as configured in pyproject.toml (a CI gate: .ci/run runs it after the tests)
lint: venv
	$(VENV)/bin/ruff check --statistics . ; r=$$?; $(VENV)/bin/mypy; m=$$?; test $$r -eq 0 -a $$m -eq 0

## package-check: the package as a team installs it (issue 45, docs/install.md): `uv build` (sdist, then the wheel
## from it), the wheel installed into a fresh venv in a temporary folder outside the checkout (dependencies pinned by
## uv.lock; uv's cache, else the package index), `multinode --version` == pyproject's, a `multinode new` project per
## cloud planned clean, the policy pack executable started; then the same wheel without a data file must fail the
## plan. The fast parts first (tests/test_package_install.py). Measured here: ~115 s wall, ~45 s CPU (warm uv cache).
package-check: venv
	$(PY) -m pytest -q -p no:cacheprovider tests/test_package_install.py
	$(PY) tools/package_check.py --uv "$(UV)"

## package-preview: package-check, then the new `existing` project's `pulumi preview --policy-pack $(multinode
## policy-path)` on the real engine (the CLI and kubernetes provider of pulumi-tools; the project's program inline through
## the Automation API of the venv the wheel is installed in, the Python language host being unavailable): clean, then
## a planted mandatory violation must fail the preview naming its rule (tools/project_preview.py, docs/install.md)
package-preview: venv pulumi-tools
	$(PY) -m pytest -q -p no:cacheprovider tests/test_package_install.py
	$(PY) tools/package_check.py --uv "$(UV)" --engine conformance/pulumi/bin

## bench: `plan` per example stack against its import floor and the SDK's own cost (bench/sdk_replay.py), and its scaling
bench: venv
	$(PY) bench/plan_bench.py

## bench-pack: the policy pack started as the engine starts it (a gRPC analyzer plugin), per-resource and stack checks
bench-pack: venv
	$(PY) bench/pack_bench.py

## plan-guides: render every guide stack (tests/guides/Pulumi.<name>.yaml) into build/<name>/
plan-guides: venv
	@for f in tests/guides/Pulumi.*.yaml; do $(VENV)/bin/multinode plan --file $$f --out build >/dev/null || exit 1; done

## conformance-kyverno: Kyverno's own CLI (built from conformance/kyverno/go.mod) applies every stack's rendered
## fabric policies to its fabric pods; the mutated pods must equal build/<stack>/effective/, the ValidatingPolicy
## must admit them and deny the negative controls. Verdicts: build/<stack>/engines/kyverno.txt (conformance/kyverno/README.md).
## The tests of its planted defects run first (they need the binary; they skip only when it is not built).
conformance-kyverno: go-check venv plan-all plan-guides
	$(MAKE) -C conformance/kyverno build
	MULTINODE_ENGINES_REQUIRED=1 $(PY) -m pytest -q -p no:cacheprovider conformance/kyverno/tests
	$(PY) conformance/kyverno/kyverno_check.py --build build

## cluster-check: every stack with node pools and every guide stack applied to a real control plane on loopback
## (embedded etcd, kube-apiserver, controller-manager, scheduler; fake kubelet): the real scheduler's bindings
## against placement.json (conformance/cluster/README.md). Needs Go; writes build/<stack>/cluster.json.
## Kyverno's admission controller (conformance/kyverno's bin/kyverno) serves its webhooks in the box; Volcano's
## scheduler and controller-manager (conformance/volcano) run in it when the Go module proxy lets them be built;
## the LWS controller (conformance/lws) and the MPI operator's controller (conformance/mpi-operator) too.
cluster-check: go-check venv plan-all plan-guides
	$(MAKE) -C conformance/kyverno build
	$(MAKE) -C conformance/volcano $(if $(filter volcano all,$(CI_ALLOW_SKIP)),build-if-served,build)
	$(MAKE) -C conformance/lws build
	$(MAKE) -C conformance/mpi-operator build
	$(MAKE) -C conformance/cluster check ROOT=$(CURDIR) PY=$(CURDIR)/$(PY)

clean:
	rm -rf build .pytest_cache

## real-node-check: one stack (STACK=aws-dev, or a guide stack of tests/guides), or several (STACKS="a b c"), in the
## box with real nodes (issue 42): the box in a network namespace of its own (only loopback), whole pools (at most
## REAL_MAX=8 nodes) run by real kubelets (k8s.io/kubernetes, the box's version) with their own containerd, CNI
## bridge, our device plugin and a stand-in CSI plugin, CoreDNS (conformance/coredns) behind kube-proxy, the
## stack's images stood in for by a Debian rootfs (debootstrap, cached in ~/.cache/multinode/realnode) and served
## by the box's own registry. Runs the planted-defect tests first (REAL_TESTS=0 leaves them out: a run of stacks
## only, e.g. a CI slot whose planted tests ran in another), then the boxes REAL_JOBS at a time (default 1)
## with their times in build/real-node-times.tsv. Fails on any finding (build/<stack>/cluster.json realNodes).
## Root only; installs Debian packages with apt-get (conformance/realnode/install-deps.sh). Kyverno is built; LWS,
## Volcano and the MPI operator run when cluster-check has built them (else their gangs are listed as not checked).
## conformance/realnode/README.md.
REAL_STACKS = $(or $(STACKS),$(STACK))
REAL_JOBS ?= 1
REAL_TESTS ?= 1
# REAL_OUT: where the stacks are planned and boxed (default build; CI: build/realnode, beside cluster-check's build/)
REAL_OUT ?= build
real-node-check: go-check venv
	@for s in $(REAL_STACKS); do f=$$(ls stacks/Pulumi.$$s.yaml tests/guides/Pulumi.$$s.yaml 2>/dev/null | head -1); \
	  test -n "$$f" || { echo "real-node-check: no stacks/Pulumi.$$s.yaml or tests/guides/Pulumi.$$s.yaml" >&2; exit 2; }; \
	  $(VENV)/bin/multinode plan --file $$f --out $(REAL_OUT) >/dev/null || exit 1; done
	$(MAKE) -C conformance/kyverno build
	$(MAKE) -C conformance/coredns build
	$(MAKE) -C conformance/cluster build realnode-deps ROOT=$(CURDIR) PY=$(CURDIR)/$(PY)
	$(if $(filter 0,$(REAL_TESTS)),@echo "real-node-check: REAL_TESTS=0: the planted-defect tests not run", \
	MULTINODE_ENGINES_REQUIRED=1 $(PY) -m pytest -q -p no:cacheprovider conformance/cluster/tests/test_realnode_check.py \
	  conformance/cluster/tests/test_realnode_registry_services.py conformance/realnode/tests \
	  $(if $(GANG_TESTS),,--ignore=conformance/realnode/tests/test_box_gangs.py))
	REAL_OUT=$(abspath $(REAL_OUT)) ROOT=$(CURDIR) PY=$(CURDIR)/$(PY) conformance/realnode/run-stacks.sh $(REAL_JOBS) $(REAL_STACKS)

## gang-tests: the planted rendezvous mistakes on real nodes (issue 43; conformance/realnode/tests/test_box_gangs.py:
## an MPI hostfile with a slot too many, a worker short, a Ray worker pointed at a name that does not resolve), two
## real-node boxes, ~4.5 min warm here. `make real-node-check` runs them with GANG_TESTS=1; CI leaves them out for its
## cold budget (README, Development). Root only.
gang-tests: go-check venv
	$(MAKE) -C conformance/kyverno build
	$(MAKE) -C conformance/coredns build
	$(MAKE) -C conformance/lws build
	$(MAKE) -C conformance/mpi-operator build
	$(MAKE) -C conformance/cluster build realnode-deps ROOT=$(CURDIR) PY=$(CURDIR)/$(PY)
	MULTINODE_ENGINES_REQUIRED=1 $(PY) -m pytest -q -p no:cacheprovider conformance/realnode/tests/test_box_gangs.py

## day-two-tests: the planted day-two boxes (issue 44; conformance/cluster/tests/test_box_daytwo.py: the rendered
## Volcano job and LWS as they are, then budgets that allow no drain, a toleration of the unreachable taint without
## limit, a Volcano job without restart policies, a surge beyond the spare nodes); DAY_TWO_K= a pytest -k expression
## for some of them. scale-check: the 512-node box with its 64-node gang (issue 47). Root for the boxes' own network
## namespaces. In CI by rotation (.ci/rotation.tsv).
day-two-tests: go-check venv
	$(MAKE) -C conformance/kyverno build
	$(MAKE) -C conformance/volcano build
	$(MAKE) -C conformance/lws build
	$(MAKE) -C conformance/cluster day-two-tests ROOT=$(CURDIR) PY=$(CURDIR)/$(PY) $(if $(DAY_TWO_K),DAY_TWO_K='$(DAY_TWO_K)')

## day-two-stacks: day two played on the stacks DAY_TWO_PLAY names (issue 44; an entry `stack:workload` plays that
## batch gang; DAY_TWO_NOT_READY=1 also plays a node reporting Ready=False), one box each, planned into
## build/daytwo/<entry>; without Kyverno (cluster-check's boxes of the same stacks check its mutations; day two is
## the controllers'). In CI by rotation (.ci/rotation.tsv). Root for the boxes' own network namespaces.
day-two-stacks: go-check venv
	$(MAKE) -C conformance/volcano build
	$(MAKE) -C conformance/lws build
	$(MAKE) -C conformance/mpi-operator build
	$(MAKE) -C conformance/cluster day-two-stacks ROOT=$(CURDIR) PY=$(CURDIR)/$(PY) KYVERNO= DAY_TWO_PLAY='$(DAY_TWO_PLAY)' \
	  $(if $(DAY_TWO_NOT_READY),DAY_TWO_NOT_READY=1)

## day-two-up: issue 44 scenario 4 through `pulumi up` on the real engine (docs/day-two.md "The model rollout"): the
## stack S (default nim-lws) brought up by `engine.py up` against a box running Kyverno, LWS and Volcano, then a
## second `up` of a copy with the workload's image changed while the box samples the set's pods; the engine's step of
## the LeaderWorkerSet must be an update of its images only (build/day-two-up/<S>/day-two.json, engines/pulumi/).
## PLANT=1: the planted defect (`pulumi up --replace` of the LeaderWorkerSet), which fails. Root for the box's own
## network namespace. In CI by rotation (.ci/rotation.tsv), after `make e2e` has built pulumi-tools.
S ?= nim-lws
day-two-up: go-check venv pulumi-tools
	$(MAKE) -C conformance/kyverno build
	$(MAKE) -C conformance/volcano build
	$(MAKE) -C conformance/lws build
	$(MAKE) -C conformance/cluster day-two-up ROOT=$(CURDIR) PY=$(CURDIR)/$(PY) S=$(S) $(if $(PLANT),PLANT=1 \
	  DAY_TWO_UP_OUT=$(CURDIR)/build/day-two-up-planted)

## day-two-up-tests: conformance/pulumi/tests/test_box_rollout_up.py: nim-lws's rollout through `pulumi up` as
## rendered (passes) and with the planted `pulumi up --replace` of the LeaderWorkerSet (must fail), two boxes
day-two-up-tests: go-check venv pulumi-tools
	$(MAKE) -C conformance/kyverno build
	$(MAKE) -C conformance/volcano build
	$(MAKE) -C conformance/lws build
	$(MAKE) -C conformance/cluster build ROOT=$(CURDIR) PY=$(CURDIR)/$(PY)
	MULTINODE_ENGINES_REQUIRED=1 $(PY) -m pytest -q -p no:cacheprovider conformance/pulumi/tests/test_box_rollout_up.py

scale-check: go-check venv
	$(MAKE) -C conformance/kyverno build
	$(MAKE) -C conformance/volcano build
	$(MAKE) -C conformance/lws build
	$(MAKE) -C conformance/cluster scale-check ROOT=$(CURDIR) PY=$(CURDIR)/$(PY)

## rotation-all: every slot of CI's rotation (.ci/rotation.tsv: the rungs each CI run plays one of), one after the
## other, each under its allowance (CI_BUDGET_MIN, default 180 here, for all of them)
rotation-all:
	CI_BUDGET_MIN=$${CI_BUDGET_MIN:-180} bash -c 'set -euo pipefail; source .ci/steps.sh; source .ci/rotation.sh; CI_ROTATION=all run_rotation'

## conformance-apiserver: every object of every stack (stacks/, the guide stacks, fleet-dev) through the API
## server's own CREATE path, k8s.io/kubernetes as a Go library (conformance/apiserver/README.md). Plans the
## stacks first; builds (cached) and tests the checker, then writes build/<stack>/engines/apiserver.txt.
conformance-apiserver: go-check plan-all plan-guides
	$(MAKE) -C conformance/apiserver check

## chart-check: every Helm release of every stack (stacks/, the guide stacks) rendered by Helm's own library
## (helm.sh/helm/v3, the version the kubernetes provider installs with; conformance/helm/README.md) against the
## upstream chart folders in ../shared/charts (CHARTS=...): render errors, custom kinds whose CRD nobody installs,
## values keys the chart never reads, then every rendered object through conformance/apiserver. A chart with no
## folder is listed NOT CHECKED. Verdicts: build/<stack>/engines/helm.txt.
chart-check: go-check plan-all plan-guides
	$(MAKE) -C conformance/helm check $(if $(CHARTS),CHARTS=$(abspath $(CHARTS)))

## conformance: the engines' own code on every stack's output (issue 27): the API server's CREATE path and
## Kyverno's CLI. Needs Go (the version in conformance/*/go.mod or newer); the first build takes minutes and keeps
## a few GB of Go caches outside the repo (README, Development).
conformance: conformance-apiserver conformance-kyverno

## go-download: download every conformance Go module's dependencies into the module cache (network-bound; .ci/run
## starts it first, beside the Python steps, so the cold builds later find their modules there)
GO_MODULES := $(patsubst %/go.mod,%,$(wildcard conformance/*/go.mod conformance/*/*/go.mod))
go-download: go-check
	@fail=""; for m in $(GO_MODULES); do start=$$(date +%s); \
	  if (cd $$m && go mod download); then echo "go-download: $$m $$(( $$(date +%s) - start )) s"; \
	  else fail="$$fail $$m"; fi; done; \
	if [ -n "$$fail" ]; then echo "go-download: failed in:$$fail" >&2; exit 1; fi

go-check:
	@command -v go >/dev/null 2>&1 || { echo "the conformance targets need the Go toolchain (go 1.26 or newer) on PATH" >&2; exit 2; }

## pulumi-tools: the Pulumi CLI and the kubernetes provider built from Go modules (conformance/pulumi, issue 29)
pulumi-tools: go-check
	$(MAKE) -C conformance/pulumi tools

## pulumi-preview: `pulumi preview --policy-pack policy` of STACK on the real engine (the pull-request check:
## fails on any mandatory finding or any difference from `multinode plan`'s policy.json); then the engine tests
pulumi-preview: venv pulumi-tools
	$(PY) conformance/pulumi/engine.py preview $(STACK) --fresh

## pr-check: the pull-request check: `pulumi preview --policy-pack policy` of STACK (a stack of stacks/ or a
## Pulumi.<stack>.yaml) on the real engine; fails on any mandatory finding, one `pr-check: FAIL` line naming the
## rule and the resource each. PR_KUBECONFIG= a kubeconfig for the stack's secret (default: an unreachable
## cluster, enough when no add-on is installed by the stack: conformance/pulumi/README.md)
pr-check: venv pulumi-tools
	$(PY) conformance/pulumi/engine.py pr-check $(STACK) $(if $(PR_KUBECONFIG),--kubeconfig $(PR_KUBECONFIG))

## pulumi-check: build the Pulumi tools, then the engine tests of conformance/pulumi/tests (a clean stack's
## preview with the pack agrees with plan; a planted mandatory violation fails the preview with the rule's name)
pulumi-check: venv pulumi-tools
	MULTINODE_ENGINES_REQUIRED=1 $(PY) -m pytest -q -p no:cacheprovider conformance/pulumi/tests \
	  --ignore=conformance/pulumi/tests/test_box_rollout_up.py

## sdks: the package's nodejs, python and go SDKs generated by Pulumi's code generators (our Go tool around
## github.com/pulumi/pulumi/pkg/v3/codegen, conformance/sdkgen) from `multinode schema` into build/sdks/; then
## examples/typescript type-checked by tsc and examples/go built by go build against them, the python SDK imported,
## and the planted-defect tests (a misspelt key / wrong enum value fails tsc). Needs Go and Node.js (npm).
sdks: go-check venv
	$(MAKE) -C conformance/sdkgen sdks ROOT=$(CURDIR) PY=$(CURDIR)/$(PY) UV="$(UV)"

## sdk-pack: after sdks, the TypeScript SDK as an npm tarball and the Go SDK as a Go module zip (the schema's module
## path) in build/sdks/pack/, then examples/typescript and examples/go built against those packed artifacts from a
## temporary folder outside the checkout (npm install of the tarball; go.mod replace to the unpacked module, GOPROXY=off)
sdk-pack: sdks
	cd $(CURDIR) && $(PY) conformance/sdkgen/pack.py --root $(CURDIR)

## e2e: `pulumi up` for real (issue 29): the e2e stack (conformance/pulumi/Pulumi.e2e.yaml) through the Pulumi
## CLI and kubernetes provider built here against the cluster in a box: up, objects compared with build/e2e/k8s,
## no-op up, the protected claim's replace refused, destroy keeping the claim (build/e2e/engines/pulumi/e2e.txt)
e2e: venv pulumi-tools
	$(MAKE) -C conformance/cluster build ROOT=$(CURDIR)
	conformance/pulumi/e2e.sh

## e2e-full: `pulumi up` for real of existing-dev and dynamo-dev as they are, every add-on they enable marked
## `provided` (the box applies its CRDs), the fabric on (the box runs Kyverno): preview with the pack compared
## with plan, up, objects compared, no-op up, protected refusal, a workload rename, destroy keeping the claim
## (build/e2e-full/<stack>/engines/pulumi/e2e.txt). E2E_STACKS= to choose.
E2E_STACKS ?= existing-dev dynamo-dev
e2e-full: venv pulumi-tools
	$(MAKE) -C conformance/cluster build ROOT=$(CURDIR)
	$(MAKE) -C conformance/kyverno build
	@fail=""; for s in $(E2E_STACKS); do conformance/pulumi/e2e.sh $$s || fail="$$fail $$s"; done; \
	if [ -n "$$fail" ]; then echo "e2e-full: failed:$$fail"; exit 1; fi; echo "e2e-full: every stack passed"

## release-e2e: `multinode release` (the product's run_release, Automation API) of existing-dev on the engine against
## the box: preview with the pack, up, the NCCL gate reading a FAKE verdict (labelled; the box has no GPUs), then the
## gate failing on a FAKE low bandwidth (build/e2e-release/existing-dev/engines/release/release.txt)
release-e2e: venv pulumi-tools
	$(MAKE) -C conformance/cluster build ROOT=$(CURDIR)
	$(MAKE) -C conformance/kyverno build
	conformance/pulumi/e2e.sh --release existing-dev

## yaml-host: the Pulumi YAML language host (github.com/pulumi/pulumi-yaml cmd/pulumi-language-yaml) built from its
## own Go module at the pulumi pkg/v3 its go.mod names (conformance/pulumi-yaml/README.md) into conformance/bin/
yaml-host: go-check
	$(MAKE) -C conformance/pulumi-yaml build

## yaml-e2e: a Pulumi YAML program using multinode:index:Platform (conformance/pulumi-yaml/program/Pulumi.yaml) on
## the real engine against the box: `pulumi preview --policy-pack` and `pulumi up` with the provider executable
## pulumi-resource-multinode on PATH; its registrations compared with the Python program's for the same config,
## its objects with plan's, a no-op second up, destroy keeping the claim (build/yaml-e2e/yaml-e2e/engines/pulumi-yaml/e2e.txt)
yaml-e2e: venv pulumi-tools yaml-host
	$(MAKE) -C conformance/cluster build ROOT=$(CURDIR)
	$(MAKE) -C conformance/kyverno build
	$(PY) -m pytest -q -p no:cacheprovider conformance/pulumi-yaml/tests
	conformance/pulumi-yaml/yaml_e2e.sh
