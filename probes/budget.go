package probes

import "time"

// ledger enforces the probe budgets over sliding windows: at most maxReq
// requests in any minute and maxTokens prompt+completion tokens in any hour,
// across all profiles. A request is admitted only if, counting itself, both
// windows ending now stay within their limits; since every admission checks
// the window ending at its own time, no window of that length anywhere in
// time can hold more.
type ledger struct {
	entries []*spend // ascending by time
}

type spend struct {
	t      time.Time
	tokens int
}

const (
	requestWindow = time.Minute
	tokenWindow   = time.Hour
)

// admit reserves tokens at now if both budgets allow it and returns the
// reservation (to be corrected with the real usage later), or nil.
func (l *ledger) admit(now time.Time, tokens, maxReq, maxTokens int) *spend {
	l.prune(now)
	reqs, toks := 0, tokens
	for _, e := range l.entries {
		if e.t.After(now.Add(-requestWindow)) {
			reqs++
		}
		toks += e.tokens
	}
	if reqs+1 > maxReq || toks > maxTokens {
		return nil
	}
	e := &spend{t: now, tokens: tokens}
	l.entries = append(l.entries, e)
	return e
}

// settle records the tokens a request really used when that is more than
// was reserved (chat templates add prompt tokens the probe cannot predict).
func (l *ledger) settle(e *spend, used int) {
	if e != nil && used > e.tokens {
		e.tokens = used
	}
}

func (l *ledger) prune(now time.Time) {
	cut := now.Add(-tokenWindow)
	i := 0
	for i < len(l.entries) && !l.entries[i].t.After(cut) {
		i++
	}
	l.entries = l.entries[i:]
}
