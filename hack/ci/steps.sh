# shellcheck shell=bash
# Step timing for .ci/run: `ci_step NAME CMD...` runs CMD as one step and
# records its wall time and status; `ci_report` prints the table (each
# step's seconds and share of the run) and writes it to $CI_TIMINGS, a file
# CI keeps beside its log, so a closing note can quote it (docs/testing.md,
# "CI's budget").
#
# A step that fails is recorded as FAIL and ci_step returns its status;
# the caller decides whether the run goes on. The cpu column is how busy
# the machine's CPUs were during the step (all of them, 100% = every CPU
# the whole time, from /proc/stat): a long step with a low share waits on
# guests or services and is a candidate to overlap with another.

CI_TIMINGS=${CI_TIMINGS:-$PWD/bin/ci-timings.txt}
ci_start=$(date +%s)
ci_steps=()

# ci_cpu_ticks prints the CPUs' busy and total ticks since boot.
ci_cpu_ticks() {
  awk '$1 == "cpu" { total = 0; for (i = 2; i <= NF; i++) total += $i; print total - $5 - $6, total }' /proc/stat
}

ci_step() {
  local name=$1 t status busy0 total0 busy1 total1
  shift
  echo "::: ci: $name: $*" >&2
  t=$(date +%s)
  read -r busy0 total0 < <(ci_cpu_ticks)
  set +e
  "$@"
  status=$?
  set -e
  local secs=$(($(date +%s) - t))
  read -r busy1 total1 < <(ci_cpu_ticks)
  local cpu=$(((busy1 - busy0) * 100 / (total1 - total0 > 0 ? total1 - total0 : 1)))
  local result=ok
  [ "$status" -eq 0 ] || result="FAIL($status)"
  ci_steps+=("$name $secs $cpu $result")
  echo "::: ci: $name: $result in ${secs}s (cpu ${cpu}%)" >&2
  return "$status"
}

# ci_report [NOTE]: the table, printed and written to $CI_TIMINGS.
ci_report() {
  local total=$(($(date +%s) - ci_start))
  mkdir -p "$(dirname "$CI_TIMINGS")"
  {
    printf '%-32s %8s %7s %5s  %s\n' step seconds share cpu result
    local line name secs cpu result
    for line in "${ci_steps[@]}"; do
      read -r name secs cpu result <<<"$line"
      printf '%-32s %8d %6.1f%% %4d%%  %s\n' "$name" "$secs" "$(awk -v s="$secs" -v t="$total" 'BEGIN { print t ? 100 * s / t : 0 }')" "$cpu" "$result"
    done
    printf '%-32s %8d %6.1f%%        %d min %d s%s\n' total "$total" 100 $((total / 60)) $((total % 60)) "${1:+; $1}"
  } | tee "$CI_TIMINGS"
}

# ci_background NAME CMD...: runs CMD as a step in the background, its
# output kept in $CI_LOGS/NAME.log so the run's log stays readable;
# ci_wait NAME waits for it, prints that log and records the step like
# ci_step, marked (background) in the table: its seconds overlap the
# steps run meanwhile, and its cpu column is theirs too.
CI_LOGS=${CI_LOGS:-$(dirname "$CI_TIMINGS")/ci-logs}
declare -A ci_bg_pids=()
ci_background() {
  local name=$1 file
  shift
  file=$CI_LOGS/${name//\//_}
  mkdir -p "$CI_LOGS"
  echo "::: ci: $name: started in the background: $* (log: $file.log)" >&2
  (
    ci_steps=()
    status=0
    ci_step "$name" "$@" >"$file.log" 2>&1 || status=$?
    echo "${ci_steps[0]}" >"$file.step"
    exit "$status"
  ) &
  ci_bg_pids[$name]=$!
}
ci_wait() {
  local name=$1 status=0 row file=$CI_LOGS/${1//\//_}
  wait "${ci_bg_pids[$name]}" || status=$?
  echo "::: ci: $name (background) said:" >&2
  cat "$file.log" >&2 || true
  row=$(cat "$file.step" 2>/dev/null || echo "$name 0 0 FAIL(no-result)")
  ci_steps+=("$row (background)")
  echo "::: ci: $name (background): ${row##* }" >&2
  return "$status"
}
