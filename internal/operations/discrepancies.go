package operations

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/acmepay/payments/internal/payment"
	"github.com/acmepay/payments/internal/provider"
)

// maxDiscrepancyListLimit caps a page of the discrepancy list.
const maxDiscrepancyListLimit = 100

// DiscrepancyCursors is the codec of the discrepancy list's cursor.
var DiscrepancyCursors = payment.IDCursor("discrepancy", "cursor")

// DiscrepancyQuery selects a page of discrepancies, by id.
type DiscrepancyQuery struct {
	Status    payment.DiscrepancyStatus // "" for any
	PaymentID string                    // "" for any
	AfterID   string
	Limit     int
}

// AuditWindow is the default audit window.
func (s *Service) AuditWindow() time.Duration { return s.window }

// GetDiscrepancy returns one discrepancy.
func (s *Service) GetDiscrepancy(ctx context.Context, id string) (*payment.Discrepancy, error) {
	return s.store.DiscrepancyGetByID(ctx, id)
}

// DiscrepancyPage is a page of the list; NextCursor continues it.
type DiscrepancyPage struct {
	Data       []*payment.Discrepancy
	HasMore    bool
	NextCursor string
}

// ListDiscrepancies pages discrepancies, oldest first. The cursor is opaque; "" starts.
func (s *Service) ListDiscrepancies(ctx context.Context, status payment.DiscrepancyStatus, paymentID, cursor string, limit int) (DiscrepancyPage, error) {
	switch status {
	case "", payment.DiscrepancyOpen, payment.DiscrepancyResolved:
	default:
		return DiscrepancyPage{}, payment.InvalidField("status", "must be open or resolved")
	}
	after, err := DiscrepancyCursors.Decode(cursor)
	if err != nil {
		return DiscrepancyPage{}, err
	}
	if limit <= 0 || limit > maxDiscrepancyListLimit {
		limit = maxDiscrepancyListLimit
	}
	rows, err := s.store.DiscrepancyList(ctx, DiscrepancyQuery{Status: status, PaymentID: paymentID, AfterID: after, Limit: limit + 1})
	if err != nil {
		return DiscrepancyPage{}, err
	}
	page := DiscrepancyPage{Data: rows, NextCursor: cursor}
	if len(rows) > limit {
		page.Data, page.HasMore = rows[:limit], true
	}
	if n := len(page.Data); n > 0 {
		page.NextCursor = DiscrepancyCursors.Encode(page.Data[n-1].ID)
	}
	return page, nil
}

// CountOpenDiscrepancies counts open discrepancies, for the metric.
func (s *Service) CountOpenDiscrepancies(ctx context.Context) (int64, error) {
	return s.store.DiscrepancyCountOpen(ctx)
}

// AuditSummary is what one audit pass did.
type AuditSummary struct {
	Examined int `json:"examined"`
	// Found counts the open discrepancies the pass recorded, by kind; New
	// how many of them it saw first.
	Found map[payment.DiscrepancyKind]int `json:"found"`
	New   int                             `json:"new"`
	// Skipped: payments the provider could not be asked about, or with an
	// operation still in flight; the next pass tries again.
	Skipped int `json:"skipped"`
	// LookupsFailed: refund or dispute lookups that failed; only the kind
	// each would have proved is left unchecked for the payment, until the
	// next pass.
	LookupsFailed int `json:"lookups_failed"`
}

// Audit compares every final payment changed within since (0: the
// window) with the provider, in pages of the batch size, and records each
// difference as an open discrepancy. The provider's side is read from its
// lists, a page of 100 payments per call, and asked about one payment
// alone only where the lists cannot tell (auditlist.go). It changes no payment and moves no
// money. A provider error skips the payment, not the pass.
func (s *Service) Audit(ctx context.Context, since time.Duration) (AuditSummary, error) {
	if since <= 0 {
		since = s.window
	}
	sum := AuditSummary{Found: map[payment.DiscrepancyKind]int{}}
	cutoff := s.now().Add(-since)
	accts := map[string]payment.Account{}
	lists := newListings(cutoff)
	var after StuckCursor
	for {
		page, err := s.store.PaymentListFinalChanged(ctx, cutoff, after, s.batch)
		if err != nil {
			return sum, err
		}
		for _, p := range page {
			sum.Examined++
			if err := s.auditOne(ctx, accts, lists, p, &sum); err != nil {
				if ctx.Err() != nil {
					return sum, ctx.Err()
				}
				sum.Skipped++
				s.log.WarnContext(ctx, "audit: payment skipped", slog.String("payment_id", p.ID), slog.String("error", err.Error()))
			}
		}
		if len(page) < s.batch {
			return sum, nil
		}
		after = StuckCursor{UpdatedAt: page[len(page)-1].UpdatedAt, ID: page[len(page)-1].ID}
	}
}

var errInFlight = errors.New("an operation of the payment is in flight")

func (s *Service) auditOne(ctx context.Context, accts map[string]payment.Account, lists *listings, p *payment.Payment, sum *AuditSummary) error {
	pending, err := s.store.AttemptListUnresolvedByPayment(ctx, p.ID)
	if err != nil {
		return err
	}
	if len(pending) > 0 {
		return errInFlight
	}
	acct, ok := accts[p.AccountID]
	if !ok {
		if acct, err = s.accounts.Merchant(ctx, p.AccountID); err != nil {
			return err
		}
		accts[p.AccountID] = acct
	}
	st, err := s.providerState(ctx, lists, acct, p)
	if err != nil {
		return err
	}
	for kind, lerr := range st.failed {
		sum.LookupsFailed++
		s.log.WarnContext(ctx, "audit: lookup failed; the kind is checked again on the next pass", slog.String("payment_id", p.ID),
			slog.String("kind", string(kind)), slog.String("error", lerr.Error()))
	}
	now := s.now()
	for _, f := range compare(p, st) {
		ours, err := json.Marshal(f.ours)
		if err != nil {
			return err
		}
		theirs, err := json.Marshal(f.theirs)
		if err != nil {
			return err
		}
		row, stored, err := s.store.DiscrepancyUpsert(ctx, &payment.Discrepancy{ID: s.newID("dsc"), AccountID: p.AccountID,
			PaymentID: p.ID, Kind: f.kind, Ours: ours, Theirs: theirs, LastCheckedAt: now})
		if err != nil {
			return err
		}
		if !stored {
			continue
		}
		sum.Found[f.kind]++
		if row.FirstSeenAt.Equal(now) {
			sum.New++
			s.log.WarnContext(ctx, "audit: discrepancy found", slog.String("discrepancy_id", row.ID),
				slog.String("payment_id", p.ID), slog.String("kind", string(f.kind)))
		}
	}
	return nil
}

// providerState is what the provider shows of a payment.
type providerState struct {
	intent   *provider.Intent // nil: the provider has no intent for it
	refunded int64            // succeeded and pending refunds
	disputes []provider.Dispute
	// failed holds the lookups that could not be made, by the kind each
	// would have proved: nothing is concluded about those kinds.
	failed map[payment.DiscrepancyKind]error
}

// proved reports whether the lookups behind a kind succeeded.
func (st providerState) proved(k payment.DiscrepancyKind) bool {
	_, bad := st.failed[k]
	return !bad
}

// providerState is what the provider shows of p: from its provider
// account's list when the list shows it, else by asking about p alone.
func (s *Service) providerState(ctx context.Context, lists *listings, acct payment.Account, p *payment.Payment) (providerState, error) {
	b, err := s.providerFor(acct, p)
	if err != nil {
		return providerState{}, err
	}
	st, ok, err := s.listedState(ctx, lists, acct, b, p)
	if ok || err != nil {
		return st, err
	}
	return s.fetch(ctx, acct, p)
}

// fetch asks the provider for the intent, its refunds and its disputes,
// each call paced by the token bucket and bounded by PROVIDER_TIMEOUT. Only
// a failed intent lookup is an error; a failed refund or dispute lookup is
// recorded in failed and the rest is still reported.
func (s *Service) fetch(ctx context.Context, acct payment.Account, p *payment.Payment) (providerState, error) {
	st := providerState{failed: map[payment.DiscrepancyKind]error{}}
	b, err := s.providerFor(acct, p)
	if err != nil {
		return st, err
	}
	call := func(f func(ctx context.Context) error) error { return s.paced(ctx, f) }
	err = call(func(ctx context.Context) (err error) {
		st.intent, _, err = b.intent(ctx, p)
		return err
	})
	if errors.Is(err, provider.ErrNotFound) {
		st.intent = nil
		return st, nil
	}
	if err != nil || st.intent.AmountReceived == 0 {
		return st, err
	}
	err = call(func(ctx context.Context) error {
		rs, err := b.prov.ListRefunds(ctx, b.creds, st.intent.ID)
		for _, r := range rs {
			if r.State == provider.RefundSucceeded || r.State == provider.RefundPending {
				st.refunded += r.Amount
			}
		}
		return err
	})
	if err != nil {
		if ctx.Err() != nil {
			return st, ctx.Err()
		}
		st.failed[payment.KindAmountRefundedMismatch], st.refunded = err, 0
	}
	return st, s.readDisputes(ctx, b, st.intent.ID, &st)
}

// readDisputes reads the intent's disputes into st, paced; a failed read
// is recorded in st.failed, and only the caller's context ending is an
// error.
func (s *Service) readDisputes(ctx context.Context, b at, intentID string, st *providerState) error {
	err := s.paced(ctx, func(ctx context.Context) (err error) {
		st.disputes, err = b.prov.ListDisputes(ctx, b.creds, intentID)
		return err
	})
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		st.failed[payment.KindDisputed], st.disputes = err, nil
	}
	return nil
}

// found is one difference.
type found struct {
	kind         payment.DiscrepancyKind
	ours, theirs map[string]any
}

// intentStatus is the status our record would have for an intent; "" for
// states that prove no money is held or taken.
func intentStatus(in *provider.Intent) payment.Status {
	switch in.State {
	case provider.IntentCaptured:
		return payment.StatusCaptured
	case provider.IntentAuthorized:
		return payment.StatusAuthorized
	case provider.IntentCanceled:
		return payment.StatusCanceled
	}
	return ""
}

// compare lists how a final payment and the provider's state differ.
func compare(p *payment.Payment, st providerState) []found {
	in := st.intent
	if in == nil {
		if p.ProviderPaymentID == "" {
			// Never recorded with a provider object: nothing to miss.
			return nil
		}
		return []found{{payment.KindMissingAtProvider,
			map[string]any{"status": p.Status, "provider_payment_id": p.ProviderPaymentID},
			map[string]any{"found": false}}}
	}
	var out []found
	theirs := intentStatus(in)
	paid := theirs == payment.StatusCaptured || theirs == payment.StatusAuthorized
	switch {
	case paid && (p.Status == payment.StatusFailed || p.Status == payment.StatusCanceled || p.Status == payment.StatusDeclined):
		out = append(out, found{payment.KindPaidAtProviderNotHere,
			map[string]any{"status": p.Status, "amount_captured": p.AmountCaptured},
			map[string]any{"status": theirs, "amount_captured": in.AmountReceived, "provider_payment_id": in.ID}})
	case theirs != "" && theirs != p.Status && (paid || p.Status == payment.StatusAuthorized || p.Status == payment.StatusCaptured):
		out = append(out, found{payment.KindStatusMismatch,
			map[string]any{"status": p.Status}, map[string]any{"status": theirs, "provider_payment_id": in.ID}})
	}
	if p.Status == payment.StatusCaptured && theirs == payment.StatusCaptured && in.AmountReceived != p.AmountCaptured {
		out = append(out, found{payment.KindAmountCapturedMismatch,
			map[string]any{"amount_captured": p.AmountCaptured}, map[string]any{"amount_captured": in.AmountReceived}})
	}
	if p.Status == payment.StatusCaptured && st.proved(payment.KindAmountRefundedMismatch) && st.refunded != p.AmountRefunded {
		out = append(out, found{payment.KindAmountRefundedMismatch,
			map[string]any{"amount_refunded": p.AmountRefunded}, map[string]any{"amount_refunded": st.refunded}})
	}
	var contested []payment.Dispute
	for _, dp := range st.disputes {
		if dp.Status != "won" && dp.Status != "warning_closed" {
			contested = append(contested, payment.FromProviderDispute(dp))
		}
	}
	if len(contested) > 0 {
		out = append(out, found{payment.KindDisputed,
			map[string]any{"disputes": payment.NonNilDisputes(p.Disputes)}, map[string]any{"disputes": contested}})
	}
	return out
}

// adopt makes the payment say what the provider says about the
// discrepancy's kind, as an audited transition with its event.
func (s *Service) adopt(ctx context.Context, tx payment.Tx, p *payment.Payment, kind payment.DiscrepancyKind, st providerState, r ResolveRequest, details map[string]any, now time.Time) error {
	in := st.intent
	from := p.Status
	event := ""
	switch kind {
	case payment.KindStatusMismatch, payment.KindPaidAtProviderNotHere:
		to := intentStatus(in)
		if to == "" || to == p.Status {
			return payment.Errorf(payment.CodeInvalidState, "the provider's state (%s) cannot be adopted", in.State)
		}
		if !payment.CanAdopt(p.Status, to) {
			return payment.Errorf(payment.CodeInvalidState, "the payment is %s and cannot become %s", p.Status, to)
		}
		p.Status = to
		if to == payment.StatusCaptured || to == payment.StatusAuthorized {
			p.FailureCode, p.FailureMessage = "", ""
		}
		if to == payment.StatusCaptured {
			p.AmountCaptured = in.AmountReceived
		}
		if p.ProviderPaymentID == "" {
			p.ProviderPaymentID = in.ID
		}
	case payment.KindAmountCapturedMismatch:
		p.AmountCaptured, event = in.AmountReceived, "payment.captured"
	case payment.KindAmountRefundedMismatch:
		p.AmountRefunded, p.ProviderAmountRefunded, event = st.refunded, st.refunded, "payment.refunded"
	case payment.KindDisputed:
		ds := p.Disputes
		closedOnly := true
		for _, dp := range st.disputes {
			ds, _ = payment.MergeDispute(ds, payment.FromProviderDispute(dp))
			closedOnly = closedOnly && dp.Closed
		}
		p.Disputes, p.UpdatedAt = ds, now
		event = "payment.disputed"
		if closedOnly {
			event = "payment.dispute_closed"
		}
		if err := tx.PaymentSetDisputes(ctx, p); err != nil {
			return err
		}
		return s.payments.Write(ctx, tx, payment.Change{Payment: p, Events: []string{event}, Audit: payment.AuditEntry{Actor: r.Actor, Action: "discrepancy.adopt_provider_state", Reason: r.Reason, Details: details}})
	default:
		return fmt.Errorf("payment: unknown discrepancy kind %q", kind)
	}
	p.UpdatedAt = now
	if err := tx.PaymentUpdateState(ctx, p); err != nil {
		return err
	}
	if from != p.Status {
		s.payments.CountTransition(p, from)
		return s.payments.Write(ctx, tx, payment.Change{Payment: p, From: from, Audit: payment.AuditEntry{Actor: r.Actor, Action: "discrepancy.adopt_provider_state", Reason: r.Reason, Details: details}})
	}
	return s.payments.Write(ctx, tx, payment.Change{Payment: p, Events: []string{event}, Audit: payment.AuditEntry{Actor: r.Actor, Action: "discrepancy.adopt_provider_state", Reason: r.Reason, Details: details}})
}
