// Command webhooks receives the payments service's webhooks: it verifies
// each delivery's signature and applies each payment's changes in order.
//
//	WEBHOOK_SECRET=whsec_… go run ./examples/webhooks
package main

import (
	"encoding/json"
	"io"
	"log"
	"net/http"
	"os"
	"sync"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// event is the part of a delivery this receiver reads.
type event struct {
	ID      string `json:"id"`
	Type    string `json:"type"`
	Payment struct {
		ID      string `json:"id"`
		Status  string `json:"status"`
		Version int64  `json:"version"`
	} `json:"payment"`
}

// receiver applies each payment's events once and in order: it keeps the
// highest version applied per payment and drops anything older. A real
// receiver keeps it in its database, in the transaction that applies the
// event.
type receiver struct {
	wh          *standardwebhooks.Webhook
	mu          sync.Mutex
	lastVersion map[string]int64
	apply       func(event)
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		http.Error(w, "unreadable body", http.StatusBadRequest)
		return
	}
	// Checks webhook-signature (either entry during a secret rotation) and
	// that webhook-timestamp is within 5 minutes.
	if err := rc.wh.Verify(body, r.Header); err != nil {
		http.Error(w, "bad signature", http.StatusBadRequest)
		return
	}
	var ev event
	if err := json.Unmarshal(body, &ev); err != nil {
		http.Error(w, "not an event", http.StatusBadRequest)
		return
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if ev.Payment.ID != "" { // webhook_endpoint.disabled carries no payment
		if ev.Payment.Version <= rc.lastVersion[ev.Payment.ID] {
			w.WriteHeader(http.StatusNoContent) // stale or duplicate
			return
		}
		rc.lastVersion[ev.Payment.ID] = ev.Payment.Version
	}
	rc.apply(ev)
	w.WriteHeader(http.StatusNoContent) // any 2xx within 10 s is success
}

func main() {
	wh, err := standardwebhooks.NewWebhook(os.Getenv("WEBHOOK_SECRET")) // whsec_…
	if err != nil {
		log.Fatal(err)
	}
	rc := &receiver{wh: wh, lastVersion: map[string]int64{}, apply: func(ev event) {
		log.Printf("%s %s payment=%s status=%s version=%d", ev.ID, ev.Type, ev.Payment.ID, ev.Payment.Status, ev.Payment.Version)
	}}
	log.Fatal(http.ListenAndServe("127.0.0.1:8092", rc))
}
