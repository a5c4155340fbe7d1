package providersim

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"time"
)

// mpSettings are the Mercado Pago settings that can change at run time;
// guarded by Server.mu.
type mpSettings struct {
	retention time.Duration
	searchLag time.Duration
	nextID    int64 // last payment id given
	nextRef   int64 // last refund id given
	nextNote  int64 // last notification id given
	nextCB    int64 // last chargeback id given
}

func (m *mpSettings) init(opts Options) {
	m.retention = opts.MPKeyRetention
	if m.retention <= 0 {
		m.retention = 24 * time.Hour
	}
	m.searchLag = max(opts.MPSearchLag, 0)
	m.nextID, m.nextRef, m.nextNote, m.nextCB = 1_300_000_000, 2_100_000_000, 9_000_000_000, 236_000_000_000
}

// mpAccount holds one access token's Mercado Pago payments.
type mpAccount struct {
	payments map[int64]*mpPayment
	order    []*mpPayment         // creation order
	waiting  map[int64]*mpPayment // Pix and Boleto that can still expire
	// chargebacks in creation order
	chargebacks []*mpChargeback
}

// mpAccount returns the account's Mercado Pago state, creating it.
func (a *account) mpAccount() *mpAccount {
	if a.mp == nil {
		a.mp = &mpAccount{payments: map[int64]*mpPayment{}, waiting: map[int64]*mpPayment{}}
	}
	return a.mp
}

// SetMPKeyRetention changes how long Mercado Pago idempotency keys are kept,
// for keys stored before and after; 0 forgets each key once its request
// ends, so every retry executes again.
func (s *Server) SetMPKeyRetention(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mp.retention = max(d, 0)
}

// SetMPSearchLag changes how old a Mercado Pago payment must be to be found
// by search.
func (s *Server) SetMPSearchLag(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mp.searchLag = max(d, 0)
}

// mpRoutes mounts the Mercado Pago API and its control and hosted pages.
func (s *Server) mpRoutes(m *http.ServeMux) {
	m.Handle("POST /v1/payments", s.mpEndpoint("mp_create", (*Server).mpCreate))
	m.Handle("GET /v1/payments/search", s.mpEndpoint("mp_search", (*Server).mpSearch))
	m.Handle("GET /v1/payments/{id}", s.mpEndpoint("mp_retrieve", (*Server).mpGet))
	m.Handle("PUT /v1/payments/{id}", s.mpEndpoint("mp_update", (*Server).mpUpdate))
	m.Handle("POST /v1/payments/{id}/refunds", s.mpEndpoint("mp_refund", (*Server).mpRefund))
	m.Handle("GET /v1/payments/{id}/refunds", s.mpEndpoint("mp_list_refunds", (*Server).mpListRefunds))
	m.Handle("GET /v1/chargebacks/search", s.mpEndpoint("mp_list_chargebacks", (*Server).mpChargebacks))
	m.Handle("GET /v1/chargebacks/{id}", s.mpEndpoint("mp_get_chargeback", (*Server).mpGetChargeback))
	s.mpControlRoutes(m)
}

// isMPToken reports whether key looks like a Mercado Pago access token.
func isMPToken(key string) bool {
	return strings.HasPrefix(key, "TEST-") || strings.HasPrefix(key, "APP_USR-")
}

// mpEndpoint is endpoint for the Mercado Pago API: a Bearer access token,
// JSON bodies and X-Idempotency-Key on POST and PUT.
func (s *Server) mpEndpoint(op string, run runFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token, rec, ok := s.mpAuthenticate(w, r, op)
		if !ok {
			return
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err == nil && r.Method != http.MethodGet && len(bytes.TrimSpace(body)) > 0 && !json.Valid(body) {
			err = errMPBody
		}
		if err != nil {
			s.reply(w, rec, mpRejected(http.StatusBadRequest, "bad_request", "invalid JSON body"))
			return
		}
		c := &call{id: r.PathValue("id"), form: r.URL.Query(), base: s.baseURL(r), body: body}
		var entry *idemEntry
		var res result
		if r.Method != http.MethodGet && rec.IdempotencyKey != "" {
			c.idemKey = rec.IdempotencyKey
			var state claimState
			entry, res, state = s.claim(token, c.idemKey, mpFingerprint(r, body), true)
			if state == claimRejected {
				s.reply(w, rec, res)
				return
			}
			rec.Replayed = state == claimReplay
		}
		s.perform(w, r, rec, token, c, run, entry, res)
	})
}

// mpAuthenticate starts the request's record and checks the access token.
func (s *Server) mpAuthenticate(w http.ResponseWriter, r *http.Request, op string) (string, *Request, bool) {
	token, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	token = strings.TrimSpace(token)
	rec := &Request{Op: op, Method: r.Method, Path: r.URL.Path, IdempotencyKey: r.Header.Get("X-Idempotency-Key"),
		Traceparent: r.Header.Get("Traceparent")}
	authed := isMPToken(token)
	s.mu.Lock()
	rec.Time = s.now()
	if authed {
		rec.SecretKey = token
		s.account(token).stats.Requests++
		authed = !s.revoked[token]
	} else {
		s.anon++
	}
	s.mu.Unlock()
	if !authed {
		s.reply(w, rec, mpRejected(http.StatusUnauthorized, "unauthorized", "invalid access token"))
		return token, rec, false
	}
	return token, rec, true
}

// mpFingerprint is what a reused key is compared on: method, path and the
// body with its object keys sorted, so key order and spacing do not matter.
func mpFingerprint(r *http.Request, body []byte) string {
	var v any
	if json.Unmarshal(body, &v) == nil {
		body, _ = json.Marshal(v)
	}
	return fingerprintOf(r.Method + " " + r.URL.Path + "\n" + string(body))
}

// mpClaimAnswer is the answer for a Mercado Pago key that is known and
// unexpired: a replay of the stored answer, or a 409 for a different body
// or a first request still running. Requires s.mu.
func mpClaimAnswer(e *idemEntry, fp, idemKey string) (*idemEntry, result, claimState) {
	switch {
	case e.fingerprint != fp:
		return nil, mpRejected(http.StatusConflict, "conflict",
			"the X-Idempotency-Key "+idemKey+" was already used with a different request"), claimRejected
	case !e.done:
		return nil, mpRejected(http.StatusConflict, "conflict",
			"a request with the X-Idempotency-Key "+idemKey+" is still being processed"), claimRejected
	}
	return e, e.res, claimReplay
}

// mpErrorJSON is Mercado Pago's error body.
type mpErrorJSON struct {
	Message string        `json:"message"`
	Error   string        `json:"error"`
	Status  int           `json:"status"`
	Cause   []mpCauseJSON `json:"cause"`
}

type mpCauseJSON struct {
	Code        int    `json:"code"`
	Description string `json:"description"`
}

type mpErr string

func (e mpErr) Error() string { return string(e) }

const errMPBody = mpErr("invalid JSON body")

// mpFailed is an error answer once execution began, kept for replays.
func mpFailed(status int, code, message string, causes ...mpCauseJSON) result {
	if causes == nil {
		causes = []mpCauseJSON{}
	}
	return jsonResult(status, mpErrorJSON{Message: message, Error: code, Status: status, Cause: causes}, true)
}

// mpRejected is an error answer that is not kept: a retry with the same
// key executes.
func mpRejected(status int, code, message string, causes ...mpCauseJSON) result {
	res := mpFailed(status, code, message, causes...)
	res.final = false
	return res
}

// mpFaultResult is the answer of a fault before the effect.
func mpFaultResult(kind FaultKind) result {
	if kind == RateLimit429BeforeEffect {
		return mpRejected(http.StatusTooManyRequests, "too_many_requests", "too many requests")
	}
	return mpRejected(http.StatusInternalServerError, "internal_error", "internal error")
}
