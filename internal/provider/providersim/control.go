package providersim

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// faultJSON is a Fault on the control API; delay is a Go duration string.
type faultJSON struct {
	Op             string    `json:"op"`
	IdempotencyKey string    `json:"idempotency_key"`
	Kind           FaultKind `json:"kind"`
	Delay          string    `json:"delay"`
	Times          int       `json:"times"`
}

type randomFaultsJSON struct {
	Drop     float64 `json:"drop"`
	Error500 float64 `json:"error_500"`
	Delay    float64 `json:"delay"`
	DelayFor string  `json:"delay_for"`
	Seed     int64   `json:"seed"`
}

// controlRoutes mounts the unauthenticated control API used when the
// simulator runs as a separate process:
//
//	GET    /_sim/stats                totals plus "by_key"
//	GET    /_sim/requests             request log (each with the traceparent it carried)
//	GET    /_sim/traceparent?idempotency_key=  {"traceparent"} of the last request with that key
//	GET    /_sim/intents?secret_key=  intents of one key
//	POST   /_sim/faults               {"op","idempotency_key","kind","delay","times"} -> {"id"}
//	GET    /_sim/faults/{id}          {"id","hits","reached"}
//	POST   /_sim/faults/{id}/release
//	DELETE /_sim/faults/{id}
//	DELETE /_sim/faults               release and remove all
//	POST   /_sim/forget-keys
//	POST   /_sim/random-faults        {"drop","error_500","delay","delay_for","seed"}
//	POST   /_sim/secrets/revoke       {"secret_key"}
//	POST   /_sim/secrets/forbid       {"secret_key","ops":[...]} (no ops: all)
//	POST   /_sim/secrets/restore      {"secret_key"}
//	GET    /_sim/clock                {"now","offset"}
//	POST   /_sim/clock/advance        {"by":"25h"} -> {"now","offset"} (expires due Pix and Boleto)
//	POST   /_sim/clock/reset          -> {"now","offset"}: undo every advance
//	POST   /_sim/intents/{id}/pay     approve 3-D Secure, pay a Pix or Boleto -> intent; 409 if not waiting
//	POST   /_sim/intents/{id}/fail    fail 3-D Secure (or a processing Boleto)
//	POST   /_sim/intents/{id}/expire  expire a waiting Pix or Boleto now
//	POST   /_sim/intents/{id}/processing  a waiting Boleto (or Pix) to processing
//	POST   /_sim/intents/{id}/dashboard-refund {"amount"}: a refund made outside the API (charge.refunded)
//	POST   /_sim/intents/{id}/dispute     {"amount","reason"} -> dispute (charge.dispute.created)
//	POST   /_sim/disputes/{id}/update     {"status"} (charge.dispute.updated)
//	POST   /_sim/disputes/{id}/close      {"status":"won"|"lost"} (charge.dispute.closed)
//	POST   /_sim/intents/{id}/pay-behind  charge a canceled or declined intent in full
//	POST   /_sim/intents/{id}/amount-received {"amount"}: show another captured amount
//	POST   /_sim/intents/{id}/forget      drop the intent with its refunds and disputes (not found after)
//	POST   /_sim/webhook_endpoints    {"secret_key","url","secret"} (url "": remove)
//	GET    /_sim/events?secret_key=   the key's events, as delivered
//	POST   /_sim/events/{id}/redeliver
//	GET    /_sim/webhooks/deliveries  every delivery attempt and its answer
//	POST   /_sim/webhooks/duplicate   {"on":true} deliver each later event twice
//	POST   /_sim/webhooks/hold        keep later deliveries back
//	POST   /_sim/webhooks/release     {"reverse":true} -> {"released"}
//	POST   /_sim/webhooks/flush       returns once queued deliveries were attempted
//
// and Mercado Pago's (mpControlRoutes, /_sim/mp/…), and the pages a
// customer's browser visits: GET/POST /_sim/3ds/{id},
// GET /_sim/pix/{id} (and qr.png, qr.svg), GET /_sim/boleto/{id} (and
// voucher.pdf).
func (s *Server) controlRoutes(m *http.ServeMux) {
	s.webhookRoutes(m)
	s.hostedRoutes(m)
	s.disputeRoutes(m)
	s.recordRoutes(m)
	s.faultRoutes(m)
	m.HandleFunc("POST /_sim/outages", s.outageControl)
	m.HandleFunc("POST /_sim/secrets/revoke", s.secretControl(false, func(key string, _ ...string) { s.RevokeSecret(key) }))
	m.HandleFunc("POST /_sim/secrets/forbid", s.secretControl(true, s.ForbidSecret))
	m.HandleFunc("POST /_sim/secrets/restore", s.secretControl(false, func(key string, _ ...string) { s.RestoreSecret(key) }))
	m.HandleFunc("GET /_sim/clock", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, s.clockJSON())
	})
	m.HandleFunc("POST /_sim/clock/advance", s.advanceClock)
	m.HandleFunc("POST /_sim/clock/reset", func(w http.ResponseWriter, r *http.Request) {
		s.ResetClock()
		writeJSON(w, http.StatusOK, s.clockJSON())
	})
	m.HandleFunc("/_sim/", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "unknown control endpoint"})
	})
}

// recordRoutes mounts the reads of what the simulator saw and holds.
func (s *Server) recordRoutes(m *http.ServeMux) {
	m.HandleFunc("GET /_sim/stats", func(w http.ResponseWriter, r *http.Request) {
		total, byKey := s.allStats()
		writeJSON(w, http.StatusOK, struct {
			Stats
			ByKey map[string]Stats `json:"by_key"`
		}{total, byKey})
	})
	m.HandleFunc("GET /_sim/requests", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, s.Requests())
	})
	m.HandleFunc("GET /_sim/traceparent", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"traceparent": s.LastTraceparent(r.URL.Query().Get("idempotency_key"))})
	})
	m.HandleFunc("GET /_sim/intents", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, s.Intents(r.URL.Query().Get("secret_key")))
	})
}

// faultRoutes mounts the injected faults, the random ones and the
// forgetting of idempotency keys.
func (s *Server) faultRoutes(m *http.ServeMux) {
	m.HandleFunc("POST /_sim/faults", s.injectFault)
	m.HandleFunc("GET /_sim/faults/{id}", s.withFault(func(w http.ResponseWriter, f *Injected) {
		reached := false
		select {
		case <-f.Reached():
			reached = true
		default:
		}
		writeJSON(w, http.StatusOK, map[string]any{"id": f.ID(), "hits": f.Hits(), "reached": reached})
	}))
	m.HandleFunc("POST /_sim/faults/{id}/release", s.withFault(func(w http.ResponseWriter, f *Injected) {
		f.Release()
		w.WriteHeader(http.StatusNoContent)
	}))
	m.HandleFunc("DELETE /_sim/faults/{id}", s.withFault(func(w http.ResponseWriter, f *Injected) {
		f.Remove()
		w.WriteHeader(http.StatusNoContent)
	}))
	m.HandleFunc("DELETE /_sim/faults", func(w http.ResponseWriter, r *http.Request) {
		s.ClearFaults()
		w.WriteHeader(http.StatusNoContent)
	})
	m.HandleFunc("POST /_sim/forget-keys", func(w http.ResponseWriter, r *http.Request) {
		s.ForgetIdempotencyKeys()
		w.WriteHeader(http.StatusNoContent)
	})
	m.HandleFunc("POST /_sim/random-faults", s.setRandomFaults)
}

// injectFault serves POST /_sim/faults.
func (s *Server) injectFault(w http.ResponseWriter, r *http.Request) {
	var in faultJSON
	if !readJSON(w, r, &in) {
		return
	}
	f := Fault{Op: in.Op, IdempotencyKey: in.IdempotencyKey, Kind: in.Kind, Times: in.Times}
	var err error
	if _, known := faultBefore[in.Kind]; !known {
		err = fmt.Errorf("unknown kind %q", in.Kind)
	} else if in.Delay != "" {
		f.Delay, err = time.ParseDuration(in.Delay)
	}
	if err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, map[string]int{"id": s.Inject(f).ID()})
}

// setRandomFaults serves POST /_sim/random-faults.
func (s *Server) setRandomFaults(w http.ResponseWriter, r *http.Request) {
	var in randomFaultsJSON
	if !readJSON(w, r, &in) {
		return
	}
	rf := RandomFaults{Drop: in.Drop, Error500: in.Error500, Delay: in.Delay, Seed: in.Seed}
	var err error
	if in.DelayFor != "" {
		rf.DelayFor, err = time.ParseDuration(in.DelayFor)
	}
	if err == nil && (min(rf.Drop, rf.Error500, rf.Delay) < 0 || rf.Drop+rf.Error500+rf.Delay > 1) {
		err = fmt.Errorf("probabilities must be non-negative and sum to at most 1")
	}
	if err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
		return
	}
	s.SetRandomFaults(rf)
	w.WriteHeader(http.StatusNoContent)
}

// advanceClock serves POST /_sim/clock/advance.
func (s *Server) advanceClock(w http.ResponseWriter, r *http.Request) {
	var in struct {
		By string `json:"by"`
	}
	if !readJSON(w, r, &in) {
		return
	}
	d, err := time.ParseDuration(in.By)
	if err != nil || d < 0 {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": fmt.Sprintf("by: want a non-negative duration such as 25h, got %q", in.By)})
		return
	}
	s.Advance(d)
	writeJSON(w, http.StatusOK, s.clockJSON())
}

// secretControl reads {"secret_key","ops"}, checks it and applies it.
func (s *Server) secretControl(takesOps bool, apply func(secretKey string, ops ...string)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var in struct {
			SecretKey string   `json:"secret_key"`
			Ops       []string `json:"ops"`
		}
		if !readJSON(w, r, &in) {
			return
		}
		var err error
		switch {
		case !strings.HasPrefix(in.SecretKey, "sk_") && !isMPToken(in.SecretKey):
			err = fmt.Errorf("secret_key: want a key starting with sk_ (or a Mercado Pago access token), got %q", in.SecretKey)
		case len(in.Ops) > 0 && !takesOps:
			err = fmt.Errorf("ops: only forbid takes ops")
		}
		for _, op := range in.Ops {
			if _, known := permissions[op]; !known && err == nil {
				err = fmt.Errorf("ops: unknown operation %q", op)
			}
		}
		if err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
			return
		}
		apply(in.SecretKey, in.Ops...)
		w.WriteHeader(http.StatusNoContent)
	}
}

type clockJSON struct {
	Now    time.Time `json:"now"`
	Offset string    `json:"offset"` // total of all advances
}

func (s *Server) clockJSON() clockJSON {
	s.mu.Lock()
	defer s.mu.Unlock()
	return clockJSON{Now: s.now(), Offset: s.offset.String()}
}

// withFault resolves the {id} of a control route.
func (s *Server) withFault(h func(http.ResponseWriter, *Injected)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id, _ := strconv.Atoi(r.PathValue("id"))
		s.mu.Lock()
		f := s.byID[id]
		s.mu.Unlock()
		if f == nil {
			writeJSON(w, http.StatusNotFound, map[string]string{"error": "no such fault"})
			return
		}
		h(w, f)
	}
}

func readJSON(w http.ResponseWriter, r *http.Request, v any) bool {
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid JSON: " + err.Error()})
		return false
	}
	return true
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}
