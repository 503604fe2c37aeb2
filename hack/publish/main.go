// Command publish puts a release's image index and its signature into an
// OCI registry and verifies them, with go-containerregistry and cosign's
// own libraries (docs/releasing.md, "Release artifacts"). It is a module
// of its own, outside the workspace (go.work), so that cosign's large
// dependency graph never raises a version the released modules build
// with.
//
//	publish keygen -dir DIR                  # DIR/cosign.key and cosign.pub, as cosign generate-key-pair writes them
//	publish image -layout DIR -ref REG/REPO:TAG -key cosign.key
//	publish verify -ref REG/REPO:TAG -key cosign.pub
//	publish registry                         # a registry on loopback, for the release rehearsal
//
// The private key's password is COSIGN_PASSWORD, as for cosign.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "publish:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return fmt.Errorf("want a command: keygen, image, verify or registry")
	}
	switch args[0] {
	case "keygen":
		return keygen(args[1:], stdout, stderr)
	case "image":
		return pushImage(ctx, args[1:], stdout, stderr)
	case "verify":
		return verify(ctx, args[1:], stdout, stderr)
	case "registry":
		return serveRegistry(ctx, args[1:], stdout, stderr)
	default:
		return fmt.Errorf("command %q: want keygen, image, verify or registry", args[0])
	}
}
