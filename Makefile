# Every Go module in the repository (a directory with a go.mod), found rather
# than listed, so a new provider module is picked up by every target.
MODULES := $(patsubst ./%/go.mod,%,$(shell find . -name go.mod -not -path './.git/*' | sort))

GO ?= go
GOLANGCI_LINT_VERSION := v2.15.0
# Tools are cached outside the repository, keyed by version.
TOOLS_DIR ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/egress-proxies/tools
GOLANGCI_LINT := $(TOOLS_DIR)/golangci-lint-$(GOLANGCI_LINT_VERSION)

.PHONY: all test unit vet lint tidy build deps tools modules help
all: test

help: ## List the targets.
	@grep -E '^[a-z%/-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/'

modules: ## Print the modules the targets loop over.
	@printf '%s\n' $(MODULES)

test: vet lint deps unit ## Everything CI runs: vet, lint, module isolation, race tests.
unit: $(addprefix test/,$(MODULES)) ## Race-enabled tests of every module.
vet: $(addprefix vet/,$(MODULES)) ## go vet every module.
lint: $(addprefix lint/,$(MODULES)) ## golangci-lint every module.
tidy: $(addprefix tidy/,$(MODULES)) ## go mod tidy every module.
build: $(addprefix build/,$(MODULES)) ## Build every module.
deps: $(addprefix deps/,$(MODULES)) ## Check each module depends only on what it may.

test/%:
	cd $* && $(GO) test -race -count=1 ./...
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

tools: $(GOLANGCI_LINT) ## Install the pinned tools into TOOLS_DIR.
$(GOLANGCI_LINT):
	mkdir -p $(TOOLS_DIR)
	GOBIN=$(TOOLS_DIR) $(GO) install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)
	mv $(TOOLS_DIR)/golangci-lint $@
