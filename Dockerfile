# Build: docker build -t payments .
# Run:   docker run -p 8080:8080 -e DATABASE_URL=... -e ENCRYPTION_KEY=... payments
#        (the image also carries the provider simulator: --entrypoint /providersim)

FROM golang:1.26 AS build
# Fetch a newer toolchain if go.mod asks for a later patch release than the image has.
ENV GOTOOLCHAIN=auto
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN mkdir -p /out && \
    CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/ ./cmd/payments ./cmd/providersim

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/payments /payments
COPY --from=build /out/providersim /providersim
USER nonroot
EXPOSE 8080
ENTRYPOINT ["/payments"]
CMD ["serve"]
