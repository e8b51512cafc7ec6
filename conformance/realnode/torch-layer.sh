#!/bin/sh
# torch-layer.sh CACHE_DIR ROOTFS_TAR: the stand-in images' PyTorch layer (issue 43) as a tar, cached as
# CACHE_DIR/torch-<key>/layer.tar (<key>: the sha256 of this script, standin-packages-torch.txt and the rootfs's
# own cache key). The packages of standin-packages-torch.txt (Debian bookworm's python3-torch 1.13.1, CPU only)
# installed with apt-get from Debian's archive (the mirror the rootfs's apt was configured with by debootstrap) in
# a chroot of the rootfs (rootfs.sh's tar, unpacked), pruned to what PyTorch loads, smoke-tested there; the layer
# is every path that is new or changed afterwards. Only the images whose containers launch PyTorch get it
# (image.go, gangs.go TorchRefs). Prints the tar's path. Needs root (chroot, mount).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
cache=$1
rootfs=$2
key=$( { cat "$here/torch-layer.sh" "$here/standin-packages-torch.txt"; basename "$(dirname "$rootfs")"; } | sha256sum | cut -c1-16)
out="$cache/torch-$key/layer.tar"
if [ -s "$out" ]; then echo "$out"; exit 0; fi
[ -s "$rootfs" ] || { echo "torch-layer.sh: no rootfs tar at $rootfs (conformance/realnode/rootfs.sh builds it)" >&2; exit 2; }
work="$cache/torch-$key.work"
root="$work/root"
cleanup() { umount "$root/proc" 2>/dev/null || :; rm -rf "$work"; }
trap cleanup EXIT
rm -rf "$work"; mkdir -p "$root" "$cache/torch-$key"
tar -C "$root" --numeric-owner -xf "$rootfs"
tpkgs=$(grep -v '^#' "$here/standin-packages-torch.txt" | grep . | paste -sd' ' -)
echo "torch-layer.sh: apt-get install $tpkgs in a chroot of $rootfs" >&2
# path, mtime, size and mode of every file: the layer is what differs after the install
listing() { (cd "$root" && find . -path ./proc -prune -o -printf '%p\t%T@\t%s\t%m\n' | sort); }
listing >"$work/before"
cp /etc/resolv.conf "$root/etc/resolv.conf"
printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d" && chmod +x "$root/usr/sbin/policy-rc.d"
mount -t proc proc "$root/proc"
{ chroot "$root" apt-get update && DEBIAN_FRONTEND=noninteractive chroot "$root" apt-get install -y \
	--no-install-recommends $tpkgs; } >"$cache/torch-$key.apt.log" 2>&1 ||
	{ echo "torch-layer.sh: apt-get install of $tpkgs failed, log $cache/torch-$key.apt.log" >&2
	  tail -5 "$cache/torch-$key.apt.log" >&2; exit 1; }
# Prune what PyTorch never loads: python3-torch pulls libtorch1.13, which links OpenCV and FFmpeg, whose packages
# bring GUI, codec and GPU-driver libraries, docs and locales (959 MB installed). Kept: every Python module and, of
# the shared libraries this install added, those in the ldd closure of the Python extension modules and of
# libtorch (and the roots themselves: torch/__init__.py dlopens libtorch_global_deps, which nothing links).
# Removed: the other new shared libraries, docs, man pages, locales, libtorch-test's files. The smoke test in the
# chroot (import torch, its launcher, gloo) must pass after the prune.
chroot "$root" sh -c '{ find /usr/lib/x86_64-linux-gnu -maxdepth 1 \( -name "libtorch*.so*" -o -name "libc10*.so*" -o \
	-name "libshm*.so*" \); find /usr/lib/python3/dist-packages /usr/lib/python3.11 -name "*.so*"; echo /usr/bin/python3.11; } >/tmp/roots
	{ cat /tmp/roots; xargs -r ldd </tmp/roots 2>/dev/null | sed -n "s/.*=> \(\/[^ ]*\) .*/\1/p"; } | xargs -r realpath -e 2>/dev/null |
	sort -u; rm -f /tmp/roots' >"$work/closure"
chroot "$root" dpkg -L libtorch-test 2>/dev/null | sed 's|^|:|' >"$work/test-files" || :
listing >"$work/installed"
comm -13 "$work/before" "$work/installed" | cut -f1 | sed 's|^\.||' | while IFS= read -r f; do
	[ -d "$root$f" ] && continue
	case "$f" in
	/usr/share/doc/* | /usr/share/man/* | /usr/share/locale/* | /usr/share/info/* | /usr/share/icons/*)
		rm -f "$root$f"; continue ;;
	/usr/lib/x86_64-linux-gnu/*.so | /usr/lib/x86_64-linux-gnu/*.so.* | /usr/lib/x86_64-linux-gnu/*/*.so*)
		real=$(chroot "$root" realpath -m "$f")
		if ! grep -qxF "$real" "$work/closure"; then rm -f "$root$f"; continue; fi ;;
	esac
	if grep -qxF ":$f" "$work/test-files"; then rm -f "$root$f"; fi
done
chroot "$root" python3 -c 'import torch, torch.distributed.run, torch.distributed as d; assert d.is_gloo_available(); print("torch-layer.sh: PyTorch", torch.__version__, "imports after the prune")' >&2
umount "$root/proc"
rm -rf "$root/var/cache/apt/archives"/*.deb "$root/var/lib/apt/lists"/* "$root/usr/sbin/policy-rc.d"
: >"$root/etc/resolv.conf"
listing >"$work/after"
comm -13 "$work/before" "$work/after" | cut -f1 >"$work/changed"
tar -C "$root" --numeric-owner --no-recursion -cf "$out.tmp" -T "$work/changed"
mv "$out.tmp" "$out"
echo "$out"
