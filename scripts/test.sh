#!/usr/bin/env bash
# Runs every test. Needs Go and PostgreSQL: uses 127.0.0.1:5432 when it
# answers, otherwise a private cluster under .data/.
set -euo pipefail
cd "$(dirname "$0")/.."

TEST_DATABASE_URL="${TEST_DATABASE_URL:-$(scripts/pg.sh url)}"
export TEST_DATABASE_URL

# stripe-mock checks the adapter's requests against Stripe's API; without it
# those tests skip and say why.
if [ ! -x bin/stripe-mock ]; then
  make -s tools >&2 || echo "stripe-mock could not be installed; its tests will skip" >&2
fi

go test -race -count=1 -timeout 20m ./...
