package contract_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/egress-proxies/egress-proxies-operator/contract"
)

func TestDurationRoundTrip(t *testing.T) {
	var d contract.Duration
	if err := json.Unmarshal([]byte(`"1m30s"`), &d); err != nil || d.Duration != 90*time.Second {
		t.Fatalf(`Unmarshal("1m30s") = %v, %v`, d.Duration, err)
	}
	out, err := json.Marshal(d)
	if err != nil || string(out) != `"1m30s"` {
		t.Errorf("Marshal = %s, %v", out, err)
	}
	for _, bad := range []string{`30`, `"thirty"`, `""`} {
		if err := json.Unmarshal([]byte(bad), &d); err == nil {
			t.Errorf("Unmarshal(%s) accepted", bad)
		}
	}
}
