#!/usr/bin/env bash
# The modules as a downstream user gets them (docs/releasing.md).
#   hack/downstream.sh [provider...]   # default: vsphere proxmox openstack libvirt
#
# 1. A release candidate of every module: `make release` in a throwaway
#    clone of HEAD (requirements moved, tags <dir>/<version>), then
#    `make release-proxy` writes those tags into a directory in the GOPROXY
#    file layout.
# 2. The only step that may use the network: each module's graph, and
#    each downstream module's (step 3's and 4's go get), is downloaded
#    into the module cache, whose cache/download directory is itself in
#    the GOPROXY layout.
# 3. Per provider, in a fresh module outside the workspace (GOWORK=off),
#    in a network namespace of its own (no network at all), with only the
#    two local proxies and a fresh module cache: the README's commands
#    (its "downstream: provider" block), then the program they built run
#    on a config, and the module graph checked: that provider's SDK, no
#    other, no Kubernetes.
# 4. The operator the same way (the README's "downstream: operator"
#    block): built with -tags "vsphere proxmox", its binary's module list
#    (go version -m) holding exactly those two SDKs.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=hack/sdk-modules.sh
. "$root/hack/sdk-modules.sh"
all_providers=$(cd "$root/providers" && ls -d -- */ | tr -d /)
providers=${*:-$all_providers}
module=github.com/egress-proxies/egress-proxies-operator
work=$(mktemp -d)
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT

# A release candidate above every module's version: the highest version in
# versions.yaml, its patch number plus one, "-rc.downstream".
highest=$(awk '$1 ~ /:$/ && $2 ~ /^v/ {print $2}' "$root/versions.yaml" | sort -V | tail -1)
version=$(awk -F. -v v="$highest" 'BEGIN{split(v, p, "."); sub(/-.*/, "", p[3]); printf "%s.%s.%d-rc.downstream\n", p[1], p[2], p[3] + 1}')
echo "downstream: release candidate $version of every module, from $(git -C "$root" rev-parse --short HEAD)"

git clone --quiet "$root" "$work/repo"
export GIT_AUTHOR_NAME=downstream GIT_AUTHOR_EMAIL=downstream@localhost
export GIT_COMMITTER_NAME=downstream GIT_COMMITTER_EMAIL=downstream@localhost
make --no-print-directory -C "$work/repo" release VERSION="$version" MODULES=all >/dev/null
make --no-print-directory -C "$work/repo" release-proxy OUT="$work/proxy" >/dev/null

# Step 2: each module's own graph into the module cache, our modules from
# the local proxy (not in the checksum database: GONOSUMDB).
cache=$(go env GOMODCACHE)
for dir in $(awk '$1 ~ /:$/ && $2 ~ /^v/ {sub(/:$/, "", $1); print $1}' "$root/versions.yaml"); do
  (cd "$work/repo/$dir" && GOWORK=off GOFLAGS=-mod=mod GOPROXY="file://$work/proxy,$(go env GOPROXY)" \
    GONOSUMDB=$module go mod download)
done
# A downstream module's graph is not any of ours: pruning keeps other
# versions of the SDKs' dependencies in it (a go list -m all there read
# klauspost/compress v1.18.5, which no module of ours selects, and failed
# offline on a fresh machine). So each downstream module is also resolved
# here as step 3 will resolve it, with the network.
resolve() {
  local dir="$work/resolve-$1"; shift
  mkdir -p "$dir"
  (cd "$dir" && GOWORK=off GOFLAGS=-mod=mod GOPROXY="file://$work/proxy,$(go env GOPROXY)" GONOSUMDB=$module \
    sh -c 'go mod init example.com/resolve 2>/dev/null && go get "$@" && go list -m all >/dev/null' resolve "$@")
}
for provider in $providers; do
  resolve "$provider" -t "$module/providers/$provider@$version" "$module/contract/contracttest@$version"
done
resolve operator -tags "vsphere proxmox" "$module/operator/cmd@$version"

# offline runs a command with no network and nothing but the two local
# proxies: a network namespace of its own (as root; a user namespace else)
# with its loopback up, for the tests' fakes and simulators.
# -trimpath: the fresh module cache is a new directory every run, and
# without it the go command keys every compiled package by its directory,
# so each run compiled the operator's whole graph again (about 8 min on two
# CPUs); trimmed, a package compiled once is reused. It changes what the
# binaries record as file paths, not which modules resolve or how.
offline() {
  local ns=(unshare --net)
  [ "$(id -u)" = 0 ] || ns+=(--map-root-user)
  "${ns[@]}" sh -c 'ip link set lo up && exec "$@"' offline env GOWORK=off GOTOOLCHAIN=local GOSUMDB=off \
    GOPROXY="file://$work/proxy,file://$cache/cache/download" GOMODCACHE="$work/modcache" \
    GOFLAGS="${GOFLAGS:+$GOFLAGS }-trimpath" "$@"
}

# block prints the README's fenced block after the marker, without its
# first line (the variables, which the caller sets).
block() {
  awk -v m="<!-- downstream: $1 -->" '$0 == m {on = 1; next} on && /^```sh/ {inb = 1; next} inb && /^```/ {exit} inb' "$root/README.md" | tail -n +2
}
[ -n "$(block provider)" ] && [ -n "$(block operator)" ] || { echo "downstream: README.md lost its downstream blocks" >&2; exit 1; }

# sdk_of is the SDK pattern of a provider (hack/sdk-modules.sh); a
# provider without one fails here rather than pass every check.
sdk_of() {
  local v="sdk_$1"
  [ -n "${!v:-}" ] || { echo "downstream: hack/sdk-modules.sh has no sdk_$1" >&2; exit 1; }
  echo "${!v}"
}
for p in $all_providers; do sdk_of "$p" >/dev/null; done
status=0
for provider in $providers; do
  echo "downstream: providers/$provider"
  dir="$work/my-$provider"
  mkdir -p "$dir"
  sed "s/PROVIDER/$provider/g" "$root/hack/downstream/main.go.tmpl" > "$dir/main.go"
  log="$work/$provider.log"
  if ! (cd "$dir" && offline bash -euo pipefail -c "provider=$provider version=$version module=$module; $(block provider)") > "$log" 2>&1; then
    cat "$log"; echo "downstream: providers/$provider: the README's commands failed" >&2; status=1; continue
  fi
  grep -E '^(ok|---|FAIL)' "$log" || true
  "$dir/my-$provider" "$root/hack/downstream/$provider.json" || { status=1; continue; }
  graph=$(cd "$dir" && offline go list -m all)
  others=""
  for p in $all_providers; do [ "$p" = "$provider" ] || others+="${others:+|}$(sdk_of "$p")"; done
  if ! grep -qE "^($(sdk_of "$provider"))" <<<"$graph"; then
    echo "downstream: providers/$provider: its SDK is not in the graph" >&2; status=1
  fi
  if found=$(grep -E "^($others|$kubernetes)" <<<"$graph"); then
    echo "downstream: providers/$provider: the graph holds what it must not:" >&2; echo "$found" >&2; status=1
  fi
  echo "downstream: providers/$provider: ok ($(wc -l <<<"$graph") modules; $(grep -E "^($(sdk_of "$provider"))" <<<"$graph" | tr '\n' ' '))"
done

echo "downstream: operator -tags \"vsphere proxmox\""
dir="$work/my-operator"
mkdir -p "$dir"
if ! (cd "$dir" && offline bash -euo pipefail -c "version=$version module=$module; $(block operator)") > "$work/operator.log" 2>&1; then
  cat "$work/operator.log"; echo "downstream: operator: the README's commands failed" >&2; exit 1
fi
deps=$(go version -m "$dir/egress-proxies-operator" | awk '$1 == "dep" {print $2}')
for want in "$sdk_vsphere" "$sdk_proxmox"; do
  grep -qE "^($want)" <<<"$deps" || { echo "downstream: operator: $want is not in the binary" >&2; status=1; }
done
if found=$(grep -E "^($sdk_openstack|$sdk_libvirt)" <<<"$deps"); then
  echo "downstream: operator: the binary holds SDKs it was not built with:" >&2; echo "$found" >&2; status=1
fi
echo "downstream: operator: $(grep -E "^($sdk_vsphere|$sdk_proxmox)" <<<"$deps" | tr '\n' ' ')in the binary; $(wc -l <<<"$deps") modules"
exit $status
