package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Shares of the fleet's behaviour.
const (
	badClientShare    = 0.10 // mint a new Idempotency-Key on every retry (a client bug)
	manualShare       = 0.35 // capture_method manual, then capture or cancel
	captureShare      = 0.70 // of authorized payments: captured; the rest canceled
	partialShare      = 0.25 // of captures: a partial amount
	declineShare      = 0.10 // a card the provider declines
	secondCardShare   = 0.50 // of declines: a new key and another card (attempt 2)
	doubleSubmitShare = 0.10 // the first create sent twice at once (a double click)
	refundShare       = 0.30 // of captured payments: refunded
	impatientShare    = 0.10 // orders whose client gives up on requests after 30–700 ms and retries
	raceOpsShare      = 0.05 // of authorized payments: capture and cancel sent at once (one must lose)
	raceRefundShare   = 0.15 // of refunds: two full refunds at once with different keys (one must lose)
	pixShare          = 0.25 // Pix at Mercado Pago (the account's first provider), automatic capture
	mpCardShare       = 0.30 // of card orders: a Mercado Pago card token (payment_methods.mercadopago)
	bothCardsShare    = 0.50 // of those: a Stripe card too, for failover (payment_methods.stripe)
	pixPaidShare      = 0.85 // of Pix shown to the customer: paid through the simulator
)

// pixWait bounds how long a client reads a paid Pix before it gives up on
// seeing it captured: the service learns of the payment from Mercado
// Pago's notification, or from its poll a minute later.
const pixWait = 90 * time.Second

// Bounds of how long an impatient client waits for an answer: short
// enough to walk away in the middle of the provider call or between the
// service's two transactions.
const (
	minPatience = 30 * time.Millisecond
	maxPatience = 700 * time.Millisecond
)

var declinedCards = []string{"pm_card_chargeDeclined", "pm_card_chargeDeclinedInsufficientFunds", "pm_card_chargeDeclinedExpiredCard"}

// mpDeclinedTokens are Mercado Pago test card tokens it rejects.
var mpDeclinedTokens = []string{"tok_OTHE", "tok_FUND", "tok_CALL"}

// payment is the part of the payment object the fleet reads.
type payment struct {
	ID                string `json:"id"`
	OrderID           string `json:"order_id"`
	Status            string `json:"status"`
	Provider          string `json:"provider"`
	ProviderPaymentID string `json:"provider_payment_id"`
	Amount            int64  `json:"amount"`
	AmountCaptured    int64  `json:"amount_captured"`
	AmountRefunded    int64  `json:"amount_refunded"`
}

// finalStatus tells an answer the service has settled; a payment that
// waits for the customer (requires_action, pending) is settled too, but
// not final for the order.
func finalStatus(s string) bool { return s != "" && s != "processing" && s != "unknown" }

func waiting(s string) bool { return s == "requires_action" || s == "pending" }

// observation is a final result a client was shown.
type observation struct {
	Order, PaymentID, Status, Via string
}

// refundSeen is a final refund result a client was shown.
type refundSeen struct {
	Order, RefundID, Status string
}

// answer is one HTTP exchange as a client saw it.
type answer struct {
	status       int
	body         []byte
	replayed     bool
	retryAfter   time.Duration
	code         string // problem+json code
	paymentID    string // problem+json payment_id
	providerCode string // problem+json provider_code of a provider_rejected
	err          error
}

// tally counts what the fleet sent and got back.
type tally struct {
	Requests        int
	ByStatus        map[int]int
	Codes           map[string]int // problem codes
	Replays         int
	TransportErrors int
	Orders          int
	BadOrders       int
	FinalOrders     int
	SecondIntents   int
	Captures        int
	Cancels         int
	Refunds         int
	DoubleSubmits   int
	Impatient       int // orders of impatient clients
	GaveUp          int // requests an impatient client abandoned
	RacedOps        int // capture against cancel
	RacedRefunds    int // two full refunds at once
	RetriedFailed   int // orders tried again with a new key after a failed payment
	MPCardOrders    int // orders paid by card at Mercado Pago
	BothCardOrders  int // of those: naming a Stripe card too
	PixOrders       int // orders paid with Pix at Mercado Pago
	PixShown        int // of those: shown a QR code (requires_action)
	PixPaid         int // of those: paid by the customer
	PixSeen         int // of those: read back captured
	NewOpKeys       int // captures, cancels and refunds asked again with a new key after failing without effect
}

// fleet is the checkout clients: each order gets one client key (the bad
// ones mint one per retry), retried with backoff and jitter against random
// replicas until a final answer or the end of the run.
type fleet struct {
	replicas []string
	simURL   string // where the customer pays a Pix
	apiKey   string
	runID    string
	http     *http.Client
	next     atomic.Int64

	mu         sync.Mutex
	t          tally
	obs        []observation
	refunds    []refundSeen
	ops        map[string]map[string]bool // payment id -> capture/cancel asked by its client
	unexpected []string
	hist       *history // every exchange, for the history checkers
	// failover is when the database's primary was stopped; recovered is
	// the time from it to the first 201 of a create sent after it, and
	// failedDuring counts the 5xx and transport errors in between.
	failover     time.Time
	recovered    time.Duration
	failedDuring int
}

// failedInFailover counts a failed request between the failover and the
// first successful create after it; f.mu is held.
func (f *fleet) failedInFailover() {
	if !f.failover.IsZero() && f.recovered == 0 {
		f.failedDuring++
	}
}

// created notes a 201 to a create sent at sent.
func (f *fleet) created(sent time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.failover.IsZero() && f.recovered == 0 && !sent.Before(f.failover) {
		f.recovered = time.Since(f.failover)
	}
}

// markFailover notes that the primary is being stopped now.
func (f *fleet) markFailover(at time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failover = at
}

// failoverFigures is the time to the first successful create after the
// failover (0: none yet) and the requests failed until then.
func (f *fleet) failoverFigures() (time.Duration, int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.recovered, f.failedDuring
}

func newFleet(replicas []string, simURL, apiKey, runID string) *fleet {
	return &fleet{
		replicas: replicas, simURL: simURL, apiKey: apiKey, runID: runID,
		http: &http.Client{Timeout: 15 * time.Second, Transport: &http.Transport{
			MaxIdleConnsPerHost: 64, IdleConnTimeout: 30 * time.Second,
		}},
		t:    tally{ByStatus: map[int]int{}, Codes: map[string]int{}},
		ops:  map[string]map[string]bool{},
		hist: &history{},
	}
}

// run starts n clients and returns when ctx is done and they all stopped.
func (f *fleet) run(ctx context.Context, n int, seed uint64) {
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(i)+1))
			for ctx.Err() == nil {
				f.checkout(ctx, rng)
				sleep(ctx, time.Duration(20+rng.IntN(130))*time.Millisecond)
			}
		}()
	}
	wg.Wait()
}

func (f *fleet) pick(rng *rand.Rand) string { return f.replicas[rng.IntN(len(f.replicas))] }

func (f *fleet) bump(fn func(t *tally)) {
	f.mu.Lock()
	fn(&f.t)
	f.mu.Unlock()
}

func (f *fleet) observe(order string, p *payment, via string) {
	if !finalStatus(p.Status) || waiting(p.Status) {
		return
	}
	f.mu.Lock()
	f.obs = append(f.obs, observation{Order: order, PaymentID: p.ID, Status: p.Status, Via: via})
	f.mu.Unlock()
}

func (f *fleet) noteOp(paymentID, op string) {
	f.mu.Lock()
	if f.ops[paymentID] == nil {
		f.ops[paymentID] = map[string]bool{}
	}
	f.ops[paymentID][op] = true
	f.mu.Unlock()
}

// surprise records an answer the contract does not allow here.
func (f *fleet) surprise(what string, a answer) {
	f.mu.Lock()
	f.unexpected = append(f.unexpected, fmt.Sprintf("%s: %d %s", what, a.status, bytes.TrimSpace(a.body)))
	f.mu.Unlock()
}

func (f *fleet) do(ctx context.Context, method, base, path, key string, body []byte) answer {
	var rdr io.Reader
	if body != nil {
		rdr = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, base+path, rdr)
	if err != nil {
		return answer{err: err}
	}
	req.Header.Set("Authorization", "Bearer "+f.apiKey)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	rctx, cancel := ctx, context.CancelFunc(func() {})
	if patience := patienceOf(ctx); patience > 0 {
		rctx, cancel = context.WithTimeout(ctx, patience)
	}
	defer cancel()
	sent := time.Now()
	resp, err := f.http.Do(req.WithContext(rctx))
	var b []byte
	if err == nil {
		b, err = io.ReadAll(resp.Body)
		resp.Body.Close()
	}
	if err != nil {
		// A request cut by the end of the run is not a fault of the service.
		f.bump(func(t *tally) {
			switch {
			case ctx.Err() != nil:
			case rctx.Err() != nil:
				t.Requests++
				t.GaveUp++
			default:
				t.Requests++
				t.TransportErrors++
				f.failedInFailover()
			}
		})
		f.hist.record(method, path, key, body, sent, answer{err: err})
		return answer{err: err}
	}
	a := answer{status: resp.StatusCode, body: b, replayed: resp.Header.Get("Idempotent-Replayed") == "true"}
	if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil {
		a.retryAfter = time.Duration(s) * time.Second
	}
	if resp.StatusCode >= 400 {
		var prob struct {
			Code         string `json:"code"`
			PaymentID    string `json:"payment_id"`
			ProviderCode string `json:"provider_code"`
		}
		_ = json.Unmarshal(b, &prob)
		a.code, a.paymentID, a.providerCode = prob.Code, prob.PaymentID, prob.ProviderCode
	}
	f.bump(func(t *tally) {
		t.Requests++
		t.ByStatus[a.status]++
		if a.status >= 500 {
			f.failedInFailover()
		}
		if a.replayed {
			t.Replays++
		}
		if a.code != "" {
			t.Codes[a.code]++
		}
	})
	f.hist.record(method, path, key, body, sent, a)
	return a
}

type patienceKey struct{}

// patienceOf is how long the order's client waits for an answer; 0 is the
// HTTP client's own timeout.
func patienceOf(ctx context.Context) time.Duration {
	d, _ := ctx.Value(patienceKey{}).(time.Duration)
	return d
}

// backoff is capped exponential with jitter, never shorter than the
// server's Retry-After.
func backoff(rng *rand.Rand, try int, retryAfter time.Duration) time.Duration {
	d := min(100*time.Millisecond<<min(try, 5), 2*time.Second)
	d = d/2 + time.Duration(rng.Int64N(int64(d/2)+1))
	if d < retryAfter {
		d = retryAfter + time.Duration(rng.IntN(250))*time.Millisecond
	}
	return d
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// noEffect is a capture, cancel or refund that failed without acting at
// the provider: refused for the account's credentials (a revoked secret
// key), never sent because the provider could not be reached, or found not
// done by a lookup past its re-send window. Its answer is 409
// provider_rejected with that provider_code; checkNoEffect holds each such
// failure against the provider's log.
func noEffect(a answer) bool {
	if a.err != nil || a.status != http.StatusConflict || a.code != "provider_rejected" {
		return false
	}
	switch a.providerCode {
	case codeAuthentication, codeUnreachable, codeNoEffect, codeNotFound:
		return true
	}
	return false
}

// A capture, cancel or refund that failed without effect is asked again
// with a new key after at least keyPause, with at most maxKeys keys in
// all: more than a revocation lasts.
const (
	keyPause = time.Second
	maxKeys  = 10
)

// retryable is an answer a well-behaved client retries with the same key.
func retryable(a answer) bool {
	return a.err != nil || a.status == http.StatusAccepted || a.status >= 500 ||
		(a.status == http.StatusConflict && a.code == "idempotency_key_in_use")
}

// checkout is one order from the cart to its end: create until final, then
// maybe a second card after a decline, a capture or cancel, refunds.
func (f *fleet) checkout(ctx context.Context, rng *rand.Rand) {
	ctx, order, bad := f.newOrder(ctx, rng)
	p := f.pay(ctx, rng, order, bad)
	if p == nil {
		return
	}
	f.bump(func(t *tally) { t.FinalOrders++ })
	if p = f.captureOrCancel(ctx, rng, order, p); p == nil {
		return
	}
	if p.Status != "captured" || rng.Float64() >= refundShare {
		return
	}
	f.refundOrder(ctx, rng, order, p)
}

// newOrder numbers an order and picks its client: a bad one or not, and
// an impatient one or not (whose patience the returned ctx carries).
func (f *fleet) newOrder(ctx context.Context, rng *rand.Rand) (_ context.Context, order string, bad bool) {
	order = fmt.Sprintf("%s-%05d", f.runID, f.next.Add(1))
	bad = rng.Float64() < badClientShare
	impatient := rng.Float64() < impatientShare
	if impatient {
		patience := minPatience + time.Duration(rng.Int64N(int64(maxPatience-minPatience)))
		ctx = context.WithValue(ctx, patienceKey{}, patience)
	}
	f.bump(func(t *tally) {
		t.Orders++
		if bad {
			t.BadOrders++
		}
		if impatient {
			t.Impatient++
		}
	})
	return ctx, order, bad
}

// pay creates the order's payment until final, and once more with a new key
// after a decline (another card) or a failure; nil when no final answer
// came.
func (f *fleet) pay(ctx context.Context, rng *rand.Rand, order string, bad bool) *payment {
	if rng.Float64() < pixShare {
		return f.payPix(ctx, rng, order, bad)
	}
	capture := "automatic"
	if rng.Float64() < manualShare {
		capture = "manual"
	}
	atMP := rng.Float64() < mpCardShare
	both := atMP && rng.Float64() < bothCardsShare
	f.bump(func(t *tally) {
		if atMP {
			t.MPCardOrders++
		}
		if both {
			t.BothCardOrders++
		}
	})
	good, card := orderCard{"pm_card_visa", "tok_APRO"}, orderCard{"pm_card_visa", "tok_APRO"}
	if rng.Float64() < declineShare {
		card = orderCard{declinedCards[rng.IntN(len(declinedCards))], mpDeclinedTokens[rng.IntN(len(mpDeclinedTokens))]}
	}
	amount := 100 + rng.Int64N(99_900)
	body := func(c orderCard) []byte {
		m := map[string]any{"order_id": order, "amount": amount, "currency": "BRL",
			"capture_method": capture, "metadata": map[string]string{"cart": "chaos"}}
		c.into(m, order, atMP, both)
		b, _ := json.Marshal(m)
		return b
	}
	p := f.create(ctx, rng, order, bad, "ck-"+order+"-1", body(card))
	switch {
	case p != nil && p.Status == "declined" && rng.Float64() < secondCardShare:
		// The shopper tries another card: a new intent, a new key (attempt 2).
		f.bump(func(t *tally) { t.SecondIntents++ })
		p = f.create(ctx, rng, order, bad, "ck-"+order+"-2", body(good))
	case p != nil && p.Status == "failed":
		// Nothing was charged (the provider refused the credentials, say):
		// the shopper clicks again a moment later, with a new key, which
		// is attempt 2 of the order and must not charge twice.
		f.bump(func(t *tally) { t.RetriedFailed++ })
		sleep(ctx, time.Second+time.Duration(rng.Int64N(int64(2*time.Second))))
		p = f.create(ctx, rng, order, bad, "ck-"+order+"-2", body(card))
	}
	return p
}

// orderCard is one card of an order: its Stripe PaymentMethod and its
// Mercado Pago token, either declined or not.
type orderCard struct{ stripe, mp string }

// into names the card in a create: a bare Stripe payment_method, or
// payment_methods with Mercado Pago's token (and, with both, Stripe's
// PaymentMethod after it, where a create fails over when Mercado Pago
// refuses the credentials on a first send).
func (c orderCard) into(m map[string]any, order string, atMP, both bool) {
	if !atMP {
		m["payment_method"] = c.stripe
		return
	}
	methods := map[string]any{"mercadopago": map[string]any{"token": c.mp, "payment_method_id": "visa", "installments": 1}}
	if both {
		methods["stripe"] = c.stripe
	}
	m["payment_methods"], m["billing_details"] = methods, billingDetails(order)
}

// payPix creates a Pix at Mercado Pago (the account's first provider)
// until the service shows its QR code, once more with a new key after a
// failure, then has the customer pay it at the simulator and reads the
// payment until it is captured. A Pix the customer walks away from is
// returned waiting; nil when no answer came.
func (f *fleet) payPix(ctx context.Context, rng *rand.Rand, order string, bad bool) *payment {
	f.bump(func(t *tally) { t.PixOrders++ })
	amount := 100 + rng.Int64N(99_900)
	body, _ := json.Marshal(map[string]any{"order_id": order, "amount": amount, "currency": "BRL",
		"payment_method": "pix", "billing_details": billingDetails(order),
		"metadata": map[string]string{"cart": "chaos"}})
	p := f.create(ctx, rng, order, bad, "ck-"+order+"-1", body)
	if p != nil && p.Status == "failed" {
		f.bump(func(t *tally) { t.RetriedFailed++ })
		sleep(ctx, time.Second+time.Duration(rng.Int64N(int64(2*time.Second))))
		p = f.create(ctx, rng, order, bad, "ck-"+order+"-2", body)
	}
	if p == nil || p.Status != "requires_action" {
		return p
	}
	f.bump(func(t *tally) { t.PixShown++ })
	if rng.Float64() >= pixPaidShare {
		return p // the customer walks away; the Pix waits until it expires
	}
	sleep(ctx, 200*time.Millisecond+time.Duration(rng.Int64N(int64(1500*time.Millisecond))))
	if !f.payAtProvider(ctx, p) {
		return nil
	}
	f.bump(func(t *tally) { t.PixPaid++ })
	return f.awaitPaid(ctx, rng, order, p)
}

// billingDetails is the payer of an order: Mercado Pago needs the email;
// the service takes billing details whole (name, email, CPF, address).
func billingDetails(order string) map[string]any {
	return map[string]any{"name": "Chaos Buyer", "email": "buyer-" + order + "@example.com", "tax_id": "52998224725",
		"address": map[string]string{"line1": "Av. Paulista 1000", "city": "São Paulo", "state": "SP", "postal_code": "01310-100", "country": "BR"}}
}

// payAtProvider is the customer paying a Pix at the simulator.
func (f *fleet) payAtProvider(ctx context.Context, p *payment) bool {
	if p.ProviderPaymentID == "" {
		f.mu.Lock()
		f.unexpected = append(f.unexpected, fmt.Sprintf("order %s: Pix payment %s requires action without a provider_payment_id", p.OrderID, p.ID))
		f.mu.Unlock()
		return false
	}
	target := f.simURL + "/_sim/mp/payments/" + p.ProviderPaymentID + "/pay"
	for try := 0; try < 5 && ctx.Err() == nil; try++ {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, nil)
		if err != nil {
			return false
		}
		resp, err := f.http.Do(req)
		if err == nil {
			resp.Body.Close()
			return resp.StatusCode == http.StatusOK
		}
		sleep(ctx, 200*time.Millisecond)
	}
	return false
}

// awaitPaid reads a paid Pix until the service shows it final (captured),
// for at most pixWait; nil when it did not.
func (f *fleet) awaitPaid(ctx context.Context, rng *rand.Rand, order string, p *payment) *payment {
	deadline := time.Now().Add(pixWait)
	for ctx.Err() == nil && time.Now().Before(deadline) {
		sleep(ctx, 300*time.Millisecond+time.Duration(rng.Int64N(int64(700*time.Millisecond))))
		q := f.get(ctx, rng, p.ID)
		if q == nil || !finalStatus(q.Status) || waiting(q.Status) {
			continue
		}
		f.observe(order, q, "GET /v1/payments/{id} after the Pix was paid")
		if q.Status == "captured" {
			f.bump(func(t *tally) { t.PixSeen++ })
		}
		return q
	}
	return nil
}

// captureOrCancel captures or cancels an authorized payment (now and then
// both at once) and returns it as it ended; nil when no final answer came.
// Any other payment is returned as it is.
func (f *fleet) captureOrCancel(ctx context.Context, rng *rand.Rand, order string, p *payment) *payment {
	if p.Status != "authorized" {
		return p
	}
	if rng.Float64() < raceOpsShare {
		// A confused back office captures and cancels at once: exactly one
		// reaches the provider, the other gets 409 invalid_state.
		f.bump(func(t *tally) { t.RacedOps++ })
		seed := rng.Uint64()
		done := make(chan *payment, 1)
		go func() {
			done <- f.operate(ctx, rand.New(rand.NewPCG(seed, 1)), order, p, "cancel", 0, true)
		}()
		q := f.operate(ctx, rng, order, p, "capture", 0, true)
		if r := <-done; q == nil || (r != nil && r.Status == "canceled") {
			q = r
		}
		return q
	}
	op, amt := "cancel", int64(0)
	if rng.Float64() < captureShare {
		op = "capture"
		if rng.Float64() < partialShare {
			amt = 1 + rng.Int64N(p.Amount)
		}
	}
	return f.operate(ctx, rng, order, p, op, amt, false)
}

// refundOrder refunds a captured payment: what is left at once (now and
// then twice at once), or in one or two parts.
func (f *fleet) refundOrder(ctx context.Context, rng *rand.Rand, order string, p *payment) {
	left := p.AmountCaptured - p.AmountRefunded
	if rng.Float64() < raceRefundShare {
		// Two full refunds with different keys at once: the second is
		// refused under the payment's lock before any provider call.
		f.bump(func(t *tally) { t.RacedRefunds++ })
		seed := rng.Uint64()
		done := make(chan bool, 1)
		go func() { done <- f.refund(ctx, rand.New(rand.NewPCG(seed, 2)), order, p, left, 2, true) }()
		one := f.refund(ctx, rng, order, p, left, 1, true)
		if two := <-done; one && two {
			f.mu.Lock()
			f.unexpected = append(f.unexpected, fmt.Sprintf("order %s: two full refunds of %d both succeeded", order, left))
			f.mu.Unlock()
		}
		return
	}
	first := left
	if left > 1 && rng.IntN(2) == 0 {
		first = left / 2
	}
	if !f.refund(ctx, rng, order, p, first, 1, false) || first == left || rng.IntN(2) == 0 {
		return
	}
	f.refund(ctx, rng, order, p, left-first, 2, false)
}

// create posts the payment until a final answer. A bad client mints a new
// key for every retry; it then meets 409 order_has_active_payment and looks
// the live payment up instead of charging again.
func (f *fleet) create(ctx context.Context, rng *rand.Rand, order string, bad bool, key0 string, body []byte) *payment {
	key := key0
	double := !bad && rng.Float64() < doubleSubmitShare
	for try := 0; ctx.Err() == nil; try++ {
		if bad && try > 0 {
			key = fmt.Sprintf("%s-r%d", key0, try)
		}
		var a answer
		if try == 0 && double {
			f.bump(func(t *tally) { t.DoubleSubmits++ })
			other := f.pick(rng)
			done := make(chan answer, 1)
			go func() { done <- f.do(ctx, http.MethodPost, other, "/v1/payments", key, body) }()
			a = f.do(ctx, http.MethodPost, f.pick(rng), "/v1/payments", key, body)
			twin := <-done
			switch {
			case twin.status == http.StatusCreated:
				if p := decodePayment(twin.body); p != nil {
					f.observe(order, p, "POST /v1/payments (double submit)")
				}
			case twin.status == http.StatusConflict && twin.code == "order_has_active_payment" &&
				f.heldByRelease(ctx, rng, twin):
				// An earlier attempt's intent is still being canceled: the
				// twin reserved nothing, and a's answer is judged below.
			case !retryable(twin):
				f.surprise("double submit of "+order, twin)
			}
		} else {
			sent := time.Now()
			a = f.do(ctx, http.MethodPost, f.pick(rng), "/v1/payments", key, body)
			if a.err == nil && a.status == http.StatusCreated {
				f.created(sent)
			}
		}
		switch {
		case a.err == nil && a.status == http.StatusCreated:
			p := decodePayment(a.body)
			if p == nil || !finalStatus(p.Status) {
				f.surprise("create "+order+": 201 without a final payment", a)
				return nil
			}
			f.observe(order, p, "POST /v1/payments")
			return p
		case retryable(a):
		case a.status == http.StatusConflict && a.code == "order_has_active_payment":
			p := f.get(ctx, rng, a.paymentID)
			switch {
			case released(p):
				// The earlier attempt's intent is still being canceled at
				// the provider; nothing was reserved, so the same key waits.
			case bad && p != nil && finalStatus(p.Status):
				f.observe(order, p, "GET /v1/payments/{id} after 409")
				return p
			case !bad:
				f.surprise("create "+order, a)
				return nil
			}
		default:
			f.surprise("create "+order, a)
			return nil
		}
		sleep(ctx, backoff(rng, try, a.retryAfter))
	}
	return nil
}

// released reports whether p is an earlier attempt whose intent the
// service cancels before the order's next attempt (a 409
// order_has_active_payment naming it is a hold, not a live payment).
func released(p *payment) bool {
	return p != nil && (p.Status == "declined" || p.Status == "failed")
}

// heldByRelease reports whether a 409 order_has_active_payment names an
// earlier attempt that is being released.
func (f *fleet) heldByRelease(ctx context.Context, rng *rand.Rand, a answer) bool {
	return released(f.get(ctx, rng, a.paymentID))
}

// get reads a payment, retrying transport errors and 5xx a few times.
func (f *fleet) get(ctx context.Context, rng *rand.Rand, id string) *payment {
	for try := 0; try < 5 && ctx.Err() == nil; try++ {
		a := f.do(ctx, http.MethodGet, f.pick(rng), "/v1/payments/"+id, "", nil)
		if a.err == nil && a.status == http.StatusOK {
			return decodePayment(a.body)
		}
		if a.err == nil && a.status < 500 {
			f.surprise("get "+id, a)
			return nil
		}
		sleep(ctx, backoff(rng, try, 0))
	}
	return nil
}

// operate captures (amount 0: in full) or cancels an authorized payment
// with one key, until a final answer. Racing another operation, 409
// invalid_state is a final answer too: the race was lost.
func (f *fleet) operate(ctx context.Context, rng *rand.Rand, order string, p *payment, op string, amount int64, racing bool) *payment {
	f.noteOp(p.ID, op)
	f.bump(func(t *tally) {
		if op == "capture" {
			t.Captures++
		} else {
			t.Cancels++
		}
	})
	var body []byte
	if amount > 0 {
		body, _ = json.Marshal(map[string]int64{"amount": amount})
	}
	key := "ck-" + order + "-" + op
	for try, keys := 0, 1; ctx.Err() == nil; try++ {
		a := f.do(ctx, http.MethodPost, f.pick(rng), "/v1/payments/"+p.ID+"/"+op, key, body)
		switch {
		case a.err == nil && a.status == http.StatusOK:
			q := decodePayment(a.body)
			if q == nil {
				f.surprise(op+" "+order, a)
				return nil
			}
			f.observe(order, q, "POST "+op)
			return q
		case retryable(a):
		case racing && a.status == http.StatusConflict && a.code == "invalid_state":
			return nil
		case noEffect(a) && keys < maxKeys:
			// Nothing happened at the provider; the same key would replay
			// the failure, so the back office asks again with a new one.
			keys++
			key = fmt.Sprintf("ck-%s-%s-%d", order, op, keys)
			f.bump(func(t *tally) { t.NewOpKeys++ })
			a.retryAfter = max(a.retryAfter, keyPause)
		default:
			f.surprise(op+" "+order, a)
			return nil
		}
		sleep(ctx, backoff(rng, try, a.retryAfter))
	}
	return nil
}

// refund asks for the n-th refund of a captured payment with one key.
// Racing another refund, 409 refund_exceeds_captured is a final answer.
func (f *fleet) refund(ctx context.Context, rng *rand.Rand, order string, p *payment, amount int64, n int, racing bool) bool {
	f.bump(func(t *tally) { t.Refunds++ })
	body, _ := json.Marshal(map[string]int64{"amount": amount})
	key := fmt.Sprintf("ck-%s-refund-%d", order, n)
	for try, keys := 0, 1; ctx.Err() == nil; try++ {
		a := f.do(ctx, http.MethodPost, f.pick(rng), "/v1/payments/"+p.ID+"/refunds", key, body)
		switch {
		case a.err == nil && a.status == http.StatusCreated:
			var r struct {
				ID     string `json:"id"`
				Status string `json:"status"`
			}
			if json.Unmarshal(a.body, &r) != nil || r.ID == "" {
				f.surprise("refund "+order, a)
				return false
			}
			if r.Status == "failed" {
				// Every refund asked here fits what is left; an over-refund
				// must be refused before any provider call (409), so a
				// refund the provider turned down should never happen.
				f.surprise("refund "+order+" failed at the provider", a)
			}
			if r.Status == "succeeded" || r.Status == "failed" {
				f.mu.Lock()
				f.refunds = append(f.refunds, refundSeen{Order: order, RefundID: r.ID, Status: r.Status})
				f.mu.Unlock()
			}
			return r.Status == "succeeded"
		case retryable(a):
		case racing && a.status == http.StatusConflict && a.code == "refund_exceeds_captured":
			return false
		case noEffect(a) && keys < maxKeys:
			keys++
			key = fmt.Sprintf("ck-%s-refund-%d-%d", order, n, keys)
			f.bump(func(t *tally) { t.NewOpKeys++ })
			a.retryAfter = max(a.retryAfter, keyPause)
		default:
			f.surprise("refund "+order, a)
			return false
		}
		sleep(ctx, backoff(rng, try, a.retryAfter))
	}
	return false
}

func decodePayment(b []byte) *payment {
	var p payment
	if json.Unmarshal(b, &p) != nil || p.ID == "" {
		return nil
	}
	return &p
}
