#!/usr/bin/env bash
# Tidies one module's go.mod and go.sum (make tidy/<module>). go mod tidy
# reads the module's own go.mod, not go.work, so it runs on the copy
# local-modfile.sh makes, and the result is copied back without the local
# replaces: no committed go.mod carries a replace (docs/architecture.md, Principles).
set -euo pipefail
module=${1:?usage: tidy.sh <module-dir>}
root=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

mapfile -t replaced < <("$root/hack/local-modfile.sh" "$module" "$tmp")
cd "$root/$module"
GOWORK=off go mod tidy -modfile="$tmp/go.mod"
# In-repo modules are required at their next release, which is what
# go.work replaces; tidy writes a zero pseudo-version for one it added.
next=v0.1.0
for path in "${replaced[@]}"; do
  go mod edit -modfile="$tmp/go.mod" -dropreplace="$path"
  if grep -q "^[[:space:]]*$path v0.0.0-00010101000000-000000000000" "$tmp/go.mod"; then
    go mod edit -modfile="$tmp/go.mod" -require="$path@$next"
  fi
done
cp "$tmp/go.mod" go.mod
if [ -f "$tmp/go.sum" ]; then cp "$tmp/go.sum" go.sum; fi
