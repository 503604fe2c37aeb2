// Package fetch copies catalogue images into backend storage as a stream
// (contract §1.4): the image flows from its URL through a SHA-256 hash
// into the destination through a ring of four 1 MiB buffers, hashed on a
// second core while they are written, never whole in memory; the checksum
// is verified before the copy is marked complete; a cut-off copy is
// discarded and fetched again, never used; and when several Creates need
// the same image at the same place, it is fetched once.
//
// Each provider plugs in its storage as a Destination: a libvirt storage
// pool, a Proxmox storage, Glance, a vSphere datastore. DirDestination, a
// local directory, is the reference.
package fetch

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/sync/singleflight"

	"github.com/egress-proxies/egress-proxies-operator/contract"
)

// Entry is one image catalogue entry.
type Entry struct {
	// URL is where the image is downloaded from (http or https).
	URL string `json:"url"`
	// SHA256 is the image's expected checksum, hex-encoded.
	SHA256 string `json:"sha256"`
	// Format is the image's disk format: qcow2 or raw.
	Format string `json:"format"`
}

var sha256RE = regexp.MustCompile(`^[0-9a-f]{64}$`)

// Validate checks e; errors are ErrPermanent naming the field and value.
func (e Entry) Validate() error {
	u, err := url.Parse(e.URL)
	switch {
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		return contract.InvalidField("url", redact(e.URL), "want an http or https URL")
	case !sha256RE.MatchString(e.SHA256):
		return contract.InvalidField("sha256", e.SHA256, "want 64 lowercase hex digits")
	case e.Format != "qcow2" && e.Format != "raw":
		return contract.InvalidField("format", e.Format, "one of qcow2, raw")
	}
	return nil
}

// Destination is where images are stored on one backend location.
// Implementations keep the completeness marker on the backend itself, so
// processes that race (two operator replicas during a leader change, a
// restarted operator) agree on what is complete.
type Destination interface {
	// Name identifies the storage: two Destinations with the same Name are
	// the same place, and fetches to it are shared.
	Name() string
	// Complete reports whether key exists and is marked complete.
	Complete(ctx context.Context, key string) (bool, error)
	// Begin starts writing key, size bytes long (-1 when unknown). It
	// returns ErrInProgress while another writer holds key; a partial copy
	// left by a writer that died is the destination's to recognise as
	// stale and discard.
	Begin(ctx context.Context, key string, size int64) (Upload, error)
}

// Upload is one copy being written.
type Upload interface {
	io.Writer
	// Commit marks the copy complete. Fetch calls it only after the
	// checksum matched.
	Commit(ctx context.Context) error
	// Abort discards the partial copy.
	Abort(ctx context.Context) error
}

// ErrInProgress is what Begin returns while another writer holds the key.
var ErrInProgress = errors.New("another writer is copying this image")

// Fetcher copies images into Destinations. The zero value works; it is
// safe for concurrent use.
type Fetcher struct {
	// Client downloads; nil uses one with dial and header timeouts (the
	// body is bounded by ctx only: a multi-GiB image takes its time).
	Client *http.Client
	// ProgressEvery is the least time between progress log lines.
	// Default 10 s.
	ProgressEvery time.Duration
	// PollInterval is how often a fetch waiting on another writer checks
	// whether the copy completed. Default 5 s.
	PollInterval time.Duration

	group singleflight.Group
}

var defaultClient = &http.Client{Transport: &http.Transport{
	Proxy:                 http.ProxyFromEnvironment,
	TLSHandshakeTimeout:   10 * time.Second,
	ResponseHeaderTimeout: 30 * time.Second,
	IdleConnTimeout:       90 * time.Second,
}}

// Ensure makes dest hold a complete copy of e under key, fetching it
// unless a complete copy is there. Concurrent calls for the same dest and
// key share one fetch; each returns as soon as its own ctx is done.
func (f *Fetcher) Ensure(ctx context.Context, dest Destination, key string, e Entry) error {
	if err := e.Validate(); err != nil {
		return err
	}
	ch := f.group.DoChan(dest.Name()+"\x00"+key, func() (any, error) {
		return nil, f.ensure(ctx, dest, key, e)
	})
	select {
	case r := <-ch:
		return r.Err
	case <-ctx.Done():
		return fmt.Errorf("fetch %s: %w", key, ctx.Err())
	}
}

func (f *Fetcher) ensure(ctx context.Context, dest Destination, key string, e Entry) error {
	log := logr.FromContextOrDiscard(ctx).WithValues("image", key, "destination", dest.Name())
	poll := f.PollInterval
	if poll == 0 {
		poll = 5 * time.Second
	}
	for {
		done, err := dest.Complete(ctx, key)
		if err != nil {
			return fmt.Errorf("fetch %s: check %s: %w", key, dest.Name(), err)
		}
		if done {
			return nil
		}
		err = f.copy(ctx, log, dest, key, e)
		if !errors.Is(err, ErrInProgress) {
			return err
		}
		log.V(1).Info("another writer is copying the image; waiting")
		select {
		case <-ctx.Done():
			return fmt.Errorf("fetch %s: %w", key, ctx.Err())
		case <-time.After(poll):
		}
	}
}

// copy streams e into a new upload, verifying the checksum on the way.
func (f *Fetcher) copy(ctx context.Context, log logr.Logger, dest Destination, key string, e Entry) error {
	client := f.Client
	if client == nil {
		client = defaultClient
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.URL, nil)
	if err != nil {
		return contract.Permanentf("fetch %s: %w", key, err)
	}
	resp, err := client.Do(req)
	if err != nil {
		// The URL may carry a token in its query: show the redacted form.
		return fmt.Errorf("fetch %s from %s: %w", key, redact(e.URL), unwrapURLError(err))
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		err := fmt.Errorf("fetch %s from %s: %s", key, redact(e.URL), resp.Status)
		if resp.StatusCode >= 400 && resp.StatusCode < 500 && resp.StatusCode != http.StatusTooManyRequests {
			return contract.Permanent(err)
		}
		return err
	}
	// Begin after the response, so the destination learns the size; a
	// process that loses the race closes the response unread.
	up, err := dest.Begin(ctx, key, resp.ContentLength)
	if err != nil {
		return fmt.Errorf("fetch %s: begin: %w", key, err)
	}
	// Check again now that this writer holds the key: another may have
	// completed the copy between the first check and Begin.
	if done, err := dest.Complete(ctx, key); err != nil || done {
		abort(ctx, log, up)
		if err != nil {
			return fmt.Errorf("fetch %s: check %s: %w", key, dest.Name(), err)
		}
		return nil
	}
	log.V(contract.LogStep).Info("fetching image", "url", redact(e.URL), "bytes", resp.ContentLength)
	hash := sha256.New()
	body := &progress{r: resp.Body, log: log, total: resp.ContentLength, every: f.ProgressEvery, start: time.Now()}
	n, err := stream(body, up, hash)
	if err != nil {
		abort(ctx, log, up)
		return fmt.Errorf("fetch %s: cut off after %d bytes: %w", key, n, err)
	}
	if sum := hex.EncodeToString(hash.Sum(nil)); sum != e.SHA256 {
		abort(ctx, log, up)
		return contract.Permanentf("fetch %s from %s: checksum %s, the catalogue says %s", key, redact(e.URL), sum, e.SHA256)
	}
	if err := up.Commit(ctx); err != nil {
		abort(ctx, log, up)
		return fmt.Errorf("fetch %s: commit: %w", key, err)
	}
	log.V(contract.LogOutcome).Info("fetched image", "bytes", n, "seconds", time.Since(body.start).Seconds())
	return nil
}

// abort discards a partial copy even when ctx is done: a partial must
// never be left to look like an image.
func abort(ctx context.Context, log logr.Logger, up Upload) {
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if err := up.Abort(actx); err != nil {
		log.Error(err, "discarding a partial image copy failed; the destination must treat it as stale")
	}
}

// progress logs a streaming copy's progress at most once per interval.
type progress struct {
	r      io.Reader
	log    logr.Logger
	total  int64
	every  time.Duration
	start  time.Time
	last   time.Time
	copied int64
}

func (p *progress) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	p.copied += int64(n)
	every := p.every
	if every == 0 {
		every = 10 * time.Second
	}
	if now := time.Now(); now.Sub(p.last) >= every && now.Sub(p.start) >= every {
		p.last = now
		p.log.V(contract.LogStep).Info("fetching image", "copied", p.copied, "total", p.total,
			"mibPerSecond", float64(p.copied)/(1<<20)/now.Sub(p.start).Seconds())
	}
	return n, err
}

// redact hides a URL's password and query, which may carry tokens.
func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "<unparsable URL>"
	}
	if u.RawQuery != "" {
		u.RawQuery = "REDACTED"
	}
	return u.Redacted()
}

// unwrapURLError drops *url.Error's copy of the full URL.
func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}
