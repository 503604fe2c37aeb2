package proxy

import (
	"testing"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
)

// A Proxy of several replicas is looked at again when its most urgent
// replica needs it: soonest keeps the earlier delay, and a result that
// asks for no requeue yet takes the delay given.
func TestSoonestKeepsTheEarlierRequeue(t *testing.T) {
	for _, tc := range []struct {
		res  ctrl.Result
		d    time.Duration
		want time.Duration
	}{
		{ctrl.Result{RequeueAfter: time.Minute}, time.Second, time.Second},
		{ctrl.Result{RequeueAfter: time.Second}, time.Minute, time.Second},
		{ctrl.Result{RequeueAfter: time.Second}, time.Second, time.Second},
		{ctrl.Result{}, time.Minute, time.Minute},
	} {
		if got := soonest(tc.res, tc.d).RequeueAfter; got != tc.want {
			t.Errorf("soonest(%v, %v) = %v, want %v", tc.res.RequeueAfter, tc.d, got, tc.want)
		}
	}
}
