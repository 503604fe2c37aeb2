# Every Go module in the repository (a directory with a go.mod), found rather
# than listed, so a new provider module is picked up by every target.
MODULES := $(patsubst ./%/go.mod,%,$(shell find . -name go.mod -not -path './.git/*' | sort))

GO ?= go
GOLANGCI_LINT_VERSION := v2.15.0
# Tools are cached outside the repository, keyed by version.
TOOLS_DIR ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/egress-proxies/tools
GOLANGCI_LINT := $(TOOLS_DIR)/golangci-lint-$(GOLANGCI_LINT_VERSION)
CONTROLLER_GEN_VERSION := v0.23.0
CONTROLLER_GEN := $(TOOLS_DIR)/controller-gen-$(CONTROLLER_GEN_VERSION)
KUSTOMIZE_VERSION := v5.8.0
KUSTOMIZE := $(TOOLS_DIR)/kustomize-$(KUSTOMIZE_VERSION)
# Helm 3, for the chart's lint and its drift test against the manifests
# (operator/internal/release); built from the module proxy like the rest.
HELM_VERSION := v3.22.0
HELM := $(TOOLS_DIR)/helm-$(HELM_VERSION)
CHART := charts/egress-proxies-operator
# Mutation testing (make mutation); built on first use, not by make tools.
GREMLINS_VERSION := v0.6.0
GREMLINS := $(TOOLS_DIR)/gremlins-$(GREMLINS_VERSION)
# The release: the operator image's tag (make image-operator), the tag the
# install manifests name (make release-manifests) and the Helm chart's
# version. Defined once, in the VERSION file; VERSION=… overrides it.
VERSION ?= $(shell cat VERSION)
# Provider types compiled into the operator binary (build tags).
# The pure-Go backends; libvirt's bindings are cgo (add it when wanted).
PROVIDERS ?= vsphere proxmox openstack

.PHONY: test-build release release-proxy downstream all test test-steps warm unit vet lint tidy build deps tools modules help generate manifests verify-generated render operator image image-smoke image-operator image-operator-smoke vsphere-secret test-integration-vsphere proxmox-secret test-integration-proxmox generate-pvefake-schema proxmox-role-doc openstack-secret test-integration-openstack openstack-up openstack-down test-integration-openstack-local libvirt-secret test-integration-libvirt dev dev-smoke e2e chaos mutation gremlins-path kustomize-path release-manifests release-chart release-artifacts helm-path
all: test

help: ## List the targets.
	@grep -E '^[a-z%/-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/'

modules: ## Print the modules the targets loop over.
	@printf '%s\n' $(MODULES)

# make test's steps, cheapest and most likely to fail first; .ci/run runs
# them one by one, in this order, to time each.
TEST_STEPS := verify-generated deps vet lint unit
test: ## Everything CI runs: install what is missing, then generated files, module isolation, vet, lint, race tests.
	hack/install-deps.sh
	$(MAKE) --no-print-directory $(TEST_STEPS)
test-steps:
	@echo $(TEST_STEPS)
warm: ## Build every cache CI's lanes use (packages, tools, Go builds, control plane and node, images, OpenStack); run it in the background on a fresh machine (docs/testing.md).
	hack/warm.sh
unit: $(addprefix test/,$(MODULES)) ## Race-enabled tests of every module.
vet: $(addprefix vet/,$(MODULES)) ## go vet every module.
lint: $(addprefix lint/,$(MODULES)) ## golangci-lint every module.
tidy: $(addprefix tidy/,$(MODULES)) ## go mod tidy every module.
build: $(addprefix build/,$(MODULES)) ## Build every module.
deps: $(addprefix deps/,$(MODULES)) ## Check each module depends only on what it may.

test/%:
	cd $* && $(GO) test -race -count=1 ./...
# The race tests compiled and linked, not run: make warm fills Go's cache.
test-build: $(addprefix test-build/,$(MODULES))
test-build/%:
	cd $* && $(GO) test -race -count=1 -exec /bin/true ./... > /dev/null
# hack/publish (cosign's libraries) is outside the workspace, go.work: its
# dependency graph would raise versions the released modules build with.
OUTSIDE_WORKSPACE := hack/publish
$(foreach m,$(OUTSIDE_WORKSPACE),test/$m test-build/$m vet/$m lint/$m build/$m): export GOWORK = off
# The images module's tests run tinyproxy and squid from Debian on loopback
# with the default cloud-init's configuration (images/cloudinit
# servers_test.go); here a missing server fails instead of skipping.
test/images: export CLOUDINIT_TEST_SERVERS = 1
test/images:
	hack/apt-ensure.sh @proxies
	cd images && $(GO) test -race -count=1 ./...
# The operator's tests once more without -race, for the in-process vcsim
# tests that race inside govmomi's simulator (identity_vsphere_test.go).
test/operator:
	hack/apt-ensure.sh @monitoring
	cd operator && $(GO) test -race -count=1 ./...
	cd operator && $(GO) test -count=1 -run 'OnOneVCenter' ./internal/controller/proxy/
# vSphere's SharedListsAreFresh lists the folder while the rule's Create
# runs, and govmomi v0.56.0's simulator races with itself there (a clone's
# ctx.Update, simulator/folder.go:477, against the property collector's
# read of the same VM, property_collector.go:110): the race detector fails
# the rule for vcsim's race. It runs once more without -race.
test/providers/vsphere:
	cd providers/vsphere && $(GO) test -race -count=1 -skip '^TestContract$$/^SharedListsAreFresh$$' ./...
	cd providers/vsphere && $(GO) test -count=1 -run '^TestContract$$/^SharedListsAreFresh$$' .
# The operator's tests run against a real kube-apiserver and etcd, built
# from source once and cached (hack/control-plane.sh).
test/operator: export KUBEBUILDER_ASSETS = $(shell hack/control-plane.sh)
# operator/internal/release renders the install and the chart with the
# pinned kustomize and helm.
test/operator: export KUSTOMIZE := $(KUSTOMIZE)
test/operator: export HELM := $(HELM)
# and runs promtool on the monitoring kit's alerts: a missing one fails.
test/operator: export MONITORING_TEST_PROMTOOL = 1
test/operator: $(KUSTOMIZE) $(HELM)
vet/%:
	cd $* && $(GO) vet ./...
lint/%: $(GOLANGCI_LINT)
	cd $* && $(GOLANGCI_LINT) run --config $(CURDIR)/.golangci.yml ./...
tidy/%:
	hack/tidy.sh $*
build/%:
	cd $* && $(GO) build ./...
deps/%:
	hack/check-module-deps.sh $*

chaos: ## The operator SIGKILLed at random while pooled Proxies change: no address on two running VMs (slow, not in make test): make chaos [RUNS=5] [KILLS=20].
	hack/chaos.sh $(or $(RUNS),5) $(or $(KILLS),20)

mutation: $(GREMLINS) ## Mutation score of one package (slow, not in make test): make mutation MODULE=operator PKG=internal/controller/proxy [RUN=<go test -run regexp>].
	GREMLINS=$(GREMLINS) hack/mutation.sh '$(MODULE)' '$(PKG)' $(if $(value RUN),'$(value RUN)')
# The pinned gremlins, built if missing; hack/mutation.sh run by hand asks here.
gremlins-path: $(GREMLINS)
	@echo $(GREMLINS)
# The pinned kustomize, built if missing; operator/internal/release's tests
# run by hand ask here (export KUSTOMIZE=$$(make -s kustomize-path)).
kustomize-path: $(KUSTOMIZE)
	@echo $(KUSTOMIZE)
helm-path: $(HELM)
	@echo $(HELM)

generate: $(CONTROLLER_GEN) ## Generate the API's deepcopy code.
	cd operator && $(CONTROLLER_GEN) object paths=./api/...

manifests: $(CONTROLLER_GEN) ## Generate CRDs and RBAC from the API and controller markers; copy the CRDs into the Helm chart.
	cd operator && $(CONTROLLER_GEN) crd rbac:roleName=manager-role paths=./... \
		output:crd:artifacts:config=config/crd/bases output:rbac:artifacts:config=config/rbac
	rm -f $(CHART)/crds/*.yaml
	cp operator/config/crd/bases/*.yaml $(CHART)/crds/

verify-generated: generate manifests ## Fail if generated files are not committed as generated.
	git diff --exit-code -- operator/api operator/config $(CHART)/crds
	@untracked=$$(git ls-files --others --exclude-standard -- operator/api operator/config $(CHART)/crds); \
		[ -z "$$untracked" ] || { echo "generated but not committed: $$untracked" >&2; exit 1; }

render: $(KUSTOMIZE) ## Print the operator's install manifests (CRDs, RBAC, Deployment, config), as make release-manifests writes them.
	@KUSTOMIZE=$(KUSTOMIZE) VERSION=$(VERSION) hack/release-manifests.sh

release-manifests: $(KUSTOMIZE) ## Write dist/install.yaml (the install manifests for VERSION's image, from operator/config) and dist/monitoring.yaml (the opt-in monitoring kit).
	mkdir -p dist
	KUSTOMIZE=$(KUSTOMIZE) VERSION=$(VERSION) hack/release-manifests.sh > dist/install.yaml.tmp
	mv dist/install.yaml.tmp dist/install.yaml
	$(KUSTOMIZE) build operator/config/prometheus > dist/monitoring.yaml.tmp
	mv dist/monitoring.yaml.tmp dist/monitoring.yaml

release-chart: $(HELM) ## Lint the Helm chart and package it into dist/ (its version and appVersion are VERSION's).
	$(HELM) lint --strict $(CHART)
	$(HELM) package $(CHART) --version $(VERSION) --app-version $(VERSION) -d dist

release-artifacts: $(KUSTOMIZE) $(HELM) ## Write and check what a release publishes into dist/ (install.yaml, the chart, the pure-Go image for amd64 and arm64 as one OCI index, an SBOM per image, SHA256SUMS) and rehearse publishing them to a registry on loopback, signed (docs/releasing.md).
	HELM=$(HELM) VERSION=$(VERSION) hack/release-artifacts.sh

dev: ## The operator's main job on a local default: control plane, vcsim, operator, a sample Proxy going Ready (Ctrl-C stops and cleans up).
	cd operator && $(GO) build -o ../bin/egress-proxies-dev ./internal/cmd/dev
	KUBEBUILDER_ASSETS=$$(hack/control-plane.sh kubectl) bin/egress-proxies-dev -state .dev -crds operator/config/crd/bases

dev-smoke: ## Run make dev until the sample Proxy is Ready, then interrupt it and check it cleaned up.
	hack/dev-smoke.sh

image: ## Build the proxy guest image (qcow2; needs root); PROXY=squid and VMWARE_TOOLS=1 vary it.
	images/recipes/debian-proxy/build.sh

image-smoke: ## Boot the guest image under QEMU with a seed; check cloud-init, the proxy and the agent.
	images/recipes/debian-proxy/smoke.sh

e2e: ## A Proxy becomes a real QEMU VM on a private libvirt in a network namespace and proxies traffic (root; docs/testing.md).
	hack/e2e/run.sh

test-integration-vsphere: ## The vSphere lifecycle against a real vCenter named by VSPHERE_TEST_* (docs/vsphere-provider.md).
	cd providers/vsphere && $(GO) test -count=1 -run '^TestIntegration$$' -v .

test-integration-libvirt: ## libvirt on a real libvirtd (a private one in a network namespace, root, or LIBVIRT_TEST_URI's): volume uploads, a booted guest's lifecycle, a frozen daemon, the harness's rules a real daemon plays (docs/libvirt-provider.md).
	cd providers/libvirt && LIBVIRT_TEST_PRIVATE_DAEMON=$${LIBVIRT_TEST_PRIVATE_DAEMON:-1} \
		LIBVIRT_TEST_IMAGE=$${LIBVIRT_TEST_IMAGE:-$$($(CURDIR)/images/recipes/debian-proxy/build.sh)} \
		$(GO) test -count=1 -timeout 20m -run '^(TestVolumeUpload|TestClassifyQuotaOnRealDaemon|TestLifecycle|TestStaticAddressLifecycle|TestPrivateDaemonIsTheLanes|TestFrozenDaemonIsDetected|TestAutoDomainTypeOnRealDaemon|TestContractOnRealDaemon)$$' -v .

libvirt-secret: ## Print the credentials Secret for libvirt over SSH from LIBVIRT_SSH_KEY_FILE and LIBVIRT_KNOWN_HOSTS_FILE.
	hack/credentials-secret.sh libvirt-ssh-key=$(LIBVIRT_SSH_KEY_FILE) libvirt-known-hosts=$(LIBVIRT_KNOWN_HOSTS_FILE)

vsphere-secret: ## Print the credentials Secret for vSphere from VSPHERE_USERNAME_FILE and VSPHERE_PASSWORD_FILE.
	hack/credentials-secret.sh vsphere-username=$(VSPHERE_USERNAME_FILE) vsphere-password=$(VSPHERE_PASSWORD_FILE)

test-integration-proxmox: ## The Proxmox VE lifecycle, the clone and network options and a second node against a real cluster named by PROXMOX_TEST_* (docs/proxmox-provider.md).
	cd providers/proxmox && $(GO) test -count=1 -run '^TestIntegration' -v .

generate-pvefake-schema: ## Regenerate pvefake's facts (facts-pve8.json, facts-pve9.json) from the pinned PVE API schema (providers/proxmox/pvefake/schema).
	cd providers/proxmox && $(GO) generate ./pvefake

proxmox-role-doc: ## Rewrite the generated API token role in docs/proxmox-provider.md (PVE 8 and 9) from the provider's call table and the pinned schema.
	cd providers/proxmox && $(GO) test -count=1 -run '^TestRoleDoc$$' . -args -update-role-doc

proxmox-secret: ## Print the credentials Secret for Proxmox VE from PROXMOX_TOKEN_ID_FILE and PROXMOX_TOKEN_SECRET_FILE (and PROXMOX_CA_FILE if set).
	hack/credentials-secret.sh proxmox-token-id=$(PROXMOX_TOKEN_ID_FILE) proxmox-token-secret=$(PROXMOX_TOKEN_SECRET_FILE) $(if $(PROXMOX_CA_FILE),proxmox-ca.pem=$(PROXMOX_CA_FILE))
test-integration-openstack: ## The OpenStack lifecycle against a real cloud named by OPENSTACK_TEST_* (docs/openstack-provider.md).
	cd providers/openstack && $(GO) test -count=1 -run '^TestIntegration$$' -v .

openstack-up: ## A real OpenStack Zed (Debian 12 packages) in network namespace egress-os, state in /tmp/egress-os; idempotent (root; docs/testing.md).
	hack/openstack/up.sh

openstack-down: ## Stop the OpenStack of openstack-up and remove its namespace (OS_KEEP_LOGS=1 keeps its logs).
	hack/openstack/down.sh

# Rules skipped on the real services, each with its reason (none now: the
# four that met Nova's BUILD after a delete run again since Get reads a
# recorded delete, docs/openstack-provider-spec.md entry 11). A regexp of
# go test -skip, e.g. ^TestContractRealCloud$$/^(DeleteTwice)$$.
OPENSTACK_REAL_SKIP =
test-integration-openstack-local: ## The OpenStack provider's harness, lifecycle, real faults and the osfake differential, and a Proxy keeping its floating IP under the operator, against OpenStack's own services in a network namespace (hack/openstack/; root; docs/testing.md).
	OPENSTACK_TEST_NO_GUEST=1 hack/openstack/run.sh sh -c 'cd $(CURDIR)/operator && $(GO) test -tags openstack -count=1 -timeout 10m -run "^TestRealCloudProxyKeepsItsFloatingIP$$" -v ./internal/controller/proxy/; operator=$$?; \
		cd $(CURDIR)/providers/openstack && $(GO) test -count=1 -timeout 60m -run "^(TestIntegration|TestIntegrationOptions|TestContractRealCloud|TestRealCloud[A-Za-z]*|TestDifferential)$$" $(if $(OPENSTACK_REAL_SKIP),-skip "$(OPENSTACK_REAL_SKIP)") -v . && exit $$operator'
# The operator's test on the lane runs a control plane of its own.
test-integration-openstack-local: export KUBEBUILDER_ASSETS = $(shell hack/control-plane.sh)

openstack-secret: ## Print the credentials Secret for OpenStack from OPENSTACK_CLOUDS_FILE (and OPENSTACK_CA_FILE if set).
	hack/credentials-secret.sh openstack-clouds.yaml=$(OPENSTACK_CLOUDS_FILE) $(if $(OPENSTACK_CA_FILE),openstack-ca.pem=$(OPENSTACK_CA_FILE))

image-operator: ## Build the operator's container image offline into bin/images/ (PROVIDERS; with libvirt, the cgo variant; VERSION, SOURCE_DATE_EPOCH); docs/operator-image.md.
	PROVIDERS="$(PROVIDERS)" VERSION="$(VERSION)" images/recipes/operator/build.sh

image-operator-smoke: ## Run the operator image under runc as its Deployment runs it (read-only root, uid 65532, no capabilities); the libvirt variant's libraries and libssh too.
	PROVIDERS="$(PROVIDERS)" VERSION="$(VERSION)" images/recipes/operator/smoke.sh

release: ## Version modules: make release VERSION=v0.2.0 MODULES=contract,providers/proxmox (or all) [DRY_RUN=1]; docs/releasing.md.
	@$(if $(filter command line,$(origin VERSION)),,$(error make release: name the version, VERSION=vX.Y.Z (the VERSION file is the operator image's)))
	@$(if $(filter command line,$(origin MODULES)),,$(error make release: name the modules, MODULES=contract,providers/proxmox or MODULES=all))
	cd hack/release && $(GO) run . tag -version $(VERSION) -modules $(MODULES) $(if $(DRY_RUN),-dry-run)
release-proxy: ## Write every module at its versions.yaml version, from its tag, into OUT in the GOPROXY file layout.
	cd hack/release && $(GO) run . proxy -out $(abspath $(OUT))
downstream: ## Build as a downstream user, offline, from a release candidate on a local module proxy: each provider alone with the harness, and the operator.
	hack/downstream.sh
operator: ## Build the operator binary with the providers in PROVIDERS into bin/.
	cd operator && $(GO) build -tags "$(PROVIDERS)" -o ../bin/egress-proxies-operator ./cmd

tools: $(GOLANGCI_LINT) $(CONTROLLER_GEN) $(KUSTOMIZE) $(HELM) ## Install the pinned tools into TOOLS_DIR.
$(GOLANGCI_LINT):
	mkdir -p $(TOOLS_DIR)
	GOBIN=$(TOOLS_DIR) $(GO) install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)
	mv $(TOOLS_DIR)/golangci-lint $@
$(CONTROLLER_GEN):
	mkdir -p $(TOOLS_DIR)
	GOBIN=$(TOOLS_DIR) $(GO) install sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_GEN_VERSION)
	mv $(TOOLS_DIR)/controller-gen $@
$(KUSTOMIZE):
	mkdir -p $(TOOLS_DIR)
	GOBIN=$(TOOLS_DIR) $(GO) install sigs.k8s.io/kustomize/kustomize/v5@$(KUSTOMIZE_VERSION)
	mv $(TOOLS_DIR)/kustomize $@
# The -X values are what helm's own release build sets: its version, and
# the Kubernetes version `helm template` assumes (that of its client-go,
# v0.37), else 1.20 and the chart's kubeVersion refuses it.
HELM_LDFLAGS := -X helm.sh/helm/v3/internal/version.version=$(HELM_VERSION) \
	$(foreach p,pkg/chartutil pkg/lint/rules,-X helm.sh/helm/v3/$(p).k8sVersionMajor=1 -X helm.sh/helm/v3/$(p).k8sVersionMinor=37)
$(HELM):
	mkdir -p $(TOOLS_DIR)
	GOBIN=$(TOOLS_DIR) $(GO) install -ldflags '$(HELM_LDFLAGS)' helm.sh/helm/v3/cmd/helm@$(HELM_VERSION)
	mv $(TOOLS_DIR)/helm $@
$(GREMLINS):
	mkdir -p $(TOOLS_DIR)
	GOBIN=$(TOOLS_DIR) $(GO) install github.com/go-gremlins/gremlins/cmd/gremlins@$(GREMLINS_VERSION)
	mv $(TOOLS_DIR)/gremlins $@
