package chaos

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"math"
	"net/http"
	"sort"
	"time"

	"github.com/anishathalye/porcupine"
)

// linearizeTimeout bounds porcupine on one partition; a partition it does
// not finish is counted apart, not as a pass.
const linearizeTimeout = 10 * time.Second

// answerKind is what an answer means for a key's history.
type answerKind int

const (
	kindTransient answerKind = iota // 409 in use, 409 held by a release, 429, 5xx: nothing stored
	kindUnknown                     // 202: the outcome is not known yet
	kindFinal                       // 2xx other than 202, or a 4xx the service stores
)

// kindOf classifies an answer that came.
func kindOf(c call) answerKind {
	switch {
	case c.Status == http.StatusAccepted:
		return kindUnknown
	case c.Status >= 500 || c.Status == http.StatusTooManyRequests:
		return kindTransient
	case c.Status == http.StatusConflict:
		switch problemCode(c.Body) {
		case "idempotency_key_in_use", "order_has_active_payment":
			return kindTransient
		}
	}
	return kindFinal
}

// keyOutput is one answer of a key: its kind and, for a final one, a
// digest of its status code and body.
type keyOutput struct {
	Kind   answerKind
	Digest string
}

// keyModel: a key has no final answer until its first one; from then on
// every answer is that one, byte for byte (CONTRACT §4: the stored status
// code and body). A 202 may come only before it; transient refusals at
// any time. The run's IDEMPOTENCY_RESPONSE_TTL outlives it, so no stored
// answer is purged to a tombstone and no replay may differ.
var keyModel = porcupine.Model{
	Init: func() interface{} { return "" },
	Step: func(state, _, output interface{}) (bool, interface{}) {
		final, out := state.(string), output.(keyOutput)
		switch out.Kind {
		case kindTransient:
			return true, final
		case kindUnknown:
			return final == "", final
		}
		if final == "" {
			return true, out.Digest
		}
		return out.Digest == final, final
	},
}

// digest is the status code and body of an answer.
func digest(c call) string {
	h := sha256.New()
	h.Write([]byte{byte(c.Status >> 8), byte(c.Status)})
	h.Write(c.Body)
	return hex.EncodeToString(h.Sum(nil)[:12])
}

// operation turns a call into porcupine's terms; an answer that never
// came returns at infinity (it may have acted at any time after its call).
func operation(c call, client int, output interface{}, epoch time.Time) porcupine.Operation {
	ret := int64(math.MaxInt64)
	if !c.Lost {
		ret = c.Return.Sub(epoch).Nanoseconds()
	}
	return porcupine.Operation{ClientId: client, Call: c.Call.Sub(epoch).Nanoseconds(), Output: output, Return: ret}
}

// linearTally is one property checked by porcupine over partitions.
type linearTally struct {
	Histories  int // partitions checked
	Operations int
	Illegal    int // partitions not linearizable
	Unknown    int // partitions porcupine did not finish in time
	Lost       int // answers that never came
	Settled    int // of those, kept because their effect is visible
}

func (t linearTally) verdict() string {
	switch {
	case t.Illegal > 0:
		return "no"
	case t.Unknown > 0:
		return "unknown"
	}
	return "yes"
}

// checkKeys checks each key's history against keyModel. An answer that
// never came can only have stored the answer the key's later calls show,
// so it constrains nothing and is left out (it is counted).
func checkKeys(calls []call, sample func(string, ...any)) linearTally {
	byKey := map[string][]call{}
	for _, c := range calls {
		if c.Key != "" {
			byKey[c.Key] = append(byKey[c.Key], c)
		}
	}
	keys := make([]string, 0, len(byKey))
	for k := range byKey {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var t linearTally
	for _, k := range keys {
		cs := byKey[k]
		epoch := cs[0].Call
		ops := make([]porcupine.Operation, 0, len(cs))
		for i, c := range cs {
			if c.Lost {
				t.Lost++
				continue
			}
			out := keyOutput{Kind: kindOf(c)}
			if out.Kind == kindFinal {
				out.Digest = digest(c)
			}
			ops = append(ops, operation(c, i, out, epoch))
		}
		t.Histories++
		t.Operations += len(ops)
		switch porcupine.CheckOperationsTimeout(keyModel, ops, linearizeTimeout) {
		case porcupine.Illegal:
			t.Illegal++
			sample("key history: %s %s of order %s got two different final answers, or a 202 after its final one (%d answers)",
				cs[0].Op, cs[0].PaymentID, cs[0].Order, len(ops))
		case porcupine.Unknown:
			t.Unknown++
		}
	}
	return t
}

// forward is the contract's transitions of a payment's status (§3, §12):
// declined and failed start a new attempt only by an audited ops replay.
var forward = map[string][]string{
	"processing":      {"unknown", "requires_action", "pending", "authorized", "captured", "declined", "failed", "canceled"},
	"unknown":         {"requires_action", "pending", "authorized", "captured", "declined", "failed", "canceled"},
	"requires_action": {"pending", "authorized", "captured", "declined", "canceled"},
	"pending":         {"authorized", "captured", "failed", "canceled"},
	"authorized":      {"captured", "canceled"},
	"declined":        {"processing"},
	"failed":          {"processing"},
}

// reaches reports whether a payment may be seen in status to after from:
// the same, or through any chain of transitions (a reader may miss the
// states between).
func reaches(from, to string) bool {
	if from == "" || from == to {
		return true
	}
	seen := map[string]bool{from: true}
	next := []string{from}
	for len(next) > 0 {
		s := next[0]
		next = next[1:]
		for _, t := range forward[s] {
			if t == to {
				return true
			}
			if !seen[t] {
				seen[t] = true
				next = append(next, t)
			}
		}
	}
	return false
}

// paymentModel: a payment's status only moves forward. Its state is the
// status last shown; "" before any.
var paymentModel = porcupine.Model{
	Init: func() interface{} { return "" },
	Step: func(state, _, output interface{}) (bool, interface{}) {
		from, to := state.(string), output.(string)
		return reaches(from, to), to
	},
}

// effectOf is the status a capture or cancel leaves a payment in.
var effectOf = map[string]string{"capture": "captured", "cancel": "canceled"}

// paymentOps turns the calls into each payment's operations: every answer
// that shows the payment as it is (not a replay, which shows it as it was),
// and, as etcd's robustness tests patch a write whose answer was lost, a
// capture or cancel whose key never got an answer, kept (returning at
// infinity) only when the final state shows its effect. A create whose
// answers were all lost constrains nothing: the first status of a
// payment is free.
func paymentOps(calls []call, finals map[string]string, t *linearTally) map[string][]porcupine.Operation {
	answered := map[string]bool{}
	shown := map[string][]call{} // payment -> answers that show it as it is
	for _, c := range calls {
		if c.Key != "" && !c.Lost {
			answered[c.Key] = true
		}
		if !c.Lost && !c.Replayed && c.Op != "refund" && c.PaymentID != "" {
			shown[c.PaymentID] = append(shown[c.PaymentID], c)
		}
	}
	epoch := time.Time{}
	if len(calls) > 0 {
		epoch = calls[0].Call
	}
	byPayment := map[string][]porcupine.Operation{}
	for i, c := range calls {
		if c.Op == "refund" || c.PaymentID == "" {
			continue
		}
		switch {
		case c.Lost:
			t.Lost++
			want := effectOf[c.Op]
			if want == "" || answered[c.Key] || finals[c.PaymentID] != want {
				continue
			}
			t.Settled++
			op := operation(c, i, want, epoch)
			if seen, ok := firstSeen(shown[c.PaymentID], want, c.Call); ok {
				op.Return = seen.Sub(epoch).Nanoseconds()
			}
			byPayment[c.PaymentID] = append(byPayment[c.PaymentID], op)
		case !c.Replayed && (c.Status == http.StatusOK || c.Status == http.StatusCreated || c.Status == http.StatusAccepted):
			p := decodePayment(c.Body)
			if p == nil || p.ID != c.PaymentID && c.Op != "create" {
				continue
			}
			byPayment[p.ID] = append(byPayment[p.ID], operation(c, i, p.Status, epoch))
		}
	}
	return byPayment
}

// firstSeen is when one of a payment's answers, after a lost call at
// from, first showed it in status: the lost call's effect happened by
// then, as etcd bounds a lost write by the first watch event showing it.
func firstSeen(shown []call, status string, from time.Time) (time.Time, bool) {
	var at time.Time
	for _, c := range shown {
		if !c.Return.After(from) {
			continue
		}
		if p := decodePayment(c.Body); p != nil && p.Status == status && (at.IsZero() || c.Return.Before(at)) {
			at = c.Return
		}
	}
	return at, !at.IsZero()
}

// checkPayments checks each payment's history against paymentModel, the
// final state read from the database closing it.
func checkPayments(calls []call, finals map[string]string, sample func(string, ...any)) linearTally {
	var t linearTally
	byPayment := paymentOps(calls, finals, &t)
	ids := make([]string, 0, len(byPayment))
	for id := range byPayment {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		ops := byPayment[id]
		if final, ok := finals[id]; ok {
			end := int64(0)
			for _, op := range ops {
				end = max(end, op.Call)
				if op.Return != math.MaxInt64 {
					end = max(end, op.Return)
				}
			}
			ops = append(ops, porcupine.Operation{ClientId: len(calls), Call: end + 1, Output: final, Return: end + 2})
		}
		t.Histories++
		t.Operations += len(ops)
		switch porcupine.CheckOperationsTimeout(paymentModel, ops, linearizeTimeout) {
		case porcupine.Illegal:
			t.Illegal++
			sample("payment history: payment %s was shown a status it cannot reach from one shown before it (final %q, %d operations)", id, finals[id], len(ops))
		case porcupine.Unknown:
			t.Unknown++
		}
	}
	return t
}

// problemCode is the code of a problem+json body.
func problemCode(b []byte) string {
	var p struct {
		Code string `json:"code"`
	}
	_ = json.Unmarshal(b, &p)
	return p.Code
}
