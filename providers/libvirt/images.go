package libvirt

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"libvirt.org/go/libvirt"
	"libvirt.org/go/libvirtxml"

	"github.com/egress-proxies/egress-proxies-operator/contract"
	"github.com/egress-proxies/egress-proxies-operator/images/fetch"
)

// staleAfter is how long a base volume may go unwritten before a writer
// that finds it incomplete takes it for a dead writer's and starts again.
const staleAfter = 5 * time.Minute

// baseName is the base volume of a catalogue entry: the key and the
// checksum's start, so a changed entry is a new volume and never mixes
// with the old one.
func baseName(key string, e fetch.Entry) string {
	return "egress-base-" + key + "-" + e.SHA256[:12] + "." + e.Format
}

// markerName is the completeness marker of a base volume: an empty volume
// made only after the upload finished and the checksum matched.
func markerName(base string) string { return base + ".complete" }

// ensureImage makes sure the region's pool holds the image's base volume,
// fetching it once per pool (images/fetch shares concurrent fetches and
// recognises a cut-off one), and returns the base volume's path.
func (p *Provider) ensureImage(ctx context.Context, pl plan) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, p.cfg.ImageTimeout.Duration)
	defer cancel()
	base := baseName(pl.imageKey, pl.image)
	dest := &poolDestination{p: p, region: pl.regionName, pool: pl.region.Pool}
	if err := p.fetcher.Ensure(ctx, dest, base, pl.image); err != nil {
		return "", err
	}
	var path string
	err := p.do(ctx, pl.regionName, "GetBaseVolume", p.cfg.CallTimeout.Duration, func(c *libvirt.Connect) error {
		return withPool(c, pl.region.Pool, func(pool *libvirt.StoragePool) error {
			vol, err := pool.LookupStorageVolByName(base)
			if err != nil {
				return err
			}
			defer func() { _ = vol.Free() }()
			path, err = vol.GetPath()
			return err
		})
	})
	if isNotFound(err) {
		// Deleted between the fetch and now: the next Create fetches it again.
		return "", fmt.Errorf("base volume %s vanished after the fetch: %w", base, errors.Unwrap(err))
	}
	return path, err
}

// poolDestination is a fetch.Destination backed by a storage pool: the
// copy streams into the base volume through virStorageVolUpload, and the
// marker volume says it is complete. The base volume is also the lock
// between writers: creating it is exclusive, and one that is incomplete
// and has not been written for staleAfter is a dead writer's.
type poolDestination struct {
	p            *Provider
	region, pool string
}

// Name implements fetch.Destination.
func (d *poolDestination) Name() string { return "libvirt:" + d.region + "/" + d.pool }

// Complete implements fetch.Destination.
func (d *poolDestination) Complete(ctx context.Context, key string) (bool, error) {
	var done bool
	err := d.p.do(ctx, d.region, "ImageComplete", d.p.cfg.CallTimeout.Duration, func(c *libvirt.Connect) error {
		return withPool(c, d.pool, func(pool *libvirt.StoragePool) error {
			for _, name := range []string{key, markerName(key)} {
				vol, err := pool.LookupStorageVolByName(name)
				if isNotFound(classify(err)) {
					return nil
				}
				if err != nil {
					return err
				}
				_ = vol.Free()
			}
			done = true
			return nil
		})
	})
	return done, err
}

// Begin implements fetch.Destination.
func (d *poolDestination) Begin(ctx context.Context, key string, size int64) (fetch.Upload, error) {
	if size < 0 {
		return nil, contract.Permanentf("image %s: the server sent no Content-Length; a volume upload needs the size first", key)
	}
	format := key[strings.LastIndexByte(key, '.')+1:]
	var w volumeWriter
	err := d.p.do(ctx, d.region, "ImageBegin", d.p.cfg.CallTimeout.Duration, func(c *libvirt.Connect) error {
		return withPool(c, d.pool, func(pool *libvirt.StoragePool) error {
			if old, err := pool.LookupStorageVolByName(key); err == nil {
				stale, err := isStale(old)
				if err == nil && stale {
					err = old.Delete(0)
				}
				_ = old.Free()
				if err != nil {
					return err
				}
				if !stale {
					return fetch.ErrInProgress
				}
			}
			vol, err := createVolume(pool, key, format, size)
			if isExists(classify(err)) {
				return fetch.ErrInProgress
			}
			if err != nil {
				return err
			}
			defer func() { _ = vol.Free() }()
			w, err = d.p.openUpload(ctx, c, vol, size)
			if err != nil {
				_ = vol.Delete(0)
			}
			return err
		})
	})
	if errors.Is(err, fetch.ErrInProgress) {
		return nil, fetch.ErrInProgress
	}
	if err != nil {
		return nil, err
	}
	return &imageUpload{ctx: ctx, d: d, key: key, w: w}, nil
}

// isStale reports whether an incomplete base volume has gone unwritten
// for staleAfter. A volume whose pool keeps no timestamps is stale.
func isStale(vol *libvirt.StorageVol) (bool, error) {
	doc, err := vol.GetXMLDesc(0)
	if err != nil {
		return false, err
	}
	var v libvirtxml.StorageVolume
	if err := v.Unmarshal(doc); err != nil {
		return false, err
	}
	if v.Target == nil || v.Target.Timestamps == nil || v.Target.Timestamps.Mtime == "" {
		return true, nil
	}
	return staleMtime(v.Target.Timestamps.Mtime), nil
}

// staleMtime reads libvirt's "1700000000.123456789"; an unreadable one
// counts as stale.
func staleMtime(mtime string) bool {
	secs, err := strconv.ParseFloat(mtime, 64)
	return err != nil || time.Since(time.Unix(int64(secs), 0)) > staleAfter
}

// imageUpload is one base image being written.
type imageUpload struct {
	ctx context.Context
	d   *poolDestination
	key string
	w   volumeWriter
}

// Write sends one piece, bounded by the call timeout: a daemon that stops
// reading cannot hold the fetch beyond it.
func (u *imageUpload) Write(b []byte) (int, error) {
	ctx, cancel := context.WithTimeout(u.ctx, u.d.p.cfg.CallTimeout.Duration)
	defer cancel()
	var n int
	err := run(ctx, func() (err error) {
		n, err = u.w.Write(b)
		return err
	})
	return n, err
}

// Commit finishes the stream and makes the marker.
func (u *imageUpload) Commit(ctx context.Context) error {
	return u.d.p.do(ctx, u.d.region, "ImageCommit", u.d.p.cfg.CallTimeout.Duration, func(c *libvirt.Connect) error {
		if err := u.w.Finish(); err != nil {
			return err
		}
		return withPool(c, u.d.pool, func(pool *libvirt.StoragePool) error {
			vol, err := createVolume(pool, markerName(u.key), "raw", 0)
			if isExists(classify(err)) {
				return nil
			}
			if err != nil {
				return err
			}
			return vol.Free()
		})
	})
}

// Abort cuts the stream off and deletes the partial base volume.
func (u *imageUpload) Abort(ctx context.Context) error {
	_ = u.w.Abort()
	return u.d.p.deleteVolume(ctx, u.d.region, u.d.pool, u.key)
}
