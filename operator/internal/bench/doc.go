// Package bench measures the operator against the bare vSphere SDK on the
// same simulated vCenter in the same run (hack/bench-vsphere.sh). It has
// only tests.
package bench
