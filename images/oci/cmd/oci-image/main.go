// Command oci-image builds a container image from files on this machine,
// offline and reproducibly, with no base image: a program (static, or
// dynamically linked with its shared libraries found and copied), extra
// files and directories, a non-root user, labels, and writes it as a
// docker-archive tarball (`ctr images import`, `docker load`) and,
// optionally, an OCI image layout. It prints the image's digest.
//
//	oci-image -o out.tar -tag example:v1 -binary bin/app=/usr/local/bin/app \
//	  -user 65532:65532 -user-name nonroot -dir /tmp:1777 -label k=v
//
// docs/operator-image.md describes every flag.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "oci-image:", err)
		os.Exit(1)
	}
}

// options are the flags, checked before any file is read.
type options struct {
	out, layout        string
	ociArchive         string
	tags               list
	binary             string
	files, hostPaths   list
	dirs               list
	user, userName     string
	labels, env        list
	entrypoint, args   list
	workdir            string
	platform           string
	sourceDateEpoch    string
	copyright          bool
	goModules          string
	sbom               string
	debianPackages     string
	dpkgInfo           string
	skipLibraryClosure bool
}

func parse(args []string, stderr io.Writer) (*options, error) {
	o := &options{}
	fs := flag.NewFlagSet("oci-image", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.out, "o", "", "Write the image here as a docker-archive tarball (required).")
	fs.StringVar(&o.layout, "layout", "", "Also write the image as an OCI image layout in this directory (replaced).")
	fs.StringVar(&o.ociArchive, "oci-archive", "", "Also write the OCI image layout as a tar: `ctr images import` keeps its manifest digest.")
	fs.Var(&o.tags, "tag", "An image reference the tarball names, e.g. egress-proxies-operator:v0.1.0 (at least one; repeatable).")
	fs.StringVar(&o.binary, "binary", "", "HOST=IMAGE[:MODE]: the program; the default entrypoint. A dynamically linked one brings its loader and shared libraries.")
	fs.Var(&o.files, "file", "HOST=IMAGE[:MODE]: copy a host file (symlinks followed) into the image (repeatable).")
	fs.Var(&o.hostPaths, "host-path", "PATH: copy a host file or directory entry to the same path, keeping the symlinks on the way (repeatable; a library opened with dlopen).")
	fs.Var(&o.dirs, "dir", "IMAGE[:MODE[:UID:GID]]: an empty directory, e.g. /tmp:1777 (repeatable).")
	fs.StringVar(&o.user, "user", "", "UID:GID the image runs as (config User), numeric.")
	fs.StringVar(&o.userName, "user-name", "", "Write /etc/passwd and /etc/group with root and this user (the -user ids) and make its home.")
	fs.Var(&o.labels, "label", "KEY=VALUE image label (repeatable).")
	fs.Var(&o.env, "env", "KEY=VALUE environment variable (repeatable).")
	fs.Var(&o.entrypoint, "entrypoint", "Entrypoint, one argument per flag (default: the -binary's image path).")
	fs.Var(&o.args, "arg", "Default arguments (config Cmd), one per flag.")
	fs.StringVar(&o.workdir, "workdir", "/", "Working directory.")
	fs.StringVar(&o.platform, "platform", runtime.GOOS+"/"+runtime.GOARCH, "OS/ARCH of the image.")
	fs.StringVar(&o.sourceDateEpoch, "source-date-epoch", os.Getenv("SOURCE_DATE_EPOCH"), "Unix time of the config and of every file (default $SOURCE_DATE_EPOCH; required).")
	fs.BoolVar(&o.copyright, "copyright", true, "Add /usr/share/doc/<package>/copyright for every host file a Debian package installed.")
	fs.StringVar(&o.goModules, "go-modules", "", "IMAGE path: write the -binary's Go modules there (go version -m) and beside -o as <name>.go-modules.txt.")
	fs.StringVar(&o.sbom, "sbom", "", "IMAGE path: write a CycloneDX SBOM (JSON) of the -binary's Go modules there and beside -o as <name>.cdx.json.")
	fs.StringVar(&o.debianPackages, "debian-packages", "", "IMAGE path: write \"package version arch\" of every Debian package a host file came from there and beside -o as <name>.debian-packages.txt.")
	fs.StringVar(&o.dpkgInfo, "dpkg-info", "/var/lib/dpkg/info", "dpkg's file lists (and its status file beside them), for -copyright and -debian-packages.")
	fs.BoolVar(&o.skipLibraryClosure, "no-libraries", false, "Do not add a dynamically linked -binary's loader and libraries.")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q: every input is a flag", fs.Arg(0))
	}
	if o.out == "" {
		return nil, fmt.Errorf("-o: required")
	}
	if o.binary == "" && len(o.entrypoint) == 0 {
		return nil, fmt.Errorf("-binary or -entrypoint: one is required")
	}
	if o.userName != "" && o.user == "" {
		return nil, fmt.Errorf("-user-name %q: needs -user UID:GID", o.userName)
	}
	if o.goModules != "" && o.binary == "" {
		return nil, fmt.Errorf("-go-modules %q: needs -binary", o.goModules)
	}
	if o.sbom != "" && o.binary == "" {
		return nil, fmt.Errorf("-sbom %q: needs -binary", o.sbom)
	}
	return o, nil
}

// created reads -source-date-epoch.
func (o *options) created() (time.Time, error) {
	if o.sourceDateEpoch == "" {
		return time.Time{}, fmt.Errorf("-source-date-epoch: not set, nor SOURCE_DATE_EPOCH; a build time would make every build differ")
	}
	n, err := strconv.ParseInt(o.sourceDateEpoch, 10, 64)
	if err != nil || n < 0 {
		return time.Time{}, fmt.Errorf("-source-date-epoch %q: want Unix seconds", o.sourceDateEpoch)
	}
	return time.Unix(n, 0).UTC(), nil
}

func (o *options) osArch() (goos, arch string, err error) {
	goos, arch, ok := strings.Cut(o.platform, "/")
	if !ok || goos == "" || arch == "" {
		return "", "", fmt.Errorf("-platform %q: want OS/ARCH, e.g. linux/amd64", o.platform)
	}
	return goos, arch, nil
}

func run(args []string, stdout, stderr io.Writer) error {
	o, err := parse(args, stderr)
	if err != nil {
		return err
	}
	res, err := build(o)
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "oci-image: %s: %s, %d entries, layer %.1f MiB (%.1f MiB unpacked), %d shared libraries\n",
		o.out, strings.Join(o.tags, " "), res.entries, mib(res.layerSize), mib(res.unpacked), res.libraries)
	fmt.Fprintln(stdout, res.digest)
	return nil
}

func mib(n int64) float64 { return float64(n) / (1 << 20) }
