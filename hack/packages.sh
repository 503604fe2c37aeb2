# shellcheck shell=bash
# The Debian packages each step of the build and each CI lane needs, named
# once. `hack/apt-ensure.sh @NAME` installs one set, `@all` every set: make
# warm and .ci/run's first step install them all up front, so a package
# Debian no longer has fails the run in its first minutes, not when its
# lane starts an hour later (docs/testing.md, "CI's budget").

# Building and testing every module: cgo for the race detector, xorriso to
# read seed ISOs back, libvirt's headers for the libvirt provider's cgo.
packages_build="gcc libc6-dev make git xorriso libvirt-dev pkg-config"
# The guest image (images/recipes/debian-proxy/build.sh) and its boot.
packages_image="mmdebstrap extlinux syslinux-common fdisk qemu-utils e2fsprogs qemu-system-x86"
# The operator's images (images/recipes/operator): the CA bundle; cgo and
# libvirt for the libvirt variant. Their smoke test: runc; the libvirt
# variant's also an sshd and its client.
packages_operator_image="ca-certificates"
packages_operator_image_libvirt="gcc libc6-dev pkg-config libvirt-dev"
packages_operator_smoke="runc"
packages_operator_smoke_libvirt="gcc libc6-dev libvirt-dev openssh-server openssh-client"
# The end-to-end lane's private libvirt (hack/e2e/run.sh) and its
# Kubernetes node (hack/e2e/node-up.sh).
packages_e2e="libvirt-daemon-system libvirt-daemon-driver-qemu libvirt-clients libvirt-dev pkg-config
dnsmasq-base iptables iproute2 qemu-system-x86 qemu-utils gcc libc6-dev openssh-server"
packages_node="containerd runc containernetworking-plugins iptables conntrack iproute2 util-linux gcc libc6-dev openssl"
# The OpenStack lane (hack/openstack/up.sh). nova-compute-qemu only
# satisfies nova-compute's dependency: the fake driver needs no
# hypervisor, and libvirtd is never started.
packages_openstack="mariadb-server rabbitmq-server keystone glance-api placement-api neutron-server
neutron-linuxbridge-agent nova-api nova-conductor nova-scheduler nova-compute nova-compute-qemu
python3-openstackclient uwsgi-plugin-python3 qemu-utils"
# The default cloud-init's two proxy servers, which the images module's
# tests run on loopback with the configuration it renders (no service is
# started by the install: apt-ensure.sh).
packages_proxies="tinyproxy squid"
# The monitoring kit's alert rules: promtool (Debian's prometheus package)
# checks and unit-tests them (operator/internal/release monitoring_test.go).
packages_monitoring="prometheus"
# Mutation testing (hack/mutation.sh) reads gremlins' report with jq; not
# part of @all (not in CI).
packages_mutation="jq"
# The sets @all installs: every one CI's steps use.
ci_package_sets="build image operator_image operator_image_libvirt operator_smoke operator_smoke_libvirt e2e node openstack proxies monitoring"

# The debconf answers a set needs before its first install, on stdout.
# OpenStack's packages would otherwise configure their databases through
# dbconfig-common at install time (openstack-pkg-tools' questions
# <package>/configure_db and dbconfig-common's <package>/dbconfig-install);
# the lane makes its own.
preseed_openstack() {
  local q
  for q in keystone glance-common placement-common neutron-common nova-common; do
    echo "$q $q/configure_db boolean false"
    echo "$q $q/dbconfig-install boolean false"
  done
}
