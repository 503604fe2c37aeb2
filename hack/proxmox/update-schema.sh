#!/usr/bin/env bash
# update-schema.sh <pve-docs checkout> <ref> <version>
#
# Pins Proxmox VE's published API schema (pve-docs api-viewer/apidata.js at
# <ref>, the release <version>, e.g. 9.1.3) as pvefake's input: writes
# providers/proxmox/pvefake/schema/apidata-<version>.js.gz (gzip -n, so the
# bytes depend only on the input), records repository, version, commit and
# the sha256 of the uncompressed file in schema/SOURCE, and regenerates the
# facts the fake reads (make generate-pvefake-schema).
set -euo pipefail
[ $# -eq 3 ] || { echo "usage: $0 <pve-docs checkout> <ref> <version>" >&2; exit 2; }
docs=$1 ref=$2 version=$3
root=$(cd "$(dirname "$0")/../.." && pwd)
dir=$root/providers/proxmox/pvefake/schema
commit=$(git -C "$docs" rev-parse "$ref^{commit}")
tmp=$(mktemp /tmp/schema-apidata.XXXXXX)
trap 'rm -f "$tmp"' EXIT
git -C "$docs" show "$commit:api-viewer/apidata.js" >"$tmp"
sum=$(sha256sum "$tmp" | cut -d' ' -f1)
gzip -9 -n -c "$tmp" >"$dir/apidata-$version.js.gz"
# One line per version: version commit sha256 (uncompressed) repository.
line="$version $commit $sum https://git.proxmox.com/git/pve-docs.git"
touch "$dir/SOURCE"
{ grep -v "^$version " "$dir/SOURCE" || true; echo "$line"; } | sort -V >"$dir/SOURCE.new"
mv "$dir/SOURCE.new" "$dir/SOURCE"
echo "pinned pve-docs $ref ($commit) as PVE $version, sha256 $sum"
# SKIP_GENERATE=1 pins without regenerating (to pin several versions first).
[ -n "${SKIP_GENERATE:-}" ] || make -C "$root" --no-print-directory generate-pvefake-schema
