// Package rawconn reads and writes a connected socket without the Go
// runtime's system-call hand-off, for connections that wake an otherwise
// idle process: a probe's streamed chunks, and the vLLM scrape whose reply
// is followed by milliseconds of parsing.
//
// Why: net.Conn.Read enters the kernel through syscall.Syscall, whose
// entry (entersyscall) wakes the runtime's monitor thread, sysmon, when the
// process was idle; sysmon then sleeps 20 µs, finds the process idle again
// and parks. A probe's stream arrives as ~35 chunks a few milliseconds
// apart, so every chunk cost two extra thread wake-ups beside its own, the
// largest share of a probe's CPU on a virtual machine (strace: 2.2 futex
// and 1.4 nanosleep calls per chunk; docs/cost.md). The socket is
// non-blocking (the netpoller waits for it), so its read never blocks and
// needs no hand-off: syscall.RawConn.Read runs a raw read and waits in the
// netpoller when it would block, keeping deadlines and Close as they are.
// Writes likewise: sysmon, once woken, polls every 20 µs until every
// processor is idle again, so a scrape request written through
// syscall.Write cost one sysmon wake-up per ~0.1 ms of the parse that
// follows its reply (perf sched_switch: ~20 per scrape cycle).
package rawconn

import "net"

// Wrap returns c reading and writing through raw system calls where the platform and
// the connection allow it (a *net.TCPConn or *net.UnixConn on Linux, not
// under the race detector), else
// c itself. Deadlines, Close and the addresses are c's own.
func Wrap(c net.Conn) net.Conn { return wrap(c) }

// Enabled says whether this build reads and writes raw (Linux, not under the race
// detector).
const Enabled = enabled

// Raw reports whether c is a connection Wrap made read raw.
func Raw(c net.Conn) bool {
	_, ok := c.(*conn)
	return ok
}
