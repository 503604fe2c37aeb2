#!/usr/bin/env bash
# Builds a local Kubernetes control plane from source — kube-apiserver and
# etcd — into a cache outside the repository keyed by version, and prints
# the directory, which is what KUBEBUILDER_ASSETS must point at. A second
# run finds the binaries and builds nothing.
#
#   export KUBEBUILDER_ASSETS=$(hack/control-plane.sh)
#   hack/control-plane.sh kubectl   # also builds kubectl of the same version
#   hack/control-plane.sh node      # also kubectl and the node's binaries:
#                                   # kubelet, kube-controller-manager,
#                                   # kube-scheduler, kube-proxy (make e2e)
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
# -v: the Kubernetes binaries report their version (below); the cache
# of those built before they did is not used.
cache=${XDG_CACHE_HOME:-$HOME/.cache}/egress-proxies/control-plane/k8s-$K8S_VERSION-etcd-$ETCD_VERSION-v

# The binaries asked for beyond kube-apiserver; node wants kubectl too.
extra=()
case ${1:-} in
  kubectl) extra=(kubectl) ;;
  node) extra=(kubectl kubelet kube-controller-manager kube-scheduler kube-proxy) ;;
esac
missing=()
for cmd in kube-apiserver "${extra[@]}"; do
  [ -x "$cache/$cmd" ] || missing+=("$cmd")
done
if [ -x "$cache/etcd" ] && [ ${#missing[@]} -eq 0 ]; then
  echo "$cache"
  exit 0
fi
mkdir -p "$cache"
log() { echo "control-plane: $*" >&2; }

# One build at a time: two runs at once (a test and make dev, two
# worktrees) would both build and rename over each other's files. The
# second waits here, then builds only what is still missing.
exec 9>"$cache.lock"
flock 9
missing=()
for cmd in kube-apiserver "${extra[@]}"; do
  [ -x "$cache/$cmd" ] || missing+=("$cmd")
done

# build_kubernetes <cmd>...: builds k8s.io/kubernetes/cmd/<cmd> of each
# into the cache, in one go build so the commands share their compiled
# packages (most of Kubernetes is common to all of them).
build_kubernetes() {
  local work; work=$(mktemp -d)
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
  local pkgs=() cmd
  for cmd in "$@"; do pkgs+=("k8s.io/kubernetes/cmd/$cmd"); done
  go get "${pkgs[@]/%/@$K8S_VERSION}" >&2
  # go build -o <dir>/ writes each command under its own name, in the
  # work tree; each reaches the cache by a rename, so a failed build
  # leaves no half-written binary there.
  mkdir out
  # The version a release build stamps (Kubernetes' hack/lib/version.sh):
  # without it the API server says v0.0.0-master, and what checks the
  # cluster's version refuses it (a chart's kubeVersion, kubectl's skew).
  local minor=${K8S_VERSION#v1.}; minor=${minor%%.*}
  local ldflags="" pkg
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldflags+=" -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
  done
  CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o out/ "${pkgs[@]}"
  for cmd in "$@"; do
    mv "out/$cmd" "$cache/$cmd.tmp"
    mv "$cache/$cmd.tmp" "$cache/$cmd"
  done
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
if [ ${#missing[@]} -gt 0 ]; then
  log "building ${missing[*]} $K8S_VERSION (several minutes the first time)"
  (build_kubernetes "${missing[@]}")
fi
echo "$cache"
