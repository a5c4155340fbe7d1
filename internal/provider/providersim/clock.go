package providersim

import "time"

// Now is the simulator's time: Options.Now plus everything Advance added. It
// stamps objects and ages idempotency keys.
func (s *Server) Now() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.now()
}

// Advance moves the simulator's clock forward by d, so a process driven only
// through the control API can age idempotency keys past KeyRetention and
// search lag. It panics if d is negative: a clock going back would revive
// forgotten keys.
func (s *Server) Advance(d time.Duration) {
	if d < 0 {
		panic("providersim: Advance with a negative duration")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.offset += d
	// Vouchers and QR codes past their expiry expire now, with their events.
	now := s.now()
	for _, a := range s.accounts {
		s.expireDue(a, now)
	}
}

// ResetClock undoes every Advance: the simulator's clock is Options.Now
// again. Keys already past retention stay forgotten, and the keys still
// kept keep their age, so going back neither revives a forgotten key nor
// makes a kept one live longer. Objects keep the times they were stamped
// with: a Pix or Boleto made while the clock was ahead expires that much
// later.
func (s *Server) ResetClock() {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	for _, a := range s.accounts {
		for k, e := range a.keys {
			if s.expired(e, now) {
				delete(a.keys, k)
				continue
			}
			e.created = e.created.Add(-s.offset)
		}
		a.swept = a.swept.Add(-s.offset)
	}
	s.offset = 0
}

// now is Server.Now for callers holding s.mu.
func (s *Server) now() time.Time { return s.opts.Now().Add(s.offset) }

// SetSearchLag changes how old an intent must be to be found by search
// (Options.SearchLag), for intents made before and after.
func (s *Server) SetSearchLag(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.opts.SearchLag = max(d, 0)
}
