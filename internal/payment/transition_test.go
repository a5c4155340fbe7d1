package payment

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/acmepay/payments/internal/provider"
)

// The transition table, spelled out independently of decide: every
// operation (and a release) against every payment status and every
// classified outcome.

// allowedTo lists the statuses a payment may move to (CONTRACT's
// transitions).
var allowedTo = map[Status]string{
	StatusProcessing:     "unknown requires_action pending authorized captured declined failed canceled",
	StatusUnknown:        "requires_action pending authorized captured declined failed canceled",
	StatusRequiresAction: "pending authorized captured declined canceled",
	StatusPending:        "authorized captured failed canceled",
	StatusAuthorized:     "captured canceled",
	StatusDeclined:       "processing",
	StatusFailed:         "processing",
}

func allowed(from, to Status) bool {
	return slices.Contains(strings.Fields(allowedTo[from]), string(to))
}

func final(s Status) bool {
	return slices.Contains(strings.Fields("authorized captured declined failed canceled"), string(s))
}

var allStatuses = []Status{StatusProcessing, StatusUnknown, StatusRequiresAction, StatusPending, StatusAuthorized,
	StatusCaptured, StatusDeclined, StatusFailed, StatusCanceled}

// cellOutcome is one classified outcome and what each operation's attempt
// makes of it.
type cellOutcome struct {
	name   string
	out    Outcome
	intent provider.IntentState // "" when the answer carried no intent
	// authTo is the status an authorization proposes; the attempt
	// statuses are per operation.
	authTo                          Status
	authAtt, capAtt, canAtt, refAtt AttemptStatus
	expired                         bool
}

func cellOutcomes() []cellOutcome {
	in := func(st provider.IntentState, code string) *provider.Intent {
		return &provider.Intent{ID: "pi_1", State: st, AmountReceived: 90, FailureCode: code}
	}
	res := func(o provider.Outcome, i *provider.Intent, r *provider.Refund, code string) Outcome {
		return Outcome{Result: provider.Result{Outcome: o, Answer: provider.AnswerObject, Intent: i, FailureCode: code}, Refund: r}
	}
	ref := func(st provider.RefundState) *provider.Refund { return &provider.Refund{ID: "re_1", State: st} }
	const (
		ok = AttemptSucceeded
		wt = AttemptWaiting
		dc = AttemptDeclined
		fl = AttemptFailed
		uk = AttemptUnknown
	)
	return []cellOutcome{
		{"succeeded/authorized", res(provider.Succeeded, in(provider.IntentAuthorized, ""), nil, ""), provider.IntentAuthorized, StatusAuthorized, ok, uk, uk, uk, false},
		{"succeeded/captured", res(provider.Succeeded, in(provider.IntentCaptured, ""), nil, ""), provider.IntentCaptured, StatusCaptured, ok, ok, uk, uk, false},
		{"succeeded/canceled", res(provider.Succeeded, in(provider.IntentCanceled, ""), nil, ""), provider.IntentCanceled, StatusCanceled, ok, uk, ok, uk, false},
		{"succeeded/requires_action", res(provider.Succeeded, in(provider.IntentRequiresAction, ""), nil, ""), provider.IntentRequiresAction, StatusRequiresAction, wt, uk, uk, uk, false},
		{"succeeded/processing", res(provider.Succeeded, in(provider.IntentProcessing, ""), nil, ""), provider.IntentProcessing, StatusPending, wt, uk, uk, uk, false},
		{"succeeded/needs_payment_method", res(provider.Succeeded, in(provider.IntentNeedsPaymentMethod, "card_declined"), nil, ""), provider.IntentNeedsPaymentMethod, StatusDeclined, dc, uk, uk, uk, false},
		{"succeeded/expired", res(provider.Succeeded, in(provider.IntentNeedsPaymentMethod, provider.FailureExpired), nil, ""), provider.IntentNeedsPaymentMethod, StatusDeclined, dc, uk, uk, uk, true},
		{"declined", res(provider.Declined, nil, nil, "card_declined"), "", StatusDeclined, dc, fl, fl, fl, false},
		{"failed", res(provider.Failed, nil, nil, "invalid_request"), "", StatusFailed, fl, fl, fl, fl, false},
		{"failed/captured", res(provider.Failed, in(provider.IntentCaptured, ""), nil, "invalid_state"), provider.IntentCaptured, StatusFailed, fl, fl, fl, fl, false},
		{"failed/canceled", res(provider.Failed, in(provider.IntentCanceled, ""), nil, "invalid_state"), provider.IntentCanceled, StatusFailed, fl, fl, fl, fl, false},
		{"unknown", res(provider.Unknown, nil, nil, ""), "", StatusUnknown, uk, uk, uk, uk, false},
		{"succeeded/refund_succeeded", res(provider.Succeeded, nil, ref(provider.RefundSucceeded), ""), "", StatusUnknown, uk, uk, uk, ok, false},
		{"succeeded/refund_pending", res(provider.Succeeded, nil, ref(provider.RefundPending), ""), "", StatusUnknown, uk, uk, uk, ok, false},
		{"succeeded/refund_failed", res(provider.Succeeded, nil, ref(provider.RefundFailed), ""), "", StatusUnknown, uk, uk, uk, fl, false},
	}
}

// cellWant is what a cell must come to.
type cellWant struct {
	status       Status
	attempt      AttemptStatus
	written      bool // the payment is written, with events
	events       []string
	ignored      bool
	release      bool // a release is armed
	closeWaiting bool
	refund       RefundStatus
}

// payableIntent: an intent that could still be paid (none counts as payable).
func payableIntent(st provider.IntentState) bool {
	return st != provider.IntentCanceled && st != provider.IntentAuthorized && st != provider.IntentCaptured
}

// adopted is the status a refused capture or cancel shows the payment
// moved on to at the provider; "" when it shows none.
func adopted(st provider.IntentState) Status {
	switch st {
	case provider.IntentCanceled:
		return StatusCanceled
	case provider.IntentCaptured:
		return StatusCaptured
	}
	return ""
}

// settleCell judges a proposed status for a payment, as every operation
// does: a move CanTransition allows, or ignored.
func settleCell(w cellWant, from, to Status, event string) cellWant {
	moved := to != from && allowed(from, to)
	w.ignored = to != from && !moved
	w.status = from
	if moved {
		w.status = to
	}
	w.written = moved || event != ""
	switch {
	case moved && event != "" && event != "payment.refunded":
		w.events = []string{event, "payment." + string(to)}
	case event != "":
		w.events = []string{event}
	case moved:
		w.events = []string{"payment." + string(to)}
	}
	return w
}

func wantCell(op string, from Status, o cellOutcome, wasWaiting bool) cellWant {
	var w cellWant
	switch op {
	case "autorizar":
		to, att := o.authTo, o.authAtt
		if o.expired && (from == StatusRequiresAction || from == StatusPending) {
			to, att = from, AttemptWaiting
		}
		if to == StatusDeclined && from == StatusPending {
			to = StatusFailed
		}
		if wasWaiting && att == AttemptUnknown {
			att = AttemptWaiting
		}
		w = settleCell(cellWant{attempt: att}, from, to, "")
		w.release = w.status != from && (to == StatusDeclined || to == StatusFailed) && payableIntent(o.intent)
		return w
	case "capturar", "cancelar":
		att, to, event := o.capAtt, StatusCaptured, "payment.capture_failed"
		if op == "cancelar" {
			att, to, event = o.canAtt, StatusCanceled, "payment.cancel_failed"
		}
		switch att {
		case AttemptFailed:
			if to = adopted(o.intent); to == "" {
				to = from
			}
		case AttemptUnknown:
			to, event = from, ""
		default:
			event = ""
		}
		w = settleCell(cellWant{attempt: att}, from, to, event)
		w.closeWaiting = w.status != from && final(w.status)
		return w
	case "estornar":
		w = cellWant{attempt: o.refAtt, status: from, refund: RefundUnknown}
		switch o.refAtt {
		case AttemptSucceeded:
			w.refund, w.written, w.events = RefundSucceeded, true, []string{"payment.refunded"}
		case AttemptFailed:
			w.refund, w.written, w.events = RefundFailed, true, []string{"payment.refund_failed"}
		}
		return w
	}
	// A release: the payment keeps its status unless the refusal shows
	// the intent paid; a refusal over an intent still payable re-arms it.
	w = cellWant{attempt: o.canAtt, status: from}
	if o.canAtt != AttemptFailed {
		return w
	}
	paid := map[provider.IntentState]Status{provider.IntentAuthorized: StatusAuthorized, provider.IntentCaptured: StatusCaptured}[o.intent]
	if paid != "" && (allowed(from, paid) || (from != paid && final(from) && final(paid))) {
		w.status, w.written, w.events = paid, true, []string{"payment." + string(paid)}
		return w
	}
	w.release = payableIntent(o.intent)
	return w
}

func TestDecideTable(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	cells := 0
	for _, op := range []string{"autorizar", "capturar", "cancelar", "estornar", "release"} {
		for _, from := range allStatuses {
			for _, o := range cellOutcomes() {
				name := fmt.Sprintf("%s/%s/%s", op, from, o.name)
				p, a, f := cellInput(op, from, now)
				wasWaiting := a.Status == AttemptWaiting
				got := decide(p, a, o.out, f)
				checkCell(t, name, p, got, wantCell(op, from, o, wasWaiting))
				cells++
			}
		}
	}
	if want := 5 * len(allStatuses) * len(cellOutcomes()); cells != want {
		t.Errorf("%d cells, want %d", cells, want)
	}
}

// cellInput is a payment in one status and its attempt of one operation,
// as locked and read; an authorization of a waiting payment is waiting.
func cellInput(op string, from Status, now time.Time) (Payment, Attempt, facts) {
	p := Payment{ID: "pay_1", AccountID: "acct_1", OrderID: "o1", Amount: 100, Status: from, ProviderPaymentID: "pi_1",
		AmountCaptured: 100, CreatedAt: now.Add(-time.Hour), UpdatedAt: now.Add(-time.Hour)}
	a := Attempt{ID: "att_1", PaymentID: p.ID, Operation: Operation(op), ProviderKey: "o1:" + op + "-v1", Status: AttemptProcessing,
		CreatedAt: now.Add(-time.Minute)}
	f := facts{Now: now, Actor: "test", Wait: waitPolicy{poll: time.Minute, maxBackoff: time.Hour}}
	switch op {
	case "autorizar":
		if from == StatusRequiresAction || from == StatusPending {
			a.Status = AttemptWaiting
		}
	case "cancelar", "release":
		a.Operation = OpCancel
		b, _ := json.Marshal(cancelRequest{CancelRequest: provider.CancelRequest{IntentID: "pi_1"}, From: from, Release: op == "release"})
		a.Request = b
	case "estornar":
		f.Refund = &Refund{ID: "ref_1", PaymentID: p.ID, AttemptID: a.ID, Amount: 30, Status: RefundProcessing}
		f.RefundedSum = 20
	}
	return p, a, f
}

func checkCell(t *testing.T, name string, p Payment, got Transition, w cellWant) {
	t.Helper()
	status := p.Status
	if got.Payment != nil {
		status = got.Payment.Status
	}
	if status != w.status || got.Attempt.Status != w.attempt {
		t.Errorf("%s: payment %s, attempt %s; want %s, %s", name, status, got.Attempt.Status, w.status, w.attempt)
	}
	if (got.Payment != nil) != w.written || !slices.Equal(got.Events, w.events) {
		t.Errorf("%s: written %v, events %v; want %v, %v", name, got.Payment != nil, got.Events, w.written, w.events)
	}
	if _, noted := got.Audit.Details["ignored"]; got.Ignored != w.ignored || noted != w.ignored {
		t.Errorf("%s: ignored %v (noted %v), want %v", name, got.Ignored, noted, w.ignored)
	}
	if (got.Release != "") != w.release || got.CloseWaiting != w.closeWaiting {
		t.Errorf("%s: release %q, close waiting %v; want release %v, close waiting %v", name, got.Release, got.CloseWaiting, w.release, w.closeWaiting)
	}
	if got.Moved != (w.written && w.status != p.Status) || got.From != p.Status {
		t.Errorf("%s: moved %v from %s", name, got.Moved, got.From)
	}
	if (got.Attempt.NextReconcileAt != nil) != (w.attempt == AttemptWaiting) {
		t.Errorf("%s: attempt %s with next reconcile %v", name, got.Attempt.Status, got.Attempt.NextReconcileAt)
	}
	if got.Refund != nil || w.refund != "" {
		if got.Refund == nil || got.Refund.Status != w.refund {
			t.Errorf("%s: refund %+v, want %s", name, got.Refund, w.refund)
		}
	}
}

// The fields an outcome writes besides the statuses.
func TestDecideFields(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	succeeded := func(in *provider.Intent, r *provider.Refund) Outcome {
		return Outcome{Result: provider.Result{Outcome: provider.Succeeded, Answer: provider.AnswerObject, Intent: in}, Refund: r}
	}

	// A refund: the refunded total counts it once it succeeded, and the
	// refund and the attempt take the provider's refund id.
	for _, tc := range []struct {
		state provider.RefundState
		was   RefundStatus
		sum   int64
		want  int64
	}{
		{provider.RefundSucceeded, RefundProcessing, 20, 50},
		{provider.RefundSucceeded, RefundSucceeded, 50, 50}, // already counted in the sum
		{provider.RefundFailed, RefundProcessing, 20, 20},
	} {
		p, a, f := cellInput("estornar", StatusCaptured, now)
		f.Refund.Status, f.RefundedSum = tc.was, tc.sum
		got := decide(p, a, succeeded(nil, &provider.Refund{ID: "re_9", State: tc.state}), f)
		if got.Payment == nil || got.Payment.AmountRefunded != tc.want {
			t.Errorf("refund %s (was %s, sum %d): payment %+v, want refunded %d", tc.state, tc.was, tc.sum, got.Payment, tc.want)
		}
		if got.Refund.ProviderRefundID != "re_9" || got.Attempt.ProviderObjectID != "re_9" || got.Audit.Details["refund_id"] != "ref_1" {
			t.Errorf("refund %s: provider ids %q, %q, details %v", tc.state, got.Refund.ProviderRefundID, got.Attempt.ProviderObjectID, got.Audit.Details)
		}
	}

	// A capture records what the provider received.
	p, a, f := cellInput("capturar", StatusAuthorized, now)
	got := decide(p, a, succeeded(&provider.Intent{ID: "pi_1", State: provider.IntentCaptured, AmountReceived: 90}, nil), f)
	if got.Payment.AmountCaptured != 90 || !got.Payment.UpdatedAt.Equal(now) {
		t.Errorf("capture: %+v, want 90 captured at %v", got.Payment, now)
	}

	// The cancel of an expired payment says why.
	p, a, f = cellInput("cancelar", StatusRequiresAction, now)
	a.Request, _ = json.Marshal(cancelRequest{CancelRequest: provider.CancelRequest{IntentID: "pi_1", Abandoned: true}, From: p.Status})
	got = decide(p, a, succeeded(&provider.Intent{ID: "pi_1", State: provider.IntentCanceled}, nil), f)
	if got.Payment.FailureCode != FailureActionExpired || got.Payment.NextAction != nil {
		t.Errorf("abandoned: %+v, want %s and no next action", got.Payment, FailureActionExpired)
	}

	// A Pix the provider let lapse stays waiting, due at once for its cancel.
	p, a, f = cellInput("autorizar", StatusRequiresAction, now)
	got = decide(p, a, succeeded(&provider.Intent{ID: "pi_1", State: provider.IntentNeedsPaymentMethod, FailureCode: provider.FailureExpired}, nil), f)
	if got.Attempt.Status != AttemptWaiting || got.Attempt.NextReconcileAt == nil || !got.Attempt.NextReconcileAt.Equal(now) {
		t.Errorf("lapsed: attempt %s next %v, want waiting, due %v", got.Attempt.Status, got.Attempt.NextReconcileAt, now)
	}

	// A payment that now requires action takes what the customer must do.
	p, a, f = cellInput("autorizar", StatusProcessing, now)
	in := &provider.Intent{ID: "pi_2", State: provider.IntentRequiresAction, ClientSecret: "cs_1",
		NextAction: &provider.NextAction{Type: "redirect_to_url"}}
	got = decide(p, a, succeeded(in, nil), f)
	if got.Payment.ClientSecret != "cs_1" || got.Payment.NextAction == nil || got.Payment.ProviderPaymentID != "pi_2" ||
		got.Attempt.ProviderObjectID != "pi_2" || got.Attempt.NextReconcileAt == nil || !got.Attempt.NextReconcileAt.Equal(now.Add(time.Minute)) {
		t.Errorf("requires action: payment %+v attempt %+v", got.Payment, got.Attempt)
	}

	// A refusal the provider explains: on the attempt and the payment.
	p, a, f = cellInput("autorizar", StatusProcessing, now)
	got = decide(p, a, Outcome{Result: provider.Result{Outcome: provider.Declined, Answer: provider.AnswerCardError,
		FailureCode: "card_declined", FailureMessage: "no"}}, f)
	if got.Attempt.FailureCode != "card_declined" || got.Payment.FailureCode != "card_declined" || got.Audit.Details["failure_code"] != "card_declined" {
		t.Errorf("declined: attempt %q payment %q details %v", got.Attempt.FailureCode, got.Payment.FailureCode, got.Audit.Details)
	}

	// An attempt another path resolved is left alone.
	p, a, f = cellInput("capturar", StatusAuthorized, now)
	a.Status = AttemptSucceeded
	if got = decide(p, a, succeeded(nil, nil), f); !got.Settled || got.Payment != nil {
		t.Errorf("resolved attempt: %+v, want settled", got)
	}
}
