package binding

import (
	"strings"
	"testing"
)

func TestNoProxyHoldsTheClusterInOrderOnce(t *testing.T) {
	c := Cluster{
		Domain:          "cluster.example",
		APIServer:       []string{"10.96.0.1", "192.0.2.10"},
		ServiceNetworks: []string{"10.96.0.0/12"},
		PodNetworks:     []string{"10.244.0.0/24", "10.244.1.0/24", "10.244.0.0/24"},
	}
	got := NoProxy(c, []string{"internal.example", "10.96.0.1"})
	want := "localhost,127.0.0.1,::1,.svc,.cluster.example,10.96.0.1,192.0.2.10,10.96.0.0/12,10.244.0.0/24,10.244.1.0/24,internal.example"
	if got != want {
		t.Fatalf("NoProxy =\n %s\nwant\n %s", got, want)
	}
}

func TestNoProxyWithoutDomainKeepsSvc(t *testing.T) {
	got := NoProxy(Cluster{}, nil)
	if got != "localhost,127.0.0.1,::1,.svc" {
		t.Fatalf("NoProxy of an empty cluster = %q", got)
	}
	if got := NoProxy(Cluster{Domain: ".cluster.local"}, nil); !strings.HasSuffix(got, ",.svc,.cluster.local") {
		t.Fatalf("a domain written with its leading dot is not doubled: %q", got)
	}
}

func TestParseNoProxy(t *testing.T) {
	got, err := ParseNoProxy(" db.internal, .corp.example,,10.0.0.0/8, 192.0.2.7 ")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"db.internal", ".corp.example", "10.0.0.0/8", "192.0.2.7"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("ParseNoProxy = %q, want %q", got, want)
	}
	for value, wantErr := range map[string]string{
		"a.example,10.0.0.0/33": `entry 2 "10.0.0.0/33" is not a network`,
		"db internal":           `entry 1 "db internal" contains white space`,
		"x,,y/z":                `entry 3 "y/z" is not a network`,
	} {
		if _, err := ParseNoProxy(value); err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Errorf("ParseNoProxy(%q) = %v, want an error containing %q", value, err, wantErr)
		}
	}
}
