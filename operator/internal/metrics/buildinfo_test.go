package metrics

import (
	"runtime"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestBuildInfo(t *testing.T) {
	c := NewBuildInfo([]string{"libvirt", "vsphere"})
	want := `# HELP egressproxies_build_info 1, labelled with the operator's version, VCS revision, Go version and compiled-in provider types.
# TYPE egressproxies_build_info gauge
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want+`egressproxies_build_info{goversion="`+runtime.Version()+`",providers="libvirt,vsphere",revision="",version="(devel)"} 1
`)); err != nil {
		t.Error(err)
	}
}
