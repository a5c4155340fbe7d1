package payment

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/acmepay/payments/internal/provider"
)

// DiscrepancyKind names how our record of a final payment and the
// provider's differ (CONTRACT §14).
type DiscrepancyKind string

const (
	KindStatusMismatch DiscrepancyKind = "status_mismatch"
	// KindPaidAtProviderNotHere: ours failed, canceled or declined, the
	// provider's paid: money taken, order not fulfilled.
	KindPaidAtProviderNotHere  DiscrepancyKind = "paid_at_provider_not_here"
	KindAmountCapturedMismatch DiscrepancyKind = "amount_captured_mismatch"
	KindAmountRefundedMismatch DiscrepancyKind = "amount_refunded_mismatch"
	KindDisputed               DiscrepancyKind = "disputed"
	// KindMissingAtProvider: we recorded the payment with a provider
	// object, and the provider has none.
	KindMissingAtProvider     DiscrepancyKind   = "missing_at_provider"
	defaultAuditBatch                           = 100
	defaultAuditWindow                          = 72 * time.Hour
	maxDiscrepancyListLimit                     = 100
	discrepancyStatusOpen     DiscrepancyStatus = "open"
	discrepancyStatusResolved DiscrepancyStatus = "resolved"
)

// DiscrepancyStatus is open until an operator resolves it.
type DiscrepancyStatus string

// Discrepancy statuses.
const (
	DiscrepancyOpen     = discrepancyStatusOpen
	DiscrepancyResolved = discrepancyStatusResolved
)

// ResolveAction is what an operator does about a discrepancy.
type ResolveAction string

const (
	// ResolveAdopt makes our record say what the provider says, audited
	// and with its event, as any transition.
	ResolveAdopt ResolveAction = "adopt_provider_state"
	// ResolveRefund returns what the provider still holds through the
	// normal refund path.
	ResolveRefund ResolveAction = "refund"
	// ResolveNote records that an operator saw it; nothing changes.
	ResolveNote ResolveAction = "note"
)

// Discrepancy is one difference the audit found between a final payment
// and the provider's record of it. Ours and Theirs are JSON objects with
// the fields that differ.
type Discrepancy struct {
	ID            string
	AccountID     string
	PaymentID     string
	Kind          DiscrepancyKind
	Ours          json.RawMessage
	Theirs        json.RawMessage
	Status        DiscrepancyStatus
	FirstSeenAt   time.Time
	LastCheckedAt time.Time
	// ClaimKeyHash and ClaimedUntil: the resolve (by its key's hash) that
	// holds the discrepancy while it asks the provider.
	ClaimKeyHash []byte
	ClaimedUntil *time.Time
	// Resolution is the action taken, nil until one was.
	Resolution *DiscrepancyResolution
	// Adopt is what the provider showed when a refund was sent for it
	// (providerShown), recorded on the payment when the refund succeeds.
	Adopt json.RawMessage
}

// DiscrepancyResolution is the action an operator took on a discrepancy. Status is
// processing or unknown while a refund is in flight, then succeeded or
// failed.
type DiscrepancyResolution struct {
	Action   ResolveAction
	RefundID string
	Status   string
	Actor    string
	Reason   string
	At       time.Time
}

// Resolution statuses.
const (
	ResolutionProcessing = "processing"
	ResolutionUnknown    = "unknown"
	ResolutionSucceeded  = "succeeded"
	ResolutionFailed     = "failed"
)

// Held reports whether a refund sent for the discrepancy is in flight: it
// stays open and no other resolve may act.
func (d *Discrepancy) Held() bool {
	return d.Resolution != nil && (d.Resolution.Status == ResolutionProcessing || d.Resolution.Status == ResolutionUnknown)
}

type resolutionJSON struct {
	Action   ResolveAction `json:"action"`
	RefundID string        `json:"refund_id,omitempty"`
	Status   string        `json:"status"`
	Actor    string        `json:"actor"`
	At       string        `json:"at"`
}

// MarshalJSON renders the public discrepancy object.
func (d *Discrepancy) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		ID            string            `json:"id"`
		Object        string            `json:"object"`
		PaymentID     string            `json:"payment_id"`
		AccountID     string            `json:"account_id"`
		Kind          DiscrepancyKind   `json:"kind"`
		Ours          json.RawMessage   `json:"ours"`
		Theirs        json.RawMessage   `json:"theirs"`
		Status        DiscrepancyStatus `json:"status"`
		FirstSeenAt   string            `json:"first_seen_at"`
		LastCheckedAt string            `json:"last_checked_at"`
		Resolution    *resolutionJSON   `json:"resolution"`
	}{d.ID, "discrepancy", d.PaymentID, d.AccountID, d.Kind, d.Ours, d.Theirs, d.Status,
		FormatTime(d.FirstSeenAt), FormatTime(d.LastCheckedAt), d.resolutionJSON()})
}

func (d *Discrepancy) resolutionJSON() *resolutionJSON {
	r := d.Resolution
	if r == nil {
		return nil
	}
	return &resolutionJSON{Action: r.Action, RefundID: r.RefundID, Status: r.Status, Actor: r.Actor, At: FormatTime(r.At)}
}

// DiscrepancyQuery selects a page of discrepancies, by id.
type DiscrepancyQuery struct {
	Status    DiscrepancyStatus // "" for any
	PaymentID string            // "" for any
	AfterID   string
	Limit     int
}

// DiscrepancyStore is the persistence of the audit.
type DiscrepancyStore interface {
	// PaymentListFinalChanged pages final payments changed since a time.
	PaymentListFinalChanged(ctx context.Context, since time.Time, after StuckCursor, limit int) ([]*Payment, error)
	// DiscrepancyUpsert inserts an open discrepancy or refreshes the open
	// one of its payment and kind (first_seen_at kept); false when an
	// operator already resolved this exact difference.
	DiscrepancyUpsert(ctx context.Context, d *Discrepancy) (*Discrepancy, bool, error)
	DiscrepancyGet(ctx context.Context, id string) (*Discrepancy, error)
	DiscrepancyList(ctx context.Context, q DiscrepancyQuery) ([]*Discrepancy, error)
	DiscrepancyCountOpen(ctx context.Context) (int64, error)
	// DiscrepancyClaim claims an open discrepancy for the resolve whose
	// key hashes to keyHash, until a time; ErrNotFound when it is resolved,
	// holds a refund in flight, or another resolve's claim is live.
	DiscrepancyClaim(ctx context.Context, id string, keyHash []byte, until, now time.Time) (*Discrepancy, error)
	// DiscrepancyReleaseClaim ends that resolve's claim, if it holds one.
	DiscrepancyReleaseClaim(ctx context.Context, id string, keyHash []byte) error
}

// DiscrepancyTx is what resolving needs of a transaction beyond Tx.
type DiscrepancyTx interface {
	DiscrepancyLock(ctx context.Context, id string) (*Discrepancy, error)
	// DiscrepancyResolve closes an open discrepancy; ErrNotFound when it is
	// not open.
	DiscrepancyResolve(ctx context.Context, id, actor string, action ResolveAction, now time.Time) (*Discrepancy, error)
	// DiscrepancyStartRefund records the refund a resolve sent (status
	// processing) and what the provider showed; it ends the claim.
	DiscrepancyStartRefund(ctx context.Context, id string, r DiscrepancyResolution, adopt []byte, reason string) (*Discrepancy, error)
	// DiscrepancyByRefund locks the discrepancy a refund was sent for;
	// ErrNotFound for any other refund.
	DiscrepancyByRefund(ctx context.Context, refundID string) (*Discrepancy, error)
	DiscrepancySetResolutionStatus(ctx context.Context, id, status string) (*Discrepancy, error)
}

// DiscrepancyConfig wires the audit.
type DiscrepancyConfig struct {
	Payments *Service
	Store    DiscrepancyStore
	Accounts Accounts
	Logger   *slog.Logger
	// Window is AUDIT_WINDOW: payments changed within it are audited.
	Window time.Duration
	// Rate is AUDIT_RATE: provider calls per second (0: no limit); Burst
	// how many may go at once (default 1).
	Rate  float64
	Burst int
	// Batch is how many payments one page of the audit reads.
	Batch int
}

// Discrepancies runs the audit of final payments against the provider and
// lets operators list and resolve what it found. The audit itself never
// moves money or changes a payment.
type Discrepancies struct {
	s        *Service
	store    DiscrepancyStore
	accounts Accounts
	log      *slog.Logger
	window   time.Duration
	batch    int
	bucket   *tokenBucket
}

// NewDiscrepancies checks its dependencies and applies defaults.
func NewDiscrepancies(c DiscrepancyConfig) (*Discrepancies, error) {
	if c.Payments == nil || c.Store == nil || c.Accounts == nil {
		return nil, errors.New("payment: discrepancies need the payment service, a store and accounts")
	}
	d := &Discrepancies{s: c.Payments, store: c.Store, accounts: c.Accounts, log: c.Logger,
		window: orDefault(c.Window, defaultAuditWindow), batch: c.Batch,
		bucket: newTokenBucket(c.Rate, c.Burst)}
	if d.batch <= 0 {
		d.batch = defaultAuditBatch
	}
	if d.log == nil {
		d.log = c.Payments.log
	}
	return d, nil
}

// Window is the default audit window.
func (d *Discrepancies) Window() time.Duration { return d.window }

// Get returns one discrepancy.
func (d *Discrepancies) Get(ctx context.Context, id string) (*Discrepancy, error) {
	return d.store.DiscrepancyGet(ctx, id)
}

// DiscrepancyPage is a page of the list; NextCursor continues it.
type DiscrepancyPage struct {
	Data       []*Discrepancy
	HasMore    bool
	NextCursor string
}

// List pages discrepancies, oldest first. The cursor is opaque; "" starts.
func (d *Discrepancies) List(ctx context.Context, status DiscrepancyStatus, paymentID, cursor string, limit int) (DiscrepancyPage, error) {
	switch status {
	case "", DiscrepancyOpen, DiscrepancyResolved:
	default:
		return DiscrepancyPage{}, fieldError("status", "must be open or resolved")
	}
	after, err := DiscrepancyCursors.Decode(cursor)
	if err != nil {
		return DiscrepancyPage{}, err
	}
	if limit <= 0 || limit > maxDiscrepancyListLimit {
		limit = maxDiscrepancyListLimit
	}
	rows, err := d.store.DiscrepancyList(ctx, DiscrepancyQuery{Status: status, PaymentID: paymentID, AfterID: after, Limit: limit + 1})
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

// CountOpen counts open discrepancies, for the metric.
func (d *Discrepancies) CountOpen(ctx context.Context) (int64, error) {
	return d.store.DiscrepancyCountOpen(ctx)
}

// AuditSummary is what one audit pass did.
type AuditSummary struct {
	Examined int `json:"examined"`
	// Found counts the open discrepancies the pass recorded, by kind; New
	// how many of them it saw first.
	Found map[DiscrepancyKind]int `json:"found"`
	New   int                     `json:"new"`
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
// difference as an open discrepancy. It changes no payment and moves no
// money. A provider error skips the payment, not the pass.
func (d *Discrepancies) Audit(ctx context.Context, since time.Duration) (AuditSummary, error) {
	if since <= 0 {
		since = d.window
	}
	sum := AuditSummary{Found: map[DiscrepancyKind]int{}}
	cutoff := d.s.clock().Add(-since)
	accts := map[string]Account{}
	var after StuckCursor
	for {
		page, err := d.store.PaymentListFinalChanged(ctx, cutoff, after, d.batch)
		if err != nil {
			return sum, err
		}
		for _, p := range page {
			sum.Examined++
			if err := d.auditOne(ctx, accts, p, &sum); err != nil {
				if ctx.Err() != nil {
					return sum, ctx.Err()
				}
				sum.Skipped++
				d.log.WarnContext(ctx, "audit: payment skipped", slog.String("payment_id", p.ID), slog.String("error", err.Error()))
			}
		}
		if len(page) < d.batch {
			return sum, nil
		}
		after = StuckCursor{UpdatedAt: page[len(page)-1].UpdatedAt, ID: page[len(page)-1].ID}
	}
}

var errInFlight = errors.New("an operation of the payment is in flight")

func (d *Discrepancies) auditOne(ctx context.Context, accts map[string]Account, p *Payment, sum *AuditSummary) error {
	pending, err := d.s.store.AttemptsUnresolvedByPayment(ctx, p.ID)
	if err != nil {
		return err
	}
	if len(pending) > 0 {
		return errInFlight
	}
	acct, ok := accts[p.AccountID]
	if !ok {
		if acct, err = d.accounts.Payer(ctx, p.AccountID); err != nil {
			return err
		}
		accts[p.AccountID] = acct
	}
	st, err := d.fetch(ctx, acct, p)
	if err != nil {
		return err
	}
	for kind, lerr := range st.failed {
		sum.LookupsFailed++
		d.log.WarnContext(ctx, "audit: lookup failed; the kind is checked again on the next pass", slog.String("payment_id", p.ID),
			slog.String("kind", string(kind)), slog.String("error", lerr.Error()))
	}
	now := d.s.clock()
	for _, f := range compare(p, st) {
		ours, err := json.Marshal(f.ours)
		if err != nil {
			return err
		}
		theirs, err := json.Marshal(f.theirs)
		if err != nil {
			return err
		}
		row, stored, err := d.store.DiscrepancyUpsert(ctx, &Discrepancy{ID: d.s.newID("dsc"), AccountID: p.AccountID,
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
			d.log.WarnContext(ctx, "audit: discrepancy found", slog.String("discrepancy_id", row.ID),
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
	failed map[DiscrepancyKind]error
}

// proved reports whether the lookups behind a kind succeeded.
func (st providerState) proved(k DiscrepancyKind) bool {
	_, bad := st.failed[k]
	return !bad
}

// fetch asks the provider for the intent, its refunds and its disputes,
// each call paced by the token bucket and bounded by PROVIDER_TIMEOUT. Only
// a failed intent lookup is an error; a failed refund or dispute lookup is
// recorded in failed and the rest is still reported.
func (d *Discrepancies) fetch(ctx context.Context, acct Account, p *Payment) (providerState, error) {
	st := providerState{failed: map[DiscrepancyKind]error{}}
	call := func(f func(ctx context.Context) error) error {
		if err := d.bucket.wait(ctx); err != nil {
			return err
		}
		cctx, cancel := context.WithTimeout(ctx, d.s.providerTimeout)
		defer cancel()
		return f(cctx)
	}
	err := call(func(ctx context.Context) (err error) {
		if p.ProviderPaymentID != "" {
			st.intent, err = d.s.provider.RetrieveIntent(ctx, acct.Credentials, p.ProviderPaymentID)
		} else {
			st.intent, err = d.s.provider.SearchIntentByPaymentID(ctx, acct.Credentials, p.ID)
		}
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
		rs, err := d.s.provider.ListRefunds(ctx, acct.Credentials, st.intent.ID)
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
		st.failed[KindAmountRefundedMismatch], st.refunded = err, 0
	}
	err = call(func(ctx context.Context) (err error) {
		st.disputes, err = d.s.provider.ListDisputes(ctx, acct.Credentials, st.intent.ID)
		return err
	})
	if err != nil {
		if ctx.Err() != nil {
			return st, ctx.Err()
		}
		st.failed[KindDisputed], st.disputes = err, nil
	}
	return st, nil
}

// found is one difference.
type found struct {
	kind         DiscrepancyKind
	ours, theirs map[string]any
}

// intentStatus is the status our record would have for an intent; "" for
// states that prove no money is held or taken.
func intentStatus(in *provider.Intent) Status {
	switch in.State {
	case provider.IntentCaptured:
		return StatusCaptured
	case provider.IntentAuthorized:
		return StatusAuthorized
	case provider.IntentCanceled:
		return StatusCanceled
	}
	return ""
}

// compare lists how a final payment and the provider's state differ.
func compare(p *Payment, st providerState) []found {
	in := st.intent
	if in == nil {
		if p.ProviderPaymentID == "" {
			// Never recorded with a provider object: nothing to miss.
			return nil
		}
		return []found{{KindMissingAtProvider,
			map[string]any{"status": p.Status, "provider_payment_id": p.ProviderPaymentID},
			map[string]any{"found": false}}}
	}
	var out []found
	theirs := intentStatus(in)
	paid := theirs == StatusCaptured || theirs == StatusAuthorized
	switch {
	case paid && (p.Status == StatusFailed || p.Status == StatusCanceled || p.Status == StatusDeclined):
		out = append(out, found{KindPaidAtProviderNotHere,
			map[string]any{"status": p.Status, "amount_captured": p.AmountCaptured},
			map[string]any{"status": theirs, "amount_captured": in.AmountReceived, "provider_payment_id": in.ID}})
	case theirs != "" && theirs != p.Status && (paid || p.Status == StatusAuthorized || p.Status == StatusCaptured):
		out = append(out, found{KindStatusMismatch,
			map[string]any{"status": p.Status}, map[string]any{"status": theirs, "provider_payment_id": in.ID}})
	}
	if p.Status == StatusCaptured && theirs == StatusCaptured && in.AmountReceived != p.AmountCaptured {
		out = append(out, found{KindAmountCapturedMismatch,
			map[string]any{"amount_captured": p.AmountCaptured}, map[string]any{"amount_captured": in.AmountReceived}})
	}
	if p.Status == StatusCaptured && st.proved(KindAmountRefundedMismatch) && st.refunded != p.AmountRefunded {
		out = append(out, found{KindAmountRefundedMismatch,
			map[string]any{"amount_refunded": p.AmountRefunded}, map[string]any{"amount_refunded": st.refunded}})
	}
	var contested []Dispute
	for _, dp := range st.disputes {
		if dp.Status != "won" && dp.Status != "warning_closed" {
			contested = append(contested, FromProviderDispute(dp))
		}
	}
	if len(contested) > 0 {
		out = append(out, found{KindDisputed,
			map[string]any{"disputes": NonNilDisputes(p.Disputes)}, map[string]any{"disputes": contested}})
	}
	return out
}

// adopt makes the payment say what the provider says about the
// discrepancy's kind, as an audited transition with its event.
func (d *Discrepancies) adopt(ctx context.Context, tx Tx, p *Payment, kind DiscrepancyKind, st providerState, r ResolveRequest, details map[string]any, now time.Time) error {
	in := st.intent
	from := p.Status
	event := ""
	switch kind {
	case KindStatusMismatch, KindPaidAtProviderNotHere:
		to := intentStatus(in)
		if to == "" || to == p.Status {
			return Errorf(CodeInvalidState, "the provider's state (%s) cannot be adopted", in.State)
		}
		if !CanAdopt(p.Status, to) {
			return Errorf(CodeInvalidState, "the payment is %s and cannot become %s", p.Status, to)
		}
		p.Status = to
		if to == StatusCaptured || to == StatusAuthorized {
			p.FailureCode, p.FailureMessage = "", ""
		}
		if to == StatusCaptured {
			p.AmountCaptured = in.AmountReceived
		}
		if p.ProviderPaymentID == "" {
			p.ProviderPaymentID = in.ID
		}
	case KindAmountCapturedMismatch:
		p.AmountCaptured, event = in.AmountReceived, "payment.captured"
	case KindAmountRefundedMismatch:
		p.AmountRefunded, p.ProviderAmountRefunded, event = st.refunded, st.refunded, "payment.refunded"
	case KindDisputed:
		ds := p.Disputes
		closedOnly := true
		for _, dp := range st.disputes {
			ds, _ = MergeDispute(ds, FromProviderDispute(dp))
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
		return d.s.Write(ctx, tx, Change{Payment: p, Events: []string{event}, Audit: AuditEntry{Actor: r.Actor, Action: "discrepancy.adopt_provider_state", Reason: r.Reason, Details: details}})
	default:
		return fmt.Errorf("payment: unknown discrepancy kind %q", kind)
	}
	p.UpdatedAt = now
	if err := tx.PaymentUpdate(ctx, p); err != nil {
		return err
	}
	if from != p.Status {
		d.s.metrics.PaymentTransition(from, p.Status)
		return d.s.Write(ctx, tx, Change{Payment: p, From: from, Audit: AuditEntry{Actor: r.Actor, Action: "discrepancy.adopt_provider_state", Reason: r.Reason, Details: details}})
	}
	return d.s.Write(ctx, tx, Change{Payment: p, Events: []string{event}, Audit: AuditEntry{Actor: r.Actor, Action: "discrepancy.adopt_provider_state", Reason: r.Reason, Details: details}})
}
