#!/bin/sh
# Rewrites go.mod's staging replace block for the k8s.io/kubernetes version go.mod requires: every
# `k8s.io/X => ./staging/src/k8s.io/X` of that version's go.mod becomes `k8s.io/X => k8s.io/X v0.<minor>.<patch>`
# (replace lines do not propagate from dependencies; k/k requires its staging modules at v0.0.0).
# Bump Kubernetes: edit the one `k8s.io/kubernetes vX.Y.Z` line of go.mod's require block, then run ./pin.sh.
set -eu
cd "$(dirname "$0")"
v=$(sed -n 's/^\(require \|\t\)k8s\.io\/kubernetes \(v1\.[0-9]*\.[0-9]*\)$/\2/p' go.mod | head -1)
[ -n "$v" ] || { echo "pin.sh: no 'k8s.io/kubernetes v1.x.y' require line in go.mod" >&2; exit 2; }
staging="v0.${v#v1.}"
go mod download -json "k8s.io/kubernetes@$v" >/dev/null
kmod=$(go mod download -json "k8s.io/kubernetes@$v" | sed -n 's/^\t"GoMod": "\(.*\)",$/\1/p')
tmp=$(mktemp)
awk '/^\/\/ BEGIN staging replaces/{exit} {print}' go.mod > "$tmp"
{
  echo "// BEGIN staging replaces: written by ./pin.sh from k8s.io/kubernetes' go.mod ($v -> $staging). Do not edit by hand."
  echo "replace ("
  sed -n 's/^\t\(k8s\.io\/[a-z0-9-]*\) => \.\/staging\/src\/.*$/\t\1 => \1 '"$staging"'/p' "$kmod"
  echo ")"
  echo "// END staging replaces"
  awk 'f{print} /^\/\/ END staging replaces/{f=1}' go.mod
} >> "$tmp"
mv "$tmp" go.mod
go mod tidy
echo "pinned k8s.io/kubernetes $v, staging $staging"
