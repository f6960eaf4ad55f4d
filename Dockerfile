# syntax=docker/dockerfile:1
#
# One Dockerfile for every prloop image. SERVICE picks the binary, the target
# picks the runtime image:
#
#   docker build --build-arg SERVICE=poller    --target static -t prloop-poller .
#   docker build --build-arg SERVICE=merger    --target static -t prloop-merger .
#   docker build --build-arg SERVICE=escalator --target static -t prloop-escalator .
#   docker build --build-arg SERVICE=feedback  --target git    -t prloop-feedback .
#   docker build --build-arg SERVICE=prloop    --target git    -t prloop .
#
# static is distroless: no shell, no package manager, nothing but the binary.
# git is Alpine with git, sh and bubblewrap, for the feedback service (it
# fetches and pushes through its mirror, and runs the coding agent with sh -c
# in a bubblewrap sandbox), for the merger when
# PRLOOP_UPDATE_METHOD=rebase, and for the all-in-one binary, whose GitHub
# simulator (prloop ghsim) keeps real git repositories.
#
# Both run as UID 65532 (distroless's "nonroot"), so Kubernetes'
# runAsNonRoot can check the numeric user.
#
# A release (.goreleaser.yaml) builds the same images from binaries it
# compiled for each platform: BINARY_FROM=prebuilt takes $BINARY from the
# build context's $TARGETPLATFORM directory instead of the build stage.

ARG GO_VERSION=1.26
ARG BINARY_FROM=build

FROM golang:${GO_VERSION}-alpine AS build
ARG SERVICE=prloop
ARG VERSION=dev
WORKDIR /src
# Static, reproducible binaries: no cgo (distroless/static has no libc), no
# VCS stamping (.git is not in the build context), no local paths.
ENV CGO_ENABLED=0 GOFLAGS=-buildvcs=false
COPY . .
RUN --mount=type=cache,target=/root/.cache/go-build \
    --mount=type=cache,target=/go/pkg/mod \
    case "$SERVICE" in \
      prloop) pkg=./cmd/prloop ;; \
      poller|feedback|merger|escalator) pkg=./services/$SERVICE/cmd/$SERVICE ;; \
      *) echo "unknown SERVICE=$SERVICE: want poller, feedback, merger, escalator or prloop" >&2; exit 1 ;; \
    esac && \
    CGO_ENABLED=0 go build -trimpath -ldflags="-s -w -X main.version=$VERSION" -o /out/app "$pkg"

# goreleaser's context: <os>/<arch>/<binary> for each platform.
FROM scratch AS prebuilt
ARG TARGETPLATFORM
ARG BINARY=prloop
COPY ${TARGETPLATFORM}/${BINARY} /out/app

FROM ${BINARY_FROM} AS binary

# Settings every prloop image shares: serve /healthz, /readyz and /metrics on
# all interfaces (the default, 127.0.0.1:0, is for a laptop), log JSON.
FROM gcr.io/distroless/static-debian12:nonroot AS static
ARG SERVICE=prloop
LABEL org.opencontainers.image.title="prloop-${SERVICE}" \
      org.opencontainers.image.source="https://github.com/prloop/prloop"
ENV PRLOOP_HTTP_ADDR=:8080 PRLOOP_LOG_FORMAT=json
COPY --from=binary /out/app /usr/local/bin/app
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/app"]

FROM alpine:3.22 AS git
ARG SERVICE=prloop
LABEL org.opencontainers.image.title="prloop-${SERVICE}" \
      org.opencontainers.image.source="https://github.com/prloop/prloop"
RUN apk add --no-cache git ca-certificates tzdata bubblewrap \
 && addgroup -S -g 65532 prloop \
 && adduser -S -D -u 65532 -G prloop -h /home/prloop prloop \
 && mkdir -p /workspace /ghsim \
 && chown prloop:prloop /workspace /ghsim
# HOME is where git and the agent keep their settings; Kubernetes mounts an
# emptyDir there (and on /workspace and /tmp) under a read-only root.
ENV HOME=/home/prloop PRLOOP_HTTP_ADDR=:8080 PRLOOP_LOG_FORMAT=json
COPY --from=binary /out/app /usr/local/bin/app
USER 65532:65532
WORKDIR /home/prloop
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/app"]
