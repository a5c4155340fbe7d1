package stripe

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/acmepay/payments/internal/logging"
	"github.com/acmepay/payments/internal/provider"
)

// TestRetryLinesAreFormattedAndCorrelated: stripe-go's retry line is
// written formatted, with the ids of the call's context, and no error
// argument or secret in it.
func TestRetryLinesAreFormattedAndCorrelated(t *testing.T) {
	t.Parallel()
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		if n.Add(1) == 1 {
			w.Header().Set("Stripe-Should-Retry", "true")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = io.WriteString(w, `{"error":{"type":"api_error","message":"busy pm_card_visa"}}`)
			return
		}
		_, _ = io.WriteString(w, intentJSON)
	}))
	t.Cleanup(srv.Close)
	var buf bytes.Buffer
	p := New(Config{APIBase: srv.URL, MaxNetworkRetries: 1, Logger: logging.New(&buf, slog.LevelDebug)})
	ctx := logging.WithFields(context.Background(), &logging.Fields{RequestID: "req-client-1"})
	ctx = logging.WithPayment(ctx, "acct_1", "pay_1")
	logging.SetAttempt(ctx, "att_1", "stripe")
	if res := p.Authorize(ctx, creds, authReq()); res.Answer != provider.AnswerObject {
		t.Fatalf("answer %q, want object", res.Answer)
	}
	var retry string
	for _, line := range strings.Split(buf.String(), "\n") {
		if strings.Contains(line, "Initiating retry") {
			retry = line
		}
	}
	if retry == "" {
		t.Fatalf("no retry line in:\n%s", buf.String())
	}
	for _, want := range []string{`Initiating retry 1 for request POST `, `/v1/payment_intents after sleeping `,
		`"request_id":"req-client-1"`, `"account_id":"acct_1"`, `"payment_id":"pay_1"`, `"attempt_id":"att_1"`, `"provider":"stripe"`} {
		if !strings.Contains(retry, want) {
			t.Errorf("retry line lacks %s:\n%s", want, retry)
		}
	}
	if strings.Contains(retry, "%v") {
		t.Errorf("retry line is an unformatted template:\n%s", retry)
	}
	for _, secret := range []string{creds.SecretKey, "pm_card_visa", "pedido-842:autorizar-v1"} {
		if strings.Contains(buf.String(), secret) {
			t.Errorf("logs carry %q:\n%s", secret, buf.String())
		}
	}
}
