#!/usr/bin/env bash
# Builds a local Kubernetes control plane from source — kube-apiserver and
# etcd — into a cache outside the repository keyed by version, and prints
# the directory, which is what KUBEBUILDER_ASSETS must point at. A second
# run finds the binaries and builds nothing.
#
#   export KUBEBUILDER_ASSETS=$(hack/control-plane.sh)
#   hack/control-plane.sh kubectl   # also builds kubectl of the same version
#
# kube-apiserver comes from the module k8s.io/kubernetes, whose staging
# modules (k8s.io/api, k8s.io/apiserver, …) are required at v0.0.0 and
# replaced by directories in its own repository; a build outside that
# repository replaces each with the published k8s.io/<name> at the matching
# v0.x version. etcd is a three-line main over etcdmain.
set -euo pipefail

K8S_VERSION=${K8S_VERSION:-v1.37.2}
STAGING_VERSION=${STAGING_VERSION:-v0.${K8S_VERSION#v1.}}
ETCD_VERSION=${ETCD_VERSION:-v3.6.16}
cache=${XDG_CACHE_HOME:-$HOME/.cache}/egress-proxies/control-plane/k8s-$K8S_VERSION-etcd-$ETCD_VERSION

want_kubectl=false
[ "${1:-}" = kubectl ] && want_kubectl=true
if [ -x "$cache/kube-apiserver" ] && [ -x "$cache/etcd" ] && { ! $want_kubectl || [ -x "$cache/kubectl" ]; }; then
  echo "$cache"
  exit 0
fi
mkdir -p "$cache"
log() { echo "control-plane: $*" >&2; }

# build_kubernetes <cmd>: builds k8s.io/kubernetes/cmd/<cmd> into the cache.
build_kubernetes() {
  local cmd=$1 work; work=$(mktemp -d)
  trap 'rm -rf "$work"' RETURN
  cd "$work"
  go mod init local/kube-apiserver-build >/dev/null 2>&1
  local gomod
  gomod=$(go mod download -json "k8s.io/kubernetes@$K8S_VERSION" | sed -n 's/^\t"GoMod": "\(.*\)",$/\1/p')
  local staging
  staging=$(grep -E '^\s+k8s\.io/[a-z0-9-]+ v0\.0\.0$' "$gomod" | awk '{print $1}' | sort -u)
  [ -n "$staging" ] || { log "found no staging modules in $gomod"; return 1; }
  for m in $staging; do
    go mod edit -replace "$m=$m@$STAGING_VERSION"
  done
  go get "k8s.io/kubernetes/cmd/$cmd@$K8S_VERSION" >&2
  CGO_ENABLED=0 go build -trimpath -o "$cache/$cmd.tmp" "k8s.io/kubernetes/cmd/$cmd"
  mv "$cache/$cmd.tmp" "$cache/$cmd"
}

build_etcd() {
  local work; work=$(mktemp -d)
  trap 'rm -rf "$work"' RETURN
  cd "$work"
  go mod init local/etcd-build >/dev/null 2>&1
  cat > main.go <<'GO'
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
GO
  go get "go.etcd.io/etcd/server/v3@$ETCD_VERSION" >&2
  go mod tidy >&2
  CGO_ENABLED=0 go build -trimpath -o "$cache/etcd.tmp" .
  mv "$cache/etcd.tmp" "$cache/etcd"
}

[ -x "$cache/etcd" ] || { log "building etcd $ETCD_VERSION"; (build_etcd); }
[ -x "$cache/kube-apiserver" ] || { log "building kube-apiserver $K8S_VERSION (several minutes the first time)"; (build_kubernetes kube-apiserver); }
if $want_kubectl && [ ! -x "$cache/kubectl" ]; then log "building kubectl $K8S_VERSION"; (build_kubernetes kubectl); fi
echo "$cache"
