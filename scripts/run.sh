#!/usr/bin/env bash
# `make run`: the service on this machine with a private PostgreSQL (unless
# DATABASE_URL is set), the provider simulator, and a demo account.
set -euo pipefail

# try_line ADDR API_KEY: a curl line that works every time it is pasted: a
# fresh Idempotency-Key and a fresh order id, as shell expressions.
try_line() {
  cat <<TRY
    curl -sS -X POST http://$1/v1/payments \\
      -H 'Authorization: Bearer $2' \\
      -H 'Content-Type: application/json' \\
      -H "Idempotency-Key: \$(cat /proc/sys/kernel/random/uuid)" \\
      -d '{"order_id":"pedido-'"t\$(date +%s)n\$(date +%N)"'","amount":2000,"currency":"BRL","payment_method":"pm_card_visa","capture_method":"manual"}'
TRY
}

# try_lost ADDR API_KEY SIM: one line that makes the simulator charge and
# lose its answer (202 unknown), then retries with the same key once the
# simulator answers again (201: the same attempt, one charge). The
# simulator's webhooks are held meanwhile: they would tell the service the
# outcome before the retry.
try_lost() {
  cat <<LOST
    K=\$(cat /proc/sys/kernel/random/uuid) O=lost-t\$(date +%s)n\$(date +%N); pay() { curl -sS -X POST http://$1/v1/payments -H 'Authorization: Bearer $2' -H 'Content-Type: application/json' -H "Idempotency-Key: \$K" -d '{"order_id":"'\$O'","amount":2000,"currency":"BRL","payment_method":"pm_card_visa"}' -w '\nHTTP %{http_code}\n' | grep -oE '^HTTP [0-9]+|"status":"[a-z_]+"' | tr '\n' ' '; echo; }; curl -sS -X POST $3/_sim/webhooks/hold; curl -sS -X POST $3/_sim/faults -d '{"op":"authorize","kind":"drop_after_effect"}' >/dev/null; pay; curl -sS -X DELETE $3/_sim/faults; pay; curl -sS -X POST $3/_sim/webhooks/release -d '{}' >/dev/null
LOST
}

# try_flows ADDR API_KEY SIM: how to try the payments that wait for the
# customer (3-D Secure, Pix, Boleto) with the simulator's control API.
try_flows() {
  local create="curl -sS -X POST http://$1/v1/payments -H 'Authorization: Bearer $2' -H 'Content-Type: application/json' -H \"Idempotency-Key: \$(cat /proc/sys/kernel/random/uuid)\""
  local order='"order_id":"pedido-'"'"'"t$(date +%s)n$(date +%N)"'"'"'","amount":2000,"currency":"BRL"'
  cat <<FLOWS
  payments that wait for the customer (docs/integrating.md): create one, then act as the customer.
  The simulator's signed webhooks move the payment; watch it with GET /v1/payments/{id}.
  pi_… below is the answer's provider_payment_id.

  3-D Secure: open next_action.redirect_to_url.url in a browser and press Approve or Fail
    $create \\
      -d '{$order,"payment_method":"pm_card_threeDSecure2Required","return_url":"http://localhost:8090/"}'

  Pix: next_action.pix_display_qr_code.image_url_png is the QR code; then pay it (or fail, expire):
    $create \\
      -d '{$order,"payment_method":"pix","expires_in":900}'
    curl -sS -X POST $3/_sim/intents/pi_…/pay        # or …/expire

  Boleto: next_action.boleto_display_details.hosted_voucher_url is the voucher; it is pending for days:
    $create \\
      -d '{$order,"payment_method":"boleto","billing_details":{"name":"Maria Silva","email":"maria@example.com","tax_id":"529.982.247-25","address":{"line1":"Rua Augusta 100","city":"São Paulo","state":"SP","postal_code":"01305-000","country":"BR"}}}'
    curl -sS -X POST $3/_sim/intents/pi_…/processing   # the bank is clearing it: pending
    curl -sS -X POST $3/_sim/clock/advance -d '{"by":"48h"}'   # two days at the simulator
    curl -sS -X POST $3/_sim/intents/pi_…/pay          # paid: captured
    curl -sS -X POST $3/_sim/clock/reset               # the simulator's clock back to now

  the checkout page (Pix and 3-D Secure in a browser):
    PAYMENTS_API=http://$1 PAYMENTS_API_KEY=$2 go run ./examples/checkout   # then open http://localhost:8090
FLOWS
}

# try_mercadopago ADDR API_KEY SIM: how to try a Pix and a card on Mercado Pago with
# the demo account whose only provider is Mercado Pago (an account's first
# provider takes its Pix and Boleto; Mercado Pago needs the payer's email).
try_mercadopago() {
  local order='"order_id":"pedido-'"'"'"t$(date +%s)n$(date +%N)"'"'"'","amount":2000,"currency":"BRL"'
  cat <<MP
  Pix on Mercado Pago, with the Mercado Pago demo account (Mercado Pago needs the payer's email;
  only a Boleto needs billing_details whole):
    curl -sS -X POST http://$1/v1/payments \\
      -H 'Authorization: Bearer $2' \\
      -H 'Content-Type: application/json' \\
      -H "Idempotency-Key: \$(cat /proc/sys/kernel/random/uuid)" \\
      -d '{$order,"payment_method":"pix","expires_in":900,"billing_details":{"email":"maria@example.com"}}'
  next_action.pix_display_qr_code.hosted_instructions_url is the simulator's Pix page: pay it there, or
  with ID the answer's provider_payment_id (Mercado Pago's payment number):
    curl -sS -X POST $3/_sim/mp/payments/ID/pay   # or …/fail, …/expire
  A card on Mercado Pago names its Mercado Pago token in payment_methods (test tokens: tok_APRO approves,
  tok_OTHE declines, tok_3DS_APRO asks for 3-D Secure; "capture_method":"manual" holds it for a capture):
    curl -sS -X POST http://$1/v1/payments \\
      -H 'Authorization: Bearer $2' \\
      -H 'Content-Type: application/json' \\
      -H "Idempotency-Key: \$(cat /proc/sys/kernel/random/uuid)" \\
      -d '{$order,"payment_methods":{"mercadopago":{"token":"tok_APRO","payment_method_id":"visa","installments":1}},"billing_details":{"email":"maria@example.com"}}'
MP
}

# rand_hex: 16 random hex digits.
rand_hex() { head -c 8 /dev/urandom | od -An -tx1 | tr -d ' \n'; }

# json_field FILE NAME: a string field of the one-line JSON object in FILE.
json_field() { sed -E 's/.*"'"$2"'":"([^"]+)".*/\1/' "$1"; }

# sim_webhook KEY URL SECRET: the simulator signs the events of KEY's
# payments with SECRET and sends them to URL, as the provider would.
sim_webhook() {
  curl -sS --fail-with-body -X POST "$STRIPE_API_BASE/_sim/webhook_endpoints" -H 'Content-Type: application/json' \
    -d "{\"secret_key\":\"$1\",\"url\":\"$2\",\"secret\":\"$3\"}" \
    || { echo "run: could not register the simulator's webhook endpoint (see .data/providersim.log)" >&2; exit 1; }
}

# Sourced (by the script tests), only define the functions.
[ "${BASH_SOURCE[0]}" = "$0" ] || return 0

cd "$(dirname "$0")/.."
ROOT="$PWD"
DATA="$ROOT/.data"
mkdir -p "$DATA" bin

if [ -z "${DATABASE_URL:-}" ]; then
  base="$(PG_FORCE_PRIVATE=1 scripts/pg.sh url)"
  psql "$base" -Atqc "SELECT 1 FROM pg_database WHERE datname = 'payments'" | grep -q 1 \
    || psql "$base" -qc "CREATE DATABASE payments" >/dev/null
  DATABASE_URL="${base/\/postgres\?/\/payments?}"
fi
export DATABASE_URL

# Secrets of the local installation, made once and kept under .data/.
[ -s "$DATA/encryption.key" ] || head -c 32 /dev/urandom | base64 > "$DATA/encryption.key"
# The admin token: 64 hex characters (serve refuses one under 32); an
# older, shorter one is replaced.
{ [ -s "$DATA/admin.token" ] && [ "$(wc -c < "$DATA/admin.token")" -ge 32 ]; } \
  || od -An -tx1 -N32 /dev/urandom | tr -d ' \n' > "$DATA/admin.token"
[ -s "$DATA/webhook.secret" ] || echo "whsec_$(head -c 24 /dev/urandom | base64 | tr -dc 'A-Za-z0-9')" > "$DATA/webhook.secret"
export ENCRYPTION_KEY="$(cat "$DATA/encryption.key")"
export ADMIN_TOKEN="$(cat "$DATA/admin.token")"
export HTTP_ADDR="${HTTP_ADDR:-127.0.0.1:8080}"
SIM_ADDR="${PROVIDERSIM_ADDR:-127.0.0.1:12111}"
# The local webhook receiver is http on loopback: the service must allow it.
export WEBHOOK_ALLOW_PRIVATE="${WEBHOOK_ALLOW_PRIVATE:-true}"
LISTEN_ADDR="${WEBHOOK_LISTEN_ADDR:-127.0.0.1:8091}"
export STRIPE_API_BASE="${STRIPE_API_BASE:-http://$SIM_ADDR}"
export MERCADOPAGO_API_BASE="${MERCADOPAGO_API_BASE:-$STRIPE_API_BASE}"

echo "building…" >&2
# The version `payments version` and payments_build_info report.
VERSION="$(git describe --always --dirty 2>/dev/null || true)"
go build -ldflags "-X github.com/acmepay/payments/internal/buildinfo.Version=$VERSION" -o bin/ ./cmd/payments ./cmd/providersim

bin/providersim -addr "$SIM_ADDR" 2>"$DATA/providersim.log" &
SIM_PID=$!
LISTEN_PID=""
trap 'kill $SIM_PID $LISTEN_PID 2>/dev/null || true; rm -f "$DATA/run.pids"' EXIT

# accounts create asks the simulator which account the key belongs to.
for _ in $(seq 50); do
  curl -s -o /dev/null --max-time 1 "$STRIPE_API_BASE/_sim/stats" && break
  sleep 0.1
done
bin/payments migrate 2>>"$DATA/payments.log"
# The demo's provider secrets are unique per installation: two accounts can
# never share provider credentials. They are kept, so the simulator's
# webhooks can be routed to the demo accounts (an installation made before
# they were kept gets new demo accounts). The demo account holds both
# providers, Stripe first, so Stripe takes its payments; the Mercado Pago
# demo account holds only Mercado Pago's, so its Pix and Boleto go there.
[ -s "$DATA/mercadopago.secret" ] || echo "mpsec_$(head -c 24 /dev/urandom | base64 | tr -dc 'A-Za-z0-9')" > "$DATA/mercadopago.secret"
if [ ! -s "$DATA/demo-account.json" ] || [ ! -s "$DATA/stripe.key" ] || [ ! -s "$DATA/mercadopago.token" ]; then
  echo "sk_test_demo_$(rand_hex)" > "$DATA/stripe.key"
  echo "TEST-demo-$(rand_hex)" > "$DATA/mercadopago.token"
  bin/payments accounts create --name "Demo store" \
    --stripe-key "$(cat "$DATA/stripe.key")" \
    --webhook-secret "$(cat "$DATA/webhook.secret")" \
    --mercadopago-access-token "$(cat "$DATA/mercadopago.token")" \
    --mercadopago-webhook-secret "$(cat "$DATA/mercadopago.secret")" \
    2>>"$DATA/payments.log" > "$DATA/demo-account.json"
fi
if [ ! -s "$DATA/demo-mp-account.json" ] || [ ! -s "$DATA/demo-mp.token" ]; then
  echo "TEST-demo-mp-$(rand_hex)" > "$DATA/demo-mp.token"
  bin/payments accounts create --name "Demo store (Mercado Pago)" \
    --mercadopago-access-token "$(cat "$DATA/demo-mp.token")" \
    --mercadopago-webhook-secret "$(cat "$DATA/mercadopago.secret")" \
    2>>"$DATA/payments.log" > "$DATA/demo-mp-account.json"
fi
API_KEY="$(json_field "$DATA/demo-account.json" api_key)"
ACCOUNT_ID="$(json_field "$DATA/demo-account.json" id)"
MP_API_KEY="$(json_field "$DATA/demo-mp-account.json" api_key)"
MP_ACCOUNT_ID="$(json_field "$DATA/demo-mp-account.json" id)"

sim_webhook "$(cat "$DATA/stripe.key")" "http://$HTTP_ADDR/webhooks/stripe/$ACCOUNT_ID" "$(cat "$DATA/webhook.secret")"
sim_webhook "$(cat "$DATA/mercadopago.token")" "http://$HTTP_ADDR/webhooks/mercadopago/$ACCOUNT_ID" "$(cat "$DATA/mercadopago.secret")"
sim_webhook "$(cat "$DATA/demo-mp.token")" "http://$HTTP_ADDR/webhooks/mercadopago/$MP_ACCOUNT_ID" "$(cat "$DATA/mercadopago.secret")"

cat >&2 <<INFO

  payments API    http://$HTTP_ADDR   (logs: stderr)
  simulator       $STRIPE_API_BASE   (logs: .data/providersim.log)
  database        $DATABASE_URL
  demo API key    $API_KEY   (Stripe first, then Mercado Pago: Stripe takes its payments)
  MP demo API key $MP_API_KEY   (only Mercado Pago: it takes the Pix and Boleto)
  webhooks        http://$LISTEN_ADDR/   (payments webhooks listen, registered for the demo account:
                  each event it receives, signature verified: tail -f .data/webhooks.log)
  admin token     $ADMIN_TOKEN
  whole story     make demo   (in another terminal: lost response, 202, retry, webhook, events)

  stop            Ctrl-C here, or make stop (also stops the private PostgreSQL)

  try (paste it as often as you like: a new order each time):
$(try_line "$HTTP_ADDR" "$API_KEY")

  a lost answer: the simulator charges and drops its response (202 unknown), then the retry
  with the same Idempotency-Key recovers the same attempt (201, one charge; docs/simulator.md):
$(try_lost "$HTTP_ADDR" "$API_KEY" "$STRIPE_API_BASE")

$(try_flows "$HTTP_ADDR" "$API_KEY" "$STRIPE_API_BASE")

$(try_mercadopago "$HTTP_ADDR" "$MP_API_KEY" "$MERCADOPAGO_API_BASE")

INFO

bin/payments serve &
PAY_PID=$!
echo "$SIM_PID $PAY_PID" > "$DATA/run.pids"
# SIGTERM (make stop) or Ctrl-C: payments drains its requests, then exits.
trap 'kill -TERM $PAY_PID $LISTEN_PID 2>/dev/null || true' TERM INT

# The receiver registers itself through the API, so it starts once the
# service answers. It reuses the endpoint an earlier run left at its
# address, with a new secret. The API key goes by the environment, not the
# command line (ps shows that).
for _ in $(seq 300); do
  curl -s -o /dev/null --max-time 1 "http://$HTTP_ADDR/healthz" && break
  kill -0 "$PAY_PID" 2>/dev/null || break
  sleep 0.1
done
# Emptied here, not by the background job's redirection: the wait below
# must not find the last run's lines.
: >"$DATA/webhooks.log"
PAYMENTS_API_KEY="$API_KEY" bin/payments webhooks listen --addr "$LISTEN_ADDR" --register \
  --api-url "http://$HTTP_ADDR" >>"$DATA/webhooks.log" 2>&1 &
LISTEN_PID=$!
echo "$SIM_PID $PAY_PID $LISTEN_PID" > "$DATA/run.pids"
for _ in $(seq 50); do
  grep -q "listening on" "$DATA/webhooks.log" && break
  kill -0 "$LISTEN_PID" 2>/dev/null || {
    echo "run: the webhook receiver did not start (the service goes on without it):" >&2
    sed 's/^/  /' "$DATA/webhooks.log" >&2
    break
  }
  sleep 0.1
done
status=0
while kill -0 "$PAY_PID" 2>/dev/null; do
  wait "$PAY_PID" && status=0 || status=$?
done
exit "$status"
