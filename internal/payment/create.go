package payment

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/acmepay/payments/internal/idempotency"
	"github.com/acmepay/payments/internal/provider"
)

// CreateBody is Create from the raw request body. A retry carrying the very
// bytes its key stored the hash of is answered from the key without parsing
// them again (it was parsed when the key was reserved); any other body is
// parsed, normalized and its fingerprint compared, as Create does.
func (s *Service) CreateBody(ctx context.Context, acct Account, key string, body []byte) (idempotency.Answer, error) {
	op := idempotency.OpPaymentsCreate
	scope := idempotency.Scope{AccountID: acct.ID, Operation: op, KeyHash: idempotency.HashKey(key)}
	bodyHash := idempotency.BodyHash(body)
	known, err := s.lookUp(ctx, scope)
	if err != nil {
		// An invalid body is still a 400 while the database is away.
		if _, perr := ParseCreateRequest(body); perr != nil {
			return idempotency.Answer{}, perr
		}
		return idempotency.Answer{}, err
	}
	if known.found {
		// Recovering an attempt needs the request: that goes the long way.
		if d, ok := idempotency.DecideBody(known.rec, bodyHash, s.clock()); ok && d != idempotency.Recover {
			return s.answer(ctx, known.rec, d)
		}
	}
	req, err := ParseCreateRequest(body)
	if err != nil {
		return idempotency.Answer{}, err
	}
	return s.create(ctx, acct, key, req, bodyHash, known)
}

// Create runs "create payment" under the client key. It answers created
// when the provider's outcome is known, accepted while it is not, or
// replays a stored answer.
func (s *Service) Create(ctx context.Context, acct Account, key string, req CreateRequest) (idempotency.Answer, error) {
	known, err := s.lookUp(ctx, idempotency.Scope{AccountID: acct.ID, Operation: idempotency.OpPaymentsCreate,
		KeyHash: idempotency.HashKey(key)})
	if err != nil {
		return idempotency.Answer{}, err
	}
	return s.create(ctx, acct, key, req, nil, known)
}

// create is Create with the key's record read and, when the request came as
// raw bytes, their hash to store with a new key.
func (s *Service) create(ctx context.Context, acct Account, key string, req CreateRequest, bodyHash []byte, known lookup) (idempotency.Answer, error) {
	op := idempotency.OpPaymentsCreate
	route, err := s.createRoute(acct, req)
	if err != nil {
		return idempotency.Answer{}, err
	}
	if !slices.ContainsFunc(route, s.circuitAllows) {
		// Every provider that could take it is skipped: nothing is
		// reserved, so the client's retry is a new create.
		return idempotency.Answer{}, Errorf(CodeUnavailable, "every provider that can take this payment is unavailable (its circuit is open); retry later")
	}
	k, err := NewKey(acct.ID, op, key, s.newID("pay"), req)
	if err != nil {
		return idempotency.Answer{}, err
	}
	k.BodyHash = bodyHash
	c := &creating{answerPayment: answerPayment{s}, acct: acct, req: req, route: route}
	if s.createBudget > 0 {
		c.deadline = time.Now().Add(s.createBudget)
	}
	ans, err := s.execute(ctx, acct, k, c, known)
	if errors.Is(err, ErrLiveOrderConflict) {
		s.metrics.Idempotency(op, "conflict")
		return idempotency.Answer{}, s.LiveOrderError(ctx, acct.ID, req.OrderID)
	}
	if ErrorCode(err) == CodeOrderHasActivePayment {
		s.metrics.Idempotency(op, "conflict")
	}
	return ans, err
}

// creating is a create on the money path.
type creating struct {
	answerPayment
	acct Account
	req  CreateRequest
	// route: the providers that can take the payment, in order; the first
	// whose circuit is closed gets attempt 1, the next ones a failover.
	route []string
	// deadline: no failover starts a call that could not answer before it.
	deadline time.Time
}

// numbered: a create takes the order's next authorization attempt.
func (c *creating) numbered() (string, Operation) { return c.req.OrderID, OpAuthorize }

// Start writes the payment and its first authorization attempt.
func (c *creating) Start(ctx context.Context, tx Tx, at Reserved) (Started, error) {
	s, req, n := c.s, c.req, at.NextAttempt
	p := &Payment{
		ID: at.PaymentID, AccountID: c.acct.ID, OrderID: req.OrderID, Attempt: n,
		Amount: req.Amount, Currency: req.Currency, CaptureMethod: req.CaptureMethod,
		PaymentMethod: req.Method(), CustomerID: req.CustomerID,
		Description: req.Description, Metadata: req.Metadata,
		Options: MethodOptions{ReturnURL: req.ReturnURL, ExpiresIn: req.ExpiresIn, BillingDetails: req.BillingDetails,
			Methods: req.PaymentMethods},
		Status: StatusProcessing, Provider: c.firstProvider(), CreatedAt: at.Now, UpdatedAt: at.Now,
	}
	a, err := s.newAuthorizeAttempt(p, at.AttemptID, n, at.Now)
	if err != nil {
		return Started{}, err
	}
	// The partial unique index on live payments refuses a second live
	// payment for the order, even from another key.
	if err := tx.PaymentInsertWithAttempt(ctx, p, a); err != nil {
		return Started{}, err
	}
	if n > 1 {
		// An earlier payment's intent may still be payable: the check
		// fails the transaction, which rolls the inserts back.
		if err := CheckOrderHeld(ctx, tx, c.acct.ID, req.OrderID, CodeOrderHasActivePayment); err != nil {
			return Started{}, err
		}
	}
	return Send(p, a), s.Write(ctx, tx, Change{Payment: p, Audit: AuditEntry{Actor: "api", Action: "payment.created", Details: map[string]any{"attempt_id": a.ID, "provider_key": a.ProviderKey}}})
}

// createRoute is the providers a create may run at, in order (CONTRACT
// §15): the account's routing for the payment's method, currency and
// amount, or its providers in the order they were added. A bare card token
// is Stripe's, so only Stripe is tried with it; payment_methods are tried
// at the providers they name a card for. A provider that lacks what it
// needs is never tried; when none can be, the create is an invalid request
// naming what is missing, before anything is reserved.
func (s *Service) createRoute(acct Account, req CreateRequest) ([]string, error) {
	candidates := acct.Route(req)
	if req.PaymentMethods == nil && RouteMethod(req) == MethodCard {
		if !slices.Contains(candidates, ProviderStripe) {
			return nil, Errorf(CodeInvalidRequest, "a card token (any payment_method but pix and boleto) is Stripe's, and Stripe is not on this payment's route: send payment_methods")
		}
		candidates = []string{ProviderStripe}
	}
	var (
		route   []string
		missing []FieldError
	)
	for _, name := range candidates {
		fe := s.lacks(acct, name, req)
		if len(fe) == 0 {
			route = append(route, name)
		}
		missing = append(missing, fe...)
	}
	if len(route) == 0 {
		return nil, &Error{Code: CodeInvalidRequest, Message: "no provider of this payment's route can take it", Fields: missing}
	}
	return route, nil
}

// firstProvider is the route's first provider whose circuit lets a call
// through (Create refuses a route with none; a circuit that opened since
// leaves the first, whose call the circuit refuses without sending it).
func (c *creating) firstProvider() string {
	for _, name := range c.route {
		if c.s.circuitAllows(name) {
			return name
		}
	}
	return c.route[0]
}

// lacks reports what a provider needs that the request does not carry.
func (s *Service) lacks(acct Account, name string, req CreateRequest) []FieldError {
	if _, err := s.ProviderFor(acct, name); err != nil {
		return []FieldError{{Field: "provider." + name, Message: "the account has no credentials at " + name}}
	}
	var fe []FieldError
	if m := req.PaymentMethods; m != nil {
		switch {
		case name == ProviderStripe && m.Stripe == "":
			fe = append(fe, FieldError{Field: "payment_methods.stripe", Message: "is required to pay at stripe"})
		case name == ProviderMercadoPago && m.MercadoPago == nil:
			fe = append(fe, FieldError{Field: "payment_methods.mercadopago", Message: "is required to pay at mercadopago"})
		}
	}
	if name == ProviderMercadoPago && (req.BillingDetails == nil || req.BillingDetails.Email == "") {
		fe = append(fe, FieldError{Field: "billing_details.email", Message: "is required for Mercado Pago"})
	}
	return fe
}

// LiveOrderError names the payment that keeps an order from a second one.
func (s *Service) LiveOrderError(ctx context.Context, accountID, orderID string) error {
	e := Errorf(CodeOrderHasActivePayment, "order %s already has a payment that is in progress or succeeded", orderID)
	if live, err := s.store.PaymentGetLiveByOrder(ctx, accountID, orderID); err == nil {
		e.PaymentID = live.ID
	}
	return e
}

// InsertAuthorizeAttempt writes authorization attempt n of a payment.
func (s *Service) InsertAuthorizeAttempt(ctx context.Context, tx Tx, p *Payment, id string, n int, now time.Time) (*Attempt, error) {
	a, err := s.newAuthorizeAttempt(p, id, n, now)
	if err != nil {
		return nil, err
	}
	return a, tx.AttemptInsert(ctx, a)
}

// newAuthorizeAttempt builds authorization attempt n with its derived
// provider key and the exact request every retry will re-send.
func (s *Service) newAuthorizeAttempt(p *Payment, id string, n int, now time.Time) (*Attempt, error) {
	key := ProviderKey(p.OrderID, OpAuthorize, n)
	md := make(map[string]string, len(p.Metadata)+3)
	for k, v := range p.Metadata {
		md[k] = v
	}
	// The service's own keys win over the client's: the reconciler finds the
	// payment at the provider by payment_id.
	md["payment_id"], md["order_id"], md["attempt"] = p.ID, p.OrderID, fmt.Sprint(n)
	token, mp := cardFor(p, p.Provider)
	req, err := json.Marshal(provider.AuthorizeRequest{
		IdempotencyKey: key, Amount: p.Amount, Currency: p.Currency,
		PaymentMethod: token, MercadoPago: mp, CaptureMethod: p.CaptureMethod,
		CustomerID: p.CustomerID, Description: p.Description, Metadata: md,
		ReturnURL: p.Options.ReturnURL, ExpiresIn: p.Options.ExpiresIn, BillingDetails: p.Options.BillingDetails,
		// Fixed now: every send of this attempt carries the same expiry.
		ExpiresAt: p.Options.ExpiresAt(p.PaymentMethod, now),
	})
	if err != nil {
		return nil, err
	}
	return s.newAttempt(p, id, OpAuthorize, n, req, now), nil
}

func (s *Service) newAttempt(p *Payment, id string, op Operation, n int, req []byte, now time.Time) *Attempt {
	lease := now.Add(s.lease)
	return &Attempt{
		ID: id, AccountID: p.AccountID, PaymentID: p.ID, OrderID: p.OrderID,
		Operation: op, Number: n, ProviderKey: ProviderKey(p.OrderID, op, n), Status: AttemptProcessing,
		Provider: ProviderOf(p.Provider),
		Request:  req, LeaseExpiresAt: &lease, CreatedAt: now, UpdatedAt: now,
	}
}
