#!/usr/bin/env bash
# make warm: builds every cache CI's lanes use, so that a run on this
# machine afterwards starts warm (docs/testing.md, "CI's budget"). On a
# fresh machine, start it first and work meanwhile:
#
#   nohup make warm > warm.log 2>&1 &
#
# Each step is what a lane would otherwise do cold, in the order .ci/run
# needs them: every lane's Debian packages and the pinned tools; the
# modules and compiled packages of vet and of the race tests
# (test binaries linked, not run); golangci-lint's cache; the control plane
# and the node's binaries (one cached build); the guest image; the node's
# images; both operator images and the release's arm64 one; the downstream lane's release candidate
# build. Everything lands in the caches the lanes read (Go's, and
# ~/.cache/egress-proxies); a second run finds them (2 min 45 s, most of
# it the downstream lane's own conformance runs).
# A step that fails is reported and the rest go on: the lane will fail on
# it with its own message.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$HOME/go/bin:$PATH"
CI_TIMINGS=${WARM_TIMINGS:-$PWD/bin/warm-timings.txt}
. hack/ci/steps.sh
failed=()
trap 'ci_report "make warm${failed[*]:+; FAILED: ${failed[*]}}"' EXIT
warm() { ci_step "$@" || failed+=("$1"); }

warm packages env APT_SETS=@all hack/install-deps.sh
# vet downloads and compiles every dependency as the tests' build does
# without -race (go mod download would also write every module's sums into
# go.work.sum, leaving the checkout changed).
warm vet make --no-print-directory -k vet
# The race tests' binaries compiled and linked, not run.
warm race-test-build make --no-print-directory test-build
warm lint make --no-print-directory -k lint
warm control-plane-and-node hack/control-plane.sh node
warm guest-image images/recipes/debian-proxy/build.sh
warm node-images hack/e2e/node/images.sh
warm operator-image make --no-print-directory -s image-operator
warm operator-image-libvirt make --no-print-directory -s image-operator PROVIDERS=libvirt
# The arm64 build of the pure-Go image: 230 s cold, 10 s from the cache.
warm release-artifacts make --no-print-directory release-artifacts
warm downstream make --no-print-directory downstream
[ ${#failed[@]} -eq 0 ]
