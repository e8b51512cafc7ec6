#!/usr/bin/env bash
# lane.sh: the steps .ci/run runs BESIDE `make cluster-check` (issue 41), in a session of its own at nice 5, its
# output in build/ci-lane.log (printed by .ci/run when both are done). cluster-check spends most of its time waiting
# for controllers to settle (two boxes use ~0.8 of the 2 cores), so these steps take the idle CPU instead of adding
# their own minutes after it. None of them writes where cluster-check reads or writes: chart-check renders into
# build/<stack>/engines/helm.txt and build/.chart-scratch and is told not to plan again (`-o plan-all -o
# plan-guides`: the stacks were planned by `make plan-all` before; a new plan would rewrite files a box is reading);
# sdks writes build/sdks; pulumi-check uses pytest's tmp folders; e2e, e2e-full and release-e2e plan into build/e2e,
# build/e2e-full and build/e2e-release and run boxes of their own (own network namespaces); real-node-check plans
# into build/realnode. Their `go build`
# prerequisites find the binaries up to date (the build ID check: nothing is rewritten under a running box).
# real-node-check runs first: its background builds are done soonest on a cold machine; the rotation's slot last.
# Environment from .ci/run: CI_ELAPSED (its SECONDS at the start: the budget is counted from CI's own start),
# prebuild_pids (the background builds await_built watches), CI_BUDGET_MIN/CI_ALLOW_SKIP as there. Skipped steps
# are appended to build/ci-lane.skipped (LANE_SKIPPED).
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS=${CI_ELAPSED:?lane.sh is started by .ci/run}
source .ci/steps.sh
: "${LANE_SKIPPED:=build/ci-lane.skipped}"   # another file: for tests (tests/test_ci_steps.py)
: >"$LANE_SKIPPED"
finish() { local s; for s in "${skipped[@]}"; do echo "$s" >>"$LANE_SKIPPED"; done; }
trap finish EXIT
# real kubelets, containerd and CNI in a box of their own network namespace (issue 42): one guide stack whose gang's
# pods all land on real nodes, after the planted real-node boxes (registry, Service ports, names, probes; the
# planted rendezvous mistakes of `make gang-tests` are left out: README, Development). Planned into build/realnode
# (REAL_OUT), as cluster-check boxes the same stack in build/. Its Debian packages, root filesystem and Ray layer
# were prepared in the background.
await_built realnode-deps coredns
step real-node-check 8 real-node-check STACK=torchrun-guide-indexed-job REAL_OUT=build/realnode
await_built helm
step chart-check   5   -o plan-all -o plan-guides chart-check   # every Helm release rendered by Helm's library (the provider's) against ../shared/charts
await_built pulumi-tools sdkgen
step sdks          6   sdks                 # the nodejs/python/go SDKs from Pulumi's codegen; the TypeScript and Go examples built against them
step e2e           8   pulumi-check e2e     # the Pulumi engine: preview with the pack, up against the box
step e2e-full      8   e2e-full release-e2e # existing-dev, dynamo-dev and multinode release on the Pulumi engine against the box
# the rotation (.ci/rotation.tsv): the one slot of rungs this commit plays (every slot over consecutive commits)
source .ci/rotation.sh
run_rotation
