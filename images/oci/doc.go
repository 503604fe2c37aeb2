// Package oci builds container images from files on this machine, offline
// and reproducibly: no base image is pulled (no image registry is
// reachable here), so an image is one layer laid out from a Tree — a
// binary, the shared libraries it loads, a few files — and an image config.
// The image format itself (manifest, config, layer digests, the tarball
// and layout writers) is go-containerregistry's; this package only decides
// what goes into the layer and makes the bytes the same on every build:
// entries sorted, one modification time, fixed owners, no host names.
//
// The command images/oci/cmd/oci-image drives it from scripts
// (docs/operator-image.md).
package oci
