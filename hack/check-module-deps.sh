#!/usr/bin/env bash
# Checks that a module's dependency graph, as a downstream user resolves it
# (GOWORK=off), holds none of the modules it must not: the contract stays
# free of every SDK and of Kubernetes; a provider module holds no other
# provider's SDK (docs/architecture.md, Principles: that isolation is why the modules exist).
set -euo pipefail
module=${1:?usage: check-module-deps.sh <module-dir>}

# shellcheck source=hack/sdk-modules.sh
. "$(dirname "$0")/sdk-modules.sh"
otel_sdk='go.opentelemetry.io/otel/sdk'

case "$module" in
  contract) deny="$sdk_vsphere|$sdk_proxmox|$sdk_libvirt|$sdk_openstack|$kubernetes|$otel_sdk" ;;
  contract/contracttest) deny="$sdk_vsphere|$sdk_proxmox|$sdk_libvirt|$sdk_openstack|$kubernetes" ;;
  providers/vsphere) deny="$sdk_proxmox|$sdk_libvirt|$sdk_openstack|$kubernetes" ;;
  providers/proxmox) deny="$sdk_vsphere|$sdk_libvirt|$sdk_openstack|$kubernetes" ;;
  providers/libvirt) deny="$sdk_vsphere|$sdk_proxmox|$sdk_openstack|$kubernetes" ;;
  providers/openstack) deny="$sdk_vsphere|$sdk_proxmox|$sdk_libvirt|$kubernetes" ;;
  images) deny="$sdk_vsphere|$sdk_proxmox|$sdk_libvirt|$sdk_openstack|$kubernetes" ;;
  # The container image builder: go-containerregistry and the standard
  # library, no SDK and no Kubernetes.
  images/oci) deny="$sdk_vsphere|$sdk_proxmox|$sdk_libvirt|$sdk_openstack|$kubernetes" ;;
  *) echo "deps/$module: no rule; nothing to check"; exit 0 ;;
esac

# The module's graph alone, as a downstream user resolves it; in-repo
# modules not yet published come from their directories.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$(dirname "$0")/local-modfile.sh" "$module" "$tmp" >/dev/null
graph=$(cd "$module" && GOWORK=off go list -modfile="$tmp/go.mod" -m all)
found=$(grep -E "^($deny)" <<<"$graph" || true)
if [ -n "$found" ]; then
  echo "deps/$module: depends on modules it must not:" >&2
  echo "$found" >&2
  exit 1
fi
echo "deps/$module: ok ($(wc -l <<<"$graph") modules)"
