package main

import (
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// deliver posts body signed with key at the given time, as the service
// signs its deliveries, and returns the answer's status.
func deliver(t *testing.T, rc http.Handler, key, id, body string, at time.Time) int {
	t.Helper()
	wh, err := standardwebhooks.NewWebhook(key)
	if err != nil {
		t.Fatal(err)
	}
	sig, err := wh.Sign(id, at, []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body))
	r.Header.Set("webhook-id", id)
	r.Header.Set("webhook-timestamp", strconv.FormatInt(at.Unix(), 10))
	r.Header.Set("webhook-signature", sig)
	w := httptest.NewRecorder()
	rc.ServeHTTP(w, r)
	return w.Code
}

func payment(id, status string, version int) string {
	return `{"id":"evt_` + strconv.Itoa(version) + `","type":"payment.` + status + `","payment":{"id":"` + id +
		`","status":"` + status + `","version":` + strconv.Itoa(version) + `}}`
}

func TestReceiverVerifiesAndOrders(t *testing.T) {
	t.Parallel()
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	var applied []string
	rc := &receiver{wh: wh, lastVersion: map[string]int64{}, apply: func(ev event) {
		applied = append(applied, ev.Payment.Status)
	}}
	now := time.Now()
	for _, d := range []struct {
		name, key, body string
		at              time.Time
		want            int
	}{
		{"authorized", secret, payment("pay_1", "authorized", 2), now, http.StatusNoContent},
		{"a duplicate", secret, payment("pay_1", "authorized", 2), now, http.StatusNoContent},
		{"captured", secret, payment("pay_1", "captured", 3), now, http.StatusNoContent},
		{"a late, older one", secret, payment("pay_1", "processing", 1), now, http.StatusNoContent},
		{"another secret", "whsec_" + strings.Repeat("A", 32), payment("pay_1", "refunded", 4), now, http.StatusBadRequest},
		{"ten minutes old", secret, payment("pay_1", "refunded", 4), now.Add(-10 * time.Minute), http.StatusBadRequest},
		{"an endpoint event", secret, `{"id":"evt_9","type":"webhook_endpoint.disabled","webhook_endpoint":{}}`, now, http.StatusNoContent},
	} {
		if got := deliver(t, rc, d.key, "evt_x", d.body, d.at); got != d.want {
			t.Errorf("%s: status %d, want %d", d.name, got, d.want)
		}
	}
	if got := strings.Join(applied, ","); got != "authorized,captured," {
		t.Fatalf("applied %q, want authorized, captured and the endpoint event once each", got)
	}
}

// docs/integrating.md shows this program whole: the page and the file
// cannot drift apart.
func TestIntegratingDocShowsThisProgram(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../../docs/integrating.md")
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile("main.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range regexp.MustCompile("(?s)```go\n(.*?)```").FindAllSubmatch(doc, -1) {
		if string(m[1]) == string(src) {
			return
		}
	}
	t.Fatal("docs/integrating.md has no go block equal to examples/webhooks/main.go")
}
