#!/bin/sh
# make e2e: a stack on the cluster in a box (conformance/cluster, issue 28) through the real Pulumi engine.
# The box gets the stack's nodes and no objects (build/.../<stack>-box/k8s is empty): `pulumi up` creates them.
#   e2e.sh                 the reduced e2e stack (Pulumi.e2e.yaml: add-ons and fabric off), no Kyverno
#   e2e.sh existing-dev    an example stack as it is, every add-on it enables marked provided (e2e.py
#                          provided_variant), the fabric on: the box runs Kyverno (conformance/kyverno/bin/kyverno)
#   e2e.sh --release existing-dev   the same box, `multinode release` (release_e2e.py) instead of e2e.py
set -eu
verdict="conformance/pulumi/e2e.py"; vflags="--full"
fullbuild=build/e2e-full
if [ "${1:-}" = "--release" ]; then shift; verdict="conformance/pulumi/release_e2e.py"; vflags=""; fullbuild=build/e2e-release; fi
root="$(cd "$(dirname "$0")/../.." && pwd)"
py="$root/.venv/bin/python"
cd "$root"
if [ $# -eq 0 ]; then
  stack="$root/conformance/pulumi/Pulumi.e2e.yaml"; name=e2e; build=build; full=""; kyverno=""; prep=""
else
  name="$1"; build=$fullbuild; full="$vflags"
  stack="$root/$build/Pulumi.$name.yaml"
  "$py" conformance/pulumi/e2e.py derive "$root/stacks/Pulumi.$name.yaml" "$stack"
  kyverno="$root/conformance/kyverno/bin/kyverno"
  test -x "$kyverno" || { echo "e2e $name: $kyverno is missing: make -C conformance/kyverno build" >&2; exit 2; }
  prep="--kyverno-crds $(conformance/moddir.sh conformance/kyverno github.com/kyverno/kyverno)/config/crds"
fi
"$root/.venv/bin/multinode" plan --file "$stack" --out "$build" >/dev/null || true   # exit 1: a finding, still a plan
test -d "$build/$name/k8s" || { echo "e2e $name: multinode plan wrote no $build/$name/k8s" >&2; exit 2; }
# shellcheck disable=SC2086
"$py" conformance/cluster/prepare.py "$build/$name" "$stack" $prep
box="$build/$name-box"
rm -rf "$box" "$build/$name/engines/pulumi"
mkdir -p "$box/k8s" "$box/engines"
cp -r "$build/$name/engines/cluster" "$box/engines/"
# As root the box runs in a network namespace of its own with only loopback (clusterbox --netns), and the --compare
# command (the Pulumi CLI, the language host, the providers, the pack) runs inside it as the box's child: nothing of
# the run can reach an address outside it (the CLI's update check fails at once, PULUMI_SKIP_UPDATE_CHECK aside).
# E2E_NETNS=0 (or not root): the host's loopback, as before.
netns=""
if [ "$(id -u)" = 0 ] && [ "${E2E_NETNS:-1}" != 0 ]; then netns="--netns"; fi
# the box writes its kubeconfig's path into observed.json before it runs the --compare command
# shellcheck disable=SC2086
exec "${CLUSTERBOX:-$root/conformance/bin/clusterbox}" $netns --stack-dir "$box" --timeout 40m \
  ${kyverno:+--kyverno "$kyverno"} --compare \
  "$py $verdict $stack \$($py -c \"import json;print(json.load(open('$box/engines/cluster/observed.json'))['kubeconfig'])\") --build $build $full"
