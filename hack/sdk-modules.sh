# Sourced: the module path patterns (extended regular expressions, matched
# at the start of a `go list -m` line) of each backend's vendor SDK and of
# Kubernetes, for the checks that a module graph holds only what it may
# (check-module-deps.sh, downstream.sh).
# shellcheck disable=SC2034
sdk_vsphere='github.com/vmware/govmomi'
sdk_proxmox='github.com/luthermonson/go-proxmox'
sdk_libvirt='libvirt.org/go/'
sdk_openstack='github.com/gophercloud/'
kubernetes='k8s.io/|sigs.k8s.io/'
