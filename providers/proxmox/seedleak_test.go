package proxmox

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/egress-proxies/egress-proxies-operator/contract"
	"github.com/egress-proxies/egress-proxies-operator/providers/proxmox/pvefake"
)

// A seed upload whose answer is lost — the call's deadline passed, the
// connection broke — after PVE forked its imgcopy worker lands when the
// copy ends, whatever became of the connection (pve-storage Status.pm
// upload). A Delete that lists the ISO storage before then must not miss
// it: the seed would outlive the Proxy. Found under load in CI, where a
// 16 MiB seed's upload passed its deadline and the seed landed after the
// rule's Delete.
func TestDeleteWaitsForALostUpload(t *testing.T) {
	f := startFake(t)
	p := f.provider(t)
	ctx := context.Background()
	req := request("lost-upload", testUID(11))

	release := f.s.HoldTasks("imgcopy") // the copy is still running …
	defer release()
	f.s.DropNextAnswer(pvefake.OpUpload) // … and the client has given up
	if _, err := p.Create(ctx, req); err == nil || contract.ClassOf(err) != contract.ClassTransient {
		t.Fatalf("Create with the upload's answer lost returned %v, want a transient error", err)
	}
	found, err := p.ListByTag(ctx, contract.LabelUID, req.UID)
	if err != nil || len(found) != 1 {
		t.Fatalf("ListByTag after the failed Create: %v, %v", found, err)
	}

	done := make(chan error, 1)
	go func() { done <- p.Delete(ctx, found[0].ProviderID) }()
	// The copy ends once Delete has seen it (it read the task's log), or
	// after Delete returned without looking.
	var derr error
wait:
	for {
		select {
		case derr = <-done:
			break wait
		default:
		}
		if readTaskLog(f) {
			release()
			derr = <-done
			break wait
		}
		time.Sleep(5 * time.Millisecond)
	}
	release()
	f.s.WaitTasks()
	if derr != nil {
		t.Fatalf("Delete: %v", derr)
	}
	if left := f.s.Inventory(); len(left) != 0 {
		t.Errorf("left behind after Delete: %v", left)
	}
}

// readTaskLog reports whether the fake served a task log read.
func readTaskLog(f *fake) bool {
	return slices.ContainsFunc(f.s.ServedCalls(), func(s pvefake.Served) bool {
		return s.Method == http.MethodGet && strings.HasSuffix(s.Path, "/tasks/{upid}/log")
	})
}
