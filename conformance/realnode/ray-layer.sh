#!/bin/sh
# ray-layer.sh CACHE_DIR: the stand-in images' Ray layer (issue 43) as a tar, cached as CACHE_DIR/ray-<key>/layer.tar
# (<key>: the sha256 of this script). Ray from PyPI (RAY_VERSION, its cp311 manylinux wheel and its dependencies:
# bookworm's python3 is 3.11) installed with pip --target into /usr/local/lib/python3.11/dist-packages, plus a
# `ray` command. Only the images whose pods run Ray get this layer (image.go RayRefs). Prints the tar's path.
set -eu
RAY_VERSION=2.60.0
here=$(cd "$(dirname "$0")" && pwd)
cache=$1
key=$(sha256sum "$here/ray-layer.sh" | cut -c1-16)
out="$cache/ray-$key/layer.tar"
if [ -s "$out" ]; then echo "$out"; exit 0; fi
work="$cache/ray-$key.work"
rm -rf "$work"; mkdir -p "$work/root/usr/local/lib/python3.11/dist-packages" "$work/root/usr/local/bin" "$cache/ray-$key"
py=${PYTHON:-python3}
echo "ray-layer.sh: pip install ray==$RAY_VERSION (cp311, manylinux) into $work" >&2
"$py" -m pip install --quiet --disable-pip-version-check --no-compile --only-binary=:all: --python-version 3.11 \
	--implementation cp --platform manylinux2014_x86_64 --platform manylinux_2_28_x86_64 \
	--target "$work/root/usr/local/lib/python3.11/dist-packages" "ray==$RAY_VERSION" >"$cache/ray-$key.pip.log" 2>&1 ||
	{ echo "ray-layer.sh: pip failed, log $cache/ray-$key.pip.log" >&2; tail -5 "$cache/ray-$key.pip.log" >&2; exit 1; }
rm -rf "$work/root/usr/local/lib/python3.11/dist-packages/bin"
# the `ray` command for the image's /usr/bin/python3 (pip's script names the host's interpreter)
printf '#!/usr/bin/python3\nimport sys\nfrom ray.scripts.scripts import main\nsys.exit(main())\n' >"$work/root/usr/local/bin/ray"
chmod 755 "$work/root/usr/local/bin/ray"
tar -C "$work/root" --numeric-owner --owner=0 --group=0 -cf "$out.tmp" usr
mv "$out.tmp" "$out"
rm -rf "$work"
echo "$out"
