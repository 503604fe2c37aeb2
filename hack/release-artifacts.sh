#!/usr/bin/env bash
# make release-artifacts: what a release publishes besides the Go modules'
# tags, built offline into dist/ and checked (docs/releasing.md, "Release
# artifacts"):
#   install.yaml, monitoring.yaml            make release-manifests
#   egress-proxies-operator-<v>.tgz          make release-chart
#   images/egress-proxies-operator-<v>.oci.tar
#       the pure-Go image for linux/amd64 and linux/arm64 as one OCI image
#       index, tagged egress-proxies-operator:<v> (images/oci/cmd/oci-index)
#   images/egress-proxies-operator-<v>-linux-<arch>.cdx.json
#       each image's CycloneDX SBOM (also in the image)
#   SHA256SUMS                               of all the above
# The checks: each image is built twice to the same digest (build.sh);
# each SBOM lists as many Go modules as `go version -m` of its binary
# (the unit test compares them one by one); the index holds both
# platforms, each image's binary an ELF for its machine.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
log() { echo "release-artifacts: $*" >&2; }
VERSION=${VERSION:-$(cat VERSION)}
IMAGE=${IMAGE:-egress-proxies-operator}
name=$IMAGE-$VERSION
dist=$root/dist
start=$(date +%s)

make --no-print-directory release-manifests release-chart VERSION="$VERSION" >&2

work=$(mktemp -d /tmp/release-artifacts.XXXXXX)
trap 'rm -rf "$work"' EXIT
mkdir -p "$dist/images"
images=()
for arch in amd64 arm64; do
  ARCH=$arch OUT=$work/$arch IMAGE=$IMAGE VERSION=$VERSION PROVIDERS="vsphere proxmox openstack" \
    images/recipes/operator/build.sh > /dev/null
  modules=$(grep -cP '^\tdep\t' "$work/$arch/$name.go-modules.txt")
  # The binary, the standard library and one component per module.
  components=$(grep -c '"bom-ref": "pkg:golang/' "$work/$arch/$name.cdx.json")
  if [ "$components" -ne $((modules + 2)) ]; then
    log "linux/$arch: the SBOM has $components components, want $((modules + 2)): the binary, std and the $modules modules go version -m lists"
    exit 1
  fi
  cp "$work/$arch/$name.cdx.json" "$dist/images/$name-linux-$arch.cdx.json"
  images+=(-image "$work/$arch/$name.oci.tar")
  log "linux/$arch: image built; its SBOM lists the binary, std and the $modules modules go version -m lists"
done
digest=$(cd images/oci && go run ./cmd/oci-index -o "$dist/images/$name.oci.tar" -tag "$IMAGE:$VERSION" \
  "${images[@]}" -binary /usr/local/bin/egress-proxies-operator)
log "index $IMAGE:$VERSION $digest (linux/amd64, linux/arm64) in dist/images/$name.oci.tar"
(cd "$dist" && sha256sum install.yaml monitoring.yaml "$IMAGE-$VERSION.tgz" images/"$name"* > SHA256SUMS)
log "dist/SHA256SUMS: $(wc -l < "$dist/SHA256SUMS") files; $(( $(date +%s) - start )) s"
