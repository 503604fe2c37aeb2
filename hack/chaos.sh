#!/usr/bin/env bash
# The random-kill test of docs/addresses.md's promise (make chaos): the
# operator, a process of its own on the simulated vCenter, SIGKILLed at
# random moments while pooled Proxies of one to three replicas are
# created, changed, scaled and deleted; it fails on any moment with one
# static address on two powered-on VMs, and on a run that does not settle
# (every Proxy serving, then every VM and address gone once deleted).
#   hack/chaos.sh [runs] [kills per run]   # default 5 runs of 20 kills
#   CHAOS_SEED=<n> replays a run's choices (its subtest names its seed);
#   BENCH_OPERATOR_LOG=<file> keeps every operator process's log.
set -euo pipefail
cd "$(dirname "$0")/.."
export KUBEBUILDER_ASSETS=${KUBEBUILDER_ASSETS:-$(hack/control-plane.sh)}
export CHAOS_RUNS=${1:-5} CHAOS_KILLS=${2:-20}
cd operator && exec go test -count=1 -run '^TestChaos$' -v -timeout 60m ./internal/bench/
