#!/usr/bin/env bash
# Usage: hack/mutation.sh <module-dir> <package-dir> [run-regexp]
#
# Measures the mutation score of one package (the package directory and any
# below it) under its module's tests, with gremlins (the version pinned in
# the Makefile): every covered conditional, arithmetic, logical, loop-control
# and assignment operator is mutated in turn and the tests rerun; a mutant
# the tests still pass on LIVED.
#
#   hack/mutation.sh operator internal/controller/proxy
#   hack/mutation.sh contract/contracttest memprovider '^TestContract$'
#   make mutation MODULE=operator PKG=internal/controller/proxy
#
# run-regexp restricts the tests of every run, the coverage run included,
# to those `go test -run` would select (passed as GOFLAGS=-run=..., which
# gremlins' own `go test` calls honour; gremlins has no -run of its own).
#
# gremlins takes a mutant whose position no coverage block holds for
# NOT COVERED, and Go's coverage blocks hold no switch case expression: the
# conditions of every `switch { case a && b: … }` would go untested, though
# they run. So the script reruns each mutant gremlins left NOT COVERED
# itself — the same token change, the same `go test -failfast`, the same
# timeout — and records what it got (KILLED, LIVED, TIMED OUT, NOT VIABLE;
# a mutant no test reaches comes back LIVED); the JSON marks those
# "rerun": true. MUTATION_RERUN_NOT_COVERED=0 keeps gremlins' verdict.
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
#                       gremlins' own report (.gremlins.json) and the run's
#                       log (.log) are written beside it
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
# jq reads gremlins' report (Debian's package, installed if missing).
"$root/hack/apt-ensure.sh" @mutation

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
raw=${out%.json}.gremlins.json
workers=${MUTATION_WORKERS:-1}
coefficient=${MUTATION_TIMEOUT_COEFFICIENT:-5}
gremlins=${GREMLINS:-$(make -s --no-print-directory -C "$root" gremlins-path)}

if [ "$module" = operator ] && [ -z "${KUBEBUILDER_ASSETS:-}" ]; then
  KUBEBUILDER_ASSETS=$("$root/hack/control-plane.sh")
  export KUBEBUILDER_ASSETS
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/mutation.XXXXXX")
trap 'rm -rf "$tmp"; [ -z "${reaper:-}" ] || kill "$reaper" 2>/dev/null' EXIT
# Everything the run makes in a temporary directory (gremlins' copies of
# the module, envtest's control planes) is under $tmp, so the reaper below
# can tell this run's control planes from anyone else's.
export TMPDIR=$tmp/tmp
mkdir -p "$TMPDIR"

# A mutant whose test binary panics, or that gremlins kills at its
# timeout, never stops the control plane its TestMain started (envtest
# stops it from there): that etcd and kube-apiserver live on, orphaned
# (parent 1), some 300 MiB each. Reap them every 10 s while gremlins runs:
# only those whose directories (envtest's k8s_test_framework_*) are this
# run's. make e2e's node runs the same binaries, daemonised (parent 1):
# the reaper killed its etcd and kube-apiserver when both ran at once.
if [ -n "${KUBEBUILDER_ASSETS:-}" ]; then
  (
    while sleep 10; do
      for pid in $(pgrep -f "^$KUBEBUILDER_ASSETS/(etcd|kube-apiserver) .*$TMPDIR/k8s_test_framework_" || true); do
        [ "$(ps -o ppid= -p "$pid" 2>/dev/null | tr -d ' ')" = 1 ] && kill -9 "$pid" 2>/dev/null
      done
    done
  ) &
  reaper=$!
fi

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
  --output "$raw"
  --exclude-files 'zz_generated\..*\.go$'
  # The defaults (arithmetic-base, conditionals-boundary,
  # conditionals-negation, increment-decrement, invert-negatives) and
  # these; the bitwise ones find nothing in this code base.
  --invert-logical --invert-negatives --invert-loopctrl
  --remove-self-assignments --invert-assignments)
for re in ${MUTATION_EXCLUDE:-}; do
  args+=(--exclude-files "$re")
done

version=$(go version -m "$gremlins" 2>/dev/null | awk '$1 == "mod" { print $2 " " $3 }')
echo "mutation: $module/$pkg${run:+ (go test -run $run)}, $workers worker(s), timeout coefficient $coefficient; ${version:-$gremlins}" | tee "$log"
start=$(date +%s)
rc=0
(cd "$tmp/mod/$pkg" && "$gremlins" "${args[@]}" "$tmp/mod/$pkg") 2>&1 | tee -a "$log" || rc=$?
if [ "$rc" -ne 0 ] || [ ! -s "$raw" ]; then
  echo "mutation: gremlins failed (exit $rc); log in $log" >&2
  exit 1
fi
cp "$raw" "$out"

# mutate <file> <line> <column> <type>: applies gremlins' token change at
# that position (its tables, internal/engine/mappings.go), in place.
mutate() {
  local LC_ALL=C # columns count bytes
  local file=$1 line=$2 col=$3 type=$4 text before rest t tok= repl=
  text=$(sed -n "${line}p" "$file")
  before=${text:0:col-1}
  rest=${text:col-1}
  for t in continue break '<<=' '>>=' '&^=' '&&' '||' '==' '!=' '<=' '>=' '++' '--' \
    '+=' '-=' '*=' '/=' '%=' '&=' '|=' '^=' '<<' '>>' '&^' '<' '>' '+' '-' '*' '/' '%' '&' '|' '^'; do
    if [ "${rest:0:${#t}}" = "$t" ]; then tok=$t; break; fi
  done
  case "$type:$tok" in
    ARITHMETIC_BASE:+) repl=- ;; ARITHMETIC_BASE:-) repl=+ ;; ARITHMETIC_BASE:\*) repl=/ ;;
    ARITHMETIC_BASE:/) repl='*' ;; ARITHMETIC_BASE:%) repl='*' ;;
    CONDITIONALS_BOUNDARY:\<) repl='<=' ;; CONDITIONALS_BOUNDARY:\<=) repl='<' ;;
    CONDITIONALS_BOUNDARY:\>) repl='>=' ;; CONDITIONALS_BOUNDARY:\>=) repl='>' ;;
    CONDITIONALS_NEGATION:==) repl='!=' ;; CONDITIONALS_NEGATION:!=) repl='==' ;;
    CONDITIONALS_NEGATION:\<) repl='>=' ;; CONDITIONALS_NEGATION:\<=) repl='>' ;;
    CONDITIONALS_NEGATION:\>) repl='<=' ;; CONDITIONALS_NEGATION:\>=) repl='<' ;;
    INCREMENT_DECREMENT:++) repl=-- ;; INCREMENT_DECREMENT:--) repl=++ ;;
    INVERT_ASSIGNMENTS:+=) repl='-=' ;; INVERT_ASSIGNMENTS:-=) repl='+=' ;;
    INVERT_ASSIGNMENTS:\*=) repl='/=' ;; INVERT_ASSIGNMENTS:/=) repl='*=' ;;
    INVERT_BITWISE:\&) repl='|' ;; INVERT_BITWISE:\|) repl='&' ;; INVERT_BITWISE:^) repl='&' ;;
    INVERT_BITWISE:\&^) repl='&' ;; INVERT_BITWISE:\<\<) repl='>>' ;; INVERT_BITWISE:\>\>) repl='<<' ;;
    INVERT_BWASSIGN:\&=) repl='|=' ;; INVERT_BWASSIGN:\|=) repl='&=' ;; INVERT_BWASSIGN:^=) repl='&=' ;;
    INVERT_BWASSIGN:\&^=) repl='&=' ;; INVERT_BWASSIGN:\<\<=) repl='>>=' ;; INVERT_BWASSIGN:\>\>=) repl='<<=' ;;
    INVERT_LOGICAL:\&\&) repl='||' ;; INVERT_LOGICAL:\|\|) repl='&&' ;;
    INVERT_LOOPCTRL:break) repl=continue ;; INVERT_LOOPCTRL:continue) repl=break ;;
    INVERT_NEGATIVES:-) repl=+ ;;
    REMOVE_SELF_ASSIGNMENTS:*=) repl='=' ;;
  esac
  if [ -z "$repl" ]; then
    echo "mutation: no $type change for \"${rest:0:8}\" at $file:$line:$col" >&2
    return 1
  fi
  {
    head -n $((line - 1)) "$file"
    printf '%s%s%s\n' "$before" "$repl" "${rest:${#tok}}"
    tail -n +$((line + 1)) "$file"
  } >"$tmp/mutant" && cat "$tmp/mutant" >"$file"
}

if [ "${MUTATION_RERUN_NOT_COVERED:-1}" != 0 ]; then
  # The same budget gremlins gives a mutant: the coefficient times the
  # unmutated coverage run.
  base=$(sed -n 's/.*Gathering coverage\.\.\. done in \([0-9.]*\)\(m\?s\).*/\1 \2/p' "$log" | head -1 |
    awk '{ if ($2 == "ms") print int($1 / 1000) + 1; else print int($1) + 1 }')
  budget=$(( ${base:-60} * coefficient ))
  mapfile -t uncovered < <(jq -r '.files[] | .file_name as $f | .mutations[] | select(.status == "NOT COVERED") | "\($f)\t\(.line)\t\(.column)\t\(.type)"' "$out")
  [ ${#uncovered[@]} -eq 0 ] || echo "mutation: rerunning the ${#uncovered[@]} mutants gremlins left NOT COVERED (${budget}s each at most)" | tee -a "$log"
  for m in "${uncovered[@]}"; do
    IFS=$'\t' read -r file line col type <<<"$m"
    src=$tmp/mod/$pkg/$file
    dir=./$(dirname "$pkg/$file") # the mutated file's package, as gremlins tests
    cp "$src" "$tmp/original"
    status="NOT VIABLE"
    if mutate "$src" "$line" "$col" "$type" && (cd "$tmp/mod" && go test -c -o "$tmp/mutant.test" "$dir" >/dev/null 2>&1); then
      trc=0
      # timeout signals the whole process group: the test binary and any
      # control plane it started go too.
      (cd "$tmp/mod" && timeout "$budget" go test -count=1 -failfast -timeout "$((budget + 2))s" "$dir" >/dev/null 2>&1) || trc=$?
      case $trc in
        0) status=LIVED ;;
        124) status="TIMED OUT" ;;
        *) status=KILLED ;;
      esac
    fi
    cat "$tmp/original" >"$src"
    printf '%12s %s at %s:%s:%s (rerun)\n' "$status" "$type" "$file" "$line" "$col" | tee -a "$log"
    jq --arg f "$file" --argjson l "$line" --argjson c "$col" --arg t "$type" --arg s "$status" \
      '(.files[] | select(.file_name == $f) | .mutations[] | select(.line == $l and .column == $c and .type == $t)) |= (.status = $s | .rerun = true)' \
      "$out" >"$tmp/out.json" && mv "$tmp/out.json" "$out"
  done
fi
elapsed=$(( $(date +%s) - start ))

count() { jq --arg s "$1" '[.files[].mutations[] | select(.status == $s)] | length' "$out"; }
killed=$(count KILLED)
lived=$(count LIVED)
timedout=$(count "TIMED OUT")
notcovered=$(count "NOT COVERED")
notviable=$(count "NOT VIABLE")
rerun=$(jq '[.files[].mutations[] | select(.rerun)] | length' "$out")
efficacy=$(awk -v k="$killed" -v l="$lived" 'BEGIN { if (k + l == 0) print "n/a"; else printf "%.2f%%", 100 * k / (k + l) }')
# The totals gremlins wrote, recounted after the reruns.
jq --argjson k "$killed" --argjson l "$lived" --argjson t "$timedout" --argjson n "$notcovered" --argjson v "$notviable" \
  '.mutants_killed = $k | .mutants_lived = $l | .mutants_timed_out = $t | .mutants_not_covered = $n | .mutants_not_viable = $v |
   .mutants_total = $k + $l + $v | .test_efficacy = (if $k + $l > 0 then 100 * $k / ($k + $l) else 0 end) |
   .mutations_coverage = (if $k + $l + $n > 0 then 100 * ($k + $l) / ($k + $l + $n) else 0 end)' \
  "$out" >"$tmp/out.json" && mv "$tmp/out.json" "$out"

{
  echo
  echo "mutation: $module/$pkg${run:+ (-run $run)}: wall time ${elapsed}s"
  echo "  killed:      $killed"
  echo "  lived:       $lived"
  echo "  timed out:   $timedout"
  echo "  not covered: $notcovered"
  echo "  not viable:  $notviable"
  echo "  efficacy:    $efficacy (killed / (killed + lived))"
  echo "  ($rerun of these were NOT COVERED by gremlins and rerun by this script)"
  for s in LIVED "NOT COVERED" "TIMED OUT" "NOT VIABLE"; do
    jq -r --arg s "$s" '.files[] | .file_name as $f | .mutations[] | select(.status == $s) | "\($f)\t\(.line)\t\(.column)\t\(.type)"' "$out" |
      sort -t $'\t' -k1,1 -k2,2n -k3,3n |
      while IFS=$'\t' read -r file line col type; do
        printf '  %-11s %s:%s:%s %s: %s\n' "$s" "$pkg/$file" "$line" "$col" "$type" \
          "$(sed -n "${line}p" "$tmp/mod/$pkg/$file" | sed 's/^[[:space:]]*//')"
      done
  done
  echo "  report: $out (gremlins' own: $raw)"
} | tee -a "$log"
