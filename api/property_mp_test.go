package api_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/acmepay/payments/internal/account"
	"github.com/acmepay/payments/internal/apitest"
	"github.com/acmepay/payments/internal/provider"
	"github.com/acmepay/payments/internal/provider/mercadopago"
	"github.com/acmepay/payments/internal/provider/providersim"
)

// mpSide runs the property at Mercado Pago, on an account whose only
// provider it is. Half its runs keep the service's default key retention
// (0: recovery only looks up, and the simulator keeps no key either, so a
// re-send would act twice); the others give both the proof retention.
type mpSide struct {
	r         *propRun
	acctID    string
	token     string
	secret    string
	prov      *mercadopago.Provider
	creds     provider.Credentials
	dashboard int // refunds made in the dashboard
}

// mpPropRefund is what the dashboard refunds; the service's refunds are
// multiples of 300, so the two never mix up.
const mpPropRefund = 100

// mpPropPayer is the payer of every run.
const mpPropPayer = `{"name":"Ana Souza","email":"ana@example.com","tax_id":"529.982.247-25",` +
	`"address":{"line1":"Av. Paulista, 1000","city":"São Paulo","state":"SP","postal_code":"01310-100","country":"BR"}}`

func newMPSide(r *propRun) *mpSide {
	opts := apitest.Options{}
	retained := r.rng.IntN(2) == 0
	if retained {
		opts.MercadoPagoKeyRetention = proofRetention
	}
	r.e = proofEnv(r.t, opts)
	if !retained {
		r.e.Sim.SetMPKeyRetention(0)
	}
	r.note("mercadopago retention=%v", retained)
	if r.rng.IntN(2) == 0 {
		// Search lags writes, within the service's grace.
		r.e.Sim.SetMPSearchLag(90 * time.Second)
		r.note("search lag")
	}
	s := &mpSide{r: r, token: fmt.Sprintf("TEST-prop-%d-%s", r.seed, apitest.SecretSuffix(r.t)), secret: fmt.Sprintf("mpwhsec_prop_%d", r.seed)}
	a, key, err := r.e.Accounts.CreateWith(context.Background(), "Loja Propriedade MP",
		account.Secrets{MercadoPagoToken: s.token, MercadoPagoWebhookSecret: s.secret})
	if err != nil {
		r.t.Fatalf("create account: %v", err)
	}
	s.acctID, r.apiKey = a.ID, key
	if s.prov, err = mercadopago.New(mercadopago.Config{APIBase: r.e.SimURL}); err != nil {
		r.t.Fatal(err)
	}
	s.creds = provider.Credentials{SecretKey: s.token}
	r.body = mpPropBody(r)
	return s
}

// mpPropBody is a Pix, or a card that Mercado Pago approves, approves
// after a 3-D Secure challenge or refuses, held for a capture or not.
func mpPropBody(r *propRun) string {
	if r.rng.IntN(4) == 0 {
		r.note("pix")
		return fmt.Sprintf(`{"order_id":%q,"amount":2000,"currency":"BRL","payment_method":"pix","expires_in":600,`+
			`"billing_details":%s}`, r.order, mpPropPayer)
	}
	token := []string{"tok_APRO", "tok_APRO", "tok_3DS_APRO", "tok_OTHE"}[r.rng.IntN(4)]
	capture := []string{"manual", "manual", "automatic"}[r.rng.IntN(3)]
	r.note("card %s %s", token, capture)
	return fmt.Sprintf(`{"order_id":%q,"amount":2000,"currency":"BRL","capture_method":%q,`+
		`"payment_methods":{"mercadopago":{"token":%q,"payment_method_id":"visa","installments":1}},"billing_details":%s}`,
		r.order, capture, token, mpPropPayer)
}

// sim is the Mercado Pago payment of the run's payment: any when the client
// never got one, which is a failure of its own.
func (s *mpSide) sim() (providersim.MPPayment, bool) {
	for _, p := range s.r.e.Sim.MPPayments(s.token) {
		if s.r.paymentID == "" || strings.HasPrefix(p.ExternalReference, s.r.paymentID+":") {
			return p, true
		}
	}
	return providersim.MPPayment{}, false
}

// mpPropStatus is the payment status a Mercado Pago payment stands for.
func mpPropStatus(p providersim.MPPayment) string {
	switch p.Status {
	case "pending":
		if p.StatusDetail == "pending_contingency" {
			return "pending"
		}
		return "requires_action"
	case "in_process":
		return "pending"
	case "authorized":
		return "authorized"
	case "approved", "refunded":
		return "captured"
	case "rejected":
		return "declined"
	case "cancelled":
		return "canceled"
	}
	return p.Status
}

func (s *mpSide) intent() (propIntent, bool) {
	p, ok := s.sim()
	in := propIntent{id: strconv.FormatInt(p.ID, 10), status: mpPropStatus(p), refunded: p.Refunded}
	if p.Captured {
		in.received = p.Amount
	}
	return in, ok
}

// webhook sends a signed notification naming the payment, as Mercado Pago
// does. The service retrieves the payment, so while the token is revoked
// the answer is 503 for a redelivery.
func (s *mpSide) webhook() {
	p, ok := s.sim()
	if !ok {
		return
	}
	r := s.r
	r.events++
	id, reqID := strconv.FormatInt(p.ID, 10), fmt.Sprintf("req-prop-%d-%d", r.seed, r.events)
	resp := r.e.Do(apitest.Request{Method: http.MethodPost, Path: "/webhooks/mercadopago/" + s.acctID, Body: mpNote(id), Bearer: "-",
		Headers: map[string]string{"x-request-id": reqID, "x-signature": providersim.MPSignature(id, reqID, s.secret, time.Now())}})
	r.note("notification -> %d", resp.Status)
	if resp.Status != http.StatusOK && !(r.revoked && resp.Status == http.StatusServiceUnavailable) {
		r.t.Errorf("seed %d: notification answered %d %s\ntrace: %q", r.seed, resp.Status, resp.Body, r.trace)
	}
}

func (s *mpSide) revoke(revoked bool) {
	if revoked {
		s.r.e.Sim.RevokeSecret(s.token)
	} else {
		s.r.e.Sim.RestoreSecret(s.token)
	}
}

func (s *mpSide) faultOp(op string) string {
	return map[string]string{"authorize": "mp_create", "capture": "mp_update", "cancel": "mp_update", "refund": "mp_refund"}[op]
}

// dashboardRefund refunds in Mercado Pago's dashboard: a refund the
// service did not make, which only notifications tell it of.
func (s *mpSide) dashboardRefund(int) {
	if p, ok := s.sim(); ok && p.Status == "approved" {
		_, err := s.r.e.Sim.MPDashboardRefund(p.ID, mpPropRefund)
		if err != nil {
			s.r.t.Fatalf("dashboard refund: %v", err)
		}
		s.dashboard++
		s.r.note("dashboard refund")
	}
}

func (s *mpSide) dashboardCancel(step int) {
	if p, ok := s.sim(); ok && (p.Status == "authorized" || p.Status == "pending") {
		res := s.prov.Cancel(context.Background(), s.creds, provider.CancelRequest{IdempotencyKey: fmt.Sprintf("dashboard-%d", step),
			IntentID: strconv.FormatInt(p.ID, 10)})
		s.r.note("dashboard cancel %s", res.Answer)
	}
}

// customer pays or lets lapse a Pix, or passes or fails a 3-D Secure
// challenge.
func (s *mpSide) customer() {
	p, ok := s.sim()
	if !ok || p.Status != "pending" {
		return
	}
	var err error
	switch n := s.r.rng.IntN(4); {
	case n < 3:
		_, err = s.r.e.Sim.MPPay(p.ID)
		s.r.note("customer pays")
	case p.PaymentTypeID == "credit_card":
		_, err = s.r.e.Sim.MPFail(p.ID)
		s.r.note("customer fails")
	default:
		_, err = s.r.e.Sim.MPExpire(p.ID)
		s.r.note("customer lets it expire")
	}
	if errors.Is(err, providersim.ErrUnexpectedState) {
		// It lapsed first: the simulator expires what is due before.
		s.r.note("too late")
	} else if err != nil {
		s.r.t.Fatalf("customer: %v", err)
	}
}

// authorizations: one payment per attempt at Mercado Pago, and at most one
// authorization of them all.
func (s *mpSide) authorizations() {
	byRef := map[string]int{}
	for _, p := range s.r.e.Sim.MPPayments(s.token) {
		byRef[p.ExternalReference]++
		if byRef[p.ExternalReference] > 1 {
			s.r.fatalf("%d payments at Mercado Pago for attempt %s", byRef[p.ExternalReference], p.ExternalReference)
		}
	}
	if n := s.r.e.Sim.StatsFor(s.token).Authorizations; n > 1 {
		s.r.fatalf("%d authorizations at the provider for one attempt", n)
	}
}

// refunds matches the service's succeeded refunds to Mercado Pago's by
// amount (Mercado Pago keeps no metadata on refunds); the dashboard's are
// told apart by theirs.
func (s *mpSide) refunds(in propIntent) {
	list, err := s.prov.ListRefunds(context.Background(), s.creds, in.id)
	if err != nil {
		s.r.t.Fatalf("list refunds: %v", err)
	}
	left, dashboard := map[int64]int{}, 0
	for _, f := range list {
		if f.Amount == mpPropRefund {
			dashboard++
			continue
		}
		left[f.Amount]++
	}
	if dashboard != s.dashboard {
		s.r.fatalf("%d refunds of %d at the provider, %d from the dashboard", dashboard, mpPropRefund, s.dashboard)
	}
	for _, f := range s.r.serviceRefunds() {
		if f.status == "succeeded" {
			left[f.amount]--
		}
	}
	for amount, n := range left {
		if n != 0 {
			s.r.fatalf("refunds of %d: %d more at the provider than succeeded here (%+v)", amount, n, list)
		}
	}
}
