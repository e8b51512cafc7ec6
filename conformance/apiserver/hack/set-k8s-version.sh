#!/usr/bin/env bash
# Pin this module to one Kubernetes release: require k8s.io/kubernetes $1 and replace every staging module
# k/k lists (read from k/k's own go.mod at that version: its replace block maps each k8s.io/X to
# ./staging/src/k8s.io/X) by the published k8s.io/X v0.<minor>.<patch>. Replace lines in a dependency's
# go.mod do not reach its consumers, so this module must carry them itself.
# Usage: hack/set-k8s-version.sh v1.33.13   (the Makefile's K8S_VERSION calls it when go.mod differs)
set -euo pipefail
ver=${1:?usage: $0 v1.MINOR.PATCH}
[[ $ver =~ ^v1\.([0-9]+)\.([0-9]+)$ ]] || { echo "not a k8s release: $ver" >&2; exit 2; }
staging="v0.${BASH_REMATCH[1]}.${BASH_REMATCH[2]}"
cd "$(dirname "$0")/.."
gomod=$(go mod download -json "k8s.io/kubernetes@$ver" | sed -n 's/^\t"GoMod": "\(.*\)",$/\1/p')
[ -s "$gomod" ] || { echo "could not download k8s.io/kubernetes@$ver" >&2; exit 1; }
mods=$(sed -n 's#^\t\(k8s.io/[a-z0-9-]*\) => ./staging/src/.*#\1#p' "$gomod")
[ -n "$mods" ] || { echo "no staging replace lines in $gomod" >&2; exit 1; }
# Drop the old block (between the markers) and the old k/k require, write the new ones.
awk '/^\/\/ BEGIN staging replaces/{skip=1} !skip{print} /^\/\/ END staging replaces/{skip=0}' go.mod > go.mod.new
{
  echo "// BEGIN staging replaces (written by hack/set-k8s-version.sh $ver; do not edit by hand)"
  echo "replace ("
  for m in $mods; do printf '\t%s => %s %s\n' "$m" "$m" "$staging"; done
  echo ")"
  echo "// END staging replaces"
} >> go.mod.new
mv go.mod.new go.mod
go mod edit -require="k8s.io/kubernetes@$ver"
go mod tidy
echo "k8s.io/kubernetes $ver, $(echo "$mods" | wc -l) staging modules at $staging"
