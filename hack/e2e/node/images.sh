#!/usr/bin/env bash
# Builds the images the lane's node runs, offline, and prints the
# directory holding them: one image tarball each for containerd to import,
# and `refs`, their names as shell assignments. Cached outside the
# repository, keyed by what goes in; a second run builds nothing.
#   - pause: the Pod sandbox, Kubernetes' own build/pause/linux/pause.c
#     (from the k8s.io/kubernetes module) compiled static with gcc;
#   - coredns: CoreDNS from its module with only the plugins the lane's
#     Corefile uses (node/coredns.yaml);
#   - probe: hack/e2e/node/probe, the Pod of node-check.sh.
# No registry is reachable, so the names are never pulled: containerd's
# sandbox image and the Pods' imagePullPolicy (Never) say so.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
K8S_VERSION=${K8S_VERSION:-v1.37.2}
COREDNS_VERSION=${COREDNS_VERSION:-v1.15.0}
# Keyed by the probe's source and this script (it holds CoreDNS's main).
probe_hash=$(cat "$here"/probe/*.go "$here"/probe/go.mod "$0" | sha256sum | cut -c1-12)
cache=${XDG_CACHE_HOME:-$HOME/.cache}/egress-proxies/node-images/k8s-$K8S_VERSION-coredns-$COREDNS_VERSION-$probe_hash
if [ -f "$cache/refs" ]; then
  echo "$cache"
  exit 0
fi
log() { echo "node-images: $*" >&2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$cache"

pause_ref=localhost/egress-e2e/pause:${K8S_VERSION#v}
coredns_ref=localhost/egress-e2e/coredns:${COREDNS_VERSION#v}
probe_ref=localhost/egress-e2e/probe:$probe_hash

log "building pause from k8s.io/kubernetes@$K8S_VERSION"
src=$(cd "$work" && go mod download -json "k8s.io/kubernetes@$K8S_VERSION" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
mkdir "$work/bin"
gcc -Os -Wall -Werror -static -DVERSION="$K8S_VERSION" -o "$work/bin/pause" "$src/build/pause/linux/pause.c"

log "building CoreDNS $COREDNS_VERSION"
mkdir "$work/coredns"
(
  cd "$work/coredns"
  go mod init local/coredns-build > /dev/null 2>&1
  # CoreDNS's own main imports every plugin (cloud DNS providers and all);
  # this one registers those of the Corefile, in CoreDNS's order.
  cat > main.go <<'GO'
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/ready"
	_ "github.com/coredns/coredns/plugin/reload"
)

func init() {
	dnsserver.Directives = []string{"reload", "ready", "health", "errors", "log", "loadbalance", "cache", "kubernetes"}
}

func main() { coremain.Run() }
GO
  go get "github.com/coredns/coredns@$COREDNS_VERSION" >&2
  go mod tidy >&2
  CGO_ENABLED=0 go build -trimpath -o ../bin/coredns .
)

log "building the probe"
(cd "$here/probe" && GOWORK=off CGO_ENABLED=0 go build -trimpath -o "$work/bin/probe" .)

# The repository's image builder (images/oci, docs/operator-image.md).
(cd "$root" && go build -trimpath -buildvcs=false -o "$work/oci-image" ./images/oci/cmd/oci-image)
# pack NAME REF USER: an image of the static binary bin/NAME, at /NAME,
# its entrypoint, run as USER.
pack() {
  "$work/oci-image" -o "$cache/$1.tar" -tag "$2" -binary "$work/bin/$1=/$1" -user "$3" \
    -source-date-epoch 0 > /dev/null
}
# The pause image's user is Kubernetes' (65535); the others', nonroot.
pack pause "$pause_ref" 65535:65535
pack coredns "$coredns_ref" 65532:65532
pack probe "$probe_ref" 65532:65532
cat > "$cache/refs" <<EOF
PAUSE_IMAGE=$pause_ref
COREDNS_IMAGE=$coredns_ref
PROBE_IMAGE=$probe_ref
EOF
echo "$cache"
