// Command fetchbench measures images/fetch on loopback for
// hack/bench-fetch.sh: "serve" streams a deterministic image of a given
// size; "fetch" copies it with fetch.Fetcher into a directory and reports
// the time taken, how much of it the final commit (the fsync) took, and
// how far the process's peak RSS grew.
package main

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/egress-proxies/egress-proxies-operator/images/fetch"
)

// block is repeated to make the image: cheap to produce at line rate.
var block = func() []byte {
	b := make([]byte, 1<<20)
	x := uint32(2463534242)
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = byte(x)
	}
	return b
}()

type imageReader struct{ left, off int64 }

func (r *imageReader) Read(p []byte) (int, error) {
	if r.left == 0 {
		return 0, io.EOF
	}
	n := copy(p, block[r.off%int64(len(block)):])
	if int64(n) > r.left {
		n = int(r.left)
	}
	r.off += int64(n)
	r.left -= int64(n)
	return n, nil
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: fetchbench serve -size N | fetch -url U -sha256 S -dir D [-cpuprofile F]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "serve":
		err = serve(os.Args[2:])
	case "fetch":
		err = fetchOnce(os.Args[2:])
	default:
		err = fmt.Errorf("unknown command %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "fetchbench:", err)
		os.Exit(1)
	}
}

// serve prints "<url> <sha256>" and serves the image until killed.
func serve(args []string) error {
	fs := flag.NewFlagSet("serve", flag.ExitOnError)
	size := fs.Int64("size", 2<<30, "image size in bytes")
	_ = fs.Parse(args)
	h := sha256.New()
	if _, err := io.Copy(h, &imageReader{left: *size}); err != nil {
		return err
	}
	l, err := (&net.ListenConfig{}).Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	fmt.Printf("http://%s/image.qcow2 %s\n", l.Addr(), hex.EncodeToString(h.Sum(nil)))
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Length", strconv.FormatInt(*size, 10))
		_, _ = io.Copy(w, &imageReader{left: *size})
	})}
	return srv.Serve(l)
}

// fetchOnce prints "seconds=<s> commit_seconds=<c> rss_growth_kib=<k>"
// (and the RSS before and at its peak).
func fetchOnce(args []string) error {
	fs := flag.NewFlagSet("fetch", flag.ExitOnError)
	url := fs.String("url", "", "image URL")
	sum := fs.String("sha256", "", "expected checksum")
	dir := fs.String("dir", "", "destination directory")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the fetch to this file")
	_ = fs.Parse(args)
	before, err := statusKiB("VmRSS")
	if err != nil {
		return err
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return err
		}
		defer func() { _ = f.Close() }()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
	}
	dest := &timedCommit{Destination: fetch.DirDestination{Dir: *dir}}
	start := time.Now()
	err = (&fetch.Fetcher{}).Ensure(context.Background(), dest, "image", fetch.Entry{URL: *url, SHA256: *sum, Format: "qcow2"})
	elapsed := time.Since(start)
	if *cpuProfile != "" {
		pprof.StopCPUProfile()
	}
	if err != nil {
		return err
	}
	peak, err := statusKiB("VmHWM")
	if err != nil {
		return err
	}
	fmt.Printf("seconds=%.3f commit_seconds=%.3f rss_before_kib=%d rss_peak_kib=%d rss_growth_kib=%d\n",
		elapsed.Seconds(), dest.commit.Seconds(), before, peak, peak-before)
	return nil
}

// timedCommit times the Upload's Commit: DirDestination's fsync is disk
// time that curl -o never spends, and the report tells it apart.
type timedCommit struct {
	fetch.Destination
	commit time.Duration
}

func (d *timedCommit) Begin(ctx context.Context, key string, size int64) (fetch.Upload, error) {
	up, err := d.Destination.Begin(ctx, key, size)
	if err != nil {
		return nil, err
	}
	return &timedUpload{Upload: up, d: d}, nil
}

type timedUpload struct {
	fetch.Upload
	d *timedCommit
}

func (u *timedUpload) Commit(ctx context.Context) error {
	start := time.Now()
	err := u.Upload.Commit(ctx)
	u.d.commit += time.Since(start)
	return err
}

// statusKiB reads one field of /proc/self/status.
func statusKiB(field string) (int64, error) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0, err
	}
	defer func() { _ = f.Close() }()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if rest, ok := strings.CutPrefix(s.Text(), field+":"); ok {
			return strconv.ParseInt(strings.Fields(rest)[0], 10, 64)
		}
	}
	return 0, fmt.Errorf("no %s in /proc/self/status", field)
}
