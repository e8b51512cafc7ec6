#!/usr/bin/env bash
# bench/ci_times.sh [out.tsv]: the CI steps of .ci/run one by one, each under /usr/bin/time, wall and CPU (user+sys
# of the step and its children), written as a TSV (issue 41). The Go modules of conformance/ are first downloaded
# and built one at a time (so a cold run shows where the cold cost goes: downloads, then compiles per go.mod), then
# the steps run on those builds. Cold: run it on a machine whose Go caches (go env GOCACHE GOMODCACHE) and uv cache
# are empty; warm: run it again. Needs what .ci/run needs. It does not clean any cache itself.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:-build/ci-times.tsv}
mkdir -p "$(dirname "$out")"
printf 'step\twall_s\tcpu_s\texit\n' >"$out"
t() {   # t <label> <command...>
  local label=$1; shift
  local f; f=$(mktemp)
  echo "== $label: $*"
  /usr/bin/time -f '%e %U %S' -o "$f" "$@"; local rc=$?
  read -r wall user sys <"$f"; rm -f "$f"
  printf '%s\t%s\t%.1f\t%s\n' "$label" "$wall" "$(echo "$user + $sys" | bc)" "$rc" | tee -a "$out"
  return 0
}
t venv make venv
t test make test
t plan-all make plan-all
t lint make lint
t plan-guides make plan-guides
for m in apiserver cluster kyverno lws mpi-operator volcano pulumi pulumi/kubernetes sdkgen; do
  t "download:$m" bash -c "cd conformance/$m && go mod download"
done
t build:apiserver make -C conformance/apiserver build
t build:cluster make -C conformance/cluster build
t build:kyverno make -C conformance/kyverno build
t build:lws make -C conformance/lws build
t build:mpi-operator make -C conformance/mpi-operator build
t build:volcano make -C conformance/volcano build
t build:pulumi-cli make -C conformance/pulumi cli
t build:pulumi-provider make -C conformance/pulumi provider
t build:sdkgen make -C conformance/sdkgen build
t step:conformance make conformance
t step:sdks make sdks
t step:cluster-check make cluster-check
t step:pulumi-check+e2e make pulumi-check e2e
t step:e2e-full+release-e2e make e2e-full release-e2e
echo "== written: $out"
column -t -s $'\t' "$out"
