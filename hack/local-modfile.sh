#!/usr/bin/env bash
# Usage: local-modfile.sh <module-dir> <tmpdir>
# Writes <tmpdir>/go.mod (and go.sum): a copy of the module's go.mod that
# replaces every other in-repo module with its directory, and prints the
# in-repo module paths it replaced, one a line. The repository's modules
# require each other at versions not yet published; commands that read one
# go.mod alone (go mod tidy, GOWORK=off go list) run on this copy with
# -modfile, so no committed go.mod needs a replace.
set -euo pipefail
module=${1:?usage: local-modfile.sh <module-dir> <tmpdir>}
tmp=${2:?usage: local-modfile.sh <module-dir> <tmpdir>}
root=$(cd "$(dirname "$0")/.." && pwd)

cp "$root/$module/go.mod" "$tmp/go.mod"
if [ -f "$root/$module/go.sum" ]; then cp "$root/$module/go.sum" "$tmp/go.sum"; fi
while read -r dir; do
  [ "$dir" = "$module" ] && continue
  path=$(awk '/^module /{print $2; exit}' "$root/$dir/go.mod")
  (cd "$root/$module" && go mod edit -modfile="$tmp/go.mod" -replace="$path=$root/$dir")
  echo "$path"
done < <(cd "$root" && find . -name go.mod -not -path './.git/*' -printf '%h\n' | sed 's|^\./||' | sort)
