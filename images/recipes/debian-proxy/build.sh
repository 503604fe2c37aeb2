#!/usr/bin/env bash
# Builds the proxy guest image: Debian 12 (bookworm) minbase with
# cloud-init, qemu-guest-agent and a forward proxy, as a bootable qcow2
# (MBR, one ext4 partition, extlinux), offline from Debian packages with
# mmdebstrap. Prints the image's path.
#
#   images/recipes/debian-proxy/build.sh            # tinyproxy
#   PROXY=squid VMWARE_TOOLS=1 images/recipes/debian-proxy/build.sh
#
# The image is cached outside the repository under a hash of this recipe
# and its options: a second run with the same inputs builds nothing.
# Packages come from the host's apt sources. Needs root (loop devices,
# mount); installs its Debian build dependencies when missing.
#
# Reproducible: fixed filesystem UUID and hash seed, SOURCE_DATE_EPOCH for
# package and file times, an empty machine-id. The same inputs give the
# same package set; the image is byte-identical only while the mirror
# serves the same package versions.
#
# Pitfalls found on these machines (docs/images.md has the why of each):
# losetup -P makes no partition device here, so the partition is mapped by
# offset; extlinux cannot read 64-bit ext4; mmdebstrap wants an empty
# target; deleted .debs bloat the image until fstrim; the cloud kernel has
# no AHCI (boot with machine type pc, or a virtio-scsi cdrom); cloud-init's
# locale module fails on minbase unless the locale is C.UTF-8.
set -euo pipefail

PROXY=${PROXY:-tinyproxy}
VMWARE_TOOLS=${VMWARE_TOOLS:-0}
SIZE=${SIZE:-2G}
SUITE=bookworm
SOURCES=${SOURCES:-/etc/apt/sources.list.d/debian.sources}
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-1764374400} # 2025-11-29

case "$PROXY" in tinyproxy|squid) ;; *) echo "PROXY=$PROXY: one of tinyproxy, squid" >&2; exit 2 ;; esac
case "$VMWARE_TOOLS" in 0|1) ;; *) echo "VMWARE_TOOLS=$VMWARE_TOOLS: 0 or 1" >&2; exit 2 ;; esac

here=$(cd "$(dirname "$0")" && pwd)
hash=$( { cat "$0" "$here/cloud.cfg"; echo "$PROXY $VMWARE_TOOLS $SIZE $SUITE $SOURCE_DATE_EPOCH"; } | sha256sum | cut -c1-16)
cache=${XDG_CACHE_HOME:-$HOME/.cache}/egress-proxies/images/debian-proxy-$PROXY-$hash
image=$cache/debian-proxy.qcow2
if [ -f "$image" ]; then
  echo "$image"
  exit 0
fi
log() { echo "debian-proxy: $*" >&2; }

[ "$(id -u)" -eq 0 ] || { log "must run as root (loop devices, mount)"; exit 1; }
"$here/../../../hack/apt-ensure.sh" @image

work=$(mktemp -d)
loop=""
cleanup() {
  mountpoint -q "$work/mnt" && umount "$work/mnt"
  [ -n "$loop" ] && losetup -d "$loop" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

# resolvconf: ifupdown applies a static network's resolvers (cloud-init's
# dns-nameservers) only through it; without it /etc/resolv.conf stayed the
# build host's.
packages=usr-is-merged,systemd-sysv,udev,linux-image-cloud-amd64,cloud-init,qemu-guest-agent,ifupdown,isc-dhcp-client,iproute2,netbase,resolvconf,$PROXY
[ "$VMWARE_TOOLS" = 1 ] && packages=$packages,open-vm-tools

log "building $PROXY image (vmware tools: $VMWARE_TOOLS) into $cache"
raw=$work/disk.raw
truncate -s "$SIZE" "$raw"
printf 'label: dos\nstart=2048, type=83, bootable\n' | sfdisk -q "$raw"
loop=$(losetup -f --show -o $((2048 * 512)) "$raw")
mkfs.ext4 -q -L rootfs -O ^64bit -U 6c1f2f1e-0b4e-4c5d-9a3e-3f1d2c4b5a69 -E hash_seed=0d7a6b1c-2e3f-4a5b-8c9d-0e1f2a3b4c5d "$loop"
mkdir "$work/mnt"
mount "$loop" "$work/mnt"
rmdir "$work/mnt/lost+found"

mmdebstrap --variant=minbase --include="$packages" \
  --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/doc/*' \
  --dpkgopt='path-include=/usr/share/doc/*/copyright' --dpkgopt='path-exclude=/usr/share/locale/*' \
  --dpkgopt='path-exclude=/usr/share/info/*' \
  --customize-hook='echo "LABEL=rootfs / ext4 errors=remount-ro 0 1" > "$1/etc/fstab"' \
  --customize-hook="cp '$here/cloud.cfg' \"\$1/etc/cloud/cloud.cfg.d/90-egress-proxies.cfg\"" \
  --customize-hook='rm -f "$1/etc/machine-id"; : > "$1/etc/machine-id"' \
  --customize-hook='chroot "$1" apt-get -y -q purge usrmerge libfile-find-rule-perl libnumber-compare-perl libtext-glob-perl perl perl-modules-5.36 libperl5.36 >/dev/null 2>&1 || true; chroot "$1" apt-get clean' \
  "$SUITE" "$work/mnt" "$SOURCES" >&2

kver=$(basename "$(ls "$work"/mnt/boot/vmlinuz-* | sort -V | tail -1)" | sed 's/^vmlinuz-//')
mkdir -p "$work/mnt/boot/extlinux"
cat > "$work/mnt/boot/extlinux/extlinux.conf" <<CONF
DEFAULT debian
TIMEOUT 1
LABEL debian
  LINUX /boot/vmlinuz-$kver
  INITRD /boot/initrd.img-$kver
  APPEND root=LABEL=rootfs ro console=ttyS0,115200n8 net.ifnames=0
CONF
extlinux --install "$work/mnt/boot/extlinux" >&2
dd if=/usr/lib/syslinux/mbr/mbr.bin of="$raw" bs=440 count=1 conv=notrunc status=none
fstrim "$work/mnt" >&2 || true
umount "$work/mnt"
# The check runs on the file, after the loop device is gone: e2fsck on
# the device itself failed now and then with "/dev/loopN is in use"
# (docs/testing.md, "CI's budget") when the kernel had not yet dropped the unmounted
# filesystem's claim on it. losetup -d of a busy device only marks it to
# clear on its last close, so the build waits until it is detached: then
# every write has reached the file and nothing else holds it.
losetup -d "$loop"
for _ in $(seq 300); do
  [ -z "$(losetup -n -O NAME -j "$raw")" ] && break
  sleep 0.2
done
if [ -n "$(losetup -n -O NAME -j "$raw")" ]; then
  log "$loop is still attached 60 s after its unmount; its holders:"
  grep -l " $loop " /proc/[0-9]*/mountinfo >&2 || true
  exit 1
fi
loop=""
e2fsck -fy "$raw?offset=$((2048 * 512))" >&2 || [ $? -le 1 ]

mkdir -p "$cache"
qemu-img convert -O qcow2 "$raw" "$image.tmp"
mv "$image.tmp" "$image"
log "built $(du -h "$image" | cut -f1)"
echo "$image"
