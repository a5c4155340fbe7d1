#!/usr/bin/env bash
# Runs every test. Needs Go and PostgreSQL: uses 127.0.0.1:5432 when it
# answers, otherwise a private cluster under .data/.
set -euo pipefail
cd "$(dirname "$0")/.."

TEST_DATABASE_URL="${TEST_DATABASE_URL:-$(scripts/pg.sh url)}"
export TEST_DATABASE_URL

# stripe-mock checks the adapter's requests against Stripe's API. A run
# without it is not a full run: it fails here, and its tests fail rather
# than skip (REQUIRE_STRIPE_MOCK=1). Only on a developer's machine,
# REQUIRE_STRIPE_MOCK=0 lets them skip; CI=true always requires it.
REQUIRE_STRIPE_MOCK="${REQUIRE_STRIPE_MOCK:-1}"
[ "${CI:-}" = "true" ] && REQUIRE_STRIPE_MOCK=1
export REQUIRE_STRIPE_MOCK
if [ -n "${STRIPE_MOCK_BIN:-}" ]; then
  [ -x "$STRIPE_MOCK_BIN" ] || { echo "test.sh: STRIPE_MOCK_BIN=$STRIPE_MOCK_BIN is not an executable file" >&2; exit 1; }
elif ! command -v stripe-mock >/dev/null 2>&1 && [ ! -x bin/stripe-mock ]; then
  if ! make -s tools >&2; then
    if [ "$REQUIRE_STRIPE_MOCK" = "1" ]; then
      echo "test.sh: stripe-mock could not be installed (make tools failed above: is the Go module proxy reachable?)." >&2
      echo "test.sh: without it the Stripe adapter's wire tests cannot run, so this run would not be complete." >&2
      echo "test.sh: fix the download, or set STRIPE_MOCK_BIN=/path/to/stripe-mock; on your own machine only, REQUIRE_STRIPE_MOCK=0 lets those tests skip." >&2
      exit 1
    fi
    echo "test.sh: stripe-mock could not be installed; REQUIRE_STRIPE_MOCK=0, so its tests will skip" >&2
  fi
fi

# Headless Chromium drives the checkout example's page
# (examples/checkout). As with stripe-mock: installed from Debian's packages
# when missing, and required (REQUIRE_CHROMIUM=1, its test fails rather than
# skips) unless REQUIRE_CHROMIUM=0 on a developer's machine; CI=true always
# requires it. CHROMIUM_BIN names another browser binary.
REQUIRE_CHROMIUM="${REQUIRE_CHROMIUM:-1}"
[ "${CI:-}" = "true" ] && REQUIRE_CHROMIUM=1
export REQUIRE_CHROMIUM
have_chromium() {
  for name in chromium chromium-browser google-chrome google-chrome-stable; do
    command -v "$name" >/dev/null 2>&1 && return 0
  done
  return 1
}
if [ -n "${CHROMIUM_BIN:-}" ]; then
  [ -x "$CHROMIUM_BIN" ] || { echo "test.sh: CHROMIUM_BIN=$CHROMIUM_BIN is not an executable file" >&2; exit 1; }
elif ! have_chromium; then
  echo "test.sh: installing chromium (Debian's package) for the checkout page's browser test" >&2
  if ! { [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 \
      && { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; } >&2 \
      && have_chromium; }; then
    if [ "$REQUIRE_CHROMIUM" = "1" ]; then
      echo "test.sh: chromium could not be installed (apt-get install -y chromium, as root, failed above or was not possible)." >&2
      echo "test.sh: without it the checkout page's browser test cannot run, so this run would not be complete." >&2
      echo "test.sh: install it, or set CHROMIUM_BIN=/path/to/chromium; on your own machine only, REQUIRE_CHROMIUM=0 lets that test skip." >&2
      exit 1
    fi
    echo "test.sh: chromium could not be installed; REQUIRE_CHROMIUM=0, so the browser test will skip" >&2
  fi
fi

# The TypeScript client (clients/typescript): dependencies from its
# lockfile, generated types current, type-checked; api/client's
# TestTypeScriptClient then runs its node test against the service. Skipped,
# with this line, where node or npm is missing.
if command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1; then
  make -s ts >&2
else
  echo "test.sh: node/npm not found: the TypeScript client is not type-checked or tested (install Node.js 20+ and npm)" >&2
fi

# The alerting rules: syntax, then their unit tests (deploy/prometheus).
# promtool comes with Debian's prometheus package; without it these two
# checks skip, saying so (go test ./deploy still checks every metric they
# name against the service's registry).
if command -v promtool >/dev/null 2>&1; then
  promtool check rules deploy/prometheus/alerts.yml
  promtool test rules deploy/prometheus/alerts_test.yml
else
  echo "test.sh: promtool not found (apt-get install prometheus): skipping promtool check/test rules of deploy/prometheus/alerts.yml" >&2
fi

go test -race -count=1 -timeout 20m ./...

# The money path a second time, every service instance behind PgBouncer in
# transaction mode (started by the tests; apt-get install pgbouncer when
# missing): create, replay, recovery, capture, refund, webhooks, events.
echo "test.sh: the money path again through PgBouncer in transaction mode (TEST_POOLER=pgbouncer)" >&2
TEST_POOLER=pgbouncer go test -race -count=1 -timeout 10m \
  -run '^(TestCreate|TestGetPayment|TestCapture|TestCancel|TestRefund|TestReconcile|TestEvents|TestWebhook.*|TestRecordingTheProviderAnswer|TestClientGoneKeepsTheProviderAnswer)$' ./api/
