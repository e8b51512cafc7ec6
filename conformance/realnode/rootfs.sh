#!/bin/sh
# rootfs.sh CACHE_DIR: the stand-in image's root filesystem as a tar, built once per recipe with debootstrap from
# Debian's package archive (the mirror apt is configured with), cached as CACHE_DIR/<key>/rootfs.tar, where <key>
# is the sha256 of this script and standin-packages.txt. Prints the tar's path. The stand-in scripts (standin/) are a
# second layer, added when the image is assembled (image.go), so changing them does not run debootstrap again.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
cache=$1
key=$(cat "$here/rootfs.sh" "$here/standin-packages.txt" | sha256sum | cut -c1-16)
out="$cache/$key/rootfs.tar"
if [ -s "$out" ]; then echo "$out"; exit 0; fi
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
# MPIJob gangs (issue 43): OpenSSH as the MPI operator's own base image sets it up (kubeflow/mpi-operator@v0.8.0
# build/base/Dockerfile): sshd's privilege separation directory, StrictModes off (the keys are a Secret volume the
# kubelet mounts at sshAuthMountPath, whose directory modes sshd would refuse), no host key checking on the client
# side (pods' host keys are made at their start). Host keys for `sshd -De` as the workers run it: ssh-keygen -A.
r="$work/root"
mkdir -p "$r/run/sshd"
sed -i 's/^#\{0,1\}StrictModes .*/StrictModes no/' "$r/etc/ssh/sshd_config"
printf 'Host *\n    StrictHostKeyChecking no\n    UserKnownHostsFile /dev/null\n    LogLevel ERROR\n' >"$r/etc/ssh/ssh_config.d/multinode-box.conf"
[ -e "$r/etc/ssh/ssh_host_ed25519_key" ] || chroot "$r" ssh-keygen -A >/dev/null
tar -C "$work/root" --numeric-owner -cf "$out.tmp" .
mv "$out.tmp" "$out"
rm -rf "$work"
echo "$out"
