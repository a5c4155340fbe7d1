package chaos

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/acmepay/payments/internal/provider/providersim"
)

// Key expiry. The provider forgets an idempotency key after its key
// retention; the service re-sends a key only inside its re-send window,
// attempt.created_at + PROVIDER_KEY_RETENTION − margin, and past it only
// looks objects up (CONTRACT §5). With Stripe's 24 h no window would close
// within a run, and with a few minutes attempts are settled long before
// theirs closes. So the replicas and the simulator share a retention just
// longer than the margin: each window stays open a few seconds, about as
// long as an unlucky attempt takes to resolve, so recoveries happen on both
// sides of it, and in a 3-minute run the simulator really forgets the keys
// of its first 100 s.
const (
	// libraryRetries is stripe-go's MaxNetworkRetries in cmd/payments.
	libraryRetries = 2
	// mpLibraryRetries: the Mercado Pago adapter never retries a call.
	mpLibraryRetries = 0
	retryBackoff     = 5 * time.Second // the longest pause between two of its sends
	clockSkew        = time.Minute
	// resendTolerance covers the time between the service's last look at
	// its window and the simulator's logging the request's arrival.
	resendTolerance = time.Second
)

// resendMargin is the service's margin (CONTRACT §5; resendMargin in
// internal/payment): every send of one call at the timeout, each possibly
// re-sent once by net/http, the library's backoff and clock skew. Were the
// service's margin smaller, its window would be longer than the run
// assumes and its re-sends would count as late.
func resendMargin(timeout time.Duration, retries int) time.Duration {
	return timeout*time.Duration(2*(1+retries)) + time.Duration(retries)*retryBackoff + clockSkew
}

// keySettings is the provider key retention the replicas and the simulator
// share, and the re-send window it leaves the service. A zero Retention
// keeps no key: each is sent once and never again.
type keySettings struct {
	Retention, Margin, Window time.Duration
}

func keysFor(timeout, window time.Duration, retries int) keySettings {
	m := resendMargin(timeout, retries)
	return keySettings{Retention: m + window, Margin: m, Window: window}
}

func (k keySettings) String() string {
	if k.Retention == 0 {
		return "0s (keys sent once, never re-sent)"
	}
	return fmt.Sprintf("%s (margin %s, re-send window %s)", k.Retention, k.Margin, k.Window)
}

// keyed groups the provider's log of mutating requests by Idempotency-Key,
// each group in order of arrival.
func keyed(reqs []providersim.Request) map[string][]providersim.Request {
	out := map[string][]providersim.Request{}
	for _, q := range reqs {
		// Mercado Pago captures and cancels are PUTs.
		if q.Method != http.MethodGet && q.IdempotencyKey != "" {
			out[q.IdempotencyKey] = append(out[q.IdempotencyKey], q)
		}
	}
	for _, qs := range out {
		// The log is in order of answers; a delayed answer comes late.
		sort.SliceStable(qs, func(i, j int) bool { return qs[i].Time.Before(qs[j].Time) })
	}
	return out
}

// checkResends reads the providers' log: no provider key may reach its
// provider after its re-send window. The window starts at the attempt's
// creation, before its first send, so measuring from the first arrival
// is never stricter than the service's rule. A key re-sent that late is a
// second charge, capture or refund as soon as the provider has forgotten
// it. A provider that keeps no key (Mercado Pago's retention 0s) has no
// window: its keys are sent once, and a second arrival is a violation. It
// also counts the keys sent more than once, the lookups the providers
// answered and the keys they had forgotten by the end.
func (r *Report) checkResends(reqs []providersim.Request, keys, mpKeys keySettings) {
	r.Keys, r.MPKeys = keys, mpKeys
	r.LookupRequests = map[string]int{}
	var end time.Time
	for _, q := range reqs {
		if q.Time.After(end) {
			end = q.Time
		}
		if q.Fault != "" {
			r.of(reqProvider(q)).Faults++
		}
		switch q.Op {
		case "search", "retrieve", "list_refunds", "mp_search", "mp_retrieve", "mp_list_refunds":
			if q.Status == http.StatusOK {
				r.LookupRequests[strings.TrimPrefix(q.Op, "mp_")]++
			}
		}
	}
	byKey := keyed(reqs)
	names := make([]string, 0, len(byKey))
	for k := range byKey {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		qs := byKey[k]
		prov, ks := reqProvider(qs[0]), keys
		if prov == provMP {
			ks = mpKeys
		}
		first, last := qs[0].Time, qs[len(qs)-1].Time
		if ks.Retention == 0 || !first.Add(ks.Retention).After(end) {
			r.KeysForgotten++
		}
		if len(qs) > 1 {
			r.KeysResent++
			r.of(prov).KeysResent++
		}
		late := last.Sub(first)
		switch {
		case ks.Retention == 0 && len(qs) > 1:
			r.LateResends++
			r.of(prov).LateResends++
			r.sample("late re-send: key %s reached %s %d times, the last %s after the first; it keeps no key, so none may be re-sent",
				k, prov, len(qs), late.Round(time.Millisecond))
		case ks.Retention > 0 && late > ks.Window+resendTolerance:
			r.LateResends++
			r.of(prov).LateResends++
			r.sample("late re-send: key %s reached %s %s after its first send (%d sends); the re-send window is %s",
				k, prov, late.Round(time.Millisecond), len(qs), ks.Window)
		}
	}
}

// lookupLine is the part of the service's "provider call" log line that
// says how an attempt's outcome was learned.
type lookupLine struct {
	Msg       string `json:"msg"`
	AttemptID string `json:"attempt_id"`
	Operation string `json:"operation"`
	Call      string `json:"call"`
	Outcome   string `json:"outcome"`
}

// resolvedByLookup counts, by operation, the attempts that a lookup past
// their re-send window settled: the replicas' and reconcile's logs name
// each provider call (send, search, retrieve, list_refunds), which the
// provider's log cannot tie to an attempt. A retrieve of an authorization
// is left out: it reads an intent whose id is already known, inside the
// window or not. Only attempts the database shows resolved count.
func resolvedByLookup(logDir string, st *localState) (byOp, byProvider map[string]int, err error) {
	files, err := filepath.Glob(filepath.Join(logDir, "replica-*.log"))
	if err != nil {
		return nil, nil, err
	}
	files = append(files, filepath.Join(logDir, "reconcile.log"))
	ops := map[string]string{} // attempt id -> operation
	for _, name := range files {
		if err := scanLookups(name, ops); err != nil {
			return nil, nil, err
		}
	}
	byOp, byProvider = map[string]int{}, map[string]int{}
	for id, op := range ops {
		if a := st.Attempts[id]; a != nil && resolved(a.Status) {
			byOp[op]++
			byProvider[a.Provider]++
		}
	}
	return byOp, byProvider, nil
}

func scanLookups(name string, ops map[string]string) error {
	f, err := os.Open(name)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		line := sc.Bytes()
		if !strings.Contains(string(line), `"provider call"`) {
			continue
		}
		var l lookupLine
		if json.Unmarshal(line, &l) != nil || l.Msg != "provider call" || l.Outcome == "unknown" {
			continue
		}
		if l.Call == "search" || l.Call == "list_refunds" || (l.Call == "retrieve" && l.Operation != "autorizar") {
			ops[l.AttemptID] = l.Operation
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("chaos: read %s: %w", name, err)
	}
	return nil
}

func resolved(status string) bool { return status != "processing" && status != "unknown" }
