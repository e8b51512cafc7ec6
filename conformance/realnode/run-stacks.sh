#!/usr/bin/env bash
# run-stacks.sh JOBS STACK...: `make -C conformance/cluster realbox` for each stack (already planned into build/),
# JOBS boxes at a time (REAL_JOBS; 1: one after the other, the output as it comes). Each box is in a network
# namespace of its own with its own addresses, tmpfs, containerd sockets and iptables, so boxes do not see each
# other. Writes build/real-node-times.tsv: per stack its exit code, wall seconds, user and system CPU seconds of
# the box and all its children (kubelets, containerd, the pods), and the number of findings in cluster.json.
# Exits 1 naming the stacks with findings. ROOT and PY come from the calling make; REAL_OUT (default ROOT/build)
# is where the stacks were planned, and where the times go.
set -uo pipefail
jobs=${1:-1}; shift
root=${ROOT:?}
out_dir=${REAL_OUT:-$root/build}
runs=$(mktemp -d)
trap 'rm -rf "$runs"' EXIT
file_of() { ls "$root/stacks/Pulumi.$1.yaml" "$root/tests/guides/Pulumi.$1.yaml" 2>/dev/null | head -1; }
one() {   # one <stack>: the box, then its times (bash's `times`: this subshell's children, i.e. make and the box)
  local s=$1 t0 rc=0
  t0=$(date +%s.%N)
  if (( jobs == 1 )); then
    make --no-print-directory -C "$root/conformance/cluster" realbox S="$s" F="$(file_of "$s")" ROOT="$root" PY="$PY" REAL_OUT="$out_dir" || rc=$?
  else
    make --no-print-directory -C "$root/conformance/cluster" realbox S="$s" F="$(file_of "$s")" ROOT="$root" PY="$PY" REAL_OUT="$out_dir" \
      >"$runs/$s.log" 2>&1 || rc=$?
  fi
  local wall cpu
  wall=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{print b-a}')
  times >"$runs/$s.times"   # in this shell (a pipe or $(...) would time a subshell): line 2 is the children's
  cpu=$(tail -n 1 "$runs/$s.times")   # "<user>m<s>s <sys>m<s>s"
  echo "$rc $wall $cpu" >"$runs/$s.rc"
}
order=()
for s in "$@"; do
  order+=("$s")
  while (( $(jobs -rp | wc -l) >= jobs )); do wait -n || true; done
  ( one "$s" ) &
done
wait
secs() { local m=${1%%m*} s=${1#*m}; awk -v m="$m" -v s="${s%s}" 'BEGIN{print m*60+s}'; }
out="$out_dir/real-node-times.tsv"
printf 'stack\trc\twall_s\tuser_s\tsys_s\tfindings\n' >"$out"
fail=""
for s in "${order[@]}"; do
  if (( jobs > 1 )); then cat "$runs/$s.log"; fi
  read -r rc wall user sys <"$runs/$s.rc" || rc=1
  n=$("$PY" -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["findings"]))' "$out_dir/$s/cluster.json" 2>/dev/null || echo "?")
  printf '%s\t%s\t%.0f\t%.1f\t%.1f\t%s\n' "$s" "$rc" "$wall" "$(secs "$user")" "$(secs "$sys")" "$n" >>"$out"
  [ "$rc" = 0 ] || fail="$fail $s"
done
cat "$out"
if [ -n "$fail" ]; then echo "real-node-check: findings in:$fail"; exit 1; fi
echo "real-node-check: every stack passed"
