package payment

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/acmepay/payments/internal/idempotency"
	"github.com/acmepay/payments/internal/provider"
	"github.com/google/uuid"
)

// Account is the caller: its id scopes every read and write, its
// credentials select the provider account.
type Account struct {
	ID          string
	Credentials provider.Credentials
}

// Metrics observes the money path; implementations must be cheap.
type Metrics interface {
	Idempotency(operation, outcome string)
	ProviderCall(op Operation, outcome provider.Outcome, d time.Duration)
	PaymentTransition(from, to Status)
}

// Config wires a Service. Zero durations take the contract's defaults.
type Config struct {
	Store    Store
	Provider provider.Provider
	Logger   *slog.Logger
	Metrics  Metrics
	// Now is the clock; tests move it to cross leases and retention windows.
	Now func() time.Time
	// NewID makes ids such as pay_…; tests may make them predictable.
	NewID func(prefix string) string

	ProviderTimeout time.Duration // PROVIDER_TIMEOUT
	Lease           time.Duration // IN_PROGRESS_LEASE
	KeyRetention    time.Duration // PROVIDER_KEY_RETENTION
	SearchGrace     time.Duration // PROVIDER_SEARCH_GRACE
}

// Service runs the money path.
type Service struct {
	store           Store
	provider        provider.Provider
	log             *slog.Logger
	metrics         Metrics
	now             func() time.Time
	newID           func(string) string
	providerTimeout time.Duration
	lease           time.Duration
	keyRetention    time.Duration
	searchGrace     time.Duration
}

// NewService checks its dependencies and applies defaults.
func NewService(c Config) (*Service, error) {
	if c.Store == nil || c.Provider == nil {
		return nil, errors.New("payment: store and provider are required")
	}
	s := &Service{
		store: c.Store, provider: c.Provider, log: c.Logger, metrics: c.Metrics,
		now: c.Now, newID: c.NewID,
		providerTimeout: orDefault(c.ProviderTimeout, 10*time.Second),
		lease:           orDefault(c.Lease, 30*time.Second),
		keyRetention:    orDefault(c.KeyRetention, 24*time.Hour),
		searchGrace:     orDefault(c.SearchGrace, 5*time.Minute),
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.metrics == nil {
		s.metrics = nopMetrics{}
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.newID == nil {
		s.newID = NewID
	}
	if s.lease <= s.providerTimeout {
		return nil, fmt.Errorf("payment: the in-progress lease (%s) must outlast the provider timeout (%s)", s.lease, s.providerTimeout)
	}
	return s, nil
}

// NewID returns prefix_ followed by a time-ordered random UUID.
func NewID(prefix string) string {
	return prefix + "_" + strings.ReplaceAll(uuid.Must(uuid.NewV7()).String(), "-", "")
}

// clock returns the service time at the database's precision, so a stored
// response and a later read of the same row render identically.
func (s *Service) clock() time.Time { return s.now().UTC().Truncate(time.Microsecond) }

// Get returns one of the account's payments.
func (s *Service) Get(ctx context.Context, accountID, id string) (*Payment, error) {
	return s.store.PaymentGet(ctx, accountID, id)
}

// ListByOrder returns the account's payments for an order, oldest first.
func (s *Service) ListByOrder(ctx context.Context, accountID, orderID string, limit int) ([]*Payment, error) {
	return s.store.PaymentListByOrder(ctx, accountID, orderID, limit)
}

// work is a provider call owned by this request: the key's lease is held.
type work struct {
	keyID   int64
	scope   idempotency.Scope
	payment *Payment
	attempt *Attempt
}

// Create runs "create payment" under the client key. It answers 201 when the
// provider's outcome is known, 202 while it is not, or replays a stored
// answer.
func (s *Service) Create(ctx context.Context, acct Account, key string, req CreateRequest) (idempotency.Response, error) {
	op := idempotency.OpPaymentsCreate
	fp, err := idempotency.Fingerprint(op, req)
	if err != nil {
		return idempotency.Response{}, err
	}
	scope := idempotency.Scope{AccountID: acct.ID, Operation: op, KeyHash: idempotency.HashKey(key)}

	// A known key is answered by one indexed read when it needs no recovery.
	if rec, err := s.store.KeyGet(ctx, scope); err == nil {
		if d := idempotency.Decide(rec, fp, s.clock()); d != idempotency.Recover {
			return s.answer(ctx, rec, d)
		}
	} else if !errors.Is(err, ErrNotFound) {
		return idempotency.Response{}, err
	}

	// Transaction 1 reserves the key and writes the payment, its attempt, the
	// event and the audit entry together. A crash after it leaves a payment
	// in processing under a lease: a retry after the lease, or the
	// reconciler, recovers the same attempt with the same provider key.
	var (
		w        *work
		known    *idempotency.Record
		decision idempotency.Decision
		resp     *idempotency.Response
	)
	for try := 0; ; try++ {
		err = s.store.WithTx(ctx, func(tx Tx) error {
			w, known, resp = nil, nil, nil
			now := s.clock()
			paymentID, attemptID := s.newID("pay"), s.newID("att")
			reserved, err := tx.KeyReserve(ctx, Reservation{
				Scope: scope, Fingerprint: fp, LeaseUntil: now.Add(s.lease),
				PaymentID: paymentID, AttemptID: attemptID, Now: now,
			})
			if err != nil {
				return err
			}
			if !reserved {
				rec, err := tx.KeyLock(ctx, scope)
				if err != nil {
					return err
				}
				if decision = idempotency.Decide(rec, fp, now); decision != idempotency.Recover {
					known = &rec
					return nil
				}
				w, resp, err = s.takeOver(ctx, tx, acct, rec, now)
				return err
			}
			n, err := tx.NextAttemptNumber(ctx, acct.ID, req.OrderID, OpAuthorize)
			if err != nil {
				return err
			}
			p := &Payment{
				ID: paymentID, AccountID: acct.ID, OrderID: req.OrderID, Attempt: n,
				Amount: req.Amount, Currency: req.Currency, CaptureMethod: req.CaptureMethod,
				PaymentMethod: req.PaymentMethod, CustomerID: req.CustomerID,
				Description: req.Description, Metadata: req.Metadata,
				Status: StatusProcessing, CreatedAt: now, UpdatedAt: now,
			}
			if err := tx.PaymentInsert(ctx, p); err != nil {
				return err
			}
			a, err := s.newAuthorizeAttempt(p, attemptID, n, now)
			if err != nil {
				return err
			}
			if err := tx.AttemptInsert(ctx, a); err != nil {
				return err
			}
			if err := s.changed(ctx, tx, p, "", "api", "payment.created", "", nil); err != nil {
				return err
			}
			w = &work{keyID: 0, scope: scope, payment: p, attempt: a}
			return nil
		})
		if errors.Is(err, ErrAttemptNumberTaken) && try < 3 {
			continue
		}
		break
	}
	switch {
	case errors.Is(err, ErrLiveOrderConflict):
		s.metrics.Idempotency(op, "conflict")
		e := Errorf(CodeOrderHasActivePayment, "order %s already has a payment that is in progress or succeeded", req.OrderID)
		if live, lerr := s.store.PaymentLiveByOrder(ctx, acct.ID, req.OrderID); lerr == nil {
			e.PaymentID = live.ID
		}
		return idempotency.Response{}, e
	case err != nil:
		return idempotency.Response{}, err
	case known != nil:
		return s.answer(ctx, *known, decision)
	case resp != nil:
		s.metrics.Idempotency(op, "replayed")
		return *resp, nil
	}
	if w.keyID == 0 {
		s.metrics.Idempotency(op, "new")
	} else {
		s.metrics.Idempotency(op, "recovered")
	}
	return s.authorize(ctx, acct, w)
}

// answer turns a decision on a known key into the response or error.
func (s *Service) answer(ctx context.Context, rec idempotency.Record, d idempotency.Decision) (idempotency.Response, error) {
	op := rec.Scope.Operation
	switch d {
	case idempotency.Replay:
		s.metrics.Idempotency(op, "replayed")
		return idempotency.Response{Status: rec.ResponseStatus, Body: rec.ResponseBody, Replayed: true}, nil
	case idempotency.ReplayCurrent:
		s.metrics.Idempotency(op, "replayed")
		p, err := s.store.PaymentGet(ctx, rec.Scope.AccountID, rec.PaymentID)
		if err != nil {
			return idempotency.Response{}, err
		}
		body, err := json.Marshal(p)
		return idempotency.Response{Status: http.StatusOK, Body: body, Replayed: true}, err
	case idempotency.Reused:
		s.metrics.Idempotency(op, "reused")
		return idempotency.Response{}, Errorf(CodeIdempotencyKeyReused, "this Idempotency-Key was used with a different request")
	case idempotency.InUse:
		s.metrics.Idempotency(op, "in_use")
		return idempotency.Response{}, Errorf(CodeIdempotencyKeyInUse, "a request with this Idempotency-Key is in progress; retry later")
	}
	return idempotency.Response{}, fmt.Errorf("payment: no answer for decision %d", d)
}

// takeOver makes this request the owner of a key whose holder died or whose
// outcome is unknown. It never starts a new attempt: it recovers the one the
// key already refers to. When the outcome became known meanwhile
// (reconciler, webhook), it completes the key with the current state.
func (s *Service) takeOver(ctx context.Context, tx Tx, acct Account, rec idempotency.Record, now time.Time) (*work, *idempotency.Response, error) {
	p, err := tx.PaymentLock(ctx, acct.ID, rec.PaymentID)
	if err != nil {
		return nil, nil, err
	}
	a, err := tx.AttemptGet(ctx, rec.AttemptID)
	if err != nil {
		return nil, nil, err
	}
	if p.Status.Final() {
		resp, err := s.respond(p)
		if err != nil {
			return nil, nil, err
		}
		return nil, &resp, tx.KeyComplete(ctx, rec.ID, resp.Status, resp.Body, now)
	}
	until := now.Add(s.lease)
	if err := tx.KeyTakeLease(ctx, rec.ID, until, now); err != nil {
		return nil, nil, err
	}
	if err := tx.AttemptSetLease(ctx, a.ID, until, now); err != nil {
		return nil, nil, err
	}
	return &work{keyID: rec.ID, scope: rec.Scope, payment: p, attempt: a}, nil, nil
}

func (s *Service) newAuthorizeAttempt(p *Payment, id string, n int, now time.Time) (*Attempt, error) {
	key := ProviderKey(p.OrderID, OpAuthorize, n)
	md := make(map[string]string, len(p.Metadata)+3)
	for k, v := range p.Metadata {
		md[k] = v
	}
	// The service's own keys win over the client's: the reconciler finds the
	// payment at the provider by payment_id.
	md["payment_id"], md["order_id"], md["attempt"] = p.ID, p.OrderID, fmt.Sprint(n)
	req, err := json.Marshal(provider.AuthorizeRequest{
		IdempotencyKey: key, Amount: p.Amount, Currency: p.Currency,
		PaymentMethod: p.PaymentMethod, CaptureMethod: p.CaptureMethod,
		CustomerID: p.CustomerID, Description: p.Description, Metadata: md,
	})
	if err != nil {
		return nil, err
	}
	lease := now.Add(s.lease)
	return &Attempt{
		ID: id, AccountID: p.AccountID, PaymentID: p.ID, OrderID: p.OrderID,
		Operation: OpAuthorize, Number: n, ProviderKey: key, Status: AttemptProcessing,
		Request: req, LeaseExpiresAt: &lease, CreatedAt: now, UpdatedAt: now,
	}, nil
}

// authorize calls the provider for an owned attempt, outside any
// transaction, then records the outcome. A crash during the call leaves the
// attempt in processing under a lease; a crash after the outcome is recorded
// but before the response is written leaves a completed key that replays.
func (s *Service) authorize(ctx context.Context, acct Account, w *work) (idempotency.Response, error) {
	res := s.resolveAuthorization(ctx, acct, w.payment, w.attempt)
	var resp idempotency.Response
	err := s.store.WithTx(ctx, func(tx Tx) error {
		now := s.clock()
		p, err := tx.PaymentLock(ctx, acct.ID, w.payment.ID)
		if err != nil {
			return err
		}
		rec, err := tx.KeyLock(ctx, w.scope)
		if err != nil {
			return err
		}
		if rec.State == idempotency.StateCompleted {
			// A concurrent owner (after a lease takeover) finished first with
			// the same provider key, hence the same outcome.
			resp = idempotency.Response{Status: rec.ResponseStatus, Body: rec.ResponseBody}
			return nil
		}
		if err := s.recordAuthorization(ctx, tx, p, w.attempt.ID, res, "system", now); err != nil {
			return err
		}
		if resp, err = s.respond(p); err != nil {
			return err
		}
		if p.Status.Final() {
			return tx.KeyComplete(ctx, rec.ID, resp.Status, resp.Body, now)
		}
		return tx.KeyMarkUnknown(ctx, rec.ID, now)
	})
	return resp, err
}

// respond renders the create answer for a payment's current state.
func (s *Service) respond(p *Payment) (idempotency.Response, error) {
	body, err := json.Marshal(p)
	if err != nil {
		return idempotency.Response{}, err
	}
	status := http.StatusCreated
	if !p.Status.Final() {
		status = http.StatusAccepted
	}
	return idempotency.Response{Status: status, Body: body}, nil
}

// recordAuthorization applies a provider result to a locked payment and its
// attempt. An attempt already resolved (by another path) is left alone.
func (s *Service) recordAuthorization(ctx context.Context, tx Tx, p *Payment, attemptID string, res provider.Result, actor string, now time.Time) error {
	a, err := tx.AttemptGet(ctx, attemptID)
	if err != nil {
		return err
	}
	if a.Status.Resolved() {
		return nil
	}
	to, ast := authorizationOutcome(res)
	a.Status, a.UpdatedAt = ast, now
	next := *p
	if res.Intent != nil {
		a.ProviderObjectID = res.Intent.ID
		next.ProviderPaymentID = res.Intent.ID
	}
	if err := tx.AttemptUpdateOutcome(ctx, a); err != nil {
		return err
	}
	switch to {
	case StatusCaptured:
		next.AmountCaptured = p.Amount
		if res.Intent != nil && res.Intent.AmountReceived > 0 {
			next.AmountCaptured = res.Intent.AmountReceived
		}
	case StatusDeclined, StatusFailed:
		next.FailureCode, next.FailureMessage = res.FailureCode, res.FailureMessage
	}
	next.Status = to
	details := map[string]any{"attempt_id": a.ID, "provider_key": a.ProviderKey, "outcome": string(res.Outcome)}
	if to == p.Status || !CanTransition(p.Status, to) {
		return tx.AuditInsert(ctx, AuditEntry{AccountID: p.AccountID, PaymentID: p.ID, At: now, Actor: actor, Action: "provider.authorize.unchanged", Details: details})
	}
	next.UpdatedAt = now
	if err := tx.PaymentUpdate(ctx, &next); err != nil {
		return err
	}
	from := p.Status
	*p = next
	s.metrics.PaymentTransition(from, to)
	return s.changed(ctx, tx, p, from, actor, "provider.authorize", "", details)
}

// authorizationOutcome classifies an authorization result into the
// payment's and the attempt's next status. When in doubt: unknown.
func authorizationOutcome(res provider.Result) (Status, AttemptStatus) {
	switch res.Outcome {
	case provider.Declined:
		return StatusDeclined, AttemptDeclined
	case provider.Failed:
		return StatusFailed, AttemptFailed
	case provider.Succeeded:
		if res.Intent == nil {
			return StatusUnknown, AttemptUnknown
		}
		switch res.Intent.Status {
		case "requires_capture":
			return StatusAuthorized, AttemptSucceeded
		case "succeeded":
			return StatusCaptured, AttemptSucceeded
		case "canceled":
			return StatusCanceled, AttemptSucceeded
		case "requires_payment_method":
			return StatusDeclined, AttemptDeclined
		}
	}
	return StatusUnknown, AttemptUnknown
}

// resolveAuthorization learns the outcome of an authorization attempt
// without ever starting a new one: retrieve the provider object when its id
// is known; within the provider's key retention re-send the same request
// with the same key; past it, search by payment_id, since a re-sent key the
// provider forgot would charge again.
func (s *Service) resolveAuthorization(ctx context.Context, acct Account, p *Payment, a *Attempt) provider.Result {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.providerTimeout)
	defer cancel()
	start := time.Now()
	var res provider.Result
	call := "authorize"
	switch {
	case a.ProviderObjectID != "":
		call = "retrieve"
		in, err := s.provider.RetrieveIntent(cctx, acct.Credentials, a.ProviderObjectID)
		res = intentResult(in, err)
	case s.clock().Sub(a.CreatedAt) < s.keyRetention:
		var req provider.AuthorizeRequest
		if err := json.Unmarshal(a.Request, &req); err != nil {
			return provider.Result{Outcome: provider.Unknown, Err: err}
		}
		res = s.provider.Authorize(cctx, acct.Credentials, req)
	default:
		call = "search"
		in, err := s.provider.SearchIntentByPaymentID(cctx, acct.Credentials, p.ID)
		res = intentResult(in, err)
		if errors.Is(err, provider.ErrNotFound) && s.clock().Sub(a.CreatedAt) >= s.searchGrace {
			res = provider.Result{Outcome: provider.Failed, FailureCode: "not_found_at_provider",
				FailureMessage: "the provider has no record of this attempt"}
		}
	}
	s.metrics.ProviderCall(OpAuthorize, res.Outcome, time.Since(start))
	s.log.LogAttrs(ctx, slog.LevelInfo, "provider call",
		slog.String("payment_id", p.ID), slog.String("attempt_id", a.ID),
		slog.String("call", call), slog.String("outcome", string(res.Outcome)),
		slog.Any("error", res.Err))
	return res
}

// intentResult turns a lookup into a result; a failed lookup is unknown.
func intentResult(in *provider.Intent, err error) provider.Result {
	if err != nil {
		return provider.Result{Outcome: provider.Unknown, Err: err}
	}
	return provider.Result{Outcome: provider.Succeeded, Intent: in}
}

// changed writes the event and the audit entry of a state change, in the
// caller's transaction.
func (s *Service) changed(ctx context.Context, tx Tx, p *Payment, from Status, actor, action, reason string, details map[string]any) error {
	if details == nil {
		details = map[string]any{}
	}
	if from != "" {
		details["from"] = string(from)
	}
	details["to"] = string(p.Status)
	if err := tx.AuditInsert(ctx, AuditEntry{
		AccountID: p.AccountID, PaymentID: p.ID, At: p.UpdatedAt,
		Actor: actor, Action: action, Reason: reason, Details: details,
	}); err != nil {
		return err
	}
	ev := Event{ID: s.newID("evt"), AccountID: p.AccountID, PaymentID: p.ID,
		Type: "payment." + string(p.Status), CreatedAt: p.UpdatedAt}
	payload, err := json.Marshal(struct {
		ID        string   `json:"id"`
		Type      string   `json:"type"`
		CreatedAt string   `json:"created_at"`
		Payment   *Payment `json:"payment"`
	}{ev.ID, ev.Type, FormatTime(ev.CreatedAt), p})
	if err != nil {
		return err
	}
	ev.Payload = payload
	return tx.EventInsert(ctx, ev)
}

func orDefault(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}

type nopMetrics struct{}

func (nopMetrics) Idempotency(string, string)                              {}
func (nopMetrics) ProviderCall(Operation, provider.Outcome, time.Duration) {}
func (nopMetrics) PaymentTransition(Status, Status)                        {}
