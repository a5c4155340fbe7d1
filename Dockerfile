# Production image: only the payments binary.
#   docker build --build-arg VERSION=$(git describe --always --dirty) -t payments .
# (or `make image`). VERSION is what `payments version` and the
# payments_build_info metric report; .git stays out of the build context.
#   docker run --stop-timeout 30 -p 8080:8080 -e DATABASE_URL=... -e ENCRYPTION_KEY=... payments
# The provider simulator, for local and test set-ups only, is its own target:
#   docker build --target providersim -t payments-providersim .
#
# Stop timeout: on SIGTERM the service drains in-flight requests for up to
# PROVIDER_TIMEOUT + 5s (15s with the default 10s), so that provider calls
# finish and record their outcome. Give it longer before SIGKILL:
# stop-timeout: 30s (docker run --stop-timeout 30, compose
# stop_grace_period: 30s, Kubernetes terminationGracePeriodSeconds: 30).
# Raise it with PROVIDER_TIMEOUT.

# The Go release go.mod asks for, or newer: with GOTOOLCHAIN=local the build
# never downloads another toolchain.
FROM golang:1.26.8 AS build
ENV GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-mod=readonly
WORKDIR /src
COPY . .
# No `go mod download`: it would fetch the `tool` dependencies (sqlc,
# staticcheck) too. Building one command downloads only the modules it
# imports.
ARG VERSION=unknown
RUN --mount=type=cache,target=/root/go/pkg/mod \
    go build -trimpath -ldflags="-s -w -X github.com/acmepay/payments/internal/buildinfo.Version=${VERSION}" \
    -o /out/payments ./cmd/payments

FROM build AS build-providersim
RUN --mount=type=cache,target=/root/go/pkg/mod \
    go build -trimpath -ldflags="-s -w" -o /out/providersim ./cmd/providersim

FROM gcr.io/distroless/static-debian12:nonroot AS providersim
COPY --from=build-providersim /out/providersim /providersim
USER nonroot
EXPOSE 12111
ENV PROVIDERSIM_ADDR=:12111
ENTRYPOINT ["/providersim"]

# The last stage is the default target: the production image.
FROM gcr.io/distroless/static-debian12:nonroot AS payments
COPY --from=build /out/payments /payments
USER nonroot
EXPOSE 8080
# /readyz: database reachable, migrations applied. Reads only HTTP_ADDR.
HEALTHCHECK --interval=10s --timeout=5s --start-period=30s --retries=3 \
    CMD ["/payments", "healthcheck"]
STOPSIGNAL SIGTERM
ENTRYPOINT ["/payments"]
CMD ["serve"]
