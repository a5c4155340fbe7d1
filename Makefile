# Payments service. `make` lists the targets.
SHELL := /bin/bash
.DEFAULT_GOAL := help
GO ?= go
BIN := $(CURDIR)/bin
STRIPE_MOCK_VERSION := v0.203.0
# The version stamped into the binaries (`payments version`,
# payments_build_info); the image takes it as --build-arg VERSION.
VERSION ?= $(shell git describe --always --dirty 2>/dev/null)
LDFLAGS := -X github.com/acmepay/payments/internal/buildinfo.Version=$(VERSION)

.PHONY: help
help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*## "}; {printf "  %-10s %s\n", $$1, $$2}'

.PHONY: run
run: ## run the service locally: private PostgreSQL, provider simulator, demo account, a webhook receiver for it
	@scripts/run.sh

.PHONY: stop
stop: ## stop what `make run` started: the service, the webhook receiver, the simulator, the private PostgreSQL
	@scripts/stop.sh

.PHONY: demo
demo: ## against a running `make run`: lost response, 202, retry, webhook, events feed; a Pix payment paid through the simulator
	@scripts/demo.sh

.PHONY: test
test: ## run every test against a real PostgreSQL (started privately if 5432 is silent)
	@scripts/test.sh

.PHONY: generate
generate: ## regenerate sqlc code, the Go API client (api/client) and docs/configuration.md
	$(GO) tool sqlc generate
	$(GO) generate ./api/client/
	$(GO) generate ./internal/settings/

# vacuum sits in its own module (tools/vacuum) so that its dependencies
# stay out of the service's go.mod.
VACUUM := $(GO) tool -modfile=tools/vacuum/go.mod vacuum

.PHONY: lint-openapi
lint-openapi: ## lint openapi.yaml (Spectral oas + Redocly recommended rules, openapi.ruleset.yaml)
	$(VACUUM) lint --no-update-check --no-banner --no-style --details --all-results --no-clip \
		--fail-severity warn --ruleset openapi.ruleset.yaml openapi.yaml

.PHONY: client-diff
client-diff: ## fail if api/client is not what openapi.yaml generates
	@tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
		(cd api/client && $(GO) tool oapi-codegen -config oapi-codegen.yaml -o "$$tmp/client.gen.go" ../../openapi.yaml) && \
		diff -u api/client/client.gen.go "$$tmp/client.gen.go" || \
		{ echo "api/client is stale: run make generate"; exit 1; }

.PHONY: ts
ts: ## TypeScript client (clients/typescript): npm ci from the lockfile, generated types current, tsc --noEmit
	cd clients/typescript && npm ci --no-audit --no-fund && npm run --silent check-generated && npm run --silent typecheck

.PHONY: ts-generate
ts-generate: ## regenerate clients/typescript/src/schema.d.ts from openapi.yaml
	cd clients/typescript && npm run --silent generate

.PHONY: config-diff
config-diff: ## fail if docs/configuration.md is not what the settings list (internal/settings) generates
	@tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
		$(GO) run ./internal/settings/gendoc -o "$$tmp/configuration.md" && \
		diff -u docs/configuration.md "$$tmp/configuration.md" || \
		{ echo "docs/configuration.md is stale: run make generate"; exit 1; }

.PHONY: verify
verify: ## generated code and docs/configuration.md current, OpenAPI lint, gofmt, go vet, staticcheck, go.mod tidy, Dockerfile and script checks
	$(GO) tool sqlc diff
	@$(MAKE) --no-print-directory client-diff
	@$(MAKE) --no-print-directory config-diff
	@$(MAKE) --no-print-directory lint-openapi
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './.data/*')); \
		if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) vet -tags failpoints ./...
	$(GO) tool staticcheck ./...
	$(GO) mod tidy -diff
	cd tools/vacuum && $(GO) mod tidy -diff
	@scripts/check-dockerfile.sh

.PHONY: bench
bench: ## the money path's Go benchmarks, the load generator on the real binaries, then create and replay through PgBouncer (docs/BENCHMARKS.md; BENCHFLAGS=-short)
	@url=$$(scripts/pg.sh url) && \
		TEST_DATABASE_URL=$$url $(GO) test -run '^$$' -bench . -benchmem ./api/ && \
		$(GO) run ./cmd/paybench -database-url "$$url" $(BENCHFLAGS) && \
		$(MAKE) --no-print-directory bench-pooled

# PgBouncer's port for bench-pooled.
PGBOUNCER_PORT ?= 16432

.PHONY: bench-pooled
bench-pooled: ## create and replay at 32 and 128 clients with the service behind PgBouncer in transaction mode (cache_describe)
	@url=$$(scripts/pg.sh url) && dir=$$(mktemp -d) && chmod 755 "$$dir" && \
		trap 'scripts/topology.sh stop "$$dir"; rm -rf "$$dir"' EXIT && \
		scripts/topology.sh pgbouncer "$$dir" $(PGBOUNCER_PORT) "$$url" >/dev/null && \
		$(GO) run ./cmd/paybench -database-url "$$url" -clients 32,128 -workloads create,replay -ceilings=false -history-rows 0 \
			-service-db-host 127.0.0.1:$(PGBOUNCER_PORT) -service-db-params default_query_exec_mode=cache_describe $(BENCHFLAGS)

.PHONY: chaos
chaos: ## chaos run of the real binaries (3 replicas, provider faults, kills, revoked credentials, expiring keys, webhooks), then the invariants; ~3 min (CHAOS_FLAGS=-short: ~30 s)
	$(GO) run ./cmd/chaos $(CHAOS_FLAGS)

.PHONY: failover
failover: ## chaos run (~30 s, 2 replicas) on a pg_auto_failover formation whose primary is stopped mid-run; time to the first successful create (docs/RELIABILITY.md)
	$(GO) run ./cmd/chaos -short -failover $(CHAOS_FLAGS)

.PHONY: chaos-short
chaos-short: ## only the ~30 s chaos test that `make test` runs (TestChaosShort)
	@TEST_DATABASE_URL=$${TEST_DATABASE_URL:-$$(scripts/pg.sh url)} $(GO) test -count=1 -run '^TestChaosShort$$' -v ./cmd/chaos/

.PHONY: migrate
migrate: ## apply migrations to DATABASE_URL
	$(GO) run ./cmd/payments migrate

.PHONY: tools
tools: ## install stripe-mock into ./bin (used by the adapter's wire tests)
	GOBIN=$(BIN) $(GO) install github.com/stripe/stripe-mock@$(STRIPE_MOCK_VERSION)

.PHONY: build
build: ## build the binaries into ./bin, stamped with `git describe` (VERSION=… overrides)
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/ ./cmd/payments ./cmd/providersim

.PHONY: image
image: ## build the production image, stamped with the same version as `make build`
	docker build --build-arg VERSION=$(VERSION) -t payments:$(VERSION) .
