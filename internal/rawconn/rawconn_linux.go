//go:build linux && !race

package rawconn

import (
	"errors"
	"io"
	"net"
	"os"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// enabled: this build reads raw.
const enabled = true

type conn struct {
	net.Conn
	raw syscall.RawConn
}

func wrap(c net.Conn) net.Conn {
	switch c.(type) {
	case *net.TCPConn, *net.UnixConn:
	default:
		return c // TLS, test pipes and other wrappers keep their own Read
	}
	sc, ok := c.(syscall.Conn)
	if !ok {
		return c
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return c
	}
	return &conn{Conn: c, raw: raw}
}

// Read reads as net.Conn's Read does (same errors: io.EOF at the end, a
// *net.OpError with Op "read" otherwise), without entersyscall.
func (c *conn) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	var n int
	var errno syscall.Errno
	err := c.raw.Read(func(fd uintptr) bool {
		for {
			// RawSyscall: the fd is non-blocking, so the read returns at
			// once (data, EOF, EAGAIN or an error) and the scheduler need
			// not know about it.
			r, _, e := unix.RawSyscall(unix.SYS_READ, fd, uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
			switch e {
			case unix.EINTR:
				continue
			case unix.EAGAIN:
				return false // wait in the netpoller, then try again
			}
			n, errno = int(r), e
			return true
		}
	})
	if err != nil {
		// Deadline, Close: the poller's error, reported as net's own Read
		// reports it.
		var op *net.OpError
		if errors.As(err, &op) {
			err = op.Err
		}
		return 0, c.opError(err)
	}
	if errno != 0 {
		return 0, c.opError(os.NewSyscallError("read", errno))
	}
	if n == 0 {
		return 0, io.EOF
	}
	return n, nil
}

// Write writes all of p as net.Conn's Write does (same errors: a
// *net.OpError with Op "write"), without entersyscall: a request written
// after the process was idle would otherwise wake sysmon, which then polls
// every 20 µs for as long as the reply takes to process (a scrape's parse).
func (c *conn) Write(p []byte) (int, error) {
	var done int
	var errno syscall.Errno
	for done < len(p) {
		err := c.raw.Write(func(fd uintptr) bool {
			for {
				r, _, e := unix.RawSyscall(unix.SYS_WRITE, fd, uintptr(unsafe.Pointer(&p[done])), uintptr(len(p)-done))
				switch e {
				case unix.EINTR:
					continue
				case unix.EAGAIN:
					return false // socket buffer full: wait in the netpoller
				}
				if e == 0 {
					done += int(r)
				}
				errno = e
				return true
			}
		})
		if err != nil {
			var op *net.OpError
			if errors.As(err, &op) {
				err = op.Err
			}
			return done, c.opErrorFor("write", err)
		}
		if errno != 0 {
			return done, c.opErrorFor("write", os.NewSyscallError("write", errno))
		}
	}
	return done, nil
}

func (c *conn) opError(err error) error { return c.opErrorFor("read", err) }

func (c *conn) opErrorFor(op string, err error) error {
	return &net.OpError{Op: op, Net: c.LocalAddr().Network(), Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: err}
}
