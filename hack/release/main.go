// Command release versions the repository's Go modules on their own and
// serves them as a module proxy would (docs/releasing.md).
//
//	release tag -version v0.2.0 -modules contract,providers/proxmox [-dry-run]
//	release proxy -out DIR
//
// tag moves the named modules to the version in versions.yaml, requires
// that version wherever another module of the repository requires them,
// moves their CHANGELOG entries out of Unreleased, commits, and tags each
// module <dir>/<version>, as Go finds a module in a subdirectory. proxy
// writes every module at its versions.yaml version, from its tag, into DIR
// in the GOPROXY file layout, for GOPROXY=file://DIR.
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"time"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("usage: release tag|proxy [flags]")
	}
	root, err := repoRoot()
	if err != nil {
		return err
	}
	switch args[0] {
	case "tag":
		fs := flag.NewFlagSet("tag", flag.ContinueOnError)
		version := fs.String("version", "", "the version to release, vX.Y.Z[-pre]")
		modules := fs.String("modules", "", `comma-separated module directories, or "all"`)
		dryRun := fs.Bool("dry-run", false, "print what would be done; change nothing")
		date := fs.String("date", time.Now().UTC().Format(time.DateOnly), "the release date in the CHANGELOG")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		r := &repo{root: root}
		p, err := r.plan(*version, splitModules(*modules), *date)
		if err != nil {
			return err
		}
		for _, line := range p.describe() {
			fmt.Println(line)
		}
		if *dryRun {
			fmt.Println("dry run: nothing changed")
			return nil
		}
		return r.apply(p)
	case "proxy":
		fs := flag.NewFlagSet("proxy", flag.ContinueOnError)
		out := fs.String("out", "", "the directory to write the proxy into")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		if *out == "" {
			return fmt.Errorf("proxy: -out is required")
		}
		served, err := (&repo{root: root}).proxy(*out)
		for _, m := range served {
			fmt.Printf("served %s@%s\n", m.Path, m.Version)
		}
		return err
	}
	return fmt.Errorf("unknown command %q: tag or proxy", args[0])
}

func splitModules(s string) []string {
	var out []string
	for m := range strings.SplitSeq(s, ",") {
		if m = strings.TrimSpace(m); m != "" {
			out = append(out, strings.TrimSuffix(m, "/"))
		}
	}
	return out
}
