#!/usr/bin/env bash
# bench/ci_run_times.sh [--cold] WORK_DIR: `bash .ci/run` as CI runs it, on a clean clone of this checkout's HEAD in
# WORK_DIR/main (with ../shared linked beside it), timed as a whole (wall and CPU) and per step (issue 41). Writes
# WORK_DIR/ci.log (every line prefixed by the seconds since the start) and WORK_DIR/ci-times.tsv: one row per step
# (`== make ... took N s`), per wait for the background builds, per background item (build/prebuild/*.done: its own
# seconds, overlapped with the steps) and the total; WORK_DIR/ci-timeline.txt: the `== ` lines with their seconds.
#   --cold: Go's module and build caches, uv's, pip's, npm's and the stand-in rootfs cache (~/.cache/multinode) are
#   pointed at empty folders under WORK_DIR (GOMODCACHE, GOCACHE, XDG_CACHE_HOME, npm_config_cache), as on a fresh
#   machine; the machine's own caches are left as they are. Debian packages the run installs (real-node-check) are
#   not removed by this script: remove them first (apt-get remove containerd runc containernetworking-plugins
#   debootstrap) for a fully cold measurement, and say so with the numbers.
# Measure on an idle machine: other work on the two cores shows up as wall time.
set -uo pipefail
cold=0
if [ "${1:-}" = --cold ]; then cold=1; shift; fi
work=${1:?usage: bench/ci_run_times.sh [--cold] WORK_DIR}
src=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$work"
work=$(cd "$work" && pwd)
rm -rf "$work/main"
git clone -q "$src" "$work/main"
[ -e "$work/shared" ] || ln -s "$(cd "$src/../shared" && pwd)" "$work/shared"
env_cold=()
if (( cold )); then
	rm -rf "$work/caches"
	mkdir -p "$work/caches"/{gomod,gocache,xdg,npm}
	env_cold=(GOMODCACHE="$work/caches/gomod" GOCACHE="$work/caches/gocache" XDG_CACHE_HOME="$work/caches/xdg"
		npm_config_cache="$work/caches/npm" UV_CACHE_DIR="$work/caches/xdg/uv")
fi
start=$(date +%s)
cd "$work/main"
/usr/bin/time -f '%e %U %S' -o "$work/time.txt" env "${env_cold[@]}" CI=true bash .ci/run 2>&1 |
	while IFS= read -r line; do printf '[%5d] %s\n' "$(( $(date +%s) - start ))" "$line"; done >"$work/ci.log"
rc=${PIPESTATUS[0]}
# time(1) writes "Command exited with non-zero status N" before its line when the run fails: read the last line
read -r wall user sys < <(tail -n 1 "$work/time.txt")
{
	printf 'what\tseconds\n'
	sed -n 's/^\[ *[0-9]*\] == make \(.*\) took \([0-9]*\) s$/step: \1\t\2/p' "$work/ci.log"
	sed -n 's/^\[ *[0-9]*\] == waited \([0-9]*\) s for the background builds of: \(.*\)$/wait: \2\t\1/p' "$work/ci.log"
	for f in build/prebuild/*.done build/prebuild/*.failed; do
		[ -e "$f" ] || continue
		n=$(basename "$f"); printf 'background: %s\t%s\n' "$n" "$(cat "$f")"
	done
	printf 'total wall\t%s\ntotal cpu (user+sys)\t%s\nexit\t%s\n' "$wall" "$(echo "$user + $sys" | bc)" "$rc"
} >"$work/ci-times.tsv"
grep -E '^\[ *[0-9]+\] (== |make(\[[0-9]+\])?: \*\*\*)' "$work/ci.log" >"$work/ci-timeline.txt"
column -t -s $'\t' "$work/ci-times.tsv"
exit "$rc"
