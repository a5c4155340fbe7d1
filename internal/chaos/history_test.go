package chaos

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/acmepay/payments/internal/provider/providersim"
)

// script builds a synthetic history: calls at offsets from t0.
type script struct {
	calls []call
}

// answer adds one call with its answer, from at to at+d.
func (s *script) answer(key, op, paymentID string, at, d time.Duration, status int, body string, replayed bool) {
	s.calls = append(s.calls, call{Key: key, Op: op, Order: "o1", PaymentID: paymentID, Call: t0.Add(at), Return: t0.Add(at + d),
		Status: status, Body: []byte(body), Replayed: replayed})
}

// lost adds a call whose answer never came.
func (s *script) lost(key, op, paymentID string, at time.Duration) {
	s.calls = append(s.calls, call{Key: key, Op: op, Order: "o1", PaymentID: paymentID, Call: t0.Add(at), Lost: true})
}

func pay(status string) string {
	return `{"id":"pay_1","object":"payment","order_id":"o1","status":"` + status + `","amount":100}`
}

// cleanScript is a create in doubt, answered 202, then 201 authorized and
// replayed, a lost capture and its retry, and reads of the payment.
func cleanScript() *script {
	s := &script{}
	s.answer("ck-o1-1", "create", "pay_1", 0, 100*time.Millisecond, http.StatusAccepted, pay("unknown"), false)
	s.answer("ck-o1-1", "create", "pay_1", time.Second, 100*time.Millisecond, http.StatusCreated, pay("authorized"), false)
	s.answer("ck-o1-1", "create", "pay_1", 2*time.Second, 100*time.Millisecond, http.StatusCreated, pay("authorized"), true)
	s.answer("ck-o1-1", "create", "", 2*time.Second, 50*time.Millisecond, http.StatusConflict, `{"code":"idempotency_key_in_use"}`, false)
	s.lost("ck-o1-capture", "capture", "pay_1", 3*time.Second)
	s.answer("ck-o1-capture", "capture", "pay_1", 4*time.Second, 100*time.Millisecond, http.StatusOK, pay("captured"), false)
	s.answer("ck-o1-capture", "capture", "pay_1", 5*time.Second, 100*time.Millisecond, http.StatusOK, pay("captured"), true)
	s.answer("", "get", "pay_1", 6*time.Second, 100*time.Millisecond, http.StatusOK, pay("captured"), false)
	// Created authorized, replayed after the capture: a replay shows the
	// payment as it was and is no step backward.
	s.answer("ck-o1-1", "create", "pay_1", 7*time.Second, 100*time.Millisecond, http.StatusCreated, pay("authorized"), true)
	return s
}

func finalsOf(status string) map[string]string { return map[string]string{"pay_1": status} }

func collect(t *testing.T) (func(string, ...any), *[]string) {
	t.Helper()
	var got []string
	return func(format string, args ...any) { got = append(got, format) }, &got
}

func TestHistoryCleanPasses(t *testing.T) {
	s := cleanScript()
	sample, got := collect(t)
	keys := checkKeys(s.calls, sample)
	pays := checkPayments(s.calls, finalsOf("captured"), sample)
	if keys.Illegal+keys.Unknown+pays.Illegal+pays.Unknown != 0 || len(*got) != 0 {
		t.Fatalf("a clean history failed: keys %+v payments %+v %v", keys, pays, *got)
	}
	if keys.Histories != 2 || keys.Lost != 1 || pays.Histories != 1 {
		t.Fatalf("keys %+v payments %+v: want 2 key histories with 1 lost answer, 1 payment history", keys, pays)
	}
}

func TestHistoryReplayWithAnotherBody(t *testing.T) {
	s := cleanScript()
	s.answer("ck-o1-capture", "capture", "pay_1", 8*time.Second, 100*time.Millisecond, http.StatusOK,
		strings.Replace(pay("captured"), `"amount":100`, `"amount":101`, 1), true)
	sample, _ := collect(t)
	if k := checkKeys(s.calls, sample); k.Illegal != 1 {
		t.Fatalf("a replay with another body: %+v", k)
	}
}

func TestHistorySecondFinalAnswer(t *testing.T) {
	s := cleanScript()
	s.answer("ck-o1-1", "create", "pay_1", 9*time.Second, 100*time.Millisecond, http.StatusConflict, `{"code":"invalid_state"}`, false)
	sample, _ := collect(t)
	if k := checkKeys(s.calls, sample); k.Illegal != 1 {
		t.Fatalf("a second final answer: %+v", k)
	}
}

func TestHistoryUnknownAfterFinal(t *testing.T) {
	s := cleanScript()
	s.answer("ck-o1-capture", "capture", "pay_1", 9*time.Second, 100*time.Millisecond, http.StatusAccepted, pay("authorized"), false)
	sample, _ := collect(t)
	if k := checkKeys(s.calls, sample); k.Illegal != 1 {
		t.Fatalf("a 202 after the final answer: %+v", k)
	}
}

// Two answers that overlap in time may be linearized either way: a 202
// whose call began before the 201 returned is legal.
func TestHistoryConcurrentUnknownPasses(t *testing.T) {
	s := &script{}
	s.answer("ck-o1-1", "create", "pay_1", 0, 2*time.Second, http.StatusAccepted, pay("unknown"), false)
	s.answer("ck-o1-1", "create", "pay_1", time.Second, 500*time.Millisecond, http.StatusCreated, pay("authorized"), false)
	sample, got := collect(t)
	if k := checkKeys(s.calls, sample); k.Illegal != 0 || len(*got) != 0 {
		t.Fatalf("overlapping 202 and 201: %+v %v", k, *got)
	}
}

func TestHistoryStatusBackward(t *testing.T) {
	s := cleanScript()
	s.answer("", "get", "pay_1", 8*time.Second, 100*time.Millisecond, http.StatusOK, pay("authorized"), false)
	sample, _ := collect(t)
	if p := checkPayments(s.calls, finalsOf("captured"), sample); p.Illegal != 1 {
		t.Fatalf("a status moving backward: %+v", p)
	}
}

func TestHistoryFinalStateBehindWhatWasShown(t *testing.T) {
	s := cleanScript()
	sample, _ := collect(t)
	if p := checkPayments(s.calls, finalsOf("authorized"), sample); p.Illegal != 1 {
		t.Fatalf("a payment shown captured that ends authorized: %+v", p)
	}
}

// A capture whose answer was lost and never retried is kept only when the
// final state shows its effect, and then returns at infinity.
func TestHistoryLostCaptureSettledByFinalState(t *testing.T) {
	s := &script{}
	s.answer("ck-o1-1", "create", "pay_1", 0, 100*time.Millisecond, http.StatusCreated, pay("authorized"), false)
	s.lost("ck-o1-capture", "capture", "pay_1", time.Second)
	s.answer("", "get", "pay_1", 2*time.Second, 100*time.Millisecond, http.StatusOK, pay("authorized"), false)
	sample, got := collect(t)
	p := checkPayments(s.calls, finalsOf("captured"), sample)
	if p.Illegal != 0 || p.Settled != 1 || len(*got) != 0 {
		t.Fatalf("a lost capture seen by the final state: %+v %v", p, *got)
	}
	p = checkPayments(s.calls, finalsOf("authorized"), sample)
	if p.Illegal != 0 || p.Settled != 0 {
		t.Fatalf("a lost capture without effect: %+v", p)
	}
}

func committedFeed() ([]string, []feedEntry) {
	ids := []string{"evt_1", "evt_2", "evt_3", "evt_4"}
	full := []feedEntry{{"evt_1", "pay_1", 1}, {"evt_2", "pay_2", 1}, {"evt_3", "pay_1", 2}, {"evt_4", "pay_2", 2}}
	return ids, full
}

func TestFeedHistoryCleanPasses(t *testing.T) {
	ids, full := committedFeed()
	reads := map[int][]string{1: ids, 3: ids}
	resumes := []resumeRead{{From: 2, IDs: []string{"evt_3", "evt_4", "evt_5"}, Origin: "page"}, {From: 4, Origin: "webhook"}}
	hooks := []received{{ID: "evt_2"}, {ID: "evt_1"}, {ID: "evt_2"}, {ID: "evt_3"}, {ID: "evt_4"}}
	sample, got := collect(t)
	tl := checkFeedHistory(ids, reads, full, resumes, hooks, sample)
	if tl.violations() != 0 || len(*got) != 0 {
		t.Fatalf("a clean feed failed: %+v %v", tl, *got)
	}
	r := &Report{}
	r.checkFeed(ids, reads)
	r.checkMerchant(ids, map[string]int{"evt_1": 1, "evt_2": 2, "evt_3": 1, "evt_4": 1}, nil)
	if r.Feed.Errors()+r.Merchant.Lost != 0 {
		t.Fatalf("a clean feed: %+v %+v", r.Feed, r.Merchant)
	}
}

// An event skipped by a read, or by the webhooks, is caught by the
// exactly-once checks the history verdict includes.
func TestFeedHistoryEventSkipped(t *testing.T) {
	ids, _ := committedFeed()
	r := &Report{}
	r.checkFeed(ids, map[int][]string{1: {"evt_1", "evt_3", "evt_4"}})
	r.checkMerchant(ids, map[string]int{"evt_1": 1, "evt_2": 1, "evt_4": 1}, nil)
	if r.Feed.Missed != 1 || r.Merchant.Lost != 1 || r.Violations() != 2 {
		t.Fatalf("an event skipped: feed %+v merchant %+v", r.Feed, r.Merchant)
	}
}

func TestFeedHistoryDeliveredTwiceOutOfOrder(t *testing.T) {
	ids, full := committedFeed()
	read := []string{"evt_1", "evt_3", "evt_2", "evt_3", "evt_4"}
	sample, _ := collect(t)
	tl := checkFeedHistory(ids, map[int][]string{3: read}, full, nil, nil, sample)
	r := &Report{}
	r.checkFeed(ids, map[int][]string{3: read})
	if tl.OutOfOrder != 1 || r.Feed.Repeated != 1 {
		t.Fatalf("an event served twice, out of order: %+v %+v", tl, r.Feed)
	}
}

func TestFeedHistoryVersionBackward(t *testing.T) {
	ids, full := committedFeed()
	full[0], full[2] = full[2], full[0]
	sample, _ := collect(t)
	if tl := checkFeedHistory(ids, nil, full, nil, nil, sample); tl.OutOfOrder != 1 {
		t.Fatalf("a payment's events in reverse version order: %+v", tl)
	}
}

func TestFeedHistoryNotResumable(t *testing.T) {
	ids, full := committedFeed()
	sample, _ := collect(t)
	resumes := []resumeRead{
		{From: 1, IDs: []string{"evt_3", "evt_4"}},          // skips evt_2
		{From: 2, IDs: []string{"evt_3", "evt_4", "evt_1"}}, // serves evt_1 behind the cursor
	}
	if tl := checkFeedHistory(ids, nil, full, resumes, nil, sample); tl.NotResumable != 2 {
		t.Fatalf("reads from a cursor that skip or go back: %+v", tl)
	}
}

func TestFeedHistoryUncommittedWebhook(t *testing.T) {
	ids, full := committedFeed()
	sample, _ := collect(t)
	if tl := checkFeedHistory(ids, nil, full, nil, []received{{ID: "evt_9"}}, sample); tl.Uncommitted != 1 {
		t.Fatalf("a webhook of an event never committed: %+v", tl)
	}
}

func ledgerWorld() *world {
	w := newWorld()
	w.intent("pi_1", "o1", "pay_1", "succeeded", 100)
	w.attempt("att_1", "pay_1", "autorizar", "o1:autorizar-v1", "succeeded", "")
	w.sent("authorize", "o1:autorizar-v1", 0, http.StatusOK, "")
	w.sent("authorize", "o1:autorizar-v1", time.Second, http.StatusOK, "")
	w.reqs[1].Replayed = true
	w.sent("capture", "o1:capturar-v1", 2*time.Second, 0, providersim.DropAfterEffect)
	w.sent("capture", "o1:capturar-v1", 3*time.Second, http.StatusOK, "")
	w.reqs[3].Replayed = true
	return w
}

func TestLedgerCleanPasses(t *testing.T) {
	w := ledgerWorld()
	sample, got := collect(t)
	if tl := checkLedger(w.reqs, stripeRecords(w.intents), w.st, sample); tl.violations() != 0 || tl.Keys != 2 || len(*got) != 0 {
		t.Fatalf("a clean ledger: %+v %v", tl, *got)
	}
}

func TestLedgerKeyActedTwice(t *testing.T) {
	w := ledgerWorld()
	w.sent("capture", "o1:capturar-v1", 4*time.Second, http.StatusOK, "") // not a replay: a second capture
	sample, _ := collect(t)
	if tl := checkLedger(w.reqs, stripeRecords(w.intents), w.st, sample); tl.TwoEffects != 1 {
		t.Fatalf("a key that acted twice: %+v", tl)
	}
}

func TestLedgerSecondCharge(t *testing.T) {
	w := ledgerWorld()
	w.intent("pi_2", "o1", "pay_1", "requires_capture", 100)
	w.intents[1].Metadata["attempt"] = "2"
	sample, _ := collect(t)
	if tl := checkLedger(w.reqs, stripeRecords(w.intents), w.st, sample); tl.SecondCharges != 1 {
		t.Fatalf("a second charge: %+v", tl)
	}
}

// Attempt 2 may charge only after attempt 1 was proven to have done
// nothing.
func TestLedgerLaterAttemptNeedsProof(t *testing.T) {
	w := newWorld()
	w.intent("pi_2", "o1", "pay_1", "succeeded", 100)
	w.intents[0].Metadata["attempt"] = "2"
	w.attempt("att_1", "pay_1", "autorizar", "o1:autorizar-v1", "failed", codeUnreachable)
	w.attempt("att_2", "pay_1", "autorizar", "o1:autorizar-v2", "succeeded", "")
	sample, _ := collect(t)
	if tl := checkLedger(nil, stripeRecords(w.intents), w.st, sample); tl.SecondCharges != 0 {
		t.Fatalf("attempt 2 after an unreachable attempt 1: %+v", tl)
	}
	w.st.Attempts["att_1"].FailureCode = "provider_error"
	if tl := checkLedger(nil, stripeRecords(w.intents), w.st, sample); tl.SecondCharges != 1 {
		t.Fatalf("attempt 2 after an attempt 1 not proven to have done nothing: %+v", tl)
	}
}

// The verdicts count in Violations and print as yes or no.
func TestHistoryVerdictsInReport(t *testing.T) {
	s := cleanScript()
	s.answer("", "get", "pay_1", 8*time.Second, 100*time.Millisecond, http.StatusOK, pay("authorized"), false)
	w := ledgerWorld()
	ids, full := committedFeed()
	r := &Report{}
	r.checkHistories(historyInputs{Calls: s.calls, Committed: ids, Full: full, Recs: stripeRecords(w.intents), Reqs: w.reqs,
		State: &localState{Payments: map[string]*localPayment{"pay_1": {ID: "pay_1", Status: "captured"}}, Attempts: w.st.Attempts}})
	if r.Violations() != 1 || r.Histories.Payments.verdict() != "no" || r.Histories.Keys.verdict() != "yes" {
		t.Fatalf("violations %d, verdicts %+v", r.Violations(), r.Histories)
	}
	var b strings.Builder
	r.Print(&b)
	out := strings.Join(strings.Fields(b.String()), " ")
	if !strings.Contains(out, "history: payments: linearizable no") || !strings.Contains(out, "history: keys: linearizable yes") {
		t.Fatalf("the report does not show the verdicts:\n%s", b.String())
	}
}

// A lost capture seen captured by a read returns by that read: a read
// after it showing the payment authorized again is caught.
func TestHistoryLostCaptureBoundedByFirstSight(t *testing.T) {
	s := &script{}
	s.answer("ck-o1-1", "create", "pay_1", 0, 100*time.Millisecond, http.StatusCreated, pay("authorized"), false)
	s.lost("ck-o1-capture", "capture", "pay_1", time.Second)
	s.answer("", "get", "pay_1", 2*time.Second, 100*time.Millisecond, http.StatusOK, pay("captured"), false)
	sample, got := collect(t)
	if p := checkPayments(s.calls, finalsOf("captured"), sample); p.Illegal != 0 || p.Settled != 1 || len(*got) != 0 {
		t.Fatalf("a lost capture seen by a read: %+v %v", p, *got)
	}
	s.answer("", "get", "pay_1", 3*time.Second, 100*time.Millisecond, http.StatusOK, pay("authorized"), false)
	if p := checkPayments(s.calls, finalsOf("captured"), sample); p.Illegal != 1 {
		t.Fatalf("authorized shown after captured was: %+v", p)
	}
}
