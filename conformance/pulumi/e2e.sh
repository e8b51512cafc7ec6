#!/bin/sh
# make e2e: the e2e stack on the cluster in a box (conformance/cluster, issue 28) through the real Pulumi engine.
# The box gets the stack's nodes and no objects (build/e2e-box/k8s is empty): `pulumi up` creates them.
set -eu
root="$(cd "$(dirname "$0")/../.." && pwd)"
py="$root/.venv/bin/python"
stack="$root/conformance/pulumi/Pulumi.e2e.yaml"
cd "$root"
"$root/.venv/bin/multinode" plan --file "$stack" --out build
"$py" conformance/cluster/prepare.py build/e2e "$stack"
rm -rf build/e2e-box build/e2e/engines/pulumi
mkdir -p build/e2e-box/k8s build/e2e-box/engines
cp -r build/e2e/engines/cluster build/e2e-box/engines/
# the box writes its kubeconfig's path into observed.json before it runs the --compare command
exec "${CLUSTERBOX:-$root/conformance/bin/clusterbox}" --stack-dir build/e2e-box --timeout 40m --compare \
  "$py conformance/pulumi/e2e.py $stack \$($py -c \"import json;print(json.load(open('build/e2e-box/engines/cluster/observed.json'))['kubeconfig'])\")"
