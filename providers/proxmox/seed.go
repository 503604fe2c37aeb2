package proxmox

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"os"
	"path"
	"strconv"
	"strings"

	pve "github.com/luthermonson/go-proxmox"

	"github.com/egress-proxies/egress-proxies-operator/images/nocloud"
)

// seedPrefix starts every seed ISO's file name; the VMID and the
// instance's name follow, so a seed is found by name from either
// (secondary-resources: explicit).
const seedPrefix = "egressproxies-"

// seedFile is the seed's file name for a VM: egressproxies-<vmid>-<name>.iso.
func seedFile(vmid int, name string) string {
	return fmt.Sprintf("%s%d-%s.iso", seedPrefix, vmid, name)
}

// seedVolid is the seed's volume ID on the zone's ISO storage.
func seedVolid(z Zone, vmid int, name string) string {
	return z.ISOStorage + ":iso/" + seedFile(vmid, name)
}

// uploadSeed builds the NoCloud seed into a temporary file (streamed, not
// held in memory: §1.4) and uploads it to the zone's ISO storage; a seed
// of the same name left by an earlier attempt is replaced, so the guest
// reads exactly this request's bytes. networkConfig, when set, is the
// seed's network-config (a static address, address.go).
func (p *Provider) uploadSeed(ctx context.Context, pl plan, name string, vmid int, userData, networkConfig []byte) error {
	f, err := os.CreateTemp("", "egressproxies-seed-*.iso")
	if err != nil {
		return fmt.Errorf("seed: %w", err)
	}
	defer func() { _ = f.Close(); _ = os.Remove(f.Name()) }()
	seed := nocloud.Seed{UserData: userData, InstanceID: fmt.Sprintf("%s-%d", name, vmid), Hostname: name, NetworkConfig: networkConfig}
	size, err := seed.WriteTo(f)
	if err != nil {
		return fmt.Errorf("seed: %w", err)
	}
	if err := p.deleteVolumes(ctx, pl.region, pl.zone, func(volid string) bool { return volid == seedVolid(pl.zone, vmid, name) }); err != nil {
		return err
	}
	var upid pve.UPID
	err = p.callWithin(ctx, pl.region, "UploadSeed", p.cfg.TaskTimeout.Duration, func(ctx context.Context, c conn) error {
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return err
		}
		return upload(ctx, c, pl.zone, seedFile(vmid, name), f, size, &upid)
	})
	if err != nil {
		return err
	}
	return p.waitTask(ctx, pl.region, upid, "seed upload")
}

// upload is POST /nodes/{node}/storage/{storage}/upload, made here rather
// than with go-proxmox's Storage.Upload/UploadReader: those take no
// context (§1.5 needs every call cancellable). pveproxy does not take
// chunked bodies, so the length is set from the file's size.
func upload(ctx context.Context, c conn, z Zone, filename string, body io.Reader, size int64, upid *pve.UPID) error {
	var head bytes.Buffer
	w := multipart.NewWriter(&head)
	if err := w.WriteField("content", "iso"); err != nil {
		return err
	}
	if _, err := w.CreateFormFile("filename", filename); err != nil {
		return err
	}
	prefix := head.Len()
	if err := w.Close(); err != nil {
		return err
	}
	all := head.Bytes()
	u := c.base + "/nodes/" + url.PathEscape(z.Node) + "/storage/" + url.PathEscape(z.ISOStorage) + "/upload"
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, io.MultiReader(bytes.NewReader(all[:prefix]), body, bytes.NewReader(all[prefix:])))
	if err != nil {
		return err
	}
	req.ContentLength = int64(len(all)) + size
	req.Header.Set("Content-Type", w.FormDataContentType())
	req.Header.Set("Accept", "application/json")
	req.Header.Set("Authorization", "PVEAPIToken="+c.token)
	res, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = res.Body.Close() }()
	var out struct {
		Data pve.UPID `json:"data"`
	}
	if err := json.NewDecoder(io.LimitReader(res.Body, 1<<20)).Decode(&out); err != nil {
		return fmt.Errorf("upload answer: %w", err)
	}
	*upid = out.Data
	return nil
}

// deleteVolumes deletes the ISO volumes of the zone's ISO storage that
// match, one imgdel task each; a volume already gone is fine. An upload
// still landing one of them is waited for first (settleUploads), or it
// would land after the list, behind the delete.
func (p *Provider) deleteVolumes(ctx context.Context, region string, z Zone, match func(volid string) bool) error {
	if err := p.settleUploads(ctx, region, z, match); err != nil {
		return err
	}
	var content []*pve.StorageContent
	err := p.call(ctx, region, "ListISOs", func(ctx context.Context, c conn) error {
		return c.api.Get(ctx, "/nodes/"+url.PathEscape(z.Node)+"/storage/"+url.PathEscape(z.ISOStorage)+"/content?content=iso", &content)
	})
	if err != nil {
		return err
	}
	for _, item := range content {
		if item == nil || !match(item.Volid) {
			continue
		}
		var upid pve.UPID
		err := p.call(ctx, region, "DeleteISO", func(ctx context.Context, c conn) error {
			return c.api.Delete(ctx, "/nodes/"+url.PathEscape(z.Node)+"/storage/"+url.PathEscape(z.ISOStorage)+"/content/"+url.PathEscape(item.Volid), &upid)
		})
		if err == nil {
			err = p.waitTask(ctx, region, upid, "seed delete")
		}
		if err != nil && !isNotFoundErr(err) {
			return err
		}
	}
	return nil
}

// isSeedOf reports whether volid is a seed of the VM vmid, whatever its name.
func isSeedOf(vmid int) func(string) bool {
	prefix := ":iso/" + seedPrefix + strconv.Itoa(vmid) + "-"
	return func(volid string) bool { return strings.Contains(volid, prefix) && strings.HasSuffix(volid, ".iso") }
}

// targetPrefix starts the line of an imgcopy task's log that names the
// file it writes (pve-storage src/PVE/API2/Storage/Status.pm upload: the
// worker prints it before its cp).
const targetPrefix = "target file: "

// settleUploads waits for the imgcopy tasks still running on the zone's
// node that write a matching volume of its ISO storage. An upload whose
// answer was lost — the call's deadline passed, the connection broke —
// may have reached PVE all the same: the worker it forked copies the file
// to the storage whatever became of the connection (Status.pm upload:
// fork_worker; pve-http-server AnyEvent.pm hands a complete body to the
// API and removes the temporary file only for a client gone before). Its
// file lands when the copy ends, so a list taken before then misses it
// and the file outlives the delete. The token sees only its own tasks
// (pve-manager PVE/API2/Tasks.pm node_tasks, without Sys.Audit); one
// whose log names no file yet is in its checks before the copy and is
// waited for too. A copy that failed lands nothing (the worker removes
// its target).
func (p *Provider) settleUploads(ctx context.Context, region string, z Zone, match func(volid string) bool) error {
	node := url.PathEscape(z.Node)
	var tasks []struct {
		UPID   pve.UPID `json:"upid"`
		Status string   `json:"status"`
	}
	err := p.call(ctx, region, "ListUploads", func(ctx context.Context, c conn) error {
		return c.api.Get(ctx, "/nodes/"+node+"/tasks?source=active&typefilter=imgcopy", &tasks)
	})
	if err != nil {
		return err
	}
	for _, t := range tasks {
		if t.Status != "RUNNING" {
			continue
		}
		var lines []struct {
			T string `json:"t"`
		}
		err := p.call(ctx, region, "TaskLog", func(ctx context.Context, c conn) error {
			return c.api.Get(ctx, "/nodes/"+node+"/tasks/"+url.PathEscape(string(t.UPID))+"/log", &lines)
		})
		if err != nil {
			return err
		}
		target, named := "", false
		for _, l := range lines {
			if f, ok := strings.CutPrefix(l.T, targetPrefix); ok {
				target, named = path.Base(f), true
			}
		}
		if named && !match(z.ISOStorage+":iso/"+target) {
			continue
		}
		var failed *TaskError
		if err := p.waitTask(ctx, region, t.UPID, "upload of "+cmp.Or(target, "a file")); err != nil && !errors.As(err, &failed) {
			return err
		}
	}
	return nil
}
