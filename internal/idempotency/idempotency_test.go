package idempotency

import (
	"strings"
	"testing"
	"time"
)

func TestParseKey(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		in, want string
		err      error
	}{
		{"abc", "abc", nil},
		{`"abc"`, "abc", nil},
		{"8e03978e-40d5-43e8-bc93-6894a57f9324", "8e03978e-40d5-43e8-bc93-6894a57f9324", nil},
		{strings.Repeat("k", 255), strings.Repeat("k", 255), nil},
		{"", "", ErrKeyMissing},
		{`""`, "", ErrKeyMissing},
		{strings.Repeat("k", 256), "", ErrKeyInvalid},
		{"a b", "", ErrKeyInvalid},
		{"tab\tkey", "", ErrKeyInvalid},
		{"ção", "", ErrKeyInvalid},
		{`"a"b"`, "", ErrKeyInvalid},
	} {
		got, err := ParseKey(c.in)
		if got != c.want || err != c.err {
			t.Errorf("ParseKey(%q) = %q, %v; want %q, %v", c.in, got, err, c.want, c.err)
		}
	}
}

func TestDecide(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	later, earlier := now.Add(time.Second), now.Add(-time.Second)
	fp := []byte("fp")
	for _, c := range []struct {
		name string
		rec  Record
		fp   []byte
		want Decision
	}{
		{"completed", Record{Fingerprint: fp, State: StateCompleted}, fp, Replay},
		{"purged", Record{Fingerprint: fp, State: StateCompleted, Purged: true}, fp, ReplayCurrent},
		{"in flight", Record{Fingerprint: fp, State: StateInProgress, LeaseExpiresAt: &later}, fp, InUse},
		{"lease expired", Record{Fingerprint: fp, State: StateInProgress, LeaseExpiresAt: &earlier}, fp, Recover},
		{"unknown", Record{Fingerprint: fp, State: StateUnknown}, fp, Recover},
		{"reused while in flight", Record{Fingerprint: fp, State: StateInProgress, LeaseExpiresAt: &later}, []byte("other"), Reused},
		{"reused after completion", Record{Fingerprint: fp, State: StateCompleted}, []byte("other"), Reused},
		{"reused after purge", Record{Fingerprint: fp, State: StateCompleted, Purged: true}, []byte("other"), Reused},
	} {
		if got := Decide(c.rec, c.fp, now); got != c.want {
			t.Errorf("%s: Decide = %d, want %d", c.name, got, c.want)
		}
	}
}

func TestFingerprintScopesByOperation(t *testing.T) {
	t.Parallel()
	a, _ := Fingerprint(OpPaymentsCapture, map[string]int{"amount": 1})
	b, _ := Fingerprint(OpRefundsCreate, map[string]int{"amount": 1})
	if string(a) == string(b) {
		t.Fatal("the same body of two operations has one fingerprint")
	}
}

func TestDecideBody(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	later := now.Add(time.Second)
	body := []byte(`{"amount":1}`)
	h := BodyHash(body)
	for _, c := range []struct {
		name   string
		rec    Record
		hash   []byte
		want   Decision
		wantOK bool
	}{
		{"same bytes, completed", Record{Fingerprint: []byte("fp"), BodyHash: h, State: StateCompleted}, h, Replay, true},
		{"same bytes, in flight", Record{Fingerprint: []byte("fp"), BodyHash: h, State: StateInProgress, LeaseExpiresAt: &later}, h, InUse, true},
		{"same bytes, unknown", Record{Fingerprint: []byte("fp"), BodyHash: h, State: StateUnknown}, h, Recover, true},
		{"other bytes", Record{Fingerprint: []byte("fp"), BodyHash: h, State: StateCompleted}, BodyHash([]byte(`{"amount": 1}`)), 0, false},
		{"stored without a hash", Record{Fingerprint: []byte("fp"), State: StateCompleted}, h, 0, false},
	} {
		got, ok := DecideBody(c.rec, c.hash, now)
		if got != c.want || ok != c.wantOK {
			t.Errorf("%s: DecideBody = %d, %v; want %d, %v", c.name, got, ok, c.want, c.wantOK)
		}
	}
}
