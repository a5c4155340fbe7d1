package api_test

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/acmepay/payments/internal/apitest"
)

// cost is what one request sent to the database: the statements by name
// (sqlc's, or their first words: BEGIN, COMMIT, the timeouts), in order.
type cost struct {
	txs, statements, roundTrips int64
	names                       []string
}

func (c cost) String() string {
	return fmt.Sprintf("%d transactions, %d statements, %d round trips: %s",
		c.txs, c.statements, c.roundTrips, strings.Join(c.names, ", "))
}

// costOf counts the database work of do on the first instance.
func costOf(e *apitest.Env, do func()) cost {
	e.Counter.Names()
	tx0, st0 := e.Counter.Counts()
	rt0 := e.Counter.RoundTrips()
	do()
	tx1, st1 := e.Counter.Counts()
	return cost{tx1 - tx0, st1 - st0, e.Counter.RoundTrips() - rt0, e.Counter.Names()}
}

// statementCount counts names as Counts does: BEGIN, COMMIT and ROLLBACK
// are not statements.
func statementCount(names []string) int {
	n := 0
	for _, name := range names {
		if name != begin && name != "COMMIT" && name != "ROLLBACK" {
			n++
		}
	}
	return n
}

// wantNames fails unless c ran exactly want, in order: a new statement on
// the money path is a decision, taken by changing the list here.
// River's PGNotifyMany, which wakes the queue's workers after an insert,
// is left out: River sends it at most once per interval, so whether a
// given insert sends it depends on time.
func wantNames(t *testing.T, what string, c cost, want []string) {
	t.Helper()
	got := slices.DeleteFunc(slices.Clone(c.names), func(n string) bool { return n == "PGNotifyMany" })
	if strings.Join(got, ", ") != strings.Join(want, ", ") {
		t.Errorf("%s ran\n  %s\nwant\n  %s", what, strings.Join(got, ", "), strings.Join(want, ", "))
	}
	if n := statementCount(want) + len(c.names) - len(got); c.statements != int64(n) {
		t.Errorf("%s: %d statements counted, %d listed", what, c.statements, n)
	}
}

// The statements of the money path, by name. BEGIN carries the isolation
// level; its first three words name it.
const begin = "BEGIN ISOLATION LEVEL"

var (
	// replayStatements: the key's unlocked read answers a replay.
	replayStatements = []string{"IdempotencyKeyGet"}
	// reserveStatements are transaction 1 of a create: the key's
	// reservation (with the order's next attempt number and the
	// account's webhook endpoints), the payment with its attempt, and the
	// audit entry with the payment.created event.
	reserveStatements = []string{begin, "IdempotencyKeyReserveNumbered", "PaymentInsertWithAttempt", "AuditEventInsert", "COMMIT"}
	// settleStatements are transaction 2: the key and the payment locked
	// (with the endpoints), the attempt read after the locks, the outcome
	// with the payment's state, the audit entry with the event, and the
	// key's answer.
	settleStatements = []string{begin, "IdempotencyKeyGetForUpdateWithPayment", "AttemptGetByID",
		"AttemptUpdateOutcomeWithPayment", "AuditEventInsert", "IdempotencyKeyComplete", "COMMIT"}
	createStatements = slices.Concat(replayStatements, reserveStatements, settleStatements)
	// With a merchant endpoint each event enqueues its delivery (River).
	createWebhookStatements = slices.Concat(replayStatements,
		[]string{begin, "IdempotencyKeyReserveNumbered", "PaymentInsertWithAttempt", "AuditEventInsert", "JobInsertFastMany", "COMMIT"},
		[]string{begin, "IdempotencyKeyGetForUpdateWithPayment", "AttemptGetByID", "AttemptUpdateOutcomeWithPayment",
			"AuditEventInsert", "JobInsertFastMany", "IdempotencyKeyComplete", "COMMIT"})
	// A failover is one statement between the two: the failed attempt,
	// the payment at the next provider, its attempt and the key moved.
	failoverStatements = slices.Concat(replayStatements, reserveStatements,
		[]string{begin, "PaymentFailOver", "COMMIT"}, settleStatements)
)

// Budgets of the money path, in round trips: a create is the replay read
// and two transactions of two pipelined round trips each, and the first
// use of an API key reads the account once. A transaction that enqueues
// merchant webhooks adds River's insert, which returns rows.
const (
	createRoundTrips        = 5
	firstUseRoundTrips      = 1
	createWebhookRoundTrips = createRoundTrips + 2
	replayRoundTrips        = 1
	// createStatementBudget bounds a create's statements.
	createStatementBudget = 10
)

// TestCost holds the money path to its budget: each statement by name, in
// order, and the round trips, not time. A create is two transactions and
// one provider call; a replay is one indexed read and no provider call (the
// API key is cached after its first use).
func TestCost(t *testing.T) {
	t.Parallel()
	if n := statementCount(createStatements); n > createStatementBudget {
		t.Fatalf("a create is listed with %d statements, over its budget of %d", n, createStatementBudget)
	}
	e := apitest.New(t, apitest.Options{})
	c := costOf(e, func() { wantStatus(t, create(e, "k-cost", createBody("pedido-cost", 100)), http.StatusCreated) })
	t.Logf("first create (API key read): %v", c)
	wantNames(t, "the first create", c, slices.Concat([]string{"AccountGetByAPIKeyHash"}, createStatements))
	if c.txs != 2 || c.roundTrips > createRoundTrips+firstUseRoundTrips {
		t.Errorf("the first create: %v, want 2 transactions and at most %d round trips", c, createRoundTrips+firstUseRoundTrips)
	}
	if calls := e.PaymentCalls(); calls != 1 {
		t.Errorf("a create made %d provider calls, want 1", calls)
	}

	c = costOf(e, func() { wantStatus(t, create(e, "k-cost", createBody("pedido-cost", 100)), http.StatusCreated) })
	t.Logf("replay: %v", c)
	wantNames(t, "a replay", c, replayStatements)
	if c.txs != 0 || c.roundTrips > replayRoundTrips {
		t.Errorf("a replay: %v, want 0 transactions and at most %d round trip", c, replayRoundTrips)
	}
	if calls := e.PaymentCalls(); calls != 1 {
		t.Errorf("a replay reached the provider")
	}

	c = costOf(e, func() { wantStatus(t, create(e, "k-cost-2", createBody("pedido-cost-2", 100)), http.StatusCreated) })
	t.Logf("create: %v", c)
	wantNames(t, "a create", c, createStatements)
	if c.txs != 2 || c.roundTrips > createRoundTrips {
		t.Errorf("a create: %v, want 2 transactions and at most %d round trips", c, createRoundTrips)
	}

	// With a merchant endpoint both transactions enqueue a delivery. River
	// asks the server's version on its first insert only: a create before
	// the one counted.
	createEndpoint(t, e, "k-cost-ep", "https://93.184.216.34/h", "*")
	wantStatus(t, create(e, "k-cost-4", createBody("pedido-cost-4", 100)), http.StatusCreated)
	c = costOf(e, func() { wantStatus(t, create(e, "k-cost-3", createBody("pedido-cost-3", 100)), http.StatusCreated) })
	t.Logf("create with a webhook endpoint: %v", c)
	wantNames(t, "a create with a webhook endpoint", c, createWebhookStatements)
	if c.txs != 2 || c.roundTrips > createWebhookRoundTrips {
		t.Errorf("a create with a webhook endpoint: %v, want 2 transactions and at most %d round trips", c, createWebhookRoundTrips)
	}
	if n := len(e.WebhookJobs(t)); n != 4 {
		t.Errorf("%d webhook jobs, want 4 (payment.created and payment.authorized of two creates)", n)
	}
}

// TestCostPix holds a Pix create to the card's budget: two transactions,
// the same round trips and one provider call to hand the customer a QR
// code, one statement to replay it; the payment then completes from the
// provider's webhook without a provider call. The figures are logged next
// to a card's.
func TestCostPix(t *testing.T) {
	t.Parallel()
	const pix = `{"order_id":"pedido-cost-pix","amount":100,"currency":"BRL","payment_method":"pix"}`
	e := apitest.New(t, apitest.Options{})
	// A card first, which also puts the API key in the cache.
	card := costOf(e, func() {
		wantStatus(t, create(e, "k-cost-card", createBody("pedido-cost-card", 100)), http.StatusCreated)
	})
	var r *apitest.Response
	c := costOf(e, func() { r = create(e, "k-cost-pix", pix) })
	requiresAction(t, r, "pix_display_qr_code")
	wantNames(t, "a Pix create", c, createStatements)
	if c.txs != 2 || c.roundTrips > createRoundTrips {
		t.Errorf("a Pix create: %v, want 2 transactions and at most %d round trips", c, createRoundTrips)
	}
	if n := e.PaymentCalls(); n != 2 {
		t.Errorf("a card and a Pix create made %d provider calls, want 2", n)
	}
	var again *apitest.Response
	replay := costOf(e, func() { again = create(e, "k-cost-pix", pix) })
	wantNames(t, "a Pix replay", replay, replayStatements)
	if replay.txs != 0 || replay.statements != 1 || replay.roundTrips > replayRoundTrips || string(again.Body) != string(r.Body) {
		t.Errorf("a Pix replay: %v, want 0 transactions, 1 statement, at most %d round trip and the same QR code", replay, replayRoundTrips)
	}

	// Completion: the provider's webhook carries the state.
	w := newAsyncEnv(t)
	p := requiresAction(t, w.create("k-cost-paid", pix), "pix_display_qr_code")
	w.hooks(t) // the requires_action event of the create
	calls := w.PaymentCalls()
	paid := costOf(w.Env, func() {
		w.transition(t, "pay", p["provider_payment_id"].(string))
		w.hooks(t)
	})
	if got := w.get(t, p["id"].(string)); got["status"] != "captured" {
		t.Fatalf("after the customer paid: %v, want captured", got["status"])
	}
	if n := w.PaymentCalls() - calls; n != 0 {
		t.Errorf("completing the Pix made %d provider calls, want 0", n)
	}
	t.Logf("card create (API key read): %v, 1 provider call", card)
	t.Logf("pix create: %v, 1 provider call; replay: %v", c, replay)
	t.Logf("pix paid (one webhook): %v, 0 provider calls", paid)
}
