#!/bin/sh
# Installs what real nodes in the box need, from Debian's package archive (apt-get, as root):
# containerd 1.6.20, runc 1.1.5 (built with libseccomp: the CRI's default seccomp profile needs it),
# containernetworking-plugins 1.1.1 (bridge, host-local, loopback, portmap), debootstrap (stand-in images),
# iproute2 and util-linux (ip, nsenter), iptables (kube-proxy, the bridge plugin's masquerade rules).
# Versions are Debian 12 (bookworm)'s; the box prints what it finds.
set -eu
need=""
for p in containerd runc containernetworking-plugins debootstrap iproute2 util-linux iptables conntrack; do
	dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q '^install ok installed$' || need="$need $p"
done
[ -z "$need" ] && { echo "real-node packages: all installed"; exit 0; }
echo "real-node packages: installing$need"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# --no-install-recommends: containerd would otherwise pull nothing we need; no service is started by us
# (policy-rc.d below keeps dpkg from starting containerd.service on a systemd host).
if [ ! -e /usr/sbin/policy-rc.d ]; then
	printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d
	trap 'rm -f /usr/sbin/policy-rc.d' EXIT
fi
apt-get install -y -qq --no-install-recommends $need
