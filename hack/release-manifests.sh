#!/usr/bin/env bash
# Prints the install manifests: operator/config/default with the
# operator's image tagged VERSION (default: the VERSION file), the tag
# make image-operator gives it. make release-manifests writes them to
# dist/install.yaml; make render prints them. KUSTOMIZE is the pinned
# kustomize (make kustomize-path).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
: "${KUSTOMIZE:?KUSTOMIZE is not set: run make release-manifests or make render}"
version=${VERSION:-$(cat "$root/VERSION")}
# An image tag: what the runtime accepts after the colon.
[[ "$version" =~ ^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$ ]] ||
  { echo "VERSION \"$version\": not an image tag (letters, digits, '_', '.', '-'; at most 128; not starting with '.' or '-')" >&2; exit 2; }
# An overlay in a directory of its own, so the tree is rendered as it is
# committed, never edited (kustomize edit would).
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat >"$tmp/kustomization.yaml" <<EOK
resources:
  - $(realpath --relative-to="$tmp" "$root/operator/config/default")
images:
  - name: egress-proxies-operator
    newTag: "$version"
EOK
"$KUSTOMIZE" build "$tmp"
