#!/usr/bin/env bash
# Installs what building and testing need on a fresh Debian 12 machine:
# Debian packages (cgo for the race detector, xorriso to read seed ISOs
# back, libvirt's headers and pkg-config for the libvirt provider's cgo
# bindings) and the pinned Go tools.
# Idempotent: a second run installs nothing.
set -euo pipefail
cd "$(dirname "$0")/.."

# The build's packages (hack/packages.sh); APT_SETS=@all, as make warm and
# .ci/run set it, installs every lane's at once.
hack/apt-ensure.sh ${APT_SETS:-@build}

command -v go >/dev/null || { echo "install-deps: Go is not on PATH (expected /usr/local/go/bin)" >&2; exit 1; }
make --no-print-directory tools
