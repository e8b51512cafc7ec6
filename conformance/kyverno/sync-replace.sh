#!/usr/bin/env bash
# Require github.com/kyverno/kyverno at the given version and copy the `replace` lines of ITS go.mod into ours
# (replace lines do not propagate to consumers; Kyverno v1.19.0 has one, go.mod:424, for its
# pod-security-admission fork). Usage: ./sync-replace.sh v1.19.0
set -euo pipefail
cd "$(dirname "$0")"
ver=${1:?usage: $0 vX.Y.Z}
mod=github.com/kyverno/kyverno
upstream=$(go mod download -json "$mod@$ver" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')
test -f "$upstream" || { echo "no go.mod for $mod@$ver" >&2; exit 1; }
# Kyverno's replace directives: single-line `replace a => b v` and the lines of a `replace ( ... )` block.
replaces=$(awk '
  /^replace[[:space:]]*\($/ {blk=1; next}
  blk && /^\)/ {blk=0; next}
  blk {sub(/^[[:space:]]+/, ""); print; next}
  /^replace[[:space:]]/ {sub(/^replace[[:space:]]+/, ""); print}
' "$upstream")
# drop our old replace lines (and the comment block above them), then write the new ones
awk '/^\/\/ BEGIN kyverno replace/ {skip=1} !skip {print} /^\/\/ END kyverno replace/ {skip=0}' go.mod > go.mod.new
{
  echo "// BEGIN kyverno replace: copied from $mod@$ver go.mod by sync-replace.sh (do not edit by hand)"
  while IFS= read -r r; do [ -n "$r" ] && echo "replace $r"; done <<< "$replaces"
  echo "// END kyverno replace"
} >> go.mod.new
mv go.mod.new go.mod
go get -tool "$mod/cmd/cli/kubectl-kyverno@$ver" "$mod/cmd/kyverno@$ver"
go mod tidy
echo "kyverno $ver; replace lines:"; grep '^replace' go.mod
