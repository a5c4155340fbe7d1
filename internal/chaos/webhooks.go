package chaos

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/acmepay/payments/internal/provider/providersim"
	"github.com/stripe/stripe-go/v76/webhook"
)

// Webhook delivery shares.
const (
	webhookShare   = 0.40 // of provider state changes: delivered as an event
	lateShare      = 0.20 // of those: first delivered 5–20 s late
	duplicateShare = 0.30 // of those: delivered a second time
)

// event is a signed-at-send-time Stripe event built from a simulator
// intent, or a Mercado Pago notification about one of its payments
// (dataID set).
type event struct {
	id, typ string
	payload []byte
	dataID  string
}

type delivery struct {
	ev    event
	due   time.Time
	tries int
}

// webhookTally counts deliveries and the service's answers.
type webhookTally struct {
	Events     int            // distinct events chosen for delivery
	MPEvents   int            // of which Mercado Pago notifications
	Sent       int            // HTTP deliveries answered
	Duplicates int            // deliveries of an event already delivered once
	Late       int            // events first delivered 5–20 s after the change
	Outcomes   map[string]int // the service's "outcome" on 200
	Retried    int            // transport errors and 5xx, delivered again later
	Abandoned  int            // gave up after 10 tries
}

// webhooks plays the provider's event delivery: for a share of the intents'
// state changes it sends signed events to random replicas, late, duplicated
// and out of order, the way Stripe may.
type webhooks struct {
	simURL, secretKey, secret, accountID string
	mpToken, mpSecret                    string
	replicas                             []string
	http                                 *http.Client

	mu         sync.Mutex
	rng        *rand.Rand
	decided    map[string]bool
	queue      []*delivery
	t          webhookTally
	unexpected []string
}

func newWebhooks(simURL, secretKey, secret, mpToken, mpSecret, accountID string, replicas []string, seed uint64) *webhooks {
	return &webhooks{simURL: simURL, secretKey: secretKey, secret: secret, mpToken: mpToken, mpSecret: mpSecret,
		accountID: accountID, replicas: replicas,
		http: &http.Client{Timeout: 15 * time.Second}, rng: rand.New(rand.NewPCG(seed, 0xbeef)),
		decided: map[string]bool{}, t: webhookTally{Outcomes: map[string]int{}}}
}

// generate polls the simulator's payment objects until ctx is done and
// schedules events for the changes it chooses.
func (w *webhooks) generate(ctx context.Context) {
	for ctx.Err() == nil {
		w.poll(ctx)
		sleep(ctx, 1500*time.Millisecond)
	}
}

// poll reads both providers' objects once and schedules their events.
func (w *webhooks) poll(ctx context.Context) {
	now := time.Now()
	if intents, err := simIntents(ctx, w.http, w.simURL, w.secretKey); err == nil {
		var evs []event
		for _, in := range intents {
			evs = append(evs, intentEvents(in, now)...)
		}
		w.schedule(evs, now)
	}
	if payments, err := simMPPayments(ctx, w.http, w.simURL, w.mpToken); err == nil {
		var evs []event
		for _, p := range payments {
			evs = append(evs, mpEvent(p, now))
		}
		w.schedule(evs, now)
	}
}

// schedule decides, once per event, whether and when it is delivered.
// Every notification of a paid Pix is delivered: the service learns of
// the customer's payment from it (or from a poll a minute later), as it
// does from Mercado Pago, which notifies every change.
func (w *webhooks) schedule(evs []event, now time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, ev := range evs {
		if w.decided[ev.id] {
			continue
		}
		w.decided[ev.id] = true
		if w.rng.Float64() >= webhookShare && ev.typ != mpPixPaid {
			continue
		}
		w.t.Events++
		if ev.dataID != "" {
			w.t.MPEvents++
		}
		due := now.Add(time.Duration(w.rng.Int64N(int64(3 * time.Second))))
		if w.rng.Float64() < lateShare {
			w.t.Late++
			due = now.Add(5*time.Second + time.Duration(w.rng.Int64N(int64(15*time.Second))))
		}
		w.queue = append(w.queue, &delivery{ev: ev, due: due})
		if w.rng.Float64() < duplicateShare {
			w.t.Duplicates++
			w.queue = append(w.queue, &delivery{ev: ev, due: due.Add(200*time.Millisecond + time.Duration(w.rng.Int64N(int64(8*time.Second))))})
		}
	}
}

// deliver sends due events until ctx is done; with drain set it first makes
// everything queued due at once and returns when the queue is empty.
func (w *webhooks) deliver(ctx context.Context, drain bool) {
	if drain {
		w.mu.Lock()
		for _, d := range w.queue {
			d.due = time.Time{}
		}
		w.mu.Unlock()
	}
	for ctx.Err() == nil {
		now := time.Now()
		w.mu.Lock()
		var due []*delivery
		rest := w.queue[:0]
		for _, d := range w.queue {
			if !d.due.After(now) {
				due = append(due, d)
			} else {
				rest = append(rest, d)
			}
		}
		w.queue = rest
		empty := len(w.queue) == 0
		w.mu.Unlock()
		for _, d := range due {
			w.send(ctx, d)
		}
		if drain && empty && len(due) == 0 {
			w.mu.Lock()
			empty = len(w.queue) == 0
			w.mu.Unlock()
			if empty {
				return
			}
		}
		sleep(ctx, 100*time.Millisecond)
	}
}

func (w *webhooks) send(ctx context.Context, d *delivery) {
	w.mu.Lock()
	base := w.replicas[w.rng.IntN(len(w.replicas))]
	w.mu.Unlock()
	req, err := w.request(ctx, base, d.ev)
	if err != nil {
		return
	}
	resp, err := w.http.Do(req)
	var body []byte
	if err == nil {
		body, err = io.ReadAll(resp.Body)
		resp.Body.Close()
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case ctx.Err() != nil:
		return
	case err != nil || resp.StatusCode >= 500:
		d.tries++
		if d.tries >= 10 {
			w.t.Abandoned++
			return
		}
		w.t.Retried++
		d.due = time.Now().Add(time.Duration(d.tries) * 500 * time.Millisecond)
		w.queue = append(w.queue, d)
	case resp.StatusCode == http.StatusOK:
		w.t.Sent++
		var out struct {
			Outcome string `json:"outcome"`
		}
		_ = json.Unmarshal(body, &out)
		w.t.Outcomes[out.Outcome]++
	default:
		w.t.Sent++
		w.unexpected = append(w.unexpected, fmt.Sprintf("webhook %s %s: %d %s", d.ev.typ, d.ev.id, resp.StatusCode, bytes.TrimSpace(body)))
	}
}

// request builds one delivery of an event, signed now: Stripe's with
// Stripe-Signature, Mercado Pago's with x-signature over data.id and a
// fresh x-request-id, data.id and type in the query as Mercado Pago sends
// them.
func (w *webhooks) request(ctx context.Context, base string, ev event) (*http.Request, error) {
	if ev.dataID == "" {
		signed := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: ev.payload, Secret: w.secret, Timestamp: time.Now()})
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/webhooks/stripe/"+w.accountID, bytes.NewReader(ev.payload))
		if err != nil {
			return nil, err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Stripe-Signature", signed.Header)
		return req, nil
	}
	target := base + "/webhooks/mercadopago/" + w.accountID + "?data.id=" + url.QueryEscape(ev.dataID) + "&type=payment"
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(ev.payload))
	if err != nil {
		return nil, err
	}
	requestID := randomUUID()
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("x-request-id", requestID)
	req.Header.Set("x-signature", providersim.MPSignature(ev.dataID, requestID, w.mpSecret, time.Now()))
	return req, nil
}

// mpPixPaid is the type of the notification of a paid Pix.
const mpPixPaid = "payment.updated (pix approved)"

// mpEvent is the notification a Mercado Pago payment's current state
// would have produced. Mercado Pago's notification names the payment
// only; the service retrieves it. Its id is derived from the state, so the
// same change seen twice is the same notification.
func mpEvent(p providersim.MPPayment, now time.Time) event {
	state := fmt.Sprintf("%d|%s|%s|%d", p.ID, p.Status, p.StatusDetail, p.Refunded)
	sum := sha256.Sum256([]byte("mp|" + state))
	id := new(big.Int).SetBytes(sum[:7]).Int64()
	action, typ := "payment.updated", "payment.updated"
	switch {
	case p.Status == "pending" || (p.Status == "rejected" && p.PaymentTypeID == "credit_card"):
		action, typ = "payment.created", "payment.created"
	case p.Status == "approved" && p.PaymentTypeID == "bank_transfer":
		typ = mpPixPaid
	}
	dataID := strconv.FormatInt(p.ID, 10)
	payload, _ := json.Marshal(map[string]any{"id": id, "live_mode": false, "type": "payment",
		"date_created": now.UTC().Format("2006-01-02T15:04:05.000-07:00"), "user_id": 123456789, "api_version": "v1",
		"action": action, "data": map[string]string{"id": dataID}})
	return event{id: "mp-" + strconv.FormatInt(id, 10), typ: typ, payload: payload, dataID: dataID}
}

// randomUUID is a version 4 UUID, as Mercado Pago's x-request-id.
func randomUUID() string {
	h := randomHex(16)
	return h[:8] + "-" + h[8:12] + "-4" + h[13:16] + "-a" + h[17:20] + "-" + h[20:]
}

// setReplicas changes where deliveries go (to the one replica left up).
func (w *webhooks) setReplicas(urls []string) {
	w.mu.Lock()
	w.replicas = urls
	w.mu.Unlock()
}

func (w *webhooks) snapshot() (webhookTally, []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	t := w.t
	t.Outcomes = map[string]int{}
	for k, v := range w.t.Outcomes {
		t.Outcomes[k] = v
	}
	return t, append([]string(nil), w.unexpected...)
}

// intentEvents are the Stripe events an intent's current state would have
// produced. The id is derived from the state, so the same change seen twice
// is the same event.
func intentEvents(in providersim.Intent, now time.Time) []event {
	var evs []event
	typ := ""
	switch in.Status {
	case "requires_capture":
		typ = "payment_intent.amount_capturable_updated"
	case "succeeded":
		typ = "payment_intent.succeeded"
	case "canceled":
		typ = "payment_intent.canceled"
	case "requires_payment_method":
		if in.LatestCharge != "" {
			typ = "payment_intent.payment_failed"
		}
	}
	if typ != "" {
		obj := map[string]any{
			"id": in.ID, "object": "payment_intent", "amount": in.Amount, "amount_capturable": in.AmountCapturable,
			"amount_received": in.AmountReceived, "currency": in.Currency, "capture_method": in.CaptureMethod,
			"status": in.Status, "metadata": in.Metadata, "created": in.Created.Unix(), "livemode": false,
			"latest_charge": nullable(in.LatestCharge),
		}
		if typ == "payment_intent.payment_failed" {
			obj["last_payment_error"] = map[string]any{"type": "card_error", "code": "card_declined",
				"decline_code": "generic_decline", "message": "Your card was declined.", "charge": in.LatestCharge}
		}
		evs = append(evs, newEvent(typ, in.ID+"|"+in.Status, obj, now))
	}
	if in.AmountRefunded > 0 && in.LatestCharge != "" {
		obj := map[string]any{
			"id": in.LatestCharge, "object": "charge", "amount": in.AmountReceived, "amount_captured": in.AmountReceived,
			"amount_refunded": in.AmountRefunded, "captured": true, "refunded": in.AmountRefunded >= in.AmountReceived,
			"currency": in.Currency, "payment_intent": in.ID, "status": "succeeded", "metadata": map[string]string{},
			"created": in.Created.Unix(), "livemode": false,
		}
		evs = append(evs, newEvent("charge.refunded", in.ID+"|refunded|"+strconv.FormatInt(in.AmountRefunded, 10), obj, now))
	}
	return evs
}

func newEvent(typ, state string, obj map[string]any, now time.Time) event {
	sum := sha256.Sum256([]byte(typ + "|" + state))
	id := "evt_" + hex.EncodeToString(sum[:12])
	payload, _ := json.Marshal(map[string]any{
		"id": id, "object": "event", "api_version": "2023-10-16", "created": now.Unix(),
		"data": map[string]any{"object": obj}, "livemode": false, "pending_webhooks": 1,
		"request": map[string]any{"id": nil, "idempotency_key": nil}, "type": typ,
	})
	return event{id: id, typ: typ, payload: payload}
}

func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// simRecords reads the account's payment objects at both providers.
func simRecords(ctx context.Context, c *http.Client, simURL, secretKey, mpToken string) ([]record, error) {
	intents, err := simIntents(ctx, c, simURL, secretKey)
	if err != nil {
		return nil, err
	}
	mp, err := simMPPayments(ctx, c, simURL, mpToken)
	if err != nil {
		return nil, err
	}
	return append(stripeRecords(intents), mpRecords(mp)...), nil
}

// simMPPayments reads the access token's Mercado Pago payments.
func simMPPayments(ctx context.Context, c *http.Client, simURL, token string) ([]providersim.MPPayment, error) {
	var out []providersim.MPPayment
	return out, simGet(ctx, c, simURL+"/_sim/mp/payments?access_token="+url.QueryEscape(token), &out)
}

// simIntents reads the account's intents from the simulator's control API.
func simIntents(ctx context.Context, c *http.Client, simURL, secretKey string) ([]providersim.Intent, error) {
	var out []providersim.Intent
	return out, simGet(ctx, c, simURL+"/_sim/intents?secret_key="+url.QueryEscape(secretKey), &out)
}

func simGet(ctx context.Context, c *http.Client, target string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return err
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("chaos: GET %s: %s", target, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}
