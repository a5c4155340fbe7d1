package api_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/acmepay/payments/internal/apitest"
	"github.com/acmepay/payments/internal/provider"
	"github.com/acmepay/payments/internal/provider/providersim"
	"github.com/acmepay/payments/internal/provider/stripe"
)

// TestPropertyProviderMatchesRecords drives one payment through random
// interleavings of client retries, captures, cancels and refunds, reconciler
// passes, provider webhooks, lease and key expiry (the clock jumps),
// credential revocation, refunds made in the provider's dashboard and
// provider faults. Once everything has settled, the provider's effects must
// equal the service's records: at most one authorization per attempt, the
// same state, the same captured and refunded totals, every refund the
// service calls succeeded made at the provider and no other, and no attempt
// left unresolved. PROPERTY_SEEDS runs more seeds.
func TestPropertyProviderMatchesRecords(t *testing.T) {
	t.Parallel()
	seeds := 64
	if v, err := strconv.Atoi(os.Getenv("PROPERTY_SEEDS")); err == nil && v > 0 {
		seeds = v
	}
	for seed := range seeds {
		t.Run(fmt.Sprintf("seed-%d", seed), func(t *testing.T) {
			t.Parallel()
			runProperty(t, uint64(seed))
		})
	}
}

func runProperty(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	e := proofEnv(t, apitest.Options{})
	w := &webhookEnv{Env: e, stripeKey: fmt.Sprintf("sk_test_prop_%d_%s", seed, apitest.SecretSuffix(t)), secret: fmt.Sprintf("whsec_prop_%d", seed)}
	a, key, err := e.Accounts.Create(context.Background(), "Loja Propriedade", w.stripeKey, w.secret)
	if err != nil {
		t.Fatalf("create account: %v", err)
	}
	w.acctID, w.apiKey = a.ID, key
	prov := stripe.New(stripe.Config{APIBase: e.SimURL})
	creds := provider.Credentials{SecretKey: w.stripeKey}

	order := fmt.Sprintf("pedido-prop-%d", seed)
	body := createBody(order, 2000)
	if rng.IntN(3) == 0 {
		body = fmt.Sprintf(`{"order_id":%q,"amount":2000,"currency":"BRL","payment_method":"pm_card_visa"}`, order)
	}
	var (
		paymentID string
		revoked   bool
		events    int
		trace     []string
	)
	intent := func() (providersim.Intent, bool) {
		for _, in := range e.Sim.Intents(w.stripeKey) {
			if in.Metadata["order_id"] == order {
				return in, true
			}
		}
		return providersim.Intent{}, false
	}
	call := func(name string, r apitest.Request) {
		r.Bearer = w.apiKey
		resp := e.Do(r)
		trace = append(trace, fmt.Sprintf("%s -> %d", name, resp.Status))
		if resp.Status >= 500 {
			t.Errorf("seed %d: %s answered %d %s\ntrace: %q", seed, name, resp.Status, resp.Body, trace)
		}
		if name == "create" && resp.Status < 300 && paymentID == "" {
			paymentID, _ = resp.JSON(t)["id"].(string)
		}
	}
	opPath := func(suffix string) string { return "/v1/payments/" + paymentID + suffix }
	webhook := func() {
		in, ok := intent()
		if !ok {
			return
		}
		typ := map[string]string{"succeeded": "payment_intent.succeeded", "requires_capture": "payment_intent.amount_capturable_updated",
			"canceled": "payment_intent.canceled", "requires_payment_method": "payment_intent.payment_failed"}[in.Status]
		events++
		if typ != "" {
			w.deliver(t, intentEvent(fmt.Sprintf("evt_prop_%d_%d", seed, events), typ, intentFields{id: in.ID, status: in.Status,
				captureMethod: in.CaptureMethod, paymentID: in.Metadata["payment_id"], amount: in.Amount, attempt: in.Metadata["attempt"]}))
		}
		if in.LatestCharge != "" && in.AmountRefunded > 0 {
			events++
			w.deliver(t, fmt.Appendf(nil, `{"id":"evt_prop_%d_%d","object":"event","type":"charge.refunded","data":{"object":{"id":%q,"object":"charge",`+
				`"amount":%d,"amount_captured":%d,"amount_refunded":%d,"currency":"brl","payment_intent":%q,"refunded":false}}}`,
				seed, events, in.LatestCharge, in.Amount, in.AmountReceived, in.AmountRefunded, in.ID))
		}
	}
	faults := []providersim.FaultKind{providersim.DropAfterEffect, providersim.Error500BeforeEffect, providersim.RateLimit429BeforeEffect}
	ops := []string{"authorize", "capture", "cancel", "refund"}

	// The first send is where doubt is born: most runs start with a fault.
	if rng.IntN(5) < 3 {
		f := faults[rng.IntN(len(faults))]
		e.Sim.Inject(providersim.Fault{Op: "authorize", Kind: f, Times: 1 + rng.IntN(2)})
		trace = append(trace, "fault authorize "+string(f))
	}
	call("create", apitest.Request{Method: http.MethodPost, Path: "/v1/payments", Key: "c1", Body: body})
	// Credentials often rotate while a payment is in doubt.
	if rng.IntN(4) == 0 {
		e.Sim.RevokeSecret(w.stripeKey)
		revoked = true
		trace = append(trace, "revoked=true")
	}
	for step := range 16 + rng.IntN(12) {
		switch rng.IntN(14) {
		case 0, 1:
			f := faults[rng.IntN(len(faults))]
			op := ops[rng.IntN(len(ops))]
			e.Sim.Inject(providersim.Fault{Op: op, Kind: f, Times: 1 + rng.IntN(2)})
			trace = append(trace, fmt.Sprintf("fault %s %s", op, f))
		case 2:
			call("create", apitest.Request{Method: http.MethodPost, Path: "/v1/payments", Key: "c1", Body: body})
		case 3, 12, 13:
			if paymentID != "" {
				call("capture", apitest.Request{Method: http.MethodPost, Path: opPath("/capture"), Key: "cap1"})
			}
		case 4:
			if paymentID != "" {
				call("cancel", apitest.Request{Method: http.MethodPost, Path: opPath("/cancel"), Key: "can1"})
			}
		case 5:
			if paymentID != "" {
				n := 1 + rng.IntN(2)
				call("refund", apitest.Request{Method: http.MethodPost, Path: opPath("/refunds"), Key: fmt.Sprintf("r%d", n),
					Body: fmt.Sprintf(`{"amount":%d}`, 300*n)})
			}
		case 6:
			sum := runOnce(t, e, nil)
			trace = append(trace, fmt.Sprintf("reconcile %+v", sum))
		case 7:
			d := []time.Duration{5 * time.Second, 15 * time.Second, 3 * time.Minute, proofRetention - proofMargin, proofRetention + time.Minute}[rng.IntN(5)]
			e.Clock.Advance(d)
			trace = append(trace, "advance "+d.String())
		case 8:
			if revoked {
				e.Sim.RestoreSecret(w.stripeKey)
			} else {
				e.Sim.RevokeSecret(w.stripeKey)
			}
			revoked = !revoked
			trace = append(trace, fmt.Sprintf("revoked=%v", revoked))
		case 9:
			webhook()
			trace = append(trace, "webhook")
		case 10:
			if in, ok := intent(); ok && in.Status == "succeeded" && !revoked {
				res := prov.Refund(context.Background(), creds, provider.RefundRequest{
					IdempotencyKey: fmt.Sprintf("dashboard-%d", step), IntentID: in.ID, Amount: 100})
				trace = append(trace, "dashboard refund "+string(res.Answer))
			}
		case 11:
			if in, ok := intent(); ok && in.Status == "requires_capture" && !revoked && rng.IntN(3) == 0 {
				res := prov.Cancel(context.Background(), creds, provider.CancelRequest{IdempotencyKey: fmt.Sprintf("dashboard-%d", step), IntentID: in.ID})
				trace = append(trace, "dashboard cancel "+string(res.Answer))
			}
		}
	}

	// Settle: no more faults, working credentials, time past every window
	// and grace, the reconciler until nothing is left, the provider's last
	// word by webhook.
	e.Sim.ClearFaults()
	e.Sim.RestoreSecret(w.stripeKey)
	for range 6 {
		e.Clock.Advance(proofRetention + time.Minute)
		runOnce(t, e, nil)
	}
	webhook()
	t.Logf("seed %d trace: %q", seed, trace)
	if t.Failed() {
		return
	}
	var unresolved int
	if err := e.DB.Pool.QueryRow(context.Background(),
		`SELECT count(*) FROM attempts WHERE status IN ('processing','unknown')`).Scan(&unresolved); err != nil {
		t.Fatal(err)
	}
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("seed %d: "+format+"\ntrace: %q", append(append([]any{seed}, args...), trace)...)
	}
	if unresolved != 0 {
		fail("%d attempts still unresolved", unresolved)
	}
	if n := e.Sim.StatsFor(w.stripeKey).Authorizations; n > 1 {
		fail("%d authorizations at the provider for one attempt", n)
	}
	if paymentID == "" {
		if _, ok := intent(); ok {
			fail("the provider holds an intent but the client never got a payment")
		}
		return
	}
	p := w.payment(t, paymentID)
	in, ok := intent()
	if !ok {
		if s := p["status"]; s != "failed" && s != "declined" {
			fail("payment %v with no intent at the provider", p)
		}
		return
	}
	want := map[string]string{"requires_capture": "authorized", "succeeded": "captured", "canceled": "canceled", "requires_payment_method": "declined"}[in.Status]
	if p["status"] != want {
		fail("payment status %v, provider intent %s", p["status"], in.Status)
	}
	if p["amount_captured"] != float64(in.AmountReceived) || p["amount_refunded"] != float64(in.AmountRefunded) {
		fail("payment captured %v refunded %v, provider received %d refunded %d", p["amount_captured"], p["amount_refunded"], in.AmountReceived, in.AmountRefunded)
	}
	atProvider := map[string]bool{}
	refunds, err := prov.ListRefunds(context.Background(), creds, in.ID)
	if err != nil {
		t.Fatalf("list refunds: %v", err)
	}
	for _, r := range refunds {
		if id := r.Metadata["refund_id"]; id != "" {
			if atProvider[id] {
				fail("refund %s made twice at the provider", id)
			}
			atProvider[id] = true
		}
	}
	rows, err := e.DB.Pool.Query(context.Background(), `SELECT id, status FROM refunds WHERE payment_id = $1`, paymentID)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var id, status string
		if err := rows.Scan(&id, &status); err != nil {
			t.Fatal(err)
		}
		if (status == "succeeded") != atProvider[id] {
			fail("refund %s is %s here, at the provider %v", id, status, atProvider[id])
		}
	}
}
