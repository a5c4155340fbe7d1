#!/usr/bin/env bash
# `make demo`, against a running `make run`: the whole story on the
# simulator. A provider response is lost, the client gets 202 unknown, a retry
# with the same key recovers the same attempt (one charge), the payment is
# captured through the API and the provider's own signed webhook arrives
# twice, and the events feed shows every change once. Then a Pix
# payment: its QR code, paid through the simulator's control API, and the
# events it produced.
set -euo pipefail
cd "$(dirname "$0")/.."
DATA="$PWD/.data"
API="http://${HTTP_ADDR:-127.0.0.1:8080}"
SIM="${STRIPE_API_BASE:-http://127.0.0.1:12111}"
say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
# curl, with one clear line instead of curl's own error when the service or
# the simulator does not answer.
curl() {
  command curl -s --max-time 30 "$@" && return 0
  echo >&2
  echo "demo: no answer from the service ($API) or the simulator ($SIM): is make run still running?" >&2
  exit 1
}
for pair in "service|$API/healthz" "simulator|$SIM/_sim/stats"; do
  command curl -s --max-time 5 -o /dev/null "${pair#*|}" || {
    echo "demo: the ${pair%%|*} does not answer on ${pair#*|}: start it with make run in another terminal (HTTP_ADDR and STRIPE_API_BASE move it)" >&2
    exit 1
  }
done
[ -s "$DATA/demo-account.json" ] || { echo "demo: no demo account in $DATA: start the service with make run first" >&2; exit 1; }
ACCOUNT_ID="$(sed -E 's/.*"id":"([^"]+)".*/\1/' "$DATA/demo-account.json")"
API_KEY="$(sed -E 's/.*"api_key":"([^"]+)".*/\1/' "$DATA/demo-account.json")"
ORDER="demo-t$(date +%s)n$(date +%N)"
KEY="$(cat /proc/sys/kernel/random/uuid)"
BODY="{\"order_id\":\"$ORDER\",\"amount\":2000,\"currency\":\"BRL\",\"payment_method\":\"pm_card_visa\",\"capture_method\":\"manual\"}"
# events_of PAYMENT_ID: that payment's events, reading the whole feed page
# by page (it starts with the account's oldest event).
events_of() {
  local after="" page
  for _ in $(seq 1000); do
    page="$(curl "$API/v1/events?limit=100&after=$after" -H "Authorization: Bearer $API_KEY")"
    printf '%s' "$page" | grep -o '"type":"[a-z_.]*","created_at":"[^"]*","payment":{"id":"pay_[^"]*"' \
      | { grep "\"$1\"" || true; } | sed -E 's/,"payment":\{"id":"[^"]*"//'
    case "$page" in *'"has_more":true'*) ;; *) return 0 ;; esac
    after="$(printf '%s' "$page" | sed -E 's/.*"next_cursor":"([^"]*)".*/\1/')"
  done
}
create() {
  curl -X POST "$API/v1/payments" -H "Authorization: Bearer $API_KEY" -H 'Content-Type: application/json' \
    -H "Idempotency-Key: $KEY" -d "$BODY" -w '\nHTTP %{http_code}\n'
}

say "1. the simulator will charge, then drop its responses (the client's own retries included)"
curl -X POST "$SIM/_sim/faults" -d '{"op":"authorize","kind":"drop_after_effect"}'; echo
# Its webhooks would tell the service the outcome at once: held until the
# retry below, so the lost response stays unknown for a while.
curl -X POST "$SIM/_sim/webhooks/hold" >/dev/null
trap 'command curl -s --max-time 5 -X POST "$SIM/_sim/webhooks/release" -d "{}" >/dev/null || true' EXIT

say "2. create payment for $ORDER: the outcome is unknown -> 202"
create

curl -X DELETE "$SIM/_sim/faults" >/dev/null
say "3. the provider recovers; retry with the same Idempotency-Key: the same attempt ($ORDER:autorizar-v1) is re-sent; the provider replays -> 201"
create

say "4. again: the stored answer, byte for byte (Idempotent-Replayed: true)"
curl -i -X POST "$API/v1/payments" -H "Authorization: Bearer $API_KEY" -H 'Content-Type: application/json' \
  -H "Idempotency-Key: $KEY" -d "$BODY" | grep -iE '^(HTTP|idempotent-replayed)'

curl -X POST "$SIM/_sim/webhooks/release" -d '{}' >/dev/null

PAYMENT_ID="$(curl "$API/v1/payments?order_id=$ORDER" -H "Authorization: Bearer $API_KEY" | sed -E 's/.*"id":"(pay_[^"]+)".*/\1/')"

say "5. what the provider saw for this order only (other payments on the simulator are not counted)"
# Only this order's provider key and this payment's intents: the simulator
# also serves every other payment made since it started.
PKEY="$ORDER:autorizar-v1"
REQUESTS="$(curl "$SIM/_sim/requests")"
SENT="$(printf '%s' "$REQUESTS" | grep -o "\"op\":\"authorize\"[^}]*\"idempotency_key\":\"$PKEY\",\"replayed\":[a-z]*" || true)"
SK="$(printf '%s' "$SENT" | head -n 1 | sed -E 's/.*"secret_key":"([^"]*)".*/\1/')"
INTENTS="$(curl "$SIM/_sim/intents?secret_key=$SK" | grep -o "\"payment_id\":\"$PAYMENT_ID\"" | wc -l | tr -d ' ')"
echo "authorize requests with provider key $PKEY: $(printf '%s' "$SENT" | grep -c . || true)" \
  "(replayed by the provider: $(printf '%s' "$SENT" | grep -c '"replayed":true' || true))"
echo "payment intents at the provider for $PAYMENT_ID: $INTENTS"
if [ "$INTENTS" = 1 ]; then echo "-> one charge"; else echo "-> $INTENTS charges, expected 1"; fi

say "6. capture through the API: the provider captures and sends its own signed webhook (payment_intent.succeeded), twice: one effect"
curl -X POST "$SIM/_sim/webhooks/duplicate" -d '{"on":true}' >/dev/null
trap 'command curl -s --max-time 5 -X POST "$SIM/_sim/webhooks/duplicate" -d "{\"on\":false}" >/dev/null || true
  command curl -s --max-time 5 -X POST "$SIM/_sim/webhooks/release" -d "{}" >/dev/null || true' EXIT
curl -X POST "$API/v1/payments/$PAYMENT_ID/capture" -H "Authorization: Bearer $API_KEY" -H 'Content-Type: application/json' \
  -H "Idempotency-Key: $(cat /proc/sys/kernel/random/uuid)" -d '{}' -w '\nHTTP %{http_code}\n' \
  | grep -oE '^HTTP [0-9]+|"status":"[a-z_]+"' | head -n 2 | tr '\n' ' '; echo
curl -X POST "$SIM/_sim/webhooks/flush" >/dev/null
curl -X POST "$SIM/_sim/webhooks/duplicate" -d '{"on":false}' >/dev/null
# The simulator's log of what it sent: this account's payment_intent.succeeded
# deliveries, the last event's (the capture's) answers from the service.
HOOKS="$(curl "$SIM/_sim/webhooks/deliveries" | grep -o '{"event_id":"[^"]*","type":"payment_intent.succeeded","url":"[^"]*'"$ACCOUNT_ID"'","status":[0-9]*' || true)"
EVT="$(printf '%s\n' "$HOOKS" | tail -n 1 | sed -E 's/.*"event_id":"([^"]*)".*/\1/')"
echo "provider event $EVT delivered $(printf '%s\n' "$HOOKS" | grep -c "\"$EVT\"" || true) times, answered:" \
  $(printf '%s\n' "$HOOKS" | grep "\"$EVT\"" | sed -E 's/.*"status":([0-9]*)/HTTP \1/')

say "7. the events feed of this payment"
events_of "$PAYMENT_ID"

PIX_ORDER="pedido-pix-t$(date +%s)n$(date +%N)"
say "8. a Pix payment for $PIX_ORDER: 201 requires_action with the QR code (next_action)"
PIX="$(curl -X POST "$API/v1/payments" -H "Authorization: Bearer $API_KEY" -H 'Content-Type: application/json' \
  -H "Idempotency-Key: $(cat /proc/sys/kernel/random/uuid)" \
  -d "{\"order_id\":\"$PIX_ORDER\",\"amount\":4990,\"currency\":\"BRL\",\"payment_method\":\"pix\",\"expires_in\":900}")"
case "$PIX" in
  *'"image_url_png"'*) ;;
  *) echo "demo: the Pix payment was not created as expected: $PIX" >&2; exit 1 ;;
esac
PIX_ID="$(printf '%s' "$PIX" | sed -E 's/^\{"id":"(pay_[^"]+)".*/\1/')"
PIX_PI="$(printf '%s' "$PIX" | sed -E 's/.*"provider_payment_id":"([^"]+)".*/\1/')"
printf '%s' "$PIX" | grep -o '"status":"[a-z_]*"' | head -n 1
printf '%s' "$PIX" | grep -o '"image_url_png":"[^"]*"'
printf '%s' "$PIX" | grep -o '"expires_at":"[^"]*"'

say "9. the customer pays the Pix (the simulator's control API): the provider's signed webhook reaches the service"
curl -X POST "$SIM/_sim/intents/$PIX_PI/pay" -o /dev/null -w 'POST /_sim/intents/%{url_effective} -> HTTP %{http_code}\n' \
  | sed "s|$SIM/_sim/intents/||"
STATUS=""
for _ in $(seq 40); do
  STATUS="$(curl "$API/v1/payments/$PIX_ID" -H "Authorization: Bearer $API_KEY" | grep -o '"status":"[a-z_]*"' | head -n 1)"
  [ "$STATUS" = '"status":"captured"' ] && break
  sleep 0.25
done
echo "$PIX_ID: $STATUS"

say "10. the events feed of the Pix payment"
events_of "$PIX_ID"

