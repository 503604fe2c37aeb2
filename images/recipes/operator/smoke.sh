#!/usr/bin/env bash
# Runs the operator image as its Deployment runs it, without Kubernetes:
# the image's root filesystem under runc, read-only, as uid 65532, with no
# capabilities, no new privileges, a tmpfs /tmp and the providers config
# mounted read-only. Checks:
#   - the image holds no shell, runs as 65532:65532 and carries its labels
#     and its Go module list;
#   - the binary starts: -version names the release and the providers;
#   - with no cluster it stops cleanly, saying so;
# and for the libvirt image (PROVIDERS with libvirt, or a -libvirt tag):
#   - the dynamic loader resolves every shared library inside the image;
#   - libvirt's client, from the image's libraries, opens test:///default,
#     and a qemu+libssh:// URI through libssh: key auth against a private
#     sshd on 127.0.0.1 that accepts the key and runs nothing (its forced
#     command fails), so libssh, the key file and known_hosts are shown to
#     work and no libvirtd is ever reached.
#
#   images/recipes/operator/smoke.sh [image.tar]   # default: build.sh's image for PROVIDERS
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
log() { echo "image-smoke: $*" >&2; }
fail() { echo "image-smoke: FAIL: $*" >&2; exit 1; }

tarball=${1:-$("$here/build.sh")}
[ -f "$tarball" ] || fail "$tarball: no such image tarball"
libvirt=0
case "$tarball" in *-libvirt.tar) libvirt=1 ;; esac

"$root/hack/apt-ensure.sh" @operator_smoke
[ "$libvirt" = 1 ] && "$root/hack/apt-ensure.sh" @operator_smoke_libvirt

work=$(mktemp -d /tmp/image-smoke.XXXXXX)
sshd_pid=""
cleanup() {
  for c in $(runc --root "$work/runc" list -q 2>/dev/null); do runc --root "$work/runc" delete -f "$c" >/dev/null 2>&1 || true; done
  [ -n "$sshd_pid" ] && kill "$sshd_pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

# Unpack: the docker archive's manifest.json lists the layers in order.
bundle=$work/bundle
mkdir -p "$bundle/rootfs"
manifest=$(tar -xOf "$tarball" manifest.json)
config_blob=$(grep -o '"Config":"[^"]*"' <<<"$manifest" | cut -d'"' -f4)
for layer in $(grep -o '"Layers":\[[^]]*\]' <<<"$manifest" | grep -o '[^"[]*\.tar\.gz'); do
  tar -xOf "$tarball" "$layer" | tar -xz -C "$bundle/rootfs" --numeric-owner -p
done
rootfs=$bundle/rootfs
config=$(tar -xOf "$tarball" "$config_blob")

# What the image is.
for shell in bin/sh bin/bash bin/dash usr/bin/sh bin/busybox; do
  { [ -e "$rootfs/$shell" ] || [ -L "$rootfs/$shell" ]; } && fail "the image holds a shell: /$shell"
done
grep -q '"User":"65532:65532"' <<<"$config" || fail "config User is not 65532:65532: $config"
for label in org.opencontainers.image.version org.opencontainers.image.revision org.opencontainers.image.source egressproxies.io/providers; do
  grep -q "\"$label\":\"[^\"]" <<<"$config" || fail "config has no label $label"
done
version=$(grep -o '"org.opencontainers.image.version":"[^"]*"' <<<"$config" | cut -d'"' -f4)
providers=$(grep -o '"egressproxies.io/providers":"[^"]*"' <<<"$config" | cut -d'"' -f4)
[ -s "$rootfs/usr/share/doc/egress-proxies-operator/go-modules.txt" ] || fail "no Go module list in the image"
[ -s "$rootfs/usr/share/doc/egress-proxies-operator/sbom.cdx.json" ] || fail "no SBOM in the image"
[ -s "$rootfs/etc/ssl/certs/ca-certificates.crt" ] || fail "no CA bundle in the image"
grep -q '^nonroot:x:65532:65532:' "$rootfs/etc/passwd" || fail "no nonroot user in /etc/passwd"
log "$(basename "$tarball"): no shell, user 65532:65532, version $version, providers \"$providers\", $(du -sh "$rootfs" | cut -f1) unpacked"

# A providers config as the ConfigMap mounts it, with one entry of a type
# compiled in (the samples of operator/config/manager/providers_config.yaml).
mkdir -p "$work/etc"
type=${providers%% *}
[ "$libvirt" = 1 ] && type=libvirt
cred=/etc/egress-proxies/credentials
{
  echo "providers:"
  echo "  - name: smoke"
  echo "    type: $type"
  case "$type" in
    vsphere) cat <<EOF
    vsphere:
      server: https://vcenter.example/sdk
      usernameFile: $cred/vsphere-username
      passwordFile: $cred/vsphere-password
      regions:
        dc1:
          datacenter: DC1
          folder: /DC1/vm/egress-proxies
          zones:
            cluster-a: {resourcePool: /DC1/host/cluster-a/Resources, datastore: ds-a, network: egress-pg}
      machineTypes: {small: {cpus: 1, memoryMiB: 1024}}
      images: {debian-12: debian-12-proxy-template}
EOF
    ;;
    proxmox) cat <<EOF
    proxmox:
      regions:
        pve-lab:
          endpoint: https://pve1.example:8006
          tokenIDFile: $cred/proxmox-token-id
          tokenSecretFile: $cred/proxmox-token-secret
          vmids: {min: 100000, max: 109999}
          zones:
            pve1: {node: pve1, isoStorage: local}
      machineTypes: {small: {cores: 1, memoryMiB: 1024}}
      images: {debian-12: {templateName: debian-12-proxy}}
EOF
    ;;
    openstack) cat <<EOF
    openstack:
      cloudsFile: $cred/openstack-clouds.yaml
      cloud: openstack
      regions:
        one:
          name: RegionOne
          zones: {az1: nova}
          network: 3f1c9a52-7b1e-4f6a-9d0c-2e8b5a7c4d10
          securityGroups: [egress-proxy]
      machineTypes: {small: m1.small}
      images: {debian-12: debian-12-proxy}
EOF
    ;;
    libvirt) cat <<EOF
    libvirt:
      regions:
        host1:
          uri: qemu+libssh://egress@host1.example/system?sshauth=privkey&keyfile=$cred/libvirt-ssh-key&known_hosts=$cred/libvirt-known-hosts
          pool: egress-proxies
          network: egress-net
      machineTypes: {small: {cpus: 1, memoryMiB: 1024, diskGiB: 4}}
      images:
        debian-12: {url: https://images.example/debian-proxy.qcow2, sha256: "$(printf '%064d' 0)", format: qcow2}
EOF
    ;;
    *) fail "no sample providers config for type $type" ;;
  esac
} > "$work/etc/providers.yaml"

# run NAME NET -- ARGS...: runs ARGS in the image as the Deployment would;
# NET is "private" (a network namespace of its own, loopback down: nothing
# to reach) or "host" (this machine's, for the loopback sshd). Prints the
# output, returns the exit code. Extra bind mounts come from $mounts,
# extra environment from $env (JSON fragments).
n=0
mounts=""
env=""
run() {
  local net=$1; shift 2 # NET --
  local id="image-smoke-$$-$((n += 1))"
  local args="" a
  for a in "$@"; do args+="${args:+, }\"$a\""; done
  local netns='{"type": "network"},'
  [ "$net" = host ] && netns=""
  cat > "$bundle/config.json" <<JSON
{
  "ociVersion": "1.0.2",
  "process": {
    "user": {"uid": 65532, "gid": 65532},
    "args": [$args],
    "env": ["PATH=/usr/local/bin", "HOME=/home/nonroot", "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt"$env],
    "cwd": "/",
    "capabilities": {"bounding": [], "effective": [], "permitted": [], "inheritable": [], "ambient": []},
    "noNewPrivileges": true,
    "rlimits": [{"type": "RLIMIT_NOFILE", "hard": 1024, "soft": 1024}]
  },
  "root": {"path": "rootfs", "readonly": true},
  "hostname": "image-smoke",
  "mounts": [
    {"destination": "/proc", "type": "proc", "source": "proc"},
    {"destination": "/dev", "type": "tmpfs", "source": "tmpfs", "options": ["nosuid", "strictatime", "mode=755", "size=65536k"]},
    {"destination": "/dev/pts", "type": "devpts", "source": "devpts", "options": ["nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620"]},
    {"destination": "/dev/shm", "type": "tmpfs", "source": "shm", "options": ["nosuid", "noexec", "nodev", "mode=1777", "size=65536k"]},
    {"destination": "/sys", "type": "sysfs", "source": "sysfs", "options": ["nosuid", "noexec", "nodev", "ro"]},
    {"destination": "/tmp", "type": "tmpfs", "source": "tmpfs", "options": ["nosuid", "nodev", "mode=1777", "size=65536k"]},
    {"destination": "/etc/egress-proxies", "type": "bind", "source": "$work/etc", "options": ["rbind", "ro"]}
    $mounts
  ],
  "linux": {
    "namespaces": [{"type": "pid"}, $netns {"type": "ipc"}, {"type": "uts"}, {"type": "mount"}],
    "maskedPaths": ["/proc/kcore", "/proc/keys", "/proc/timer_list", "/sys/firmware"],
    "readonlyPaths": ["/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"]
  }
}
JSON
  local rc=0
  timeout 120 runc --root "$work/runc" run --bundle "$bundle" "$id" </dev/null || rc=$?
  runc --root "$work/runc" delete -f "$id" >/dev/null 2>&1 || true
  return $rc
}

# 1. It starts, and says what it is.
out=$(run private -- /usr/local/bin/egress-proxies-operator -version 2>&1) || fail "-version: exit $?: $out"
[ "$out" = "egress-proxies-operator $version (providers: $(tr ' ' '\n' <<<"$providers" | sort | xargs))" ] ||
  fail "-version printed \"$out\"; want version $version and providers \"$providers\""
log "runs: $out"

# 2. No cluster: it reads its config, then stops, naming what is missing.
rc=0
out=$(run private -- /usr/local/bin/egress-proxies-operator --providers-config=/etc/egress-proxies/providers.yaml 2>&1) || rc=$?
[ "$rc" = 1 ] && grep -q 'cluster:' <<<"$out" || fail "with no cluster: exit $rc, want 1 and a cluster error: $out"
log "no cluster: exit 1, $(grep -o 'cluster: [^"]*' <<<"$out" | head -1)"

# 3. In a Pod: the API server's address in the environment, the service
# account's token and CA mounted; the server does not answer (the network
# namespace has no route), and the operator stops saying where it called.
mkdir -p "$work/sa"
echo smoke-token > "$work/sa/token"
echo default > "$work/sa/namespace"
cp "$rootfs/etc/ssl/certs/ca-certificates.crt" "$work/sa/ca.crt"
mounts=", {\"destination\": \"/var/run/secrets/kubernetes.io/serviceaccount\", \"type\": \"bind\", \"source\": \"$work/sa\", \"options\": [\"rbind\", \"ro\"]}"
env=', "KUBERNETES_SERVICE_HOST=127.0.0.1", "KUBERNETES_SERVICE_PORT=6443"'
rc=0
out=$(run private -- /usr/local/bin/egress-proxies-operator --providers-config=/etc/egress-proxies/providers.yaml 2>&1) || rc=$?
mounts="" env=""
[ "$rc" = 1 ] && grep -q '127.0.0.1:6443' <<<"$out" || fail "in a Pod with no API server: exit $rc, want 1 and an error naming 127.0.0.1:6443: $out"
log "in a Pod, API server unreachable: exit 1, $(grep -o 'dial tcp 127.0.0.1:6443[^"\\]*' <<<"$out" | head -1)"

if [ "$libvirt" = 1 ]; then
  # 4. The loader finds every library in the image (ldd is the loader in
  # list mode; the image has no ldd script, nor a shell to run it).
  interp=/lib64/ld-linux-x86-64.so.2
  out=$(run private -- "$interp" --list /usr/local/bin/egress-proxies-operator 2>&1) || fail "$interp --list: $out"
  grep -q 'not found' <<<"$out" && fail "libraries not found in the image: $(grep 'not found' <<<"$out")"
  grep -q 'libssh\.so' <<<"$out" || fail "libssh is not among the operator's libraries: $out"
  log "loader: $(grep -c '=>' <<<"$out") libraries resolve in the image, libssh among them"

  # 5. libvirt's client from the image's libraries: in process, and over
  # qemu+libssh:// to a private sshd on loopback.
  mkdir -p "$work/probe/ssh"
  gcc -O2 -o "$work/probe/libvirt-probe" "$here/libvirt-probe.c" -lvirt
  ssh-keygen -q -t ed25519 -N '' -f "$work/probe/ssh/host_ed25519"
  ssh-keygen -q -t ed25519 -N '' -f "$work/probe/ssh/id_ed25519"
  cp "$work/probe/ssh/id_ed25519.pub" "$work/probe/ssh/authorized_keys"
  port=$((20000 + $$ % 10000))
  # The user is nobody: its shell, nologin, refuses the forced command too.
  cat > "$work/probe/ssh/sshd_config" <<EOF
ListenAddress 127.0.0.1
Port $port
HostKey $work/probe/ssh/host_ed25519
PidFile $work/probe/ssh/sshd.pid
AuthorizedKeysFile $work/probe/ssh/authorized_keys
AllowUsers nobody
StrictModes no
UsePAM no
PasswordAuthentication no
KbdInteractiveAuthentication no
AllowTcpForwarding no
AllowAgentForwarding no
X11Forwarding no
PermitTTY no
ForceCommand /bin/false
EOF
  mkdir -p /run/sshd
  /usr/sbin/sshd -D -f "$work/probe/ssh/sshd_config" -E "$work/probe/sshd.log" &
  sshd_pid=$!
  for _ in $(seq 50); do grep -q "Server listening" "$work/probe/sshd.log" 2>/dev/null && break; sleep 0.1; done
  echo "[127.0.0.1]:$port $(cut -d' ' -f1,2 "$work/probe/ssh/host_ed25519.pub")" > "$work/probe/ssh/known_hosts"
  # Another key for the same host: a known_hosts that must be refused.
  ssh-keygen -q -t ed25519 -N '' -f "$work/probe/ssh/other_ed25519"
  echo "[127.0.0.1]:$port $(cut -d' ' -f1,2 "$work/probe/ssh/other_ed25519.pub")" > "$work/probe/ssh/known_hosts_other"
  # The container's user reads its key; sshd, as nobody, the authorized
  # keys, through the work directory.
  chown -R 65532:65532 "$work/probe/ssh"
  chmod 600 "$work/probe/ssh/id_ed25519"
  chmod 755 "$work" "$work/probe" "$work/probe/ssh"
  mounts=", {\"destination\": \"/probe\", \"type\": \"bind\", \"source\": \"$work/probe\", \"options\": [\"rbind\", \"ro\"]}"
  uri="qemu+libssh://nobody@127.0.0.1:$port/system?sshauth=privkey&keyfile=/probe/ssh/id_ed25519&known_hosts=/probe/ssh/known_hosts_other"
  out=$(run host -- /probe/libvirt-probe test:///default "${uri/known_hosts_other/known_hosts}" 2>&1) || true
  grep -q '^test:///default: connected' <<<"$out" || fail "test:///default from the image's libvirt: $out"
  grep -q 'Accepted publickey for nobody' "$work/probe/sshd.log" ||
    fail "qemu+libssh:// did not authenticate: $out; sshd: $(cat "$work/probe/sshd.log")"
  # The host key is checked against known_hosts: another key is refused
  # before any authentication.
  accepted=$(grep -c 'Accepted publickey' "$work/probe/sshd.log")
  other=$(run host -- /probe/libvirt-probe "$uri" 2>&1) || true
  mounts=""
  grep -qi 'host key' <<<"$other" && [ "$(grep -c 'Accepted publickey' "$work/probe/sshd.log")" = "$accepted" ] ||
    fail "qemu+libssh:// with another host key in known_hosts was not refused: $other"
  log "libvirt from the image: test:///default connected; qemu+libssh:// authenticated by key (then: $(grep '^qemu' <<<"$out" | sed 's/.*: error: //'))"
  log "libvirt from the image: another host key refused ($(sed 's/.*: error: //' <<<"$other"))"
fi
log "ok"
