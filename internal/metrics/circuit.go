package metrics

import "github.com/prometheus/client_golang/prometheus"

// circuitStates are the values of payments_provider_circuit_state: one
// series per provider and state, 1 for the current state.
var circuitStates = []string{"closed", "half_open", "open"}

func newCircuitGauge() *prometheus.GaugeVec {
	return prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "payments_provider_circuit_state",
		Help: "Each provider's circuit (PROVIDER_CIRCUIT_FAILURES, PROVIDER_CIRCUIT_COOLDOWN): 1 for its current state (closed, half_open, open), 0 for the others.",
	}, []string{"provider", "state"})
}

// CircuitState records a provider circuit's new state.
func (m *Metrics) CircuitState(provider, state string) {
	provider = providerLabel(provider)
	for _, s := range circuitStates {
		v := 0.0
		if s == state {
			v = 1
		}
		m.circuits.WithLabelValues(provider, s).Set(v)
	}
}
