package vllmsim

import (
	"context"
	"errors"
	"net"
	"net/http"
	"sync"
	"time"
)

// server owns the listener so FaultDown can close it and reopen the same address.
type server struct {
	s      *Sim
	h      http.Handler // what it serves: the Sim's Handler unless set (a rank's)
	mu     sync.Mutex
	addr   string
	hs     *http.Server
	down   bool
	closed bool
}

func (sv *server) listen() error {
	ln, err := net.Listen("tcp", sv.addr)
	if err != nil {
		return err
	}
	sv.addr = ln.Addr().String()
	h := sv.h
	if h == nil {
		h = sv.s.Handler()
	}
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	sv.hs = hs
	go func() { _ = hs.Serve(ln) }()
	return nil
}

func (sv *server) setDown(down bool) {
	sv.mu.Lock()
	defer sv.mu.Unlock()
	if down == sv.down || sv.closed {
		return
	}
	sv.down = down
	if down {
		if sv.hs != nil {
			_ = sv.hs.Close()
			sv.hs = nil
		}
		// The socket is closed asynchronously once the accept loop lets go of
		// it; wait until connecting is refused so "down" holds on return.
		for i := 0; i < 100; i++ {
			c, err := net.DialTimeout("tcp", sv.addr, 100*time.Millisecond)
			if err != nil {
				return
			}
			_ = c.Close()
			time.Sleep(5 * time.Millisecond)
		}
		return
	}
	// Reopen on the same address; retry briefly while the port is released.
	for i := 0; i < 50; i++ {
		if err := sv.listen(); err == nil {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (sv *server) close() {
	sv.mu.Lock()
	defer sv.mu.Unlock()
	sv.closed = true
	if sv.hs != nil {
		_ = sv.hs.Close()
		sv.hs = nil
	}
}

// Start listens on Config.Addr (default 127.0.0.1:0), serves Handler, and in
// real-time mode starts the clock goroutine. Close stops both.
func (s *Sim) Start() error { return s.startOn(s.cfg.Addr, nil) }

// startOn is Start on addr serving h (nil: Handler).
func (s *Sim) startOn(addr string, h http.Handler) error {
	if s.srv != nil {
		return errors.New("vllmsim: already started")
	}
	sv := &server{s: s, h: h, addr: addr}
	if err := sv.listen(); err != nil {
		return err
	}
	s.srv = sv
	s.StartClock()
	return nil
}

// StartClock starts the real-time clock goroutine without a listener (for use
// with Handler in an httptest server). No-op in virtual mode or if running.
func (s *Sim) StartClock() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cfg.VirtualClock || s.cancelRun != nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.cancelRun = cancel
	s.runDone = make(chan struct{})
	go s.runRealtime(ctx)
}

// URL is the base URL, e.g. "http://127.0.0.1:40123" ("" before Start).
func (s *Sim) URL() string {
	if s.srv == nil {
		return ""
	}
	s.srv.mu.Lock()
	defer s.srv.mu.Unlock()
	return "http://" + s.srv.addr
}

// Addr is the listen address ("" before Start).
func (s *Sim) Addr() string {
	if s.srv == nil {
		return ""
	}
	s.srv.mu.Lock()
	defer s.srv.mu.Unlock()
	return s.srv.addr
}

// Close stops the listener and the clock goroutine, and releases hung handlers.
func (s *Sim) Close() {
	s.ClearFaults()
	if s.srv != nil {
		s.srv.close()
	}
	s.mu.Lock()
	cancel, done := s.cancelRun, s.runDone
	s.cancelRun = nil
	s.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
}
