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
// credential revocation, refunds and cancels made in the provider's
// dashboard, the customer's own actions and provider faults. Even seeds
// run at Stripe, odd ones at Mercado Pago (with and without a key
// retention). Once everything has settled, the provider's effects must
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

// propIntent is the provider's payment object of the run's order, in the
// service's terms.
type propIntent struct {
	id string
	// status is the payment status the provider's state stands for.
	status             string
	received, refunded int64
}

// propSide is what the property test does at one provider.
type propSide interface {
	// intent is the provider's object of the order, if it holds one.
	intent() (propIntent, bool)
	// webhook tells the service the object's current state as the
	// provider would.
	webhook()
	revoke(revoked bool)
	// faultOp is the simulator's operation for a service operation.
	faultOp(op string) string
	dashboardRefund(step int)
	dashboardCancel(step int)
	// customer plays the customer's part on a payment waiting for them.
	customer()
	// authorizations fails the run if an attempt authorized more than once.
	authorizations()
	// refunds fails the run unless the service's succeeded refunds are
	// exactly the refunds it made at the provider.
	refunds(in propIntent)
}

// propRun is one seed's run.
type propRun struct {
	t         *testing.T
	seed      uint64
	rng       *rand.Rand
	e         *apitest.Env
	apiKey    string
	order     string
	body      string
	paymentID string
	revoked   bool
	events    int
	trace     []string
	side      propSide
}

func runProperty(t *testing.T, seed uint64) {
	r := &propRun{t: t, seed: seed, rng: rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15)),
		order: fmt.Sprintf("pedido-prop-%d", seed)}
	if seed%2 == 1 {
		r.side = newMPSide(r)
	} else {
		r.e = proofEnv(t, apitest.Options{})
		r.side = newStripeSide(r)
	}
	r.start()
	for step := range 16 + r.rng.IntN(12) {
		r.step(step)
	}
	r.settle()
	r.check()
}

func (r *propRun) note(format string, args ...any) {
	r.trace = append(r.trace, fmt.Sprintf(format, args...))
}

// fatalf stops the run with its trace.
func (r *propRun) fatalf(format string, args ...any) {
	r.t.Helper()
	r.t.Fatalf("seed %d: "+format+"\ntrace: %q", append(append([]any{r.seed}, args...), r.trace)...)
}

func (r *propRun) call(name string, req apitest.Request) {
	r.t.Helper()
	req.Bearer = r.apiKey
	resp := r.e.Do(req)
	r.note("%s -> %d", name, resp.Status)
	if resp.Status >= 500 || resp.Status == http.StatusBadRequest {
		r.t.Errorf("seed %d: %s answered %d %s\ntrace: %q", r.seed, name, resp.Status, resp.Body, r.trace)
	}
	if name == "create" && resp.Status < 300 && r.paymentID == "" {
		r.paymentID, _ = resp.JSON(r.t)["id"].(string)
	}
}

func (r *propRun) opPath(suffix string) string { return "/v1/payments/" + r.paymentID + suffix }

var (
	propFaults = []providersim.FaultKind{providersim.DropAfterEffect, providersim.Error500BeforeEffect, providersim.RateLimit429BeforeEffect}
	propOps    = []string{"authorize", "capture", "cancel", "refund"}
)

func (r *propRun) inject(op string) {
	f := propFaults[r.rng.IntN(len(propFaults))]
	r.e.Sim.Inject(providersim.Fault{Op: r.side.faultOp(op), Kind: f, Times: 1 + r.rng.IntN(2)})
	r.note("fault %s %s", op, f)
}

// start creates the payment: most runs start with a fault, where doubt
// is born, and credentials often rotate while a payment is in doubt.
func (r *propRun) start() {
	if r.rng.IntN(5) < 3 {
		r.inject("authorize")
	}
	r.call("create", apitest.Request{Method: http.MethodPost, Path: "/v1/payments", Key: "c1", Body: r.body})
	if r.rng.IntN(4) == 0 {
		r.revoked = true
		r.side.revoke(true)
		r.note("revoked=true")
	}
}

func (r *propRun) step(step int) {
	switch r.rng.IntN(15) {
	case 0, 1:
		r.inject(propOps[r.rng.IntN(len(propOps))])
	case 2:
		r.call("create", apitest.Request{Method: http.MethodPost, Path: "/v1/payments", Key: "c1", Body: r.body})
	case 3, 12, 13:
		if r.paymentID != "" {
			r.call("capture", apitest.Request{Method: http.MethodPost, Path: r.opPath("/capture"), Key: "cap1"})
		}
	case 4:
		if r.paymentID != "" {
			r.call("cancel", apitest.Request{Method: http.MethodPost, Path: r.opPath("/cancel"), Key: "can1"})
		}
	case 5:
		if r.paymentID != "" {
			n := 1 + r.rng.IntN(2)
			r.call("refund", apitest.Request{Method: http.MethodPost, Path: r.opPath("/refunds"), Key: fmt.Sprintf("r%d", n),
				Body: fmt.Sprintf(`{"amount":%d}`, 300*n)})
		}
	case 6:
		r.note("reconcile %+v", runOnce(r.t, r.e, nil))
	case 7:
		d := []time.Duration{5 * time.Second, 15 * time.Second, 3 * time.Minute, proofRetention - proofMargin, proofRetention + time.Minute}[r.rng.IntN(5)]
		r.e.Clock.Advance(d)
		r.note("advance %s", d)
	case 8:
		r.revoked = !r.revoked
		r.side.revoke(r.revoked)
		r.note("revoked=%v", r.revoked)
	case 9:
		r.side.webhook()
		r.note("webhook")
	case 10:
		if !r.revoked {
			r.side.dashboardRefund(step)
		}
	case 11:
		if !r.revoked && r.rng.IntN(3) == 0 {
			r.side.dashboardCancel(step)
		}
	case 14:
		r.side.customer()
	}
}

// settle ends the run: no more faults, working credentials, time past
// every window and grace, the reconciler until nothing is left, the
// provider's last word by webhook.
func (r *propRun) settle() {
	r.e.Sim.ClearFaults()
	r.revoked = false
	r.side.revoke(false)
	for range 6 {
		r.e.Clock.Advance(proofRetention + time.Minute)
		runOnce(r.t, r.e, nil)
	}
	r.side.webhook()
	r.t.Logf("seed %d trace: %q", r.seed, r.trace)
}

func (r *propRun) check() {
	if r.t.Failed() {
		return
	}
	var unresolved []string
	if err := r.e.DB.Pool.QueryRow(context.Background(),
		`SELECT coalesce(array_agg(provider_key || ' ' || status), '{}') FROM attempts WHERE status IN ('processing','unknown')`).Scan(&unresolved); err != nil {
		r.t.Fatal(err)
	}
	if len(unresolved) != 0 {
		r.fatalf("attempts still unresolved: %q", unresolved)
	}
	r.side.authorizations()
	in, ok := r.side.intent()
	if r.paymentID == "" {
		if ok {
			r.fatalf("the provider holds an intent but the client never got a payment")
		}
		return
	}
	resp := r.e.Do(apitest.Request{Method: http.MethodGet, Path: r.opPath(""), Bearer: r.apiKey})
	wantStatus(r.t, resp, http.StatusOK)
	p := resp.JSON(r.t)
	if !ok {
		if s := p["status"]; s != "failed" && s != "declined" {
			r.fatalf("payment %v with no intent at the provider", p)
		}
		return
	}
	if p["status"] != in.status {
		r.fatalf("payment status %v, provider intent %+v", p["status"], in)
	}
	if p["amount_captured"] != float64(in.received) || p["amount_refunded"] != float64(in.refunded) {
		r.fatalf("payment captured %v refunded %v, provider received %d refunded %d", p["amount_captured"], p["amount_refunded"], in.received, in.refunded)
	}
	r.side.refunds(in)
}

// serviceRefunds are the payment's refunds as the service records them.
func (r *propRun) serviceRefunds() []propRefund {
	rows, err := r.e.DB.Pool.Query(context.Background(), `SELECT id, amount, status FROM refunds WHERE payment_id = $1`, r.paymentID)
	if err != nil {
		r.t.Fatal(err)
	}
	defer rows.Close()
	var out []propRefund
	for rows.Next() {
		var f propRefund
		if err := rows.Scan(&f.id, &f.amount, &f.status); err != nil {
			r.t.Fatal(err)
		}
		out = append(out, f)
	}
	if err := rows.Err(); err != nil {
		r.t.Fatal(err)
	}
	return out
}

type propRefund struct {
	id, status string
	amount     int64
}

// stripeSide runs the property at Stripe, on an account with a webhook
// secret, with a manual-capture or an automatic card.
type stripeSide struct {
	r     *propRun
	w     *webhookEnv
	prov  *stripe.Provider
	creds provider.Credentials
}

func newStripeSide(r *propRun) *stripeSide {
	w := &webhookEnv{Env: r.e, stripeKey: fmt.Sprintf("sk_test_prop_%d_%s", r.seed, apitest.SecretSuffix(r.t)), secret: fmt.Sprintf("whsec_prop_%d", r.seed)}
	a, key, err := r.e.Accounts.Create(context.Background(), "Loja Propriedade", w.stripeKey, w.secret)
	if err != nil {
		r.t.Fatalf("create account: %v", err)
	}
	w.acctID, w.apiKey, r.apiKey = a.ID, key, key
	r.body = createBody(r.order, 2000)
	if r.rng.IntN(3) == 0 {
		r.body = fmt.Sprintf(`{"order_id":%q,"amount":2000,"currency":"BRL","payment_method":"pm_card_visa"}`, r.order)
	}
	return &stripeSide{r: r, w: w, prov: stripe.New(stripe.Config{APIBase: r.e.SimURL}), creds: provider.Credentials{SecretKey: w.stripeKey}}
}

func (s *stripeSide) sim() (providersim.Intent, bool) {
	for _, in := range s.r.e.Sim.Intents(s.w.stripeKey) {
		if in.Metadata["order_id"] == s.r.order {
			return in, true
		}
	}
	return providersim.Intent{}, false
}

func (s *stripeSide) intent() (propIntent, bool) {
	in, ok := s.sim()
	want := map[string]string{"requires_capture": "authorized", "succeeded": "captured", "canceled": "canceled", "requires_payment_method": "declined"}[in.Status]
	return propIntent{id: in.ID, status: want, received: in.AmountReceived, refunded: in.AmountRefunded}, ok
}

func (s *stripeSide) webhook() {
	in, ok := s.sim()
	if !ok {
		return
	}
	r := s.r
	typ := map[string]string{"succeeded": "payment_intent.succeeded", "requires_capture": "payment_intent.amount_capturable_updated",
		"canceled": "payment_intent.canceled", "requires_payment_method": "payment_intent.payment_failed"}[in.Status]
	r.events++
	if typ != "" {
		s.w.deliver(r.t, intentEvent(fmt.Sprintf("evt_prop_%d_%d", r.seed, r.events), typ, intentFields{id: in.ID, status: in.Status,
			captureMethod: in.CaptureMethod, paymentID: in.Metadata["payment_id"], amount: in.Amount, attempt: in.Metadata["attempt"]}))
	}
	if in.LatestCharge != "" && in.AmountRefunded > 0 {
		r.events++
		s.w.deliver(r.t, fmt.Appendf(nil, `{"id":"evt_prop_%d_%d","object":"event","type":"charge.refunded","data":{"object":{"id":%q,"object":"charge",`+
			`"amount":%d,"amount_captured":%d,"amount_refunded":%d,"currency":"brl","payment_intent":%q,"refunded":false}}}`,
			r.seed, r.events, in.LatestCharge, in.Amount, in.AmountReceived, in.AmountRefunded, in.ID))
	}
}

func (s *stripeSide) revoke(revoked bool) {
	if revoked {
		s.r.e.Sim.RevokeSecret(s.w.stripeKey)
	} else {
		s.r.e.Sim.RestoreSecret(s.w.stripeKey)
	}
}

func (s *stripeSide) faultOp(op string) string { return op }

func (s *stripeSide) dashboardRefund(step int) {
	if in, ok := s.sim(); ok && in.Status == "succeeded" {
		res := s.prov.Refund(context.Background(), s.creds, provider.RefundRequest{
			IdempotencyKey: fmt.Sprintf("dashboard-%d", step), IntentID: in.ID, Amount: 100})
		s.r.note("dashboard refund %s", res.Answer)
	}
}

func (s *stripeSide) dashboardCancel(step int) {
	if in, ok := s.sim(); ok && in.Status == "requires_capture" {
		res := s.prov.Cancel(context.Background(), s.creds, provider.CancelRequest{IdempotencyKey: fmt.Sprintf("dashboard-%d", step), IntentID: in.ID})
		s.r.note("dashboard cancel %s", res.Answer)
	}
}

// customer: a card needs nothing from the customer here.
func (s *stripeSide) customer() {}

func (s *stripeSide) authorizations() {
	if n := s.r.e.Sim.StatsFor(s.w.stripeKey).Authorizations; n > 1 {
		s.r.fatalf("%d authorizations at the provider for one attempt", n)
	}
}

// refunds matches the service's refunds to Stripe's by the refund id the
// service puts in their metadata.
func (s *stripeSide) refunds(in propIntent) {
	atProvider := map[string]bool{}
	list, err := s.prov.ListRefunds(context.Background(), s.creds, in.id)
	if err != nil {
		s.r.t.Fatalf("list refunds: %v", err)
	}
	for _, f := range list {
		if id := f.Metadata["refund_id"]; id != "" {
			if atProvider[id] {
				s.r.fatalf("refund %s made twice at the provider", id)
			}
			atProvider[id] = true
		}
	}
	for _, f := range s.r.serviceRefunds() {
		if (f.status == "succeeded") != atProvider[f.id] {
			s.r.fatalf("refund %s is %s here, at the provider %v", f.id, f.status, atProvider[f.id])
		}
	}
}
