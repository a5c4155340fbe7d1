package providersim

import (
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
)

// Outage is what a Front does to the connections it gets.
type Outage int32

const (
	// Up passes every connection to the simulator.
	Up Outage = iota
	// Refused: nothing listens; every dial is refused.
	Refused
	// Silent: connections are accepted and read, and never answered.
	Silent
)

// Front is a TCP front for one provider's API on an address of its own, so
// that a test or the chaos run can take one provider down (connections
// refused, or accepted and never answered) while the other keeps working.
// 5xx answers and revoked credentials are the simulator's own faults.
type Front struct {
	target string
	addr   string

	mu       sync.Mutex
	outage   Outage
	ln       net.Listener
	held     map[net.Conn]struct{}
	accepted atomic.Int64
}

// NewFront listens on addr (a free local port when "") and passes
// connections to target (host:port).
func NewFront(addr, target string) (*Front, error) {
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	f := &Front{target: target, addr: ln.Addr().String(), ln: ln, held: map[net.Conn]struct{}{}}
	go f.serve(ln)
	return f, nil
}

// URL is the front's base URL.
func (f *Front) URL() string { return "http://" + f.addr }

// Accepted counts the connections the front accepted (never the refused).
func (f *Front) Accepted() int64 { return f.accepted.Load() }

// Set changes the outage. Leaving Silent closes the held connections;
// leaving Refused listens again on the same address.
func (f *Front) Set(o Outage) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if o == f.outage {
		return nil
	}
	if f.outage == Silent {
		for c := range f.held {
			c.Close()
			delete(f.held, c)
		}
	}
	switch {
	case o == Refused:
		f.ln.Close()
	case f.outage == Refused:
		ln, err := net.Listen("tcp", f.addr)
		if err != nil {
			return err
		}
		f.ln = ln
		go f.serve(ln)
	}
	f.outage = o
	return nil
}

// Close stops the front and drops its connections.
func (f *Front) Close() {
	f.Set(Refused)
}

func (f *Front) serve(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		f.accepted.Add(1)
		f.mu.Lock()
		silent := f.outage == Silent
		if silent {
			f.held[c] = struct{}{}
		}
		f.mu.Unlock()
		if silent {
			go io.Copy(io.Discard, c) // read the request, never answer
			continue
		}
		go f.pass(c)
	}
}

func (f *Front) pass(c net.Conn) {
	defer c.Close()
	up, err := net.Dial("tcp", f.target)
	if err != nil {
		return
	}
	defer up.Close()
	done := make(chan struct{})
	go func() {
		io.Copy(up, c)
		if tc, ok := up.(*net.TCPConn); ok {
			tc.CloseWrite()
		}
		close(done)
	}()
	if _, err := io.Copy(c, up); err != nil && !errors.Is(err, net.ErrClosed) {
		return
	}
	<-done
}

// AddFront lets the control API set a front's outage by name
// (POST /_sim/outages {"front":"stripe","outage":"refused"}).
func (s *Server) AddFront(name string, f *Front) {
	s.frontsMu.Lock()
	defer s.frontsMu.Unlock()
	if s.fronts == nil {
		s.fronts = map[string]*Front{}
	}
	s.fronts[name] = f
}

var outageNames = map[string]Outage{"up": Up, "refused": Refused, "silent": Silent}

// outageControl serves POST /_sim/outages.
func (s *Server) outageControl(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Front  string `json:"front"`
		Outage string `json:"outage"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		http.Error(w, "body: want {\"front\":…,\"outage\":\"up\"|\"refused\"|\"silent\"}", http.StatusBadRequest)
		return
	}
	o, ok := outageNames[body.Outage]
	s.frontsMu.Lock()
	f := s.fronts[body.Front]
	s.frontsMu.Unlock()
	if !ok || f == nil {
		http.Error(w, "unknown front or outage", http.StatusBadRequest)
		return
	}
	if err := f.Set(o); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
