#!/usr/bin/env bash
# Installs what building and testing need on a fresh Debian 12 machine:
# Debian packages (cgo for the race detector, xorriso to read seed ISOs
# back, libvirt's headers and pkg-config for the libvirt provider's cgo
# bindings) and the pinned Go tools.
# Idempotent: a second run installs nothing.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(gcc libc6-dev make git xorriso libvirt-dev pkg-config)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "install-deps: missing Debian packages ${missing[*]}; run as root or install them" >&2
    exit 1
  fi
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

command -v go >/dev/null || { echo "install-deps: Go is not on PATH (expected /usr/local/go/bin)" >&2; exit 1; }
make --no-print-directory tools
