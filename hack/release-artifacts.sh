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
# Then publishing is rehearsed on a registry on loopback
# (go-containerregistry's, hack/publish): the index pushed and signed with
# a key made for the rehearsal (cosign's libraries), the signature
# verified; the chart pushed with `helm push` as an OCI artifact and
# pulled back the same bytes. HELM is the pinned helm (make helm-path).
set -euo pipefail
: "${HELM:?HELM is not set: run make release-artifacts}"
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
digest=$(cd images/oci && go run ./cmd/oci-index -o "$dist/images/$name.oci.tar" -layout "$work/index" \
  -tag "$IMAGE:$VERSION" "${images[@]}" -binary /usr/local/bin/egress-proxies-operator)
log "index $IMAGE:$VERSION $digest (linux/amd64, linux/arm64) in dist/images/$name.oci.tar"
(cd "$dist" && sha256sum install.yaml monitoring.yaml "$IMAGE-$VERSION.tgz" images/"$name"* > SHA256SUMS)
log "dist/SHA256SUMS: $(wc -l < "$dist/SHA256SUMS") files"

# Publishing, rehearsed on loopback.
(cd hack/publish && GOWORK=off go build -o "$work/publish" .)
"$work/publish" registry > "$work/registry" &
registry_pid=$!
trap 'kill "$registry_pid" 2> /dev/null || true; rm -rf "$work"' EXIT
for _ in $(seq 50); do [ -s "$work/registry" ] && break; sleep 0.1; done
reg=$(cat "$work/registry")
[ -n "$reg" ] || { log "the loopback registry did not start"; exit 1; }
export COSIGN_PASSWORD=rehearsal
"$work/publish" keygen -dir "$work" > /dev/null
pushed=$("$work/publish" image -layout "$work/index" -ref "$reg/$IMAGE:$VERSION" -key "$work/cosign.key")
[ "$pushed" = "$reg/$IMAGE@$digest" ] || { log "pushed $pushed, want the index $digest"; exit 1; }
log "published: $("$work/publish" verify -ref "$reg/$IMAGE:$VERSION" -key "$work/cosign.pub")"
export HELM_REGISTRY_CONFIG=$work/helm-registry.json HELM_CACHE_HOME=$work/helm-cache HELM_CONFIG_HOME=$work/helm-config
"$HELM" push "$dist/$IMAGE-$VERSION.tgz" "oci://$reg/charts" --plain-http >&2
mkdir "$work/pulled"
"$HELM" pull "oci://$reg/charts/$IMAGE" --version "$VERSION" --plain-http -d "$work/pulled" >&2
cmp "$dist/$IMAGE-$VERSION.tgz" "$work/pulled/$IMAGE-$VERSION.tgz" ||
  { log "the chart pulled back from oci://$reg/charts differs from dist/$IMAGE-$VERSION.tgz"; exit 1; }
log "published: the chart as oci://$reg/charts/$IMAGE:$VERSION, pulled back the same"
log "$(( $(date +%s) - start )) s"
