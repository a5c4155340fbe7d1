// Package providersim is a stateful simulator of the part of the Stripe API
// that the payment service uses through stripe-go: PaymentIntents (create and
// confirm, confirm again, retrieve, capture, cancel, search, list) and refunds (create, retrieve,
// list), and disputes (list); and of Mercado Pago's payments API as
// mercadopago/sdk-go uses it (see Mercado Pago below).
//
// Payments that wait for the customer work as at Stripe: the test cards
// pm_card_threeDSecure2Required and pm_card_authenticationRequired answer
// requires_action with next_action redirect_to_url (a hosted challenge page
// with Approve and Fail that sends the customer back to return_url) or, without
// a return_url, use_stripe_sdk; payment_method_data[type]=pix answers
// pix_display_qr_code (a real QR code image and an instructions page) and
// payment_method_data[type]=boleto answers boleto_display_details (a voucher
// page and PDF). Pay, Fail, Expire and MarkProcessing (and /_sim/intents/{id}/…)
// play the customer's part. Every transition makes the Stripe event with the
// intent as data.object and POSTs it, signed as Stripe signs, to the endpoint
// registered for the secret key; deliveries can be duplicated, held and
// released in reverse order.
//
// It honours Idempotency-Key per secret key the way Stripe does, keeps each
// secret key's objects apart, counts every effect, and lets tests inject
// faults (lost responses, delays, 5xx, 429, held requests) at the moments that
// matter for exactly-once behaviour: before or after the effect. Tests can
// revoke or restrict a secret key and move the clock. Tests mount it with
// httptest; cmd/providersim serves it as a process, with a control API under
// /_sim/.
//
// # Where it differs from Stripe
//
// Settings that Stripe does not offer, chosen so tests are deterministic:
//   - Idempotency keys are forgotten exactly KeyRetention (default 24h) after
//     first use. Stripe only promises to keep them at least 24 hours; a retry
//     after that may or may not execute again, so the simulator takes the
//     harsher reading and always does. A key whose first request is still
//     running is never forgotten.
//   - Search sees an intent SearchLag after it was created, default at once.
//     Stripe's search lags writes by under a minute normally and longer during
//     an outage; a SearchLag shows whether the service relies on search right
//     after a write. Retrieve and lists have no lag, as at Stripe.
//   - Time is Options.Now plus Advance; timestamps and key ages follow it.
//
// Simplified:
//   - Each key holds its own objects. Any sk_, rk_test_ or rk_live_ string
//     is accepted until RevokeSecret; a new string (a rolled key) sees none
//     of the old key's objects or idempotency keys, whereas at Stripe a
//     rolled key reaches the same account. GET /v1/account answers one
//     account id for the keys of one family (what follows sk_test_,
//     rk_live_, ...). Publishable keys are rejected as invalid;
//     ForbidSecret gives a key a restricted key's 403s.
//   - Only test payment methods (pm_card_visa, pm_card_chargeDeclined, the
//     3-D Secure cards above, ...) and payment_method_data of type pix or
//     boleto exist. POST /v1/payment_intents/{id}/confirm takes card
//     payment methods only, with a secret key or, as from Stripe.js, with
//     any publishable key (pk_) and the intent's client_secret: so a
//     declined or failed-challenge intent can be paid again, as at Stripe,
//     until it is canceled; a Pix or Boleto intent is never confirmed
//     again (create another). Pix and Boleto take BRL
//     and automatic capture only; a Boleto tax_id is checked for 11 or 14
//     digits, not for its check digits.
//   - An unpaid Pix or Boleto expires when the simulator's clock passes its
//     expires_at (on Advance, or on the next request that touches the
//     account) or on Expire: as Stripe documents for vouchers, it goes back
//     to requires_payment_method with last_payment_error
//     payment_intent_payment_attempt_expired and payment_intent.payment_failed,
//     and can then be canceled but never paid. A Boleto in processing does
//     not expire. Pix and Boleto codes are made up (the Pix code has the BR
//     Code layout and CRC), and a Boleto is due at 23:59:59 São Paulo time.
//   - Events: PaymentIntent events (payment_intent.requires_action,
//     .processing, .succeeded, .amount_capturable_updated, .payment_failed,
//     .canceled), and charge.refunded and charge.dispute.created, .updated
//     and .closed only for what the control calls plant (DashboardRefund,
//     OpenDispute, UpdateDispute, CloseDispute); no payment_intent.created
//     and no event for refunds made through the API.
//     Refunds succeed at once, never pending or failed. Events carry
//     api_version EventAPIVersion (stripe-go v76's) and created by the
//     simulator's clock, but are signed with the wall clock so that
//     stripe-go's tolerance check passes after the clock was moved. One
//     endpoint per secret key (RegisterWebhookEndpoint), one attempt per
//     delivery, in event order, with no retries: Redeliver resends.
//   - Search supports metadata, status and currency clauses joined by AND,
//     and its page tokens are offsets. The PaymentIntent list filters by
//     created (created[gte], [gt], [lte], [lt]), pages by limit and
//     starting_after with has_more, and expands data.latest_charge alone
//     (a charge with amount_refunded and disputed). The refund and dispute
//     lists filter by payment_intent or charge and ignore created and
//     expand; an unknown payment_intent or charge filter answers 404.
//   - Stripe-Version, Stripe-Account and livemode are ignored; error messages
//     follow Stripe's but are not guaranteed word for word; 429s and 5xx
//     happen only when injected.
//
// # Mercado Pago
//
// The same server answers the Mercado Pago payments API as
// github.com/mercadopago/sdk-go v1.8.0 calls it: POST /v1/payments, GET and
// PUT /v1/payments/{id} (PUT takes {"capture":true} with an optional
// transaction_amount, or {"status":"cancelled"}), GET
// /v1/payments/search (by external_reference, or by range=date_created,
// date_last_updated or date_approved between begin_date and end_date, both
// inclusive; paged by limit and offset with paging.total), POST and GET
// /v1/payments/{id}/refunds, and GET
// /v1/chargebacks/search?payment_id= and /v1/chargebacks/{id} (chargebacks
// are made only by MPOpenChargeback, and refunds outside the API by
// MPDashboardRefund). Bodies
// are JSON, ids are numbers, errors are {"message","error","status","cause"}.
// Any Bearer token starting with TEST- or APP_USR- is an account of its own
// (RevokeSecret makes it answer 401; ForbidSecret does not apply). Card
// tokens are test fixtures:
// tok_<NAME> pays with the test cardholder NAME (APRO approved/accredited,
// OTHE rejected/cc_rejected_other_reason, CONT pending/pending_contingency,
// CALL, FUND, SECU, EXPI and FORM rejected with their cc_rejected_* detail),
// and tok_3DS_<NAME> is a card that, with three_d_secure_mode "optional",
// answers pending/pending_challenge with three_ds_info.external_resource_url
// (a hosted challenge page, /_sim/mp/3ds/{id}, that sends the customer back
// to callback_url when there is one) before NAME decides. An
// absent capture captures at once; "capture":false answers
// authorized/pending_capture. payment_method_id "pix" answers
// pending/pending_waiting_transfer with point_of_interaction.transaction_data
// {qr_code, qr_code_base64, ticket_url} and date_of_expiration (default
// 24h); "bolbradesco" answers pending/pending_waiting_payment with
// transaction_details.external_resource_url and barcode (due in three days
// at 23:59:59 São Paulo time). MPPay, MPFail and MPExpire (and
// /_sim/mp/payments/{id}/…) play the customer; an unpaid Pix or Boleto
// becomes cancelled/expired when the clock passes its date_of_expiration.
// Every change notifies the endpoint registered for the access token
// (RegisterWebhookEndpoint) with {"action":"payment.created" or
// "payment.updated","type":"payment","data":{"id":…}}, ?data.id=…&type=payment
// in the URL, x-request-id, and x-signature ts=<Unix seconds>,v1=<hex
// HMAC-SHA256 of "id:<data.id>;request-id:<x-request-id>;ts:<ts>;"> (see
// MPSignature). Faults, Stats, Requests and the clock work as for Stripe,
// with the operations mp_create, mp_retrieve, mp_update (capture and
// cancel), mp_search, mp_refund, mp_list_refunds and mp_list_chargebacks.
//
// Where it differs from Mercado Pago:
//   - X-Idempotency-Key (on POST and PUT, optional) is kept per access token
//     for MPKeyRetention (default 24h, SetMPKeyRetention or POST
//     /_sim/mp/settings; 0 keeps none). Mercado Pago documents no retention.
//     The same key with the same method, path and JSON body (key order and
//     spacing aside) replays the stored answer, rejections included; with a
//     different body, or while the first request runs, it answers 409
//     conflict, not kept. Mercado Pago documents neither. Malformed requests
//     (400 bad_request) are not kept, so a corrected retry executes.
//   - Search sees a payment MPSearchLag after its creation (default at
//     once); it filters only by external_reference and sorts by creation,
//     oldest first unless criteria=desc. Retrieve has no lag.
//   - Only the test tokens above exist (any other token is 400 Invalid
//     card_token_id); payment_method_id is not checked against the token,
//     amounts are BRL, installments are echoed, fees and net amounts are 0,
//     and card, payer and 3-D Secure fields are fixtures. Pix and Boleto codes
//     are made up. A Boleto's CPF or CNPJ is checked for 11 or 14 digits only.
//   - PUT updates nothing but capture and cancel. Cancel is refused (400,
//     cause 2063) unless the payment is pending, in_process or authorized,
//     a cancelled one included; capture needs authorized, refunds need
//     approved. Refunds are approved at once; the payment goes to
//     refunded/refunded when fully refunded, else keeps approved with
//     status_detail partially_refunded. Authorizations never lapse.
//   - Notifications go to the endpoint registered for the access token, not
//     to the payment's notification_url (echoed only), once each, with no
//     retries (Redeliver resends); ts is the wall clock in seconds.
//   - Error causes and messages follow Mercado Pago's shape, not its exact
//     codes; answers carry the Stripe-side headers too (Request-Id,
//     Idempotent-Replayed on a replay), not Mercado Pago's x-request-id.
package providersim

import (
	"log/slog"
	"maps"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Options configure a Server. The zero value is usable.
type Options struct {
	// Now is the clock for idempotency-key expiry and object timestamps,
	// before any Advance. Default time.Now.
	Now func() time.Time
	// KeyRetention is how long an idempotency key is remembered after its
	// first use. Default 24h, as Stripe.
	KeyRetention time.Duration
	// SearchLag hides intents from search until they are this old, like
	// Stripe's eventually consistent search. Default 0 (visible at once).
	SearchLag time.Duration
	// RandomFaults injects faults at random into mutating requests.
	RandomFaults RandomFaults
	// Logger, when set, receives one record per API request.
	Logger *slog.Logger
	// BaseURL is where the hosted pages (3-D Secure challenge, Pix
	// instructions, Boleto voucher) are reached, as put in next_action.
	// Default: http:// and the Host of the request that created the intent.
	BaseURL string
	// WebhookClient sends webhook deliveries. Default: a client with a 10s
	// timeout.
	WebhookClient *http.Client
	// MPKeyRetention is how long a Mercado Pago X-Idempotency-Key is
	// remembered after its first use. Default 24h; Mercado Pago does not
	// document it. SetMPKeyRetention changes it later, 0 included.
	MPKeyRetention time.Duration
	// MPSearchLag hides Mercado Pago payments from search until they are
	// this old. Default 0.
	MPSearchLag time.Duration
}

// RandomFaults are per-request probabilities of a fault on mutating (POST)
// requests that no injected Fault matched, for load tests.
type RandomFaults struct {
	Drop     float64 // DropAfterEffect
	Error500 float64 // Error500BeforeEffect
	Delay    float64 // DelayAfterEffect for DelayFor
	DelayFor time.Duration
	// Seed makes the sequence reproducible; 0 picks a random seed.
	Seed int64
}

// Stats counts requests and effects.
type Stats struct {
	Requests       int `json:"requests"`       // API requests received
	Replays        int `json:"replays"`        // idempotent replays served
	Authorizations int `json:"authorizations"` // intents (and Mercado Pago payments) authorized or charged
	Declines       int `json:"declines"`
	Captures       int `json:"captures"`
	Cancels        int `json:"cancels"`
	Refunds        int `json:"refunds"`
}

func (s *Stats) add(o Stats) {
	s.Requests += o.Requests
	s.Replays += o.Replays
	s.Authorizations += o.Authorizations
	s.Declines += o.Declines
	s.Captures += o.Captures
	s.Cancels += o.Cancels
	s.Refunds += o.Refunds
}

// Request is one logged API request.
type Request struct {
	Op             string    `json:"op"` // authorize, confirm, capture, cancel, refund, retrieve, retrieve_refund, list_refunds, search, list_intents, list_disputes, account; "" if unrouted
	Method         string    `json:"method"`
	Path           string    `json:"path"`
	SecretKey      string    `json:"secret_key,omitempty"`
	IdempotencyKey string    `json:"idempotency_key,omitempty"`
	Replayed       bool      `json:"replayed"`
	Fault          FaultKind `json:"fault,omitempty"` // fault applied, if any
	Status         int       `json:"status"`          // 0 when the connection was dropped
	Time           time.Time `json:"time"`            // arrival, by Options.Now
	// Traceparent is the W3C trace context the caller sent, to find the
	// span of the call that made this request.
	Traceparent string `json:"traceparent,omitempty"`
}

// maxLog bounds the request log for long load tests.
const maxLog = 100_000

// Server is the simulator; it implements http.Handler. Held requests block
// until released, so call ClearFaults before closing the HTTP server.
type Server struct {
	opts Options
	mux  *http.ServeMux

	frontsMu sync.Mutex
	fronts   map[string]*Front // by name, for the outage control

	mu        sync.Mutex
	offset    time.Duration // added to Options.Now by Advance
	accounts  map[string]*account
	revoked   map[string]bool            // secret keys answering 401
	forbidden map[string]map[string]bool // secret key -> operations answering 403
	anon      int                        // requests without a valid secret key
	log       []Request
	faults    []*Injected       // active, in injection order
	byID      map[int]*Injected // everything injected since the last clear
	nextID    int
	random    RandomFaults
	rng       *rand.Rand
	hooks     webhookState
	mp        mpSettings
}

// account is the state of one secret key.
type account struct {
	key         string
	intents     map[string]*intentRecord
	waiting     map[string]*intentRecord // Pix and Boleto intents that can still expire
	order       []*intentRecord          // creation order
	refunds     map[string]*refund
	refundOrder []*refund  // refunds in creation order
	disputes    []*dispute // in creation order
	keys        map[string]*idemEntry
	mp          *mpAccount // Mercado Pago payments, when the key is an access token
	swept       time.Time
	stats       Stats
	events      []Event
}

// New returns a Server with no objects and no faults.
func New(opts Options) *Server {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.KeyRetention <= 0 {
		opts.KeyRetention = 24 * time.Hour
	}
	if opts.WebhookClient == nil {
		opts.WebhookClient = &http.Client{Timeout: 10 * time.Second}
	}
	s := &Server{opts: opts, accounts: map[string]*account{}, byID: map[int]*Injected{},
		revoked: map[string]bool{}, forbidden: map[string]map[string]bool{}}
	s.hooks.init()
	s.mp.init(opts)
	s.SetRandomFaults(opts.RandomFaults)

	m := http.NewServeMux()
	m.Handle("POST /v1/payment_intents", s.endpoint("authorize", (*Server).createIntent))
	m.Handle("GET /v1/payment_intents/search", s.endpoint("search", (*Server).searchIntents))
	m.Handle("GET /v1/payment_intents", s.endpoint("list_intents", (*Server).listIntents))
	m.Handle("GET /v1/payment_intents/{id}", s.endpoint("retrieve", (*Server).getIntent))
	m.Handle("POST /v1/payment_intents/{id}/capture", s.endpoint("capture", (*Server).captureIntent))
	m.Handle("POST /v1/payment_intents/{id}/cancel", s.endpoint("cancel", (*Server).cancelIntent))
	m.Handle("POST /v1/payment_intents/{id}/confirm", s.publishable(s.endpoint("confirm", (*Server).confirmIntent)))
	m.Handle("POST /v1/refunds", s.endpoint("refund", (*Server).createRefund))
	m.Handle("GET /v1/refunds", s.endpoint("list_refunds", (*Server).listRefunds))
	m.Handle("GET /v1/refunds/{id}", s.endpoint("retrieve_refund", (*Server).getRefund))
	m.Handle("GET /v1/disputes", s.endpoint("list_disputes", (*Server).listDisputes))
	m.Handle("GET /v1/account", s.endpoint("account", (*Server).getAccount))
	s.mpRoutes(m)
	m.Handle("/", s.endpoint("", nil))
	s.controlRoutes(m)
	s.mux = m
	return s
}

// ServeHTTP serves the Stripe API under /v1/ and the control API under /_sim/.
// Every answer is dated by the simulator's clock, as a provider's by its own.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Date", s.Now().UTC().Format(http.TimeFormat))
	s.mux.ServeHTTP(w, r)
}

// Stats returns the counters summed over all secret keys.
func (s *Server) Stats() Stats {
	total, _ := s.allStats()
	return total
}

// StatsFor returns the counters of one secret key.
func (s *Server) StatsFor(secretKey string) Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	if a := s.accounts[secretKey]; a != nil {
		return a.stats
	}
	return Stats{}
}

func (s *Server) allStats() (Stats, map[string]Stats) {
	s.mu.Lock()
	defer s.mu.Unlock()
	total := Stats{Requests: s.anon}
	byKey := make(map[string]Stats, len(s.accounts))
	for k, a := range s.accounts {
		total.add(a.stats)
		byKey[k] = a.stats
	}
	return total, byKey
}

// Requests returns the most recent requests (up to 100 000) in the order they
// were answered.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.log[max(0, len(s.log)-maxLog):]...)
}

// LastTraceparent is the traceparent of the last request sent with the
// idempotency key ("" for any request), or "" when it carried none.
func (s *Server) LastTraceparent(idemKey string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := len(s.log) - 1; i >= 0; i-- {
		if idemKey == "" || s.log[i].IdempotencyKey == idemKey {
			return s.log[i].Traceparent
		}
	}
	return ""
}

// Intents returns a copy of the secret key's intents in creation order.
func (s *Server) Intents(secretKey string) []Intent {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.accounts[secretKey]
	if a == nil {
		return nil
	}
	out := make([]Intent, len(a.order))
	for i, pi := range a.order {
		out[i] = pi.Intent
		out[i].Metadata = maps.Clone(pi.Metadata)
	}
	return out
}

// ForgetIdempotencyKeys forgets every stored idempotency key, as if
// KeyRetention had passed for all of them.
func (s *Server) ForgetIdempotencyKeys() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, a := range s.accounts {
		clear(a.keys)
	}
}

// SetRandomFaults replaces the random-fault settings.
func (s *Server) SetRandomFaults(rf RandomFaults) {
	seed := uint64(rf.Seed)
	if seed == 0 {
		seed = rand.Uint64()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.random, s.rng = rf, rand.New(rand.NewPCG(seed, seed))
}

// account returns the state of a secret key, creating it. Requires s.mu.
func (s *Server) account(key string) *account {
	a := s.accounts[key]
	if a == nil {
		a = &account{key: key, intents: map[string]*intentRecord{}, refunds: map[string]*refund{},
			keys: map[string]*idemEntry{}, waiting: map[string]*intentRecord{}}
		s.accounts[key] = a
	}
	return a
}

// call is what an endpoint sees of a request.
type call struct {
	id      string // path parameter
	base    string // Options.BaseURL or the request's scheme and host
	form    map[string][]string
	idemKey string
	now     time.Time
	body    []byte // a JSON body (Mercado Pago)
}

// result is an endpoint's answer. final marks answers produced after the
// endpoint began executing: only those are kept for idempotent replays.
type result struct {
	status int
	body   []byte
	final  bool
}

type runFunc func(s *Server, a *account, c *call) result

// endpoint wraps an operation in the common pipeline: authentication,
// idempotency, faults before the effect, the effect, faults after it.
func (s *Server) endpoint(op string, run runFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key, rec, ok := s.authenticate(w, r, op, run)
		if !ok {
			return
		}
		if err := r.ParseForm(); err != nil {
			s.reply(w, rec, rejected(&apiError{Type: invalidRequest, Message: "Invalid request body: " + err.Error()}))
			return
		}
		c := &call{id: r.PathValue("id"), form: r.Form, base: s.baseURL(r)}
		if r.Method == http.MethodPost {
			c.idemKey = rec.IdempotencyKey
		}

		var entry *idemEntry
		var res result
		if c.idemKey != "" {
			var state claimState
			entry, res, state = s.claim(key, c.idemKey, fingerprint(r), false)
			if state == claimRejected {
				s.reply(w, rec, res)
				return
			}
			rec.Replayed = state == claimReplay
		}
		s.perform(w, r, rec, key, c, run, entry, res)
	})
}

// authenticate starts the request's record and checks its credentials and
// route. When they fail it answers and returns ok false.
func (s *Server) authenticate(w http.ResponseWriter, r *http.Request, op string, run runFunc) (key string, rec *Request, ok bool) {
	key, authed := secretKey(r)
	rec = &Request{Op: op, Method: r.Method, Path: r.URL.Path, IdempotencyKey: r.Header.Get("Idempotency-Key"),
		Traceparent: r.Header.Get("Traceparent")}
	var credStatus int
	var credErr *apiError
	s.mu.Lock()
	rec.Time = s.now()
	if authed {
		rec.SecretKey = key
		s.account(key).stats.Requests++
		credStatus, credErr = s.credentialError(key, op)
	} else {
		s.anon++
	}
	s.mu.Unlock()

	// Credentials come first and their errors are never stored, so a
	// revoked or unpermitted key cannot replay, claim or consume an
	// Idempotency-Key.
	switch {
	case !authed:
		s.reply(w, rec, failed(http.StatusUnauthorized, authError(r, key)))
		return key, rec, false
	case credStatus == http.StatusUnauthorized:
		s.reply(w, rec, failed(credStatus, credErr))
		return key, rec, false
	case run == nil:
		s.reply(w, rec, failed(http.StatusNotFound, &apiError{Type: invalidRequest,
			Message: "Unrecognized request URL (" + r.Method + ": " + r.URL.Path + ")."}))
		return key, rec, false
	case credErr != nil:
		s.reply(w, rec, failed(credStatus, credErr))
		return key, rec, false
	}
	return key, rec, true
}

// perform runs the call, unless it replays res, between the faults picked
// for it, and answers.
func (s *Server) perform(w http.ResponseWriter, r *http.Request, rec *Request, key string, c *call, run runFunc, entry *idemEntry, res result) {
	before, after := s.pickFaults(rec.Op, c.idemKey, r.Method != http.MethodGet)
	if before.kind != "" {
		rec.Fault = before.kind
		before.apply(r.Context())
		if before.kind != HoldBeforeEffect {
			if !rec.Replayed {
				s.unclaim(key, c.idemKey, entry)
			}
			rec.Replayed = false
			if strings.HasPrefix(rec.Op, "mp_") {
				s.reply(w, rec, mpFaultResult(before.kind))
			} else {
				s.reply(w, rec, before.errorResult())
			}
			return
		}
	}
	if !rec.Replayed {
		res = s.execute(key, c, run, entry)
	}
	if after.kind != "" {
		rec.Fault = after.kind
		after.apply(r.Context())
		if after.kind == DropAfterEffect {
			s.record(rec)
			dropConnection(w)
			return
		}
	}
	s.reply(w, rec, res)
}

// execute runs the endpoint under the lock and settles the idempotency entry
// in the same critical section, so a retry sees either nothing or the result.
func (s *Server) execute(key string, c *call, run runFunc, entry *idemEntry) result {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.account(key)
	c.now = s.now()
	s.expireDue(a, c.now)
	res := run(s, a, c)
	if entry != nil {
		if res.final {
			entry.done, entry.res = true, res
		} else {
			a.release(c.idemKey, entry)
		}
	}
	return res
}

// reply logs the request and then writes the answer, so counters are final
// by the time the client sees the response.
func (s *Server) reply(w http.ResponseWriter, rec *Request, res result) {
	rec.Status = res.status
	s.record(rec)
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Request-Id", newID("req_", 14))
	if rec.IdempotencyKey != "" && rec.Method == http.MethodPost {
		h.Set("Idempotency-Key", rec.IdempotencyKey)
	}
	if rec.Replayed {
		h.Set("Idempotent-Replayed", "true")
	}
	w.WriteHeader(res.status)
	w.Write(res.body)
}

func (s *Server) record(rec *Request) {
	s.mu.Lock()
	if rec.Replayed {
		s.account(rec.SecretKey).stats.Replays++
	}
	if len(s.log) >= 2*maxLog {
		s.log = append(s.log[:0], s.log[len(s.log)-maxLog:]...)
	}
	s.log = append(s.log, *rec)
	s.mu.Unlock()
	if l := s.opts.Logger; l != nil {
		l.Info("request", "op", rec.Op, "method", rec.Method, "path", rec.Path,
			"idempotency_key", rec.IdempotencyKey, "replayed", rec.Replayed,
			"fault", string(rec.Fault), "status", rec.Status)
	}
}

// baseURL is where hosted pages are reached from the customer's browser.
func (s *Server) baseURL(r *http.Request) string {
	if s.opts.BaseURL != "" {
		return strings.TrimSuffix(s.opts.BaseURL, "/")
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

// secretKey reads a Bearer token, or HTTP basic auth with the key as user.
func secretKey(r *http.Request) (string, bool) {
	key, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		key, _, _ = r.BasicAuth()
	}
	key = strings.TrimSpace(key)
	// Secret keys, and the restricted keys (rk_test_, rk_live_) an account
	// may register instead.
	return key, strings.HasPrefix(key, "sk_") || strings.HasPrefix(key, "rk_test_") || strings.HasPrefix(key, "rk_live_")
}

func authError(r *http.Request, key string) *apiError {
	if r.Header.Get("Authorization") == "" {
		return &apiError{Type: invalidRequest, Message: "You did not provide an API key. You need to provide your API key in the Authorization header, using Bearer auth (e.g. 'Authorization: Bearer YOUR_SECRET_KEY')."}
	}
	return invalidKey(key)
}

// dropConnection closes the connection without writing a response.
func dropConnection(w http.ResponseWriter) {
	if hj, ok := w.(http.Hijacker); ok {
		if conn, _, err := hj.Hijack(); err == nil {
			conn.Close()
			return
		}
	}
	// Not hijackable (HTTP/2): abort the stream instead.
	panic(http.ErrAbortHandler)
}
