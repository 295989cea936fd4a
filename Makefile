# Build and test entry points. `make test` is what CI (.ci/run) runs.
GO        ?= go
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
REVISION  ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
BRANCH    ?= $(shell git rev-parse --abbrev-ref HEAD 2>/dev/null || echo unknown)
PKG       := github.com/prometheus/common/version
LDFLAGS   := -s -w -X $(PKG).Version=$(VERSION) -X $(PKG).Revision=$(REVISION) -X $(PKG).Branch=$(BRANCH) -X $(PKG).BuildUser=vllm_exporter -X $(PKG).BuildDate=$(shell date -u +%Y%m%d-%H:%M:%S)
# go-nvml's header marks many NVML calls deprecated; the warnings are noise.
export CGO_CFLAGS ?= -O2 -g -Wno-deprecated-declarations
export CGO_ENABLED ?= 1

.PHONY: all build test fuzz bench vet tools test-unit test-validate
all: build

build:
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/vllm_exporter ./cmd/vllm_exporter
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/vllm-sim ./cmd/vllm-sim

# phase NAME CMD: runs CMD and prints how long it took (CI reads these).
phase = @s=$$(date +%s); $(2); rc=$$?; echo "phase $(1): $$(( $$(date +%s) - s ))s"; exit $$rc

# The real Prometheus 3.16 and 3.5, promtool, Alertmanager 0.31 and amtool
# the rule and end-to-end tests run, built from the pinned modules in
# internal/tools into the tool cache (internal/toolbuild; nothing to do
# when cached). Built here, before the tests, so no test package spends its
# timeout compiling Prometheus. Without a module proxy this fails; `make
# test` then goes on outside CI and those tests skip, saying why.
tools:
	$(call phase,tools,$(GO) run ./internal/toolbuild/buildtools)

# deploy/validate is a Go module of its own (Helm, client-go and compose-go
# stay out of the exporter's dependencies): the Helm chart, the Kubernetes
# manifests and examples/ against Helm's linter and the API schemas.
# gofmt first: an unformatted file passes vet and the tests.
vet:
	$(call phase,vet,unformatted=$$(gofmt -l .) && { [ -z "$$unformatted" ] || { echo "gofmt -l: $$unformatted" >&2; false; }; } && $(GO) vet ./... && (cd deploy/validate && $(GO) vet ./...))

test: vet
	@$(MAKE) --no-print-directory tools || [ "$$CI" != true ]
	@$(MAKE) --no-print-directory test-unit test-validate

test-unit:
	$(call phase,test,$(GO) test -count=1 -timeout 20m ./...)

test-validate:
	$(call phase,deploy/validate,cd deploy/validate && $(GO) test -count=1 -timeout 20m ./...)

# Bounded native fuzzing of every parser (FUZZTIME per target).
FUZZTIME ?= 20s
fuzz:
	./.ci/fuzz.sh $(FUZZTIME)

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...
