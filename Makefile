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

.PHONY: all build test fuzz bench vet
all: build

build:
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/vllm_exporter ./cmd/vllm_exporter
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/vllm-sim ./cmd/vllm-sim

# deploy/validate is a module of its own (Helm, client-go and compose-go
# stay out of the exporter's dependencies): the Helm chart, the Kubernetes
# manifests and examples/ against Helm's linter and the API schemas.
vet:
	$(GO) vet ./...
	cd deploy/validate && $(GO) vet ./...

test: vet
	$(GO) test -count=1 -timeout 20m ./...
	cd deploy/validate && $(GO) test -count=1 -timeout 20m ./...

# Bounded native fuzzing of every parser (FUZZTIME per target).
FUZZTIME ?= 20s
fuzz:
	./.ci/fuzz.sh $(FUZZTIME)

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...
