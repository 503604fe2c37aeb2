#!/usr/bin/env bash
# Opens the lane's private libvirtd (hack/e2e/libvirt-up.sh, which runs
# this) to SSH, as a remote libvirt host is: an sshd of its own on the
# bridge address inside the lane's network namespace, accepting one
# generated client key for one user ($E2E_SSH_USER), a member of the
# libvirt group and nothing more. The operator's qemu+libssh2:// URI then
# runs libvirt's own remote side there (`virt-ssh-helper qemu:///system`,
# which libvirt 9.0 picks when it exists, nc otherwise), which connects
# to /run/libvirt/libvirt-sock: the private daemon's socket, bind-mounted
# in the sshd's mount namespace as in libvirtd's.
#
# Nothing outside the state directory changes: the user exists only in
# the copies of /etc/passwd and /etc/group that libvirt-up.sh made and
# bind-mounted for the daemons, and mounts here for the sshd (so no user
# is added to the machine); /run is a tmpfs of the sshd's mount namespace
# (sshd's privilege separation directory /run/sshd lives there); the
# machine's sshd, host keys and config are not used. Debian's
# openssh-server is installed by run.sh with no service started.
#
# It leaves in $E2E_STATE/ssh: the client key ($E2E_SSH_KEY, with .pub),
# known_hosts ($E2E_SSH_KNOWN_HOSTS: the host key under the bridge
# address), sshd.pid and sshd.log.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/env.sh"
log() { echo "ssh-up: $*" >&2; }

ssh=$E2E_STATE/ssh
lv=$E2E_STATE/lv
[ -x /usr/sbin/sshd ] || { log "/usr/sbin/sshd missing: hack/apt-ensure.sh openssh-server"; exit 1; }

rm -rf "$ssh"
mkdir -p "$ssh"
ssh-keygen -q -t ed25519 -N '' -C "egress-e2e host $E2E_NETNS" -f "$ssh/host_ed25519"
ssh-keygen -q -t ed25519 -N '' -C "egress-e2e operator $E2E_NETNS" -f "$E2E_SSH_KEY"
# restrict: no forwarding, no pty, no agent; the key runs a command only.
echo "restrict $(cat "$E2E_SSH_KEY.pub")" > "$ssh/authorized_keys"
port_host=$E2E_HOST_IP
[ "$E2E_SSH_PORT" = 22 ] || port_host="[$E2E_HOST_IP]:$E2E_SSH_PORT"
echo "$port_host $(cut -d' ' -f1,2 "$ssh/host_ed25519.pub")" > "$E2E_SSH_KNOWN_HOSTS"

cat > "$ssh/sshd_config" <<EOF
# The lane's sshd (hack/e2e/ssh-up.sh): one user, one key, commands only.
ListenAddress $E2E_HOST_IP:$E2E_SSH_PORT
HostKey $ssh/host_ed25519
PidFile $ssh/sshd.pid
AuthorizedKeysFile $ssh/authorized_keys
AllowUsers $E2E_SSH_USER
AuthenticationMethods publickey
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
PermitRootLogin no
DisableForwarding yes
PermitTTY no
# The state directory is under /tmp (mode 1777), which StrictModes refuses
# on the way to authorized_keys; the files are root's, in root's directory.
StrictModes no
LogLevel VERBOSE
EOF
chmod 0644 "$ssh"/*
chmod 0600 "$ssh/host_ed25519" "$E2E_SSH_KEY"

ip netns exec "$E2E_NETNS" sh -euc '
  lv=$1 ssh=$2
  mount -t tmpfs -o mode=0755 egress-e2e-run /run
  mkdir -p /run/sshd /run/libvirt
  mount --bind "$lv/run" /run/libvirt
  mount --bind "$lv/passwd" /etc/passwd
  mount --bind "$lv/group" /etc/group
  exec /usr/sbin/sshd -f "$ssh/sshd_config" -E "$ssh/sshd.log"
' sh "$lv" "$ssh"

# Ready when the lane's own libvirt client, over libssh2 with the files the
# operator gets, reaches the daemon as the user.
uri="qemu+libssh2://$E2E_SSH_USER@$E2E_HOST_IP:$E2E_SSH_PORT/system?sshauth=privkey&keyfile=$E2E_SSH_KEY&known_hosts=$E2E_SSH_KNOWN_HOSTS"
for _ in $(seq 20); do
  ip netns exec "$E2E_NETNS" virsh -q -c "$uri" uri >/dev/null 2>&1 && break
  sleep 0.5
done
if ! out=$(ip netns exec "$E2E_NETNS" virsh -q -c "$uri" uri 2>&1); then
  log "libvirt over SSH does not answer at $uri: $out"
  tail -n 20 "$ssh/sshd.log" >&2 || true
  exit 1
fi
log "sshd $(cat "$ssh/sshd.pid") on $E2E_HOST_IP:$E2E_SSH_PORT: $E2E_SSH_USER reaches $out over libssh2"
