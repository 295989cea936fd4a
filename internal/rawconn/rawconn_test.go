package rawconn

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"runtime"
	"syscall"
	"testing"
	"time"
)

// pair is a connected loopback TCP pair: the client end wrapped, the
// server end plain.
func pair(t *testing.T) (client net.Conn, server *net.TCPConn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			accepted <- nil
			return
		}
		accepted <- c
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	s := <-accepted
	if s == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { c.Close(); s.Close() })
	return Wrap(c), s.(*net.TCPConn)
}

func TestWrapReadsRawOnLinuxOnly(t *testing.T) {
	c, _ := pair(t)
	if raw := Raw(c); raw != Enabled {
		t.Fatalf("Wrap(*net.TCPConn) on %s (raw reads: %v) = %T", runtime.GOOS, Enabled, c)
	}
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	if got := Wrap(a); got != a {
		t.Fatalf("Wrap(net.Pipe) = %T, want the pipe itself", got)
	}
}

func TestReadDeliversEveryChunkThenEOF(t *testing.T) {
	c, s := pair(t)
	var want bytes.Buffer
	go func() {
		for i := range 50 {
			chunk := bytes.Repeat([]byte{byte('a' + i%26)}, 1+i*37)
			want.Write(chunk) // only this goroutine writes want until Close
			if _, err := s.Write(chunk); err != nil {
				return
			}
			if i%7 == 0 {
				time.Sleep(time.Millisecond) // let some chunks arrive alone
			}
		}
		s.CloseWrite()
	}()
	got, err := io.ReadAll(c)
	if err != nil {
		t.Fatalf("ReadAll: %v", err)
	}
	if !bytes.Equal(got, want.Bytes()) {
		t.Fatalf("read %d bytes, want %d (or different content)", len(got), want.Len())
	}
	if n, err := c.Read(make([]byte, 8)); n != 0 || err != io.EOF {
		t.Fatalf("Read after EOF = %d, %v; want 0, io.EOF", n, err)
	}
	if n, err := c.Read(nil); n != 0 || err != nil {
		t.Fatalf("Read(nil) = %d, %v; want 0, nil", n, err)
	}
}

func TestReadHonoursDeadlinesAsNetDoes(t *testing.T) {
	c, s := pair(t)
	if err := c.SetReadDeadline(time.Now().Add(20 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	_, err := c.Read(make([]byte, 8))
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Read past the deadline: %v, want a timeout", err)
	}
	var op *net.OpError
	if !errors.As(err, &op) || op.Op != "read" {
		t.Fatalf("Read past the deadline: %#v, want a *net.OpError with Op read", err)
	}
	// The connection still works once the deadline is lifted.
	if err := c.SetReadDeadline(time.Time{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Write([]byte("after")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 8)
	n, err := c.Read(buf)
	if err != nil || string(buf[:n]) != "after" {
		t.Fatalf("Read after the deadline = %q, %v", buf[:n], err)
	}
}

func TestReadUnblocksOnClose(t *testing.T) {
	c, _ := pair(t)
	done := make(chan error, 1)
	go func() {
		_, err := c.Read(make([]byte, 8))
		done <- err
	}()
	// Close while the read waits or before it starts: either way the read
	// must end with net.ErrClosed, not hang.
	c.Close()
	select {
	case err := <-done:
		if !errors.Is(err, net.ErrClosed) {
			t.Fatalf("Read on a closed conn: %v, want net.ErrClosed", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Read did not return after Close")
	}
}

func TestReadReportsAResetAsNetDoes(t *testing.T) {
	c, s := pair(t)
	if err := s.SetLinger(0); err != nil { // Close sends RST
		t.Fatal(err)
	}
	if _, err := s.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1)
	if _, err := io.ReadFull(c, buf); err != nil {
		t.Fatal(err)
	}
	s.Close()
	var err error
	for err == nil {
		_, err = c.Read(buf)
	}
	if runtime.GOOS == "linux" && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("Read after the peer reset: %v, want ECONNRESET", err)
	}
	var op *net.OpError
	if runtime.GOOS == "linux" && (!errors.As(err, &op) || op.Op != "read") {
		t.Fatalf("Read after the peer reset: %#v, want a *net.OpError with Op read", err)
	}
}

// A write larger than the socket buffers goes out whole: the raw write
// waits in the netpoller when the buffer is full and carries on from where
// the partial write stopped.
func TestWriteDeliversMoreThanTheSocketBufferInOrder(t *testing.T) {
	c, s := pair(t)
	// Larger than loopback's send and receive buffers together, even
	// autotuned (a small SO_RCVBUF would not do: on loopback its window
	// updates wait for the persist timer, plain net.Conn or not).
	want := make([]byte, 32<<20)
	for i := range want {
		want[i] = byte(i*7 + i>>11)
	}
	got := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(s)
		got <- b
	}()
	n, err := c.Write(want)
	if err != nil || n != len(want) {
		t.Fatalf("Write = %d, %v; want %d, nil", n, err, len(want))
	}
	c.Close()
	select {
	case b := <-got:
		if !bytes.Equal(b, want) {
			t.Fatalf("peer read %d bytes, want the %d written (or different content)", len(b), len(want))
		}
	case <-time.After(30 * time.Second):
		t.Fatal("peer never saw the end of the write")
	}
}

func TestWriteHonoursDeadlinesAndReportsAsNetDoes(t *testing.T) {
	c, _ := pair(t)
	// Nobody reads the peer: the buffers fill and the write must stop at its
	// deadline with what it wrote so far.
	if err := c.SetWriteDeadline(time.Now().Add(50 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	n, err := c.Write(make([]byte, 64<<20))
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Write past the deadline: %d, %v; want a timeout", n, err)
	}
	var op *net.OpError
	if !errors.As(err, &op) || op.Op != "write" {
		t.Fatalf("Write past the deadline: %#v, want a *net.OpError with Op write", err)
	}
	if n <= 0 || n >= 64<<20 {
		t.Fatalf("Write past the deadline wrote %d bytes, want a part", n)
	}
	c.Close()
	if _, err := c.Write([]byte("x")); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Write on a closed conn: %v, want net.ErrClosed", err)
	}
}
