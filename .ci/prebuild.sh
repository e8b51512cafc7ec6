#!/usr/bin/env bash
# prebuild.sh <dir> <group>: started in the background by .ci/run (issue 41), at the lowest CPU priority, so that
# the slow cold work of the later steps runs while the Python steps (tests, plans, lint) use the CPU in front.
#   go:       the conformance Go programs, one after the other, in the order the steps need them (conformance,
#             cluster-check, then the lane beside it: real-node-check, chart-check, the Pulumi steps, sdks); `go build` fetches the modules it needs
#             through the Go module proxy as it goes (network time overlapped too).
#   realnode: the Debian packages and the stand-in root filesystem of real-node-check (apt-get and debootstrap:
#             network- and disk-bound).
# For each item it writes <dir>/<item>.log, then <dir>/<item>.done (the seconds it took) or <dir>/<item>.failed.
# A step waits for its items with `await_built` (.ci/steps.sh) and then runs its own make target, whose build
# finds Go's cache warm and only checks it is up to date; after a failed item the step builds again and fails
# loudly with the real error. Nothing here decides whether CI passes.
set -uo pipefail
dir=$1 group=$2
mkdir -p "$dir"
item() {   # item <name> <command>...
	local name=$1 start=$SECONDS
	shift
	if "$@" >"$dir/$name.log" 2>&1; then
		echo "$((SECONDS - start))" >"$dir/$name.done"
	else
		echo "$((SECONDS - start))" >"$dir/$name.failed"
	fi
}
case $group in
go)
	item apiserver make -C conformance/apiserver build
	item kyverno make -C conformance/kyverno build
	item cluster make -C conformance/cluster build
	item lws make -C conformance/lws build
	item mpi-operator make -C conformance/mpi-operator build
	item volcano make -C conformance/volcano build
	item coredns make -C conformance/coredns build   # real-node-check, the first step of the lane beside cluster-check
	item helm make -C conformance/helm build
	item pulumi-tools make pulumi-tools
	item sdkgen make -C conformance/sdkgen build
	;;
realnode)
	item realnode-deps make -C conformance/cluster realnode-deps
	;;
*)
	echo "prebuild.sh: unknown group $group (go, realnode)" >&2
	exit 2
	;;
esac
