# vllm_exporter container image.
#
#   docker build -t vllm_exporter \
#     --build-arg VERSION="$(git describe --tags --always --dirty)" \
#     --build-arg REVISION="$(git rev-parse HEAD)" \
#     --build-arg BRANCH="$(git rev-parse --abbrev-ref HEAD)" .
#   docker run --rm --runtime=nvidia --gpus all -p 9470:9470 vllm_exporter --vllm.url=http://vllm:8000
#
# The build stage runs `make build`, the same target (flags, version
# ldflags, cgo for NVML) as local and CI builds; internal/faulttest checks
# that this file and the Makefile agree and runs the build stage's commands.

ARG GO_VERSION=1.26

# --- build: cgo on (go-nvml dlopens libnvidia-ml at run time; no driver or
# CUDA needed to build), glibc from Debian bookworm like the runtime image.
FROM golang:${GO_VERSION}-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
ARG REVISION=unknown
ARG BRANCH=unknown
RUN make build VERSION="$VERSION" REVISION="$REVISION" BRANCH="$BRANCH"

# --- runtime: glibc (the NVIDIA container runtime mounts the host's
# libnvidia-ml.so.1 and runs ldconfig, which the slim image has), CA
# certificates for an https --vllm.url, a fixed non-root user.
FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid 65532 vllm_exporter \
 && useradd --system --uid 65532 --gid 65532 --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin vllm_exporter
COPY --from=build /src/bin/vllm_exporter /usr/bin/vllm_exporter
# NVML needs only the "utility" driver capability (no compute). "all" lets a
# sidecar that requests no GPU of its own see the node's GPUs, which are
# vLLM's when its pod owns the node; on a node shared by vLLM pods run it with
# --no-collector.gpu and one GPU exporter per node (docs/deploy.md).
#
# GOMEMLIMIT: a soft heap limit for a 64 MiB container (the chart's default
# memory limit); the Go runtime collects harder as it nears it instead of
# letting the heap double. Measured peak RSS at defaults, 16 models x 8
# engines and through the fault matrix: see docs/hardening.md (Memory
# limit). With a different container limit set it to about 75% of it.
ENV NVIDIA_VISIBLE_DEVICES=all \
    NVIDIA_DRIVER_CAPABILITIES=utility \
    GOMEMLIMIT=40MiB
USER 65532:65532
EXPOSE 9470
ENTRYPOINT ["/usr/bin/vllm_exporter"]
