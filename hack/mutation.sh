#!/usr/bin/env bash
# Usage: hack/mutation.sh <module-dir> <package-dir> [run-regexp]
#
# Measures the mutation score of one package (the package directory and any
# below it) under its module's tests, with gremlins (the version pinned in
# the Makefile): every covered conditional, arithmetic, logical, loop-control
# and assignment operator is mutated in turn and the tests rerun; a mutant
# the tests still pass on LIVED.
#
#   hack/mutation.sh operator internal/controller
#   hack/mutation.sh contract/contracttest memprovider '^TestContract$'
#   make mutation MODULE=operator PKG=internal/controller
#
# run-regexp restricts the tests of every run, the coverage run included,
# to those `go test -run` would select (passed as GOFLAGS=-run=..., which
# gremlins' own `go test` calls honour; gremlins has no -run of its own).
#
# gremlins copies the module into temporary directories, where go.work does
# not apply and the sibling modules, required at an unpublished v0.1.0,
# exist on no proxy. So it runs on a temporary copy of the module whose
# go.mod replaces every other module of the repository with its directory in
# this checkout (hack/local-modfile.sh), with GOWORK=off. No committed file
# changes.
#
# Environment:
#   MUTATION_OUT        the JSON report (default /tmp/mutation/<module>-<pkg>.json);
#                       the run's log is written beside it (.log)
#   MUTATION_WORKERS    mutants tested at once (default 1: an envtest suite
#                       runs a control plane per run)
#   MUTATION_TIMEOUT_COEFFICIENT
#                       a mutant's run may take this many times the
#                       unmutated coverage run before it counts as timed out
#                       (default 5)
#   MUTATION_EXCLUDE    space-separated regexps of files (relative to the
#                       package directory) not to mutate, on top of
#                       generated code (zz_generated.*)
#   GREMLINS            the gremlins binary (default: built by make into the
#                       tools cache)
#   KUBEBUILDER_ASSETS  for the operator: default $(hack/control-plane.sh)
set -euo pipefail

usage="usage: hack/mutation.sh <module-dir> <package-dir> [run-regexp]"
module=${1:?$usage}
pkg=${2:?$usage}
run=${3:-}
module=${module%/}
pkg=${pkg%/}
root=$(cd "$(dirname "$0")/.." && pwd)

[ -f "$root/$module/go.mod" ] || { echo "mutation: $module is not a module of this repository (no $module/go.mod)" >&2; exit 2; }
[ -d "$root/$module/$pkg" ] || { echo "mutation: no directory $module/$pkg" >&2; exit 2; }
case "$run" in
  *[[:space:]]*) echo "mutation: the -run regexp must not contain white space (it travels in GOFLAGS): $run" >&2; exit 2 ;;
esac

slug=$(printf '%s-%s' "$module" "$pkg" | tr '/.' '__')
out=${MUTATION_OUT:-/tmp/mutation/$slug.json}
mkdir -p "$(dirname "$out")"
out=$(cd "$(dirname "$out")" && pwd)/$(basename "$out")
log=${out%.json}.log
workers=${MUTATION_WORKERS:-1}
coefficient=${MUTATION_TIMEOUT_COEFFICIENT:-5}
gremlins=${GREMLINS:-$(make -s --no-print-directory -C "$root" gremlins-path)}

if [ "$module" = operator ] && [ -z "${KUBEBUILDER_ASSETS:-}" ]; then
  KUBEBUILDER_ASSETS=$("$root/hack/control-plane.sh")
  export KUBEBUILDER_ASSETS
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/mutation.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# The module's working tree as it is now (uncommitted changes included),
# without the modules nested in it (contract/ holds contract/contracttest).
excludes=(--exclude=.git)
while read -r nested; do
  excludes+=("--exclude=./${nested#"$root/$module/"}")
done < <(find "$root/$module" -mindepth 2 -name go.mod -not -path '*/.git/*' -printf '%h\n')
mkdir -p "$tmp/mod" "$tmp/modfile"
tar -C "$root/$module" "${excludes[@]}" -cf - . | tar -C "$tmp/mod" -xf -
"$root/hack/local-modfile.sh" "$module" "$tmp/modfile" >/dev/null
cp "$tmp/modfile/go.mod" "$tmp/mod/go.mod"
if [ -f "$tmp/modfile/go.sum" ]; then cp "$tmp/modfile/go.sum" "$tmp/mod/go.sum"; fi

export GOWORK=off
if [ -n "$run" ]; then
  export GOFLAGS="${GOFLAGS:+$GOFLAGS }-run=$run"
fi

args=(unleash
  --workers "$workers"
  --timeout-coefficient "$coefficient"
  --output "$out"
  --exclude-files 'zz_generated\..*\.go$'
  # The defaults (arithmetic-base, conditionals-boundary,
  # conditionals-negation, increment-decrement, invert-negatives) and
  # these; the bitwise ones find nothing in this code base.
  --invert-logical --invert-negatives --invert-loopctrl
  --remove-self-assignments --invert-assignments)
for re in ${MUTATION_EXCLUDE:-}; do
  args+=(--exclude-files "$re")
done

echo "mutation: $module/$pkg${run:+ (go test -run $run)}, $workers worker(s), timeout coefficient $coefficient; $("$gremlins" --version 2>&1 | head -1)" | tee "$log"
start=$(date +%s)
rc=0
(cd "$tmp/mod/$pkg" && "$gremlins" "${args[@]}" "$tmp/mod/$pkg") 2>&1 | tee -a "$log" || rc=$?
elapsed=$(( $(date +%s) - start ))
if [ "$rc" -ne 0 ] || [ ! -s "$out" ]; then
  echo "mutation: gremlins failed (exit $rc); log in $log" >&2
  exit 1
fi

count() { jq --arg s "$1" '[.files[].mutations[] | select(.status == $s)] | length' "$out"; }
killed=$(count KILLED)
lived=$(count LIVED)
timedout=$(count "TIMED OUT")
notcovered=$(count "NOT COVERED")
notviable=$(count "NOT VIABLE")
efficacy=$(awk -v k="$killed" -v l="$lived" 'BEGIN { if (k + l == 0) print "n/a"; else printf "%.2f%%", 100 * k / (k + l) }')

{
  echo
  echo "mutation: $module/$pkg${run:+ (-run $run)}: wall time ${elapsed}s"
  echo "  killed:      $killed"
  echo "  lived:       $lived"
  echo "  timed out:   $timedout"
  echo "  not covered: $notcovered"
  echo "  not viable:  $notviable"
  echo "  efficacy:    $efficacy (killed / (killed + lived))"
  for s in LIVED "NOT COVERED" "TIMED OUT"; do
    jq -r --arg s "$s" '.files[] | .file_name as $f | .mutations[] | select(.status == $s) | "\($f)\t\(.line)\t\(.column)\t\(.type)"' "$out" |
      sort -t $'\t' -k1,1 -k2,2n -k3,3n |
      while IFS=$'\t' read -r file line col type; do
        printf '  %-11s %s:%s:%s %s: %s\n' "$s" "$pkg/$file" "$line" "$col" "$type" \
          "$(sed -n "${line}p" "$root/$module/$pkg/$file" | sed 's/^[[:space:]]*//')"
      done
  done
  echo "  report: $out"
} | tee -a "$log"
