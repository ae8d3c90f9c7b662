# syntax=docker/dockerfile:1

# windowd container image.
#
#   docker build -t windowd .
#   docker run --rm -v windowd-state:/var/lib/windowd \
#     -v "$PWD/my-config.yaml:/etc/windowd/config.yaml:ro" -p 9100:9100 windowd
#
# The image carries configs/docker-compose.yaml as /etc/windowd/config.yaml
# (brokers kafka:9092); mount your own file over it. The config must set
# http.listen to 0.0.0.0:9100 (or another non-loopback address) for /metrics,
# /healthz and /readyz to be reachable from outside the container.

ARG GO_VERSION=1.26

# The version `windowd version` shows: the build context has no .git (see
# .dockerignore), so the build passes it in, e.g.
#   docker build --build-arg VERSION=$(git describe --tags --always --dirty) -t windowd .
ARG VERSION=unknown

# ---- build -----------------------------------------------------------------
FROM golang:${GO_VERSION}-bookworm AS build
ARG VERSION

WORKDIR /src

# Pebble compresses sstables with zstd through github.com/DataDog/zstd, which
# is cgo (without cgo Pebble falls back to a slower pure-Go zstd), and keeps
# its block cache in C memory. So: cgo on, linked statically against glibc,
# with the pure-Go user and DNS lookups (osusergo, netgo) so that the static
# binary never calls glibc's NSS and runs on a distroless/static base.
ENV CGO_ENABLED=1 \
    GOFLAGS=-buildvcs=false

# Dependencies first: this layer is rebuilt only when go.mod or go.sum change.
COPY go.mod go.sum ./
RUN go mod download && go mod verify

COPY . .
RUN --mount=type=cache,target=/root/.cache/go-build \
    go build -trimpath -tags osusergo,netgo \
      -ldflags "-s -w -X main.stampedVersion=${VERSION} -linkmode external -extldflags -static" \
      -o /out/windowd ./cmd/windowd \
 && /out/windowd version | grep -F "windowd ${VERSION} " \
 && /out/windowd validate --config configs/docker-compose.yaml \
 && mkdir -p /out/state

# ---- run -------------------------------------------------------------------
# static-debian12: no libc, no shell; CA certificates, tzdata and a `nonroot`
# user (uid/gid 65532).
FROM gcr.io/distroless/static-debian12:nonroot

COPY --from=build /out/windowd /windowd
COPY configs/docker-compose.yaml /etc/windowd/config.yaml
# The state directory must belong to the nonroot user; a new named volume
# mounted here copies this ownership.
COPY --from=build --chown=65532:65532 /out/state /var/lib/windowd

# nonroot, numerically, so that Kubernetes' runAsNonRoot can verify it.
USER 65532:65532
WORKDIR /var/lib/windowd

# /metrics, /healthz, /readyz (http.listen)
EXPOSE 9100
# Pebble state (state.dir). A clean shutdown keeps it as a warm cache; the
# changelog topic is the source of truth (docs/SEMANTICS.md, State follows partitions).
VOLUME ["/var/lib/windowd"]

ENTRYPOINT ["/windowd"]
CMD ["run", "--config", "/etc/windowd/config.yaml"]
