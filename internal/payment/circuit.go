package payment

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/sony/gobreaker/v2"

	"github.com/acmepay/payments/internal/provider"
)

// Defaults of PROVIDER_CIRCUIT_FAILURES and PROVIDER_CIRCUIT_COOLDOWN.
const (
	DefaultCircuitFailures = 5
	DefaultCircuitCooldown = 30 * time.Second
)

var errUnreachable = errors.New("provider unreachable")

// Circuit states, as the metric and the console name them.
const (
	CircuitClosed   = "closed"
	CircuitHalfOpen = "half_open"
	CircuitOpen     = "open"
)

// newCircuits makes one breaker per provider (CONTRACT §15). It opens
// after failures consecutive first sends that proved the provider
// unreachable; while it is open, creates skip the provider without an
// attempt; after the cooldown one trial call decides. Only first sends of
// an authorization go through it: they are the calls a failover can avoid.
func newCircuits(names []string, failures int, cooldown time.Duration, log *slog.Logger, m Metrics) map[string]*gobreaker.TwoStepCircuitBreaker[struct{}] {
	cbs := make(map[string]*gobreaker.TwoStepCircuitBreaker[struct{}], len(names))
	for _, name := range names {
		cbs[name] = gobreaker.NewTwoStepCircuitBreaker[struct{}](gobreaker.Settings{
			Name:        name,
			MaxRequests: 1,
			Timeout:     cooldown,
			ReadyToTrip: func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= uint32(failures) },
			OnStateChange: func(name string, from, to gobreaker.State) {
				log.Warn("provider circuit", slog.String("provider", name),
					slog.String("from", circuitState(from)), slog.String("to", circuitState(to)))
				m.CircuitState(name, circuitState(to))
			},
		})
		m.CircuitState(name, CircuitClosed)
	}
	return cbs
}

func circuitState(s gobreaker.State) string {
	switch s {
	case gobreaker.StateOpen:
		return CircuitOpen
	case gobreaker.StateHalfOpen:
		return CircuitHalfOpen
	}
	return CircuitClosed
}

// CircuitStates is each provider's circuit state, for the console.
func (s *Service) CircuitStates() map[string]string {
	out := make(map[string]string, len(s.circuits))
	for name, cb := range s.circuits {
		out[name] = circuitState(cb.State())
	}
	return out
}

// circuitAllows reports whether a new attempt may go to the provider: not
// while its circuit is open.
func (s *Service) circuitAllows(name string) bool {
	cb, ok := s.circuits[name]
	return !ok || cb.State() != gobreaker.StateOpen
}

// callThroughCircuit is callProvider for a create's first send, counted by
// the provider's circuit. A call the circuit refuses (a trial is already
// under way) is not sent at all, which proves the provider did nothing.
func (s *Service) callThroughCircuit(ctx context.Context, acct Account, w work) Outcome {
	cb, ok := s.circuits[attemptProvider(w.payment, w.attempt)]
	if _, fo := w.mutation.(failingOver); !ok || !fo || w.recovered {
		return s.callProvider(ctx, acct, w)
	}
	done, err := cb.Allow()
	if err != nil {
		return Outcome{Result: provider.Result{Outcome: provider.Failed, FailureCode: FailureProviderUnreachable,
			FailureMessage: "the provider's circuit is open: the request was not sent"}}
	}
	out := s.callProvider(ctx, acct, w)
	if out.Outcome == provider.Failed && out.FailureCode == FailureProviderUnreachable {
		done(errUnreachable)
	} else {
		done(nil)
	}
	return out
}
