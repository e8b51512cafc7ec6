#!/usr/bin/env bash
# run-boxes.sh JOBS: the boxes of `make check`, JOBS at a time (BOX_JOBS, default 1: one after the other). Reads
# lines "<stack> <stack file> run|expect-fail" on stdin; runs `make box` for each (the make variables of the calling
# make reach it through MAKEFLAGS), an expect-fail stack through expect_fail.py; prints each box's output (as it
# comes with one job; with several, each whole, in the order given, once all are done); exits 1 naming the stacks that failed. A box spends most of a stack waiting
# for controllers to settle (load ~0.4 on 2 cores while one runs), which is why two at a time can pay: each box
# takes its own ports (controlplane.go freePort) and its own temp dir.
set -uo pipefail
jobs=${1:-1}
here=$(cd "$(dirname "$0")" && pwd)
runs=$(mktemp -d)
trap 'rm -rf "$runs"' EXIT
order=()
one() {   # one <stack> <file> <mode>
  local s=$1 f=$2 mode=$3 rc=0
  if (( jobs == 1 )); then   # one at a time: the output as it comes
    make --no-print-directory -C "$here" box S="$s" F="$f" || rc=$?
  else
    make --no-print-directory -C "$here" box S="$s" F="$f" >"$runs/$s.log" 2>&1 || rc=$?
  fi
  if [ "$mode" = expect-fail ]; then
    rc2=0; "$PY" "$here/expect_fail.py" "$ROOT/build/$s" "$rc" || rc2=$?; rc=$rc2
  fi
  echo "$rc" >"$runs/$s.rc"
}
while read -r s f mode; do
  [ -n "$s" ] || continue
  order+=("$s")
  while (( $(jobs -rp | wc -l) >= jobs )); do wait -n || true; done
  one "$s" "$f" "$mode" &
done
wait
fail=""
for s in "${order[@]}"; do
  if (( jobs > 1 )); then cat "$runs/$s.log"; fi
  [ "$(cat "$runs/$s.rc" 2>/dev/null || echo 1)" = 0 ] || fail="$fail $s"
done
if [ -n "$fail" ]; then echo "cluster-check: findings in:$fail"; exit 1; fi
echo "cluster-check: every stack passed"
