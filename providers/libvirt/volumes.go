package libvirt

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path"
	"regexp"
	"slices"
	"sync"

	"github.com/go-logr/logr"
	"libvirt.org/go/libvirt"
	"libvirt.org/go/libvirtxml"

	"github.com/egress-proxies/egress-proxies-operator/contract"
	"github.com/egress-proxies/egress-proxies-operator/images/nocloud"
)

// maxCloudInit bounds CloudInit: the NoCloud seed's own limit.
const maxCloudInit = nocloud.MaxUserData

// The instance's secondary resources, found by name in the region's pool
// (secondary-resources: by-name): the overlay the domain boots from and
// the seed it reads cloud-init from.
func overlayName(instance string) string { return instance + ".qcow2" }
func seedName(instance string) string    { return instance + "-seed.iso" }

// baseRE matches the name of a base volume of any release and image
// (baseName).
var baseRE = regexp.MustCompile(`^egress-base-[a-z0-9]([-a-z0-9]*[a-z0-9])?-[0-9a-f]{12}\.[a-z0-9]+$`)

// instanceVolumes says, for each of the instance's volume names present in
// the pool, whether the operator made it (true) or not (false); a name
// absent is not in the map. libvirt keeps no metadata on a volume (its XML
// has name, key, capacity, target and backing store, nothing free:
// https://libvirt.org/formatstorage.html#storage-volume-xml), so the
// operator's own are told by what it writes:
//   - the overlay is the operator's when its backing store is a base
//     volume of the operator (baseName) in the same pool: a disk another
//     process made under that name has its own backing file or none;
//   - the seed is the operator's only beside the operator's overlay: Create
//     makes the seed after the overlay, and every delete removes the seed
//     first, so a seed of the operator's never stands alone.
func (p *Provider) instanceVolumes(ctx context.Context, region, poolName, name string) (map[string]bool, error) {
	out := map[string]bool{}
	err := p.do(ctx, region, "CheckVolumes", p.cfg.CallTimeout.Duration, func(c *libvirt.Connect) error {
		clear(out)
		return withPool(c, poolName, func(pool *libvirt.StoragePool) error {
			overlay, err := pool.LookupStorageVolByName(overlayName(name))
			if err == nil {
				doc, err := overlay.GetXMLDesc(0)
				_ = overlay.Free()
				switch {
				case isNotFound(classify(err)):
					// Deleted between the lookup and the read, by an
					// overlapping Delete: absent, as if never looked up.
				case err != nil:
					return err
				default:
					var v libvirtxml.StorageVolume
					if err := v.Unmarshal(doc); err != nil {
						return fmt.Errorf("volume %s: %w", overlayName(name), err)
					}
					out[overlayName(name)] = ownOverlay(&v)
				}
			} else if !isNotFound(classify(err)) {
				return err
			}
			seed, err := pool.LookupStorageVolByName(seedName(name))
			if err == nil {
				_ = seed.Free()
				out[seedName(name)] = out[overlayName(name)]
			} else if !isNotFound(classify(err)) {
				return err
			}
			return nil
		})
	})
	return out, err
}

// ownOverlay says the overlay's backing store is a base volume of the
// operator's in the overlay's own directory (its pool).
func ownOverlay(v *libvirtxml.StorageVolume) bool {
	if v.BackingStore == nil || v.Target == nil {
		return false
	}
	backing := v.BackingStore.Path
	return baseRE.MatchString(path.Base(backing)) && path.Dir(backing) == path.Dir(v.Target.Path)
}

// foreignVolume is Create's collision error for a volume of the
// instance's names that the operator did not make, or nil.
func foreignVolume(vols map[string]bool, region, pool string) error {
	for _, name := range slices.Sorted(maps.Keys(vols)) {
		if !vols[name] {
			return contract.Permanentf("volume %s in pool %s of region %s was not made by the operator (a seed beside no overlay of the operator's, or an overlay not backed by one of its base images); refusing to replace it", name, pool, region)
		}
	}
	return nil
}

// createOverlay creates the instance's qcow2 overlay on the base volume.
func (p *Provider) createOverlay(ctx context.Context, pl plan, name, base string) error {
	return p.do(ctx, pl.regionName, "CreateOverlay", p.cfg.CallTimeout.Duration, func(c *libvirt.Connect) error {
		return withPool(c, pl.region.Pool, func(pool *libvirt.StoragePool) error {
			capacity := uint64(pl.machine.DiskGiB) << 30
			if capacity == 0 {
				bv, err := pool.LookupStorageVolByName(baseName(pl.imageKey, pl.image))
				if err != nil {
					return err
				}
				info, err := bv.GetInfo()
				_ = bv.Free()
				if err != nil {
					return err
				}
				capacity = info.Capacity
			}
			doc, err := (&libvirtxml.StorageVolume{
				Name:     overlayName(name),
				Capacity: &libvirtxml.StorageVolumeSize{Value: capacity, Unit: "bytes"},
				Target:   &libvirtxml.StorageVolumeTarget{Format: &libvirtxml.StorageVolumeTargetFormat{Type: "qcow2"}},
				BackingStore: &libvirtxml.StorageVolumeBackingStore{
					Path: base, Format: &libvirtxml.StorageVolumeTargetFormat{Type: pl.image.Format},
				},
			}).Marshal()
			if err != nil {
				return contract.Permanentf("overlay %s: render XML: %w", overlayName(name), err)
			}
			vol, err := pool.StorageVolCreateXML(doc, 0)
			if err != nil {
				return err
			}
			return vol.Free()
		})
	})
}

// createSeed builds the NoCloud seed into a temporary file (its size must
// be known before the volume is made; the seed is never whole in memory,
// §1.4), then creates the seed volume and streams the file into it.
func (p *Provider) createSeed(ctx context.Context, pl plan, req contract.CreateRequest) error {
	f, err := os.CreateTemp("", "egress-seed-*.iso")
	if err != nil {
		return fmt.Errorf("seed for %s: %w", req.Name, err)
	}
	defer func() { _ = f.Close(); _ = os.Remove(f.Name()) }()
	netConfig, err := networkConfig(req)
	if err != nil {
		return fmt.Errorf("seed for %s: %w", req.Name, err)
	}
	size, err := nocloud.Seed{UserData: req.CloudInit, InstanceID: req.Name, Hostname: req.Name, NetworkConfig: netConfig}.WriteTo(f)
	if err != nil {
		return fmt.Errorf("seed for %s: %w", req.Name, err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("seed for %s: %w", req.Name, err)
	}
	name := seedName(req.Name)
	var w volumeWriter
	err = p.do(ctx, pl.regionName, "CreateSeed", p.cfg.CallTimeout.Duration, func(c *libvirt.Connect) error {
		return withPool(c, pl.region.Pool, func(pool *libvirt.StoragePool) error {
			vol, err := createVolume(pool, name, "raw", size)
			if err != nil {
				return err
			}
			defer func() { _ = vol.Free() }()
			w, err = p.openUpload(ctx, c, vol, size)
			return err
		})
	})
	if err != nil {
		return err
	}
	err = p.do(ctx, pl.regionName, "UploadSeed", p.cfg.CallTimeout.Duration, func(*libvirt.Connect) error {
		if _, err := io.Copy(w, f); err != nil {
			return err
		}
		return w.Finish()
	})
	if err != nil {
		_ = w.Abort()
		return err
	}
	logr.FromContextOrDiscard(ctx).V(contract.LogStep).Info("uploaded seed", "volume", name, "bytes", size)
	return nil
}

// createVolume makes a volume of the format and size in pool.
func createVolume(pool *libvirt.StoragePool, name, format string, size int64) (*libvirt.StorageVol, error) {
	doc, err := (&libvirtxml.StorageVolume{
		Name:     name,
		Capacity: &libvirtxml.StorageVolumeSize{Value: uint64(size), Unit: "bytes"},
		Target:   &libvirtxml.StorageVolumeTarget{Format: &libvirtxml.StorageVolumeTargetFormat{Type: format}},
	}).Marshal()
	if err != nil {
		return nil, contract.Permanentf("volume %s: render XML: %w", name, err)
	}
	return pool.StorageVolCreateXML(doc, 0)
}

// deleteVolume deletes a volume by name; one already gone is success.
func (p *Provider) deleteVolume(ctx context.Context, region, poolName, name string) error {
	err := p.do(ctx, region, "DeleteVolume", p.cfg.CallTimeout.Duration, func(c *libvirt.Connect) error {
		return withPool(c, poolName, func(pool *libvirt.StoragePool) error {
			vol, err := pool.LookupStorageVolByName(name)
			if err != nil {
				return err
			}
			defer func() { _ = vol.Free() }()
			return vol.Delete(0)
		})
	})
	if isNotFound(err) {
		return nil
	}
	return err
}

// withPool looks a pool up by name, runs fn on it and frees it.
func withPool(c *libvirt.Connect, name string, fn func(*libvirt.StoragePool) error) error {
	pool, err := c.LookupStoragePoolByName(name)
	if err != nil {
		return err
	}
	defer func() { _ = pool.Free() }()
	return fn(pool)
}

// volumeWriter is one upload into a volume.
type volumeWriter interface {
	io.Writer
	// Finish completes the upload; the daemon has every byte.
	Finish() error
	// Abort cuts it off.
	Abort() error
}

// openUpload starts streaming size bytes into vol.
func (p *Provider) openUpload(ctx context.Context, c *libvirt.Connect, vol *libvirt.StorageVol, size int64) (volumeWriter, error) {
	if p.hooks.upload != nil {
		return p.hooks.upload(ctx, c, vol, size)
	}
	st, err := c.NewStream(0)
	if err != nil {
		return nil, err
	}
	if err := vol.Upload(st, 0, uint64(size), 0); err != nil {
		_ = st.Free()
		return nil, err
	}
	return &streamWriter{st: st}, nil
}

// streamWriter writes into a virStorageVolUpload stream. Its calls block,
// and callers bound them (do, imageUpload.Write) by leaving a call that
// outlives its budget running in its goroutine. So the stream is ended
// by whoever uses it last, like list.go's domain handles: an Abort that
// finds a Send or Finish running marks the stream ended, and that call
// aborts and frees it when it returns. Aborting or freeing a stream a
// virStreamSend still runs on is a use after free.
type streamWriter struct {
	st stream

	mu    sync.Mutex
	busy  int  // calls on st running now
	ended bool // Finish succeeded or Abort was called: no call starts
	freed bool
}

// stream is what streamWriter uses of a *libvirt.Stream.
type stream interface {
	Send(p []byte) (int, error)
	Finish() error
	Abort() error
	Free() error
}

// errStreamEnded is a call's error on a stream already finished or
// aborted: it does not reach libvirt.
var errStreamEnded = errors.New("the upload stream has ended")

// use runs fn on the stream unless it has ended; if it ended while fn
// ran (an Abort), the last call to return aborts and frees it.
func (w *streamWriter) use(fn func() error) error {
	w.mu.Lock()
	if w.ended {
		w.mu.Unlock()
		return errStreamEnded
	}
	w.busy++
	w.mu.Unlock()
	defer func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.busy--; w.busy == 0 && w.ended {
			_ = w.abortAndFree() // the Abort that asked for it has returned
		}
	}()
	return fn()
}

func (w *streamWriter) Write(b []byte) (int, error) {
	n := 0
	err := w.use(func() error {
		for n < len(b) {
			sent, err := w.st.Send(b[n:])
			if err != nil {
				return err
			}
			n += sent
		}
		return nil
	})
	return n, err
}

// Finish completes the upload and frees the stream; after a failed
// Finish, Abort frees it.
func (w *streamWriter) Finish() error {
	if err := w.use(w.st.Finish); err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.ended = true
	if w.busy == 0 && !w.freed {
		w.freed = true
		_ = w.st.Free()
	}
	return nil
}

// Abort cuts the upload off: now, or when the call still running on the
// stream returns. It never waits for that call.
func (w *streamWriter) Abort() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.ended = true
	if w.busy > 0 || w.freed {
		return nil
	}
	return w.abortAndFree()
}

// abortAndFree ends the stream; w.mu is held and no call runs on it.
func (w *streamWriter) abortAndFree() error {
	if w.freed {
		return nil
	}
	w.freed = true
	err := w.st.Abort()
	_ = w.st.Free()
	return err
}
