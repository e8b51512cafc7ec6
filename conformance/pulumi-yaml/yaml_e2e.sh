#!/bin/sh
# make yaml-e2e: the Pulumi YAML program of program/Pulumi.yaml on the real engine against the cluster in a box
# (README.md here). The Python program's stack file for the same config is derived from the program
# (yaml_e2e.py derive); `multinode plan` of it gives the registrations, objects and findings to compare with; the box
# gets the stack's nodes, the CRDs of every kind it renders and Kyverno, and no objects: `pulumi up` creates them.
set -eu
root="$(cd "$(dirname "$0")/../.." && pwd)"
py="$root/.venv/bin/python"
cd "$root"
name=yaml-e2e
build=build/yaml-e2e
program="$root/conformance/pulumi-yaml/program/Pulumi.yaml"
stack="$root/$build/Pulumi.$name.yaml"
for exe in conformance/pulumi/bin/pulumi conformance/pulumi/bin/pulumi-resource-kubernetes \
           conformance/bin/pulumi-language-yaml conformance/bin/clusterbox conformance/kyverno/bin/kyverno \
           .venv/bin/pulumi-resource-multinode .venv/bin/multinode-policy-pack; do
  test -x "$exe" || { echo "yaml-e2e: $exe is missing (make yaml-e2e builds it)" >&2; exit 2; }
done
"$py" conformance/pulumi-yaml/yaml_e2e.py derive "$program" "$stack"
"$root/.venv/bin/multinode" plan --file "$stack" --out "$build" >/dev/null || true   # exit 1: a finding, still a plan
test -d "$build/$name/k8s" || { echo "yaml-e2e: multinode plan wrote no $build/$name/k8s" >&2; exit 2; }
"$py" conformance/cluster/prepare.py "$build/$name" "$stack" \
  --kyverno-crds "$(conformance/moddir.sh conformance/kyverno github.com/kyverno/kyverno)/config/crds"
box="$build/$name-box"
rm -rf "$box"
mkdir -p "$box/k8s" "$box/engines"
cp -r "$build/$name/engines/cluster" "$box/engines/"
# As root the box and everything the compare command starts (the CLI, the language host, the providers, the pack)
# run in a network namespace of its own with only loopback (clusterbox --netns); E2E_NETNS=0: the host's loopback.
netns=""
if [ "$(id -u)" = 0 ] && [ "${E2E_NETNS:-1}" != 0 ]; then netns="--netns"; fi
kc="\$($py -c \"import json;print(json.load(open('$box/engines/cluster/observed.json'))['kubeconfig'])\")"
# shellcheck disable=SC2086
exec "$root/conformance/bin/clusterbox" $netns --stack-dir "$box" --timeout 40m \
  --kyverno "$root/conformance/kyverno/bin/kyverno" --compare \
  "$py conformance/pulumi-yaml/yaml_e2e.py $program $stack $kc --build $build"
