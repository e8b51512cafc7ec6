#!/bin/sh
# rootfs.sh CACHE_DIR: the stand-in image's root filesystem as a tar, built once per recipe with debootstrap from
# Debian's package archive (the mirror apt is configured with), cached as CACHE_DIR/<key>/rootfs.tar, where <key>
# is the sha256 of this script and standin-packages.txt. Prints the tar's path. The stand-in scripts (standin/) are a
# second layer, added when the image is assembled (image.go), so changing them does not run debootstrap again.
# The packages of standin-packages-torch.txt (PyTorch) are a layer of their own, CACHE_DIR/<key>/torch-layer.tar
# (block below), which image.go adds only to the images whose containers run PyTorch.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
cache=$1
key=$(cat "$here/rootfs.sh" "$here/standin-packages.txt" "$here/standin-packages-torch.txt" | sha256sum | cut -c1-16)
out="$cache/$key/rootfs.tar"
if [ -s "$out" ] && [ -s "$cache/$key/torch-layer.tar" ]; then echo "$out"; exit 0; fi
# the first Debian archive apt is configured with (deb822 .sources files, then sources.list); no address of ours
mirror=$(cat /etc/apt/sources.list.d/*.sources 2>/dev/null | sed -n 's/^URIs: *\([^ ]*\).*/\1/p' | grep -v -- '-security' | head -1)
[ -n "$mirror" ] || mirror=$(sed -n 's/^deb \(\[[^]]*\] \)\{0,1\}\([^ ]*\) .*/\2/p' /etc/apt/sources.list 2>/dev/null | grep -v -- '-security' | head -1)
[ -n "$mirror" ] || { echo "rootfs.sh: no Debian archive configured for apt (/etc/apt/sources.list.d/*.sources or /etc/apt/sources.list)" >&2; exit 2; }
command -v debootstrap >/dev/null || { echo "rootfs.sh: debootstrap is not installed (conformance/realnode/install-deps.sh)" >&2; exit 2; }
work="$cache/$key.work"
rm -rf "$work"; mkdir -p "$work" "$cache/$key"
pkgs=$(grep -v '^#' "$here/standin-packages.txt" | grep . | paste -sd, -)
echo "rootfs.sh: debootstrap bookworm ($pkgs) from $mirror into $work" >&2
debootstrap --variant=minbase --include="$pkgs" bookworm "$work/root" "$mirror" >"$cache/$key.debootstrap.log" 2>&1 ||
	{ echo "rootfs.sh: debootstrap failed, log $cache/$key.debootstrap.log" >&2; tail -5 "$cache/$key.debootstrap.log" >&2; exit 1; }
rm -rf "$work/root/var/cache/apt/archives"/*.deb "$work/root/var/lib/apt/lists"/*
tar -C "$work/root" --numeric-owner -cf "$out.tmp" .
mv "$out.tmp" "$out"
# --- the PyTorch layer: standin-packages-torch.txt installed with apt-get in a chroot of the rootfs just packed;
# the layer is every path that is new or changed afterwards (path, mtime, size, mode compared; apt-get install
# only adds and replaces files here, so the layer needs no whiteouts).
root="$work/root"
tpkgs=$(grep -v '^#' "$here/standin-packages-torch.txt" | grep . | paste -sd' ' -)
echo "rootfs.sh: PyTorch layer ($tpkgs) from $mirror" >&2
listing() { (cd "$root" && find . -path ./proc -prune -o -printf '%p\t%T@\t%s\t%m\n' | sort); }
listing >"$work/before"
cp /etc/resolv.conf "$root/etc/resolv.conf"
printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d" && chmod +x "$root/usr/sbin/policy-rc.d"
mount -t proc proc "$root/proc"
trap 'umount "$root/proc" 2>/dev/null || true' EXIT
{ chroot "$root" apt-get update && DEBIAN_FRONTEND=noninteractive chroot "$root" apt-get install -y \
	--no-install-recommends $tpkgs; } >"$cache/$key.torch.log" 2>&1 ||
	{ echo "rootfs.sh: apt-get install of $tpkgs failed, log $cache/$key.torch.log" >&2; tail -5 "$cache/$key.torch.log" >&2; exit 1; }
# Prune what PyTorch never loads: python3-torch pulls libtorch1.13, which links OpenCV and FFmpeg, whose
# packages bring GUI, codec and GPU-driver libraries, docs and locales (about 1 GB). Kept: every Python module,
# and of the shared libraries this install added, those in the ldd closure of the Python extension modules and
# of libtorch; removed: the other new shared libraries, docs, man pages, locales, and libtorch-test. A smoke test
# in the chroot (import torch, its launcher, gloo) must pass after the prune.
new_files() { comm -13 "$work/before" "$(listing >"$work/now"; echo "$work/now")" | cut -f1 | sed 's|^\.||'; }
# (the roots themselves are kept too: torch/__init__.py dlopens libtorch_global_deps, which nothing links)
chroot "$root" sh -c '{ find /usr/lib/x86_64-linux-gnu -maxdepth 1 \( -name "libtorch*.so*" -o -name "libc10*.so*" -o \
	-name "libshm*.so*" \); find /usr/lib/python3/dist-packages /usr/lib/python3.11 -name "*.so*"; echo /usr/bin/python3.11; } >/tmp/roots
	{ cat /tmp/roots; xargs -r ldd </tmp/roots 2>/dev/null | sed -n "s/.*=> \(\/[^ ]*\) .*/\1/p"; } | xargs -r realpath -e 2>/dev/null |
	sort -u; rm -f /tmp/roots' >"$work/closure"
chroot "$root" dpkg -L libtorch-test 2>/dev/null | sed 's|^|:|' >"$work/test-files" || :
new_files | while IFS= read -r f; do
	case "$f" in
	/usr/share/doc/* | /usr/share/man/* | /usr/share/locale/* | /usr/share/info/* | /usr/share/icons/*)
		[ -d "$root$f" ] || rm -f "$root$f" ;;
	/usr/lib/x86_64-linux-gnu/*.so | /usr/lib/x86_64-linux-gnu/*.so.* | /usr/lib/x86_64-linux-gnu/*/*.so*)
		[ -d "$root$f" ] && continue
		real=$(chroot "$root" realpath -m "$f")
		if ! grep -qxF "$real" "$work/closure"; then rm -f "$root$f"; fi ;;
	esac
	if grep -qxF ":$f" "$work/test-files" && [ ! -d "$root$f" ]; then rm -f "$root$f"; fi
done
chroot "$root" python3 -c 'import torch, torch.distributed.run, torch.distributed as d; assert d.is_gloo_available(); print("rootfs.sh: PyTorch", torch.__version__, "imports after the prune")' >&2
umount "$root/proc"
rm -rf "$root/var/cache/apt/archives"/*.deb "$root/var/lib/apt/lists"/* "$root/usr/sbin/policy-rc.d"
: >"$root/etc/resolv.conf"
listing >"$work/after"
comm -13 "$work/before" "$work/after" | cut -f1 >"$work/changed"
tar -C "$root" --numeric-owner --no-recursion -cf "$cache/$key/torch-layer.tar.tmp" -T "$work/changed"
mv "$cache/$key/torch-layer.tar.tmp" "$cache/$key/torch-layer.tar"
# --- end of the PyTorch layer
rm -rf "$work"
echo "$out"
