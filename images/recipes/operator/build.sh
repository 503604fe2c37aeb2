#!/usr/bin/env bash
# Builds the operator's container image offline, from Go modules and Debian
# packages only (no image registry is reachable, so there is no base image):
# images/oci/cmd/oci-image lays out one layer and writes it with
# go-containerregistry. docs/operator-image.md says what is in it and why.
#
#   images/recipes/operator/build.sh                           # PROVIDERS="vsphere proxmox openstack"
#   PROVIDERS="vsphere libvirt" images/recipes/operator/build.sh   # the libvirt (cgo) variant
#
# Writes to OUT (bin/images):
#   egress-proxies-operator-<tag>.tar              docker archive, tagged IMAGE:<tag>
#   egress-proxies-operator-<tag>.oci.tar          the same image as an OCI archive
#   egress-proxies-operator-<tag>.go-modules.txt   go version -m of the binary (also in the image)
#   egress-proxies-operator-<tag>.cdx.json         its CycloneDX SBOM (also in the image)
#   egress-proxies-operator-<tag>.debian-packages.txt  the Debian packages copied from, with versions (also in the image)
# and prints the docker archive's path on stdout, its digest and size on
# stderr. <tag> is VERSION, with -libvirt for the libvirt variant.
#
# ARCH (default: this machine's) builds the pure-Go image for another
# architecture (Go cross-compiles; make release-artifacts builds amd64 and
# arm64 and joins them into one index); the libvirt variant is built for
# this machine only (cgo would need a cross toolchain).
#
# Pure Go: a static binary (CGO_ENABLED=0), Debian's CA bundle, /etc/passwd
# with nonroot (65532), /tmp, nothing else — no shell. libvirt: the same,
# built with cgo, plus the dynamic loader and exactly the shared libraries
# it loads (their DT_NEEDED closure; libssh among them, which the
# qemu+libssh:// transport runs in process) and each library's Debian
# copyright file.
#
# Reproducible: -trimpath, -buildvcs=false, every file's time and the
# config's creation time are SOURCE_DATE_EPOCH (default: the commit's
# time), entries sorted, owners numeric. The image is built twice and the
# two digests compared; a difference fails the build.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
cd "$root"
log() { echo "image-operator: $*" >&2; }

PROVIDERS=${PROVIDERS:-vsphere proxmox openstack}
IMAGE=${IMAGE:-egress-proxies-operator}
OUT=${OUT:-$root/bin/images}
SOURCE=${SOURCE:-https://github.com/egress-proxies/egress-proxies-operator}
REVISION=${REVISION:-$(git rev-parse HEAD)}
# The release, defined once in the VERSION file: the tag dist/install.yaml
# and the chart name the image by.
VERSION=${VERSION:-$(cat "$root/VERSION")}
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct)}

ARCH=${ARCH:-$(go env GOHOSTARCH)}
libvirt=0
for p in $PROVIDERS; do
  case "$p" in
    vsphere|proxmox|openstack|memory) ;;
    libvirt) libvirt=1 ;;
    *) echo "PROVIDERS=\"$PROVIDERS\": unknown provider type $p (vsphere, proxmox, openstack, libvirt, memory)" >&2; exit 2 ;;
  esac
done
if [ "$libvirt" = 1 ] && [ "$ARCH" != "$(go env GOHOSTARCH)" ]; then
  echo "ARCH=$ARCH: the libvirt variant (cgo) is built for this machine's architecture only, $(go env GOHOSTARCH)" >&2
  exit 2
fi
case "$VERSION" in
  ''|*[!A-Za-z0-9_.-]*) echo "VERSION=\"$VERSION\": want an image tag (letters, digits, _ . -)" >&2; exit 2 ;;
esac
tag=$VERSION
[ "$libvirt" = 1 ] && tag=$VERSION-libvirt
name=$IMAGE-$tag

# The CA bundle and the copyright files come from Debian packages;
# update-ca-certificates (the package's postinst) writes the bundle from
# the package's certificates, so the package is listed through its
# copyright file.
if [ "$libvirt" = 1 ]; then
  "$root/hack/apt-ensure.sh" @operator_image @operator_image_libvirt
else
  "$root/hack/apt-ensure.sh" @operator_image
fi

work=$(mktemp -d /tmp/image-operator.XXXXXX)
trap 'rm -rf "$work"' EXIT
mkdir -p "$OUT"

start=$(date +%s)
go build -trimpath -buildvcs=false -o "$work/oci-image" ./images/oci/cmd/oci-image

# netgo and osusergo keep Go's own name and user lookups in Go in the cgo
# build too: only libvirt's C code uses glibc's resolver.
tags=$PROVIDERS
cgo=0
if [ "$libvirt" = 1 ]; then tags="$PROVIDERS netgo osusergo"; cgo=1; fi
(cd operator && GOARCH=$ARCH CGO_ENABLED=$cgo go build -trimpath -buildvcs=false -tags "$tags" \
  -ldflags "-s -w -X main.version=$VERSION" -o "$work/egress-proxies-operator" ./cmd)
built=$(date +%s)

# glibc (the libvirt build's resolver) reads nsswitch.conf; Go reads it to
# order /etc/hosts and DNS. Kubernetes mounts /etc/hosts and resolv.conf.
printf 'passwd: files\ngroup: files\nhosts: files dns\n' > "$work/nsswitch.conf"

args=(
  -tag "$IMAGE:$tag"
  -binary "$work/egress-proxies-operator=/usr/local/bin/egress-proxies-operator:0755"
  -file "/etc/ssl/certs/ca-certificates.crt=/etc/ssl/certs/ca-certificates.crt:0644"
  -host-path /usr/share/doc/ca-certificates/copyright
  -file "$work/nsswitch.conf=/etc/nsswitch.conf:0644"
  -user 65532:65532 -user-name nonroot
  -dir /tmp:1777
  -env SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt
  -env HOME=/home/nonroot
  -go-modules /usr/share/doc/egress-proxies-operator/go-modules.txt
  -sbom /usr/share/doc/egress-proxies-operator/sbom.cdx.json
  -platform "linux/$ARCH"
  -debian-packages /usr/share/doc/egress-proxies-operator/debian-packages.txt
  -label "org.opencontainers.image.title=egress-proxies-operator"
  -label "org.opencontainers.image.version=$VERSION"
  -label "org.opencontainers.image.revision=$REVISION"
  -label "org.opencontainers.image.source=$SOURCE"
  -label "egressproxies.io/providers=$PROVIDERS"
)
digest=$("$work/oci-image" -o "$OUT/$name.tar" -oci-archive "$OUT/$name.oci.tar" "${args[@]}")
# Twice, to a second file: the same digest and the same bytes, or the
# build is not reproducible and says so.
again=$("$work/oci-image" -o "$work/again.tar" "${args[@]}" 2>/dev/null)
if [ "$digest" != "$again" ] || ! cmp -s "$OUT/$name.tar" "$work/again.tar"; then
  echo "image-operator: two builds of the same inputs differ: $digest, $again" >&2
  exit 1
fi
end=$(date +%s)

size=$(stat -c %s "$OUT/$name.tar")
log "$IMAGE:$tag digest $digest (same on a second build)"
log "$OUT/$name.tar: $((size / 1024)) KiB; binary $(($(stat -c %s "$work/egress-proxies-operator") / 1024)) KiB; go build $((built - start)) s, image $((end - built)) s"
echo "$OUT/$name.tar"
