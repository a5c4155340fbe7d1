package chaos

import (
	"net/http"
	"sort"
	"strconv"
	"strings"

	"github.com/acmepay/payments/internal/provider/providersim"
)

// ledgerTally is the provider's ledger held to its two promises.
type ledgerTally struct {
	Keys       int // provider keys of mutating requests in the log
	Attempts   int // payment attempts with an object at a provider
	TwoEffects int // keys that acted more than once (not as a replay)
	// SecondCharges are payments or orders that moved money on two
	// attempts, or on a later attempt after one not proven to have done
	// nothing.
	SecondCharges int
}

func (t ledgerTally) violations() int { return t.TwoEffects + t.SecondCharges }

// mutating reports whether a logged request may change something at the
// provider (a lookup never does).
func mutating(q providersim.Request) bool {
	return q.IdempotencyKey != "" && (q.Method == http.MethodPost || q.Method == http.MethodPut)
}

// checkLedger holds the provider's request log and objects to the
// ledger's promises: a key (an attempt of one operation) acts at most once
// (a re-send inside its window is a replay of that one effect), and a
// payment moves money on one attempt only, every earlier attempt having
// failed in a way that proves it did nothing.
func checkLedger(reqs []providersim.Request, recs []record, st *localState, sample func(string, ...any)) ledgerTally {
	var t ledgerTally
	acted := map[string]int{}
	for _, q := range reqs {
		if !mutating(q) {
			continue
		}
		k := q.Op + " " + q.IdempotencyKey
		if _, ok := acted[k]; !ok {
			acted[k] = 0
		}
		if hadEffect(q) && !q.Replayed {
			acted[k]++
		}
	}
	t.Keys = len(acted)
	keys := make([]string, 0, len(acted))
	for k, n := range acted {
		if n > 1 {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		t.TwoEffects++
		op, _, _ := strings.Cut(k, " ")
		sample("ledger: a %s key acted %d times at the provider (a re-send that was not a replay)", op, acted[k])
	}
	t.Attempts, t.SecondCharges = checkAttempts(recs, st, sample)
	return t
}

// noEffectCodes are the failures that prove an attempt did nothing.
var noEffectCodes = map[string]bool{codeAuthentication: true, codeUnreachable: true, codeNoEffect: true, codeNotFound: true}

// checkAttempts counts, per order, the attempts whose object at a
// provider moved money; more than one is a second charge. An attempt that
// moved money after an earlier attempt of the same payment is one too
// unless the earlier one failed with a code that proves it did nothing.
func checkAttempts(recs []record, st *localState, sample func(string, ...any)) (attempts, second int) {
	charged := map[string]map[string]bool{} // order -> payment:attempt
	seen := map[string]bool{}
	for _, in := range recs {
		pa := in.Metadata["payment_id"] + ":" + in.Metadata["attempt"]
		seen[pa] = true
		if !authorizedAtProvider(in.Intent) {
			continue
		}
		o := in.Metadata["order_id"]
		if charged[o] == nil {
			charged[o] = map[string]bool{}
		}
		charged[o][pa] = true
	}
	orders := make([]string, 0, len(charged))
	for o := range charged {
		orders = append(orders, o)
	}
	sort.Strings(orders)
	for _, o := range orders {
		if len(charged[o]) > 1 {
			second++
			sample("ledger: order %s moved money on %d attempts", o, len(charged[o]))
			continue
		}
		for pa := range charged[o] {
			pid, n, _ := strings.Cut(pa, ":")
			if bad := unprovenBefore(st, pid, n); bad != "" {
				second++
				sample("ledger: payment %s moved money on attempt %s after attempt %s, which is not proven to have done nothing", pid, n, bad)
			}
		}
	}
	return len(seen), second
}

// unprovenBefore is an authorization attempt of the payment numbered
// below n that did not fail with a no-effect code; "" when there is none.
func unprovenBefore(st *localState, paymentID, n string) string {
	if st == nil {
		return ""
	}
	num, err := strconv.Atoi(n)
	if err != nil {
		return ""
	}
	for _, a := range st.Attempts {
		if a.PaymentID != paymentID || a.Operation != "autorizar" || a.Number >= num {
			continue
		}
		// A decline moved no money either.
		if a.Status != "declined" && (a.Status != "failed" || !noEffectCodes[a.FailureCode]) {
			return strconv.Itoa(a.Number)
		}
	}
	return ""
}
