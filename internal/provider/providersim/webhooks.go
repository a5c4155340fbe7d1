package providersim

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strconv"
	"time"
)

// EventAPIVersion is the api_version of the events the simulator sends: the
// version stripe-go v76 is pinned to, so its webhook.ConstructEvent accepts
// them without IgnoreAPIVersionMismatch.
const EventAPIVersion = "2023-10-16"

// Event is a Stripe event the simulator made, with the exact payload it
// delivers.
type Event struct {
	ID           string    `json:"id"`
	Type         string    `json:"type"`
	IntentID     string    `json:"intent_id"`
	IntentStatus string    `json:"intent_status"`
	Created      time.Time `json:"created"`
	Payload      []byte    `json:"-"`
	mpDataID     string    // a Mercado Pago notification's data.id
	mpTopic      string    // and its type
}

// Delivery is one attempt to POST an event to a webhook endpoint.
type Delivery struct {
	EventID string    `json:"event_id"`
	Type    string    `json:"type"`
	URL     string    `json:"url"`
	Status  int       `json:"status"`          // 0 when no answer came
	Error   string    `json:"error,omitempty"` // transport error
	Time    time.Time `json:"time"`            // wall clock, as signed
}

type webhookEndpoint struct{ url, secret string }

type outgoing struct {
	ev *Event
	ep webhookEndpoint
}

// webhookState is the delivery side; guarded by Server.mu.
type webhookState struct {
	endpoints  map[string]webhookEndpoint // by secret key
	queue      []outgoing                 // to send, in order
	held       []outgoing                 // kept back by HoldWebhooks
	hold       bool
	duplicate  bool
	sending    bool
	idle       chan struct{} // closed while nothing is queued or being sent
	deliveries []Delivery
}

func (h *webhookState) init() {
	h.endpoints = map[string]webhookEndpoint{}
	h.idle = make(chan struct{})
	close(h.idle)
}

// eventJSON is an Event as Stripe serializes it.
type eventJSON struct {
	ID         string `json:"id"`
	Object     string `json:"object"`
	APIVersion string `json:"api_version"`
	Created    int64  `json:"created"`
	Data       struct {
		Object any `json:"object"` // a payment_intent, charge or dispute
	} `json:"data"`
	Livemode        bool `json:"livemode"`
	PendingWebhooks int  `json:"pending_webhooks"`
	Request         struct {
		ID             *string `json:"id"`
		IdempotencyKey *string `json:"idempotency_key"`
	} `json:"request"`
	Type string `json:"type"`
}

// emit records the event of an intent's transition, with the intent as it
// is now, and queues it for the secret key's webhook endpoint. Requires s.mu.
func (s *Server) emit(a *account, typ string, pi *intentRecord, now time.Time) {
	s.emitObject(a, typ, pi, pi.wire(), now)
}

// emitObject records and queues an event about an intent whose data.object
// is obj (the intent, its charge or a dispute). Requires s.mu.
func (s *Server) emitObject(a *account, typ string, pi *intentRecord, obj any, now time.Time) {
	ep, registered := s.hooks.endpoints[a.key]
	ej := eventJSON{ID: newID("evt_", 24), Object: "event", APIVersion: EventAPIVersion, Created: now.Unix(), Type: typ}
	ej.Data.Object = obj
	if registered {
		ej.PendingWebhooks = 1
	}
	payload, err := json.MarshalIndent(ej, "", "  ")
	if err != nil {
		panic(err) // only our own types are marshalled
	}
	ev := &Event{ID: ej.ID, Type: typ, IntentID: pi.ID, IntentStatus: pi.Status, Created: now, Payload: payload}
	a.events = append(a.events, *ev)
	if registered {
		s.enqueue(outgoing{ev, ep})
	}
}

// enqueue queues a delivery, twice under DuplicateWebhooks, and starts the
// sender. Requires s.mu.
func (s *Server) enqueue(o outgoing) {
	h := &s.hooks
	n := 1
	if h.duplicate {
		n = 2
	}
	for range n {
		if h.hold {
			h.held = append(h.held, o)
		} else {
			h.queue = append(h.queue, o)
		}
	}
	s.startSender()
}

// startSender starts the single sender goroutine if there is work. One
// sender keeps deliveries in queue order. Requires s.mu.
func (s *Server) startSender() {
	h := &s.hooks
	if h.sending || len(h.queue) == 0 {
		return
	}
	h.sending, h.idle = true, make(chan struct{})
	go s.send()
}

func (s *Server) send() {
	for {
		s.mu.Lock()
		h := &s.hooks
		if len(h.queue) == 0 {
			h.sending = false
			close(h.idle)
			s.mu.Unlock()
			return
		}
		o := h.queue[0]
		h.queue = h.queue[1:]
		s.mu.Unlock()

		d := s.deliver(o)
		s.mu.Lock()
		h.deliveries = append(h.deliveries, d)
		s.mu.Unlock()
	}
}

// deliver POSTs one event signed as Stripe signs: the wall clock (not the
// simulator's clock, which tests move by days) in t=, and v1 the
// HMAC-SHA256 of "t.payload" with the endpoint's secret. There are no
// retries; Redeliver sends an event again.
func (s *Server) deliver(o outgoing) Delivery {
	if o.ev.mpDataID != "" {
		return s.mpDeliver(o)
	}
	now := time.Now()
	d := Delivery{EventID: o.ev.ID, Type: o.ev.Type, URL: o.ep.url, Time: now}
	req, err := http.NewRequest(http.MethodPost, o.ep.url, bytes.NewReader(o.ev.Payload))
	if err != nil {
		d.Error = err.Error()
		return d
	}
	req.Header.Set("Content-Type", "application/json; charset=utf-8")
	req.Header.Set("User-Agent", "Stripe/1.0 (+https://stripe.com/docs/webhooks)")
	req.Header.Set("Stripe-Signature", SignPayload(o.ev.Payload, o.ep.secret, now))
	res, err := s.opts.WebhookClient.Do(req)
	if err != nil {
		d.Error = err.Error()
		return d
	}
	io.Copy(io.Discard, io.LimitReader(res.Body, 1<<20))
	res.Body.Close()
	d.Status = res.StatusCode
	return d
}

// SignPayload makes a Stripe-Signature header for payload signed at t.
func SignPayload(payload []byte, secret string, t time.Time) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(ts + "."))
	mac.Write(payload)
	return "t=" + ts + ",v1=" + hex.EncodeToString(mac.Sum(nil))
}

// RegisterWebhookEndpoint makes the events of a secret key's objects go to
// url, signed with secret (a whsec_… string), from now on. Registering again
// replaces the endpoint; an empty url removes it.
func (s *Server) RegisterWebhookEndpoint(secretKey, url, secret string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if url == "" {
		delete(s.hooks.endpoints, secretKey)
		return
	}
	s.hooks.endpoints[secretKey] = webhookEndpoint{url: url, secret: secret}
}

// Events returns the events of a secret key's objects in the order they
// happened.
func (s *Server) Events(secretKey string) []Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	if a := s.accounts[secretKey]; a != nil {
		return slices.Clone(a.events)
	}
	return nil
}

// WebhookDeliveries returns every delivery attempt in the order they ended.
func (s *Server) WebhookDeliveries() []Delivery {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.hooks.deliveries)
}

// WaitWebhooks waits until every queued delivery has been attempted (held
// ones excepted), or ctx ends.
func (s *Server) WaitWebhooks(ctx context.Context) error {
	s.mu.Lock()
	idle := s.hooks.idle
	s.mu.Unlock()
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// DuplicateWebhooks makes every later event be delivered twice in a row, as
// Stripe may.
func (s *Server) DuplicateWebhooks(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hooks.duplicate = on
}

// HoldWebhooks keeps later deliveries back until ReleaseWebhooks.
func (s *Server) HoldWebhooks() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hooks.hold = true
}

// ReleaseWebhooks stops holding and sends the held deliveries, in reverse
// order when asked (the newest event first), and returns how many.
func (s *Server) ReleaseWebhooks(reverse bool) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := &s.hooks
	held := h.held
	if reverse {
		slices.Reverse(held)
	}
	h.queue, h.held, h.hold = append(h.queue, held...), nil, false
	s.startSender()
	return len(held)
}

// Redeliver sends an event of any secret key again to that key's endpoint,
// as Stripe's "resend". It reports whether the event and an endpoint exist.
func (s *Server) Redeliver(eventID string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, a := range s.accounts {
		ep, ok := s.hooks.endpoints[a.key]
		if !ok {
			continue
		}
		for i := range a.events {
			if ev := &a.events[i]; ev.ID == eventID {
				s.enqueue(outgoing{ev, ep})
				return true
			}
		}
	}
	return false
}

// webhookRoutes mounts the control API of webhooks.
func (s *Server) webhookRoutes(m *http.ServeMux) {
	m.HandleFunc("POST /_sim/webhook_endpoints", func(w http.ResponseWriter, r *http.Request) {
		var in struct {
			SecretKey string `json:"secret_key"`
			URL       string `json:"url"`
			Secret    string `json:"secret"`
		}
		if !readJSON(w, r, &in) {
			return
		}
		if in.SecretKey == "" || (in.URL != "" && in.Secret == "") {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "want secret_key, url and secret"})
			return
		}
		s.RegisterWebhookEndpoint(in.SecretKey, in.URL, in.Secret)
		w.WriteHeader(http.StatusNoContent)
	})
	m.HandleFunc("GET /_sim/events", func(w http.ResponseWriter, r *http.Request) {
		evs := s.Events(r.URL.Query().Get("secret_key"))
		out := make([]json.RawMessage, len(evs))
		for i, ev := range evs {
			out[i] = ev.Payload
		}
		writeJSON(w, http.StatusOK, out)
	})
	m.HandleFunc("POST /_sim/events/{id}/redeliver", func(w http.ResponseWriter, r *http.Request) {
		if !s.Redeliver(r.PathValue("id")) {
			writeJSON(w, http.StatusNotFound, map[string]string{"error": "no such event, or no endpoint for its secret key"})
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	m.HandleFunc("GET /_sim/webhooks/deliveries", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, s.WebhookDeliveries())
	})
	m.HandleFunc("POST /_sim/webhooks/duplicate", func(w http.ResponseWriter, r *http.Request) {
		var in struct {
			On bool `json:"on"`
		}
		if !readJSON(w, r, &in) {
			return
		}
		s.DuplicateWebhooks(in.On)
		w.WriteHeader(http.StatusNoContent)
	})
	m.HandleFunc("POST /_sim/webhooks/hold", func(w http.ResponseWriter, r *http.Request) {
		s.HoldWebhooks()
		w.WriteHeader(http.StatusNoContent)
	})
	m.HandleFunc("POST /_sim/webhooks/release", func(w http.ResponseWriter, r *http.Request) {
		var in struct {
			Reverse bool `json:"reverse"`
		}
		if !readJSON(w, r, &in) {
			return
		}
		writeJSON(w, http.StatusOK, map[string]int{"released": s.ReleaseWebhooks(in.Reverse)})
	})
	m.HandleFunc("POST /_sim/webhooks/flush", func(w http.ResponseWriter, r *http.Request) {
		if err := s.WaitWebhooks(r.Context()); err != nil {
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	m.HandleFunc("POST /_sim/intents/{id}/pay", s.controlTransition(s.Pay))
	m.HandleFunc("POST /_sim/intents/{id}/fail", s.controlTransition(s.Fail))
	m.HandleFunc("POST /_sim/intents/{id}/expire", s.controlTransition(s.Expire))
	m.HandleFunc("POST /_sim/intents/{id}/processing", s.controlTransition(s.MarkProcessing))
}
