// Package release checks what a user installs: the manifests rendered from
// operator/config (make release-manifests, dist/install.yaml) and the Helm
// chart in charts/. It has only tests; they run the pinned kustomize and
// helm that the Makefile installs, named by $KUSTOMIZE and $HELM.
package release
