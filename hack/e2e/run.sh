#!/usr/bin/env bash
# The end-to-end lane (make e2e): the operator installed as users install
# it, on a real Kubernetes node, turns a Proxy into a real QEMU VM that a
# client Pod uses. On a fresh Debian 12 machine, as root:
#   1. installs the Debian packages it needs, with no service started;
#   2. builds the guest image (images/recipes/debian-proxy, cached);
#   3. builds the operator's libvirt image (make image-operator), the
#      release manifest (make release-manifests), the node's binaries and
#      images (cached) and the test driver (operator/test/e2e, tag e2e);
#   4. starts a private libvirtd, virtlogd, NAT network and pool in a
#      network namespace of its own, with an sshd in front of them
#      (hack/e2e/libvirt-up.sh, ssh-up.sh), and a real single-node
#      Kubernetes cluster in it (hack/e2e/node-up.sh) with the operator's
#      image imported, which a Pod proves usable (hack/e2e/node-check.sh);
#   5. runs the driver inside that namespace: kubectl apply of
#      dist/install.yaml, the providers config and the credentials Secret
#      (make libvirt-secret; libvirt over qemu+libssh2://), an
#      AddressPool and a Proxy of it: its address known before the VM
#      exists, the VM Ready on exactly it, a client Pod through its
#      Service seen by the origin from it, a refused client, a port change
#      replacing the VM on the same address (the outage measured), the
#      leader killed during a second Proxy's provisioning, delete; then
#      the manifest's install deleted and the operator installed again
#      from the Helm chart (make release-chart), a Proxy Ready and deleted
#      on it, helm uninstall;
#   6. tears everything down, also when a step failed, after printing
#      the guests' serial consoles and the operator's log on failure.
# Nothing leaves loopback and the namespace; libvirt's `default` network
# and the root namespace's libvirtd are never started.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
. hack/e2e/env.sh
log() { echo "e2e: $*" >&2; }
now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1fs", b - a }'; }
lane_start=$(now)

[ "$(id -u)" -eq 0 ] || { log "must run as root (packages, network namespace, loop devices)"; exit 1; }

# 1. Packages, with no service started (apt-ensure.sh: the root libvirtd
# must never run here).
hack/apt-ensure.sh @e2e @monitoring

# 2. The guest image (build.sh installs its own build dependencies).
t=$(now)
image=$(images/recipes/debian-proxy/build.sh)
image_time=$(secs "$t" "$(now)")
case $image_time in 0.*) image_time="$image_time (cached)" ;; esac
log "guest image $image ($image_time)"

# 3. Binaries, built here: the namespace cannot download anything.
# The node's binaries and images come with the control plane's, cached.
KUBEBUILDER_ASSETS=$(hack/control-plane.sh node)
export KUBEBUILDER_ASSETS
node_images=$(hack/e2e/node/images.sh)
# The operator as users get it: the libvirt build's image, imported into
# the node's containerd, and the release manifest.
t=$(now)
operator_image_tar=$(make --no-print-directory -s image-operator PROVIDERS=libvirt)
version=$(cat VERSION)
operator_image_time=$(secs "$t" "$(now)")
log "operator image $operator_image_tar ($operator_image_time)"
make --no-print-directory -s release-manifests
make --no-print-directory -s release-chart > /dev/null
helm=$(make --no-print-directory -s helm-path)
mkdir -p bin
(cd operator && go test -c -tags e2e -o ../bin/e2e.test ./test/e2e)

# One lane per state directory at a time: its namespace and directory are
# named by E2E_NETNS and E2E_STATE (hack/e2e/env.sh), and the clean-up of
# an interrupted lane below must not tear down a running one.
exec 9>"$E2E_STATE.lock"
if ! flock -n 9; then
  log "another lane runs; waiting for it (at most 30 min)"
  flock -w 1800 9 || { log "it did not finish"; exit 1; }
fi

# 4–6. The lane, torn down on any exit.
status=1
finish() {
  if [ "$status" -ne 0 ]; then
    log "FAILED; what the guests and the operator said:"
    for f in "$E2E_STATE"/serial/*; do
      [ -f "$f" ] && { echo "----- serial console $f (last 150 lines)"; tail -n 150 "$f"; }
    done
    for f in "$E2E_STATE"/lv/log/qemu/*.log; do
      [ -f "$f" ] && { echo "----- QEMU log $f"; tail -n 30 "$f"; }
    done
    [ -f "$E2E_STATE/operator.log" ] && { echo "----- operator log (last 200 lines)"; tail -n 200 "$E2E_STATE/operator.log"; }
    for f in "$E2E_STATE"/node/log/*.log; do
      [ -f "$f" ] && { echo "----- node: $f (last 30 lines)"; tail -n 30 "$f"; }
    done
  fi
  local timings t
  timings=""
  [ -f "$E2E_STATE/timings" ] && timings=$(tr '\n' ' ' < "$E2E_STATE/timings")
  [ -f "$E2E_STATE/node/timings" ] && timings="$(tr '\n' ' ' < "$E2E_STATE/node/timings")$timings"
  t=$(now)
  hack/e2e/node-down.sh 9>&-
  hack/e2e/libvirt-down.sh 9>&-
  log "teardown $(secs "$t" "$(now)")"
  if [ "$status" -eq 0 ]; then
    log "timings: image build $image_time; operator image $operator_image_time; ${timings}lane total $(secs "$lane_start" "$(now)")"
    log "ok"
  fi
}
trap finish EXIT
trap 'exit 130' INT TERM # so an interrupted lane is torn down too
# The daemons and the driver's children must not inherit the lock (9>&-).
hack/e2e/node-down.sh 9>&- # a lane interrupted before its teardown
hack/e2e/libvirt-down.sh 9>&-
hack/e2e/libvirt-up.sh 9>&-
E2E_NODE_IMAGES=$operator_image_tar hack/e2e/node-up.sh 9>&-
hack/e2e/node-check.sh 9>&-

export E2E_URI E2E_POOL E2E_NET E2E_HOST_IP E2E_SUBNET E2E_OUTSIDE_IP E2E_POD_CIDR E2E_STATE E2E_KUBECONFIG
export E2E_SSH_USER E2E_SSH_PORT E2E_SSH_KEY E2E_SSH_KNOWN_HOSTS
export E2E_IMAGE=$image E2E_ROOT=$root E2E_KUBECTL=$KUBEBUILDER_ASSETS/kubectl E2E_MANIFEST=$root/dist/install.yaml
export E2E_OPERATOR_IMAGE=egress-proxies-operator:$version-libvirt
export E2E_HELM=$helm E2E_CHART=$root/dist/egress-proxies-operator-$version.tgz
export E2E_MONITORING=$root/dist/monitoring.yaml
E2E_CLIENT_IMAGE=$(. "$node_images/refs" && echo "$PROBE_IMAGE")
export E2E_CLIENT_IMAGE
ip netns exec "$E2E_NETNS" "$root/bin/e2e.test" -test.v -test.count=1 -test.timeout=25m 9>&-
status=0
