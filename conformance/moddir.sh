#!/usr/bin/env bash
# moddir.sh <go.mod folder> <module path>: print the module cache folder of <module path> at the version that
# <go.mod folder>/go.mod selects, downloading the module first. `go list -m -f '{{.Dir}}'` alone prints an empty
# line while the module is not yet in the module cache (a fresh machine), and the callers then read "/config/crds"
# or fail with no message (issue 41: CI's cold run stopped at conformance/pulumi's schema.json rule that way).
set -euo pipefail
dir=$1 mod=$2
cd "$dir"
go mod download "$mod" || { echo "moddir.sh: go mod download $mod failed in $dir" >&2; exit 2; }
d=$(go list -m -f '{{.Dir}}' "$mod")
if [ -z "$d" ] || [ ! -d "$d" ]; then
  echo "moddir.sh: $mod has no folder in the module cache after download (in $dir)" >&2
  exit 2
fi
echo "$d"
