package proxy

import "testing"

// The credentials.Watcher may report a change before the controller is set
// up (its runner not made yet): nothing backs off then, and nothing
// panics.
func TestCredentialsChangedBeforeSetup(t *testing.T) {
	(&Reconciler{}).CredentialsChanged()
}
