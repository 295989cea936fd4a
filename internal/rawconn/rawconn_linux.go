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

func (c *conn) opError(err error) error {
	return &net.OpError{Op: "read", Net: c.LocalAddr().Network(), Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: err}
}
