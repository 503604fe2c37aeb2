package openstack

import (
	"context"
	"fmt"
	"testing"

	"github.com/egress-proxies/egress-proxies-operator/contract"
	"github.com/egress-proxies/egress-proxies-operator/providers/openstack/osfake"
)

// ListByTag reads every page of Nova's list: Nova ends
// a page at [api]max_limit servers and links on with a marker, and a
// full last page links to an empty one (nova/api/openstack/common.py
// get_limit_and_marker, ViewBuilder._get_collection_links). The fake's
// page is lowered to 2; 4 servers fill two pages exactly, 5 spill onto a
// third.
func TestListReadsEveryPage(t *testing.T) {
	for _, n := range []int{4, 5} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			c := startCloud(t, func(o *osfake.Options) { o.MaxLimit = 2 })
			p := c.provider(t)
			ctx := context.Background()
			for i := range n {
				req := request(fmt.Sprintf("proxy-page-%d", i))
				req.UID = fmt.Sprintf("5f1d7c2e-8a4b-4c3d-9e2f-%012d", i)
				if _, err := p.Create(ctx, req); err != nil {
					t.Fatal(err)
				}
			}
			got, err := p.ListByTag(ctx, contract.LabelManaged, testOwner)
			if err != nil || len(got) != n {
				t.Errorf("ListByTag = %d servers, %v; want %d", len(got), err, n)
			}
		})
	}
}
