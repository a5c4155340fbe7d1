package providersim

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"
)

// FaultKind is what a Fault does to a request.
type FaultKind string

const (
	// DropAfterEffect performs the operation and stores its idempotent
	// result, then closes the connection without a response.
	//
	// On a reused keep-alive connection Go's net/http transparently re-sends
	// a GET, or a POST carrying an Idempotency-Key, that lost its response;
	// the re-send is another matching request. To make a Go client see the
	// loss, use Times 0 (then Remove) or a count above 1.
	DropAfterEffect FaultKind = "drop_after_effect"
	// DelayAfterEffect performs the operation, then waits Delay (or until the
	// client goes away) before answering.
	DelayAfterEffect FaultKind = "delay_after_effect"
	// HoldAfterEffect performs the operation, then blocks until released.
	HoldAfterEffect FaultKind = "hold_after_effect"
	// Error500BeforeEffect answers 500 api_error; nothing happens or is stored.
	Error500BeforeEffect FaultKind = "error_500_before_effect"
	// RateLimit429BeforeEffect answers 429 rate_limit; nothing happens or is
	// stored.
	RateLimit429BeforeEffect FaultKind = "rate_limit_429_before_effect"
	// HoldBeforeEffect blocks until released, then performs the operation.
	// The idempotency key stays in flight meanwhile, and the operation still
	// happens if the client has given up, as it would at a real provider.
	HoldBeforeEffect FaultKind = "hold_before_effect"
)

// faultBefore lists the known kinds and whether each acts before the effect.
var faultBefore = map[FaultKind]bool{
	Error500BeforeEffect: true, RateLimit429BeforeEffect: true, HoldBeforeEffect: true,
	DropAfterEffect: false, DelayAfterEffect: false, HoldAfterEffect: false,
}

// Fault selects requests and says what to do to them. Faults see requests
// that passed authentication and the idempotency check, replays included;
// random faults only mutating ones.
type Fault struct {
	// Op is authorize, confirm, capture, cancel, refund, retrieve, retrieve_refund,
	// list_refunds, search or list_intents, or for Mercado Pago mp_create, mp_retrieve,
	// mp_update, mp_search, mp_refund, mp_list_refunds,
	// mp_list_chargebacks or mp_get_chargeback; "" matches any.
	Op string
	// IdempotencyKey must equal the request's; "" matches any.
	IdempotencyKey string
	Kind           FaultKind
	Delay          time.Duration // for DelayAfterEffect
	// Times is how many matching requests the fault applies to; 0 means until
	// removed.
	Times int
}

// Injected is a live fault. At most one before-effect and one after-effect
// fault apply to a request: the earliest injected that match.
type Injected struct {
	s        *Server
	id       int
	fault    Fault
	hits     int // guarded by s.mu
	reached  chan struct{}
	released chan struct{}
	reach    sync.Once
	release  sync.Once
}

// Inject adds a fault. It panics on an unknown Kind.
func (s *Server) Inject(f Fault) *Injected {
	if _, ok := faultBefore[f.Kind]; !ok {
		panic(fmt.Sprintf("providersim: unknown fault kind %q", f.Kind))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextID++
	inj := &Injected{s: s, id: s.nextID, fault: f, reached: make(chan struct{}), released: make(chan struct{})}
	s.faults = append(s.faults, inj)
	s.byID[inj.id] = inj
	return inj
}

// ID identifies the fault in the control API.
func (i *Injected) ID() int { return i.id }

// Reached is closed when the fault first acts on a request: for after-effect
// kinds, once the effect has happened; for holds, as the request blocks.
func (i *Injected) Reached() <-chan struct{} { return i.reached }

// Release unblocks the requests held by the fault, now and in future. It is
// safe to call more than once.
func (i *Injected) Release() { i.release.Do(func() { close(i.released) }) }

// Hits is the number of requests the fault has applied to.
func (i *Injected) Hits() int {
	i.s.mu.Lock()
	defer i.s.mu.Unlock()
	return i.hits
}

// Remove stops the fault from matching and releases what it holds.
func (i *Injected) Remove() {
	i.s.mu.Lock()
	i.s.faults = slices.DeleteFunc(i.s.faults, func(f *Injected) bool { return f == i })
	i.s.mu.Unlock()
	i.Release()
}

// ClearFaults releases and removes every injected fault.
func (s *Server) ClearFaults() {
	s.mu.Lock()
	all := s.byID
	s.faults, s.byID = nil, map[int]*Injected{}
	s.mu.Unlock()
	for _, f := range all {
		f.Release()
	}
}

// action is a fault chosen for one request; inj is nil for random faults.
type action struct {
	kind  FaultKind
	delay time.Duration
	inj   *Injected
}

// apply marks the fault reached and waits as its kind requires.
func (a action) apply(ctx context.Context) {
	if a.inj != nil {
		a.inj.reach.Do(func() { close(a.inj.reached) })
	}
	switch a.kind {
	case HoldBeforeEffect, HoldAfterEffect:
		// Deliberately deaf to ctx: a provider finishes what it started.
		<-a.inj.released
	case DelayAfterEffect:
		t := time.NewTimer(a.delay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
		}
	}
}

func (a action) errorResult() result {
	if a.kind == RateLimit429BeforeEffect {
		return failed(http.StatusTooManyRequests, &apiError{Type: invalidRequest, Code: "rate_limit",
			Message: "Too many requests hit the API too quickly. We recommend an exponential backoff of your requests."})
	}
	return failed(http.StatusInternalServerError, &apiError{Type: apiErrorType,
		Message: "An unknown error occurred while processing this request."})
}

// pickFaults chooses the faults for a request and counts the hits.
func (s *Server) pickFaults(op, idemKey string, mutating bool) (before, after action) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, f := range s.faults {
		if (f.fault.Op != "" && f.fault.Op != op) || (f.fault.IdempotencyKey != "" && f.fault.IdempotencyKey != idemKey) {
			continue
		}
		slot := &after
		if faultBefore[f.fault.Kind] {
			slot = &before
		}
		if slot.kind != "" {
			continue
		}
		*slot = action{f.fault.Kind, f.fault.Delay, f}
		f.hits++
	}
	s.faults = slices.DeleteFunc(s.faults, func(f *Injected) bool { return f.fault.Times > 0 && f.hits >= f.fault.Times })

	if before.kind != "" || after.kind != "" || !mutating {
		return before, after
	}
	rf := s.random
	switch p := s.rng.Float64(); {
	case p < rf.Drop:
		after.kind = DropAfterEffect
	case p < rf.Drop+rf.Error500:
		before.kind = Error500BeforeEffect
	case p < rf.Drop+rf.Error500+rf.Delay:
		after = action{kind: DelayAfterEffect, delay: rf.DelayFor}
	}
	return before, after
}
