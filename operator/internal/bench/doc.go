// Package bench measures the operator against the bare vSphere SDK on the
// same simulated vCenter in the same run (hack/bench-vsphere.sh,
// hack/bench-fleet.sh), and kills it at random there to hold it to its
// address promise (TestChaos, hack/chaos.sh). It has only tests.
package bench
