#!/usr/bin/env bash
# Starts the end-to-end lane's private libvirt: a network namespace with a
# libvirtd and virtlogd of its own, a NAT network and a directory storage
# pool that exist only there. Nothing in the root namespace changes: the
# daemons see private copies of /etc/libvirt, /run/libvirt,
# /var/lib/libvirt, /var/cache/libvirt and /var/log/libvirt through bind
# mounts made in the namespace's own mount namespace (ip netns exec gives
# one), and libvirt's `default` network is removed from the copy, so this
# daemon never knows it. The namespace has no interface to the outside
# and no default route: the VMs reach the bridge address and nothing else.
# Last, hack/e2e/ssh-up.sh opens the daemon to SSH on the bridge address,
# as a remote libvirt host is, for the operator's qemu+libssh2:// URI.
#
#   hack/e2e/libvirt-up.sh        # E2E_STATE and E2E_NETNS from hack/e2e/env.sh
#   hack/e2e/libvirt-down.sh      # undoes all of it, also after a half-done up
#
# This is the one private-daemon set-up: the libvirt provider's real-daemon
# tests (providers/libvirt/daemon_test.go) run it too, each with an
# E2E_STATE and E2E_NETNS of its own and E2E_SSH=0 (no sshd: the tests use
# the socket), and read the URI, pool and network from env.sh.
#
# Recipe and measurements: the field notes on a real VM end to end
# (cgroup_controllers = [ ] because ip netns exec remounts /sys and no
# systemd runs there; security_driver "none" and root-owned QEMU because
# the disk images live in the state directory).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/env.sh"
log() { echo "libvirt-up: $*" >&2; }

[ "$(id -u)" -eq 0 ] || { log "must run as root (network namespace, bind mounts)"; exit 1; }
if ip netns list | awk -v ns="$E2E_NETNS" '$1 == ns { found = 1 } END { exit !found }'; then
  log "network namespace $E2E_NETNS exists: run hack/e2e/libvirt-down.sh first"
  exit 1
fi

lv=$E2E_STATE/lv
mkdir -p "$lv"/{run,lib,cache,log} "$E2E_STATE/pool"
rm -rf "$lv/etc"
cp -a /etc/libvirt "$lv/etc"
rm -f "$lv/etc/qemu/networks/default.xml" "$lv/etc/qemu/networks/autostart/default.xml"
cat >> "$lv/etc/qemu.conf" <<'EOF'

# egress-proxies e2e: a private daemon in a network namespace.
user = "root"
group = "root"
dynamic_ownership = 0
remember_owner = 0
security_driver = "none"
cgroup_controllers = [ ]
EOF
# The lane's SSH user (hack/e2e/ssh-up.sh) reaches the read-write socket as
# a member of the libvirt group. Debian's default is polkit, with a rule
# letting that group in; no polkitd runs here, so the socket's group and
# mode are the check instead, as on a host without polkit.
cat >> "$lv/etc/libvirtd.conf" <<'EOF'

# egress-proxies e2e: the libvirt group's members, without polkit.
unix_sock_group = "libvirt"
unix_sock_rw_perms = "0770"
auth_unix_rw = "none"
EOF

# The lane host's users: the machine's, and the SSH user of ssh-up.sh with
# a group of its own and the libvirt group as a supplementary one (what a
# real host's user needs), no home directory. Only the daemons' and the
# sshd's mount namespaces see these copies: libvirtd names each client by
# its user record, and no user is added to the machine.
libvirt_gid=$(getent group libvirt | cut -d: -f3) || { log "no libvirt group (Debian's libvirt-daemon-system makes it)"; exit 1; }
cp /etc/passwd "$lv/passwd"
echo "$E2E_SSH_USER:x:$E2E_SSH_UID:$E2E_SSH_UID:egress-proxies e2e:/nonexistent:/bin/sh" >> "$lv/passwd"
awk -F: -v OFS=: -v u="$E2E_SSH_USER" -v g="$libvirt_gid" '$3 == g { $4 = ($4 == "" ? u : $4 "," u) } 1' /etc/group > "$lv/group"
echo "$E2E_SSH_USER:x:$E2E_SSH_UID:" >> "$lv/group"

ip netns add "$E2E_NETNS"
ip -n "$E2E_NETNS" link set lo up
# The mount points must exist; empty directories, never used in the root
# namespace's libvirt (which is not running).
mkdir -p /etc/libvirt /run/libvirt /var/lib/libvirt /var/cache/libvirt /var/log/libvirt
ip netns exec "$E2E_NETNS" sh -euc '
  lv=$1
  mount --bind "$lv/etc" /etc/libvirt
  mount --bind "$lv/run" /run/libvirt
  mount --bind "$lv/lib" /var/lib/libvirt
  mount --bind "$lv/cache" /var/cache/libvirt
  mount --bind "$lv/log" /var/log/libvirt
  mount --bind "$lv/passwd" /etc/passwd
  mount --bind "$lv/group" /etc/group
  virtlogd -d -p /run/libvirt/virtlogd.pid
  libvirtd -d -p /run/libvirt/libvirtd.pid
' sh "$lv"

virsh() { command virsh -q -c "$E2E_URI" "$@"; }
for _ in $(seq 60); do
  virsh version >/dev/null 2>&1 && break
  sleep 0.5
done
virsh version >/dev/null || { log "the private libvirtd does not answer on $E2E_URI"; exit 1; }
log "libvirtd $(cat "$lv/run/libvirtd.pid") and virtlogd $(cat "$lv/run/virtlogd.pid") run in $E2E_NETNS"

cat > "$E2E_STATE/net.xml" <<EOF
<network>
  <name>$E2E_NET</name>
  <forward mode='nat'/>
  <bridge name='$E2E_BRIDGE' stp='off' delay='0'/>
  <ip address='$E2E_HOST_IP' netmask='255.255.255.0'>
    <dhcp><range start='192.168.150.100' end='192.168.150.200'/></dhcp>
  </ip>
</network>
EOF
virsh net-define "$E2E_STATE/net.xml" >/dev/null
virsh net-start "$E2E_NET" >/dev/null
networks=$(virsh net-list --all --name | xargs)
[ "$networks" = "$E2E_NET" ] || { log "the private daemon knows networks [$networks], want only $E2E_NET"; exit 1; }
ip -n "$E2E_NETNS" addr add "$E2E_OUTSIDE_IP/32" dev "$E2E_BRIDGE"
virsh pool-define-as "$E2E_POOL" dir --target "$E2E_STATE/pool" >/dev/null
virsh pool-start "$E2E_POOL" >/dev/null
log "network $E2E_NET ($E2E_BRIDGE $E2E_HOST_IP, outside client $E2E_OUTSIDE_IP) and pool $E2E_POOL ($E2E_STATE/pool) ready"
if [ "${E2E_SSH:-1}" != 0 ]; then
  "$here/ssh-up.sh"
fi
