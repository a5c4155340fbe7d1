package logging

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
)

func lines(t *testing.T, buf *bytes.Buffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("%q: %v", l, err)
		}
		out = append(out, m)
	}
	return out
}

func TestFieldsNameEveryLine(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	log := New(&buf, slog.LevelInfo)
	ctx := WithFields(context.Background(), &Fields{RequestID: "req_1"})
	SetAccount(ctx, "acct_1")
	SetKeyHash(ctx, []byte{0xab})
	same := WithPayment(ctx, "acct_1", "pay_1")
	SetAttempt(same, "att_1", "stripe")
	log.InfoContext(ctx, "first")
	// A line naming another payment keeps its own, once.
	log.InfoContext(ctx, "other", slog.String("payment_id", "pay_2"))
	// Another payment in the same unit of work gets Fields of its own.
	other := WithPayment(ctx, "acct_1", "pay_3")
	log.InfoContext(other, "third")
	log.InfoContext(ctx, "fourth")

	got := lines(t, &buf)
	want := []map[string]any{
		{"request_id": "req_1", "key_hash": "ab", "account_id": "acct_1", "payment_id": "pay_1", "attempt_id": "att_1", "provider": "stripe"},
		{"payment_id": "pay_2", "account_id": "acct_1"},
		{"request_id": "req_1", "payment_id": "pay_3", "attempt_id": nil},
		{"payment_id": "pay_1"},
	}
	for i, w := range want {
		for k, v := range w {
			if got[i][k] != v {
				t.Errorf("line %d %s = %v, want %v: %v", i, k, got[i][k], v, got[i])
			}
		}
	}
	if n := strings.Count(strings.Split(buf.String(), "\n")[1], `"payment_id"`); n != 1 {
		t.Errorf("line naming its payment has payment_id %d times", n)
	}
	if same != ctx {
		t.Error("the request's own payment made a new context")
	}
}

func TestWithPaymentWithoutFields(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	ctx := WithPayment(context.Background(), "acct_9", "pay_9")
	New(&buf, slog.LevelInfo).InfoContext(ctx, "job")
	if l := lines(t, &buf)[0]; l["payment_id"] != "pay_9" || l["account_id"] != "acct_9" || l["request_id"] != nil {
		t.Fatalf("line %v", l)
	}
}
