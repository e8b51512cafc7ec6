#!/usr/bin/env bash
# Require volcano.sh/volcano at the given version and copy the `replace` lines of ITS go.mod into ours
# (replace lines do not propagate to consumers). Volcano's go.mod (v1.15.1 go.mod:215-254) replaces every
# k8s.io staging module by its published v0.35.3 (it imports k8s.io/kubernetes v1.35.3, which requires them at
# v0.0.0), pins cloud.google.com/go, otlptracegrpc and grpc, and replaces volcano.sh/apis by a LOCAL path
# (./staging/src/volcano.sh/apis): a nested module, which is not in volcano.sh/volcano's module zip, so that one
# line is dropped and volcano.sh/apis comes from the proxy at the version Volcano requires.
# Usage: ./sync-replace.sh v1.15.1
set -euo pipefail
cd "$(dirname "$0")"
ver=${1:?usage: $0 vX.Y.Z}
mod=volcano.sh/volcano
upstream=$(go mod download -json "$mod@$ver" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')
test -f "$upstream" || { echo "no go.mod for $mod@$ver" >&2; exit 1; }
replaces=$(awk '
  /^replace[[:space:]]*\($/ {blk=1; next}
  blk && /^\)/ {blk=0; next}
  blk && /^[[:space:]]*\/\// {next}
  blk {sub(/^[[:space:]]+/, ""); print; next}
  /^replace[[:space:]]/ {sub(/^replace[[:space:]]+/, ""); print}
' "$upstream" | grep -v '=> \./')
awk '/^\/\/ BEGIN volcano replace/ {skip=1} !skip {print} /^\/\/ END volcano replace/ {skip=0}' go.mod > go.mod.new
{
  echo "// BEGIN volcano replace: copied from $mod@$ver go.mod by sync-replace.sh (do not edit by hand; its local"
  echo "// volcano.sh/apis => ./staging/src/volcano.sh/apis is left out: not in the module zip)"
  while IFS= read -r r; do [ -n "$r" ] && echo "replace $r"; done <<< "$replaces"
  echo "// END volcano replace"
} >> go.mod.new
mv go.mod.new go.mod
go get -tool "$mod/cmd/scheduler@$ver" "$mod/cmd/controller-manager@$ver"
go mod tidy
echo "volcano $ver; replace lines:"; grep -c '^replace' go.mod
