package metrics

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// A Create may take up to a provider's task timeout (vSphere's and
// Proxmox's 10 minutes) and still succeed: the call-duration buckets reach
// past it, so a p95 over slow Creates is a number, not +Inf.
func TestCallDurationBucketsReachTheLongestTask(t *testing.T) {
	h := ProviderCallDuration.WithLabelValues("buckets", "memory", "Create", "")
	h.Observe(9 * 60)
	m := &dto.Metric{}
	if err := h.(prometheus.Metric).Write(m); err != nil {
		t.Fatal(err)
	}
	for _, b := range m.GetHistogram().GetBucket() {
		if b.GetUpperBound() >= 9*60 && b.GetUpperBound() <= 15*60 && b.GetCumulativeCount() == 1 {
			return
		}
	}
	t.Errorf("a 9-minute Create falls in no bucket between 9 and 15 minutes: %v", m.GetHistogram().GetBucket())
}
