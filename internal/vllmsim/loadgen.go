package vllmsim

import (
	"math"
	"math/rand"
	"time"
)

// loadGen submits requests straight to the scheduler (no HTTP), with arrivals
// drawn from a seeded generator, so virtual-clock runs are reproducible.
type loadGen struct {
	s        *Sim
	rng      *rand.Rand
	enabled  bool
	next     time.Time   // the earliest due arrival (zero: none)
	due      []time.Time // per stream (the profile's own first, then its Streams)
	modelIdx []int       // per stream: the next model in turn
	prefixes map[int][]int
	n        uint64
}

func newLoadGen(s *Sim, seed int64) *loadGen {
	return &loadGen{s: s, rng: rand.New(rand.NewSource(seed)), prefixes: map[int][]int{}}
}

// streams is the profile's own traffic followed by its extra streams.
func (g *loadGen) streams() []LoadProfile {
	p := g.s.scen.Load
	return append([]LoadProfile{p}, p.Streams...)
}

// reset schedules each stream's next arrival from now under the current
// profile.
func (g *loadGen) reset(now time.Time) {
	g.next, g.due, g.modelIdx = time.Time{}, nil, nil
	if !g.enabled {
		return
	}
	for _, p := range g.streams() {
		g.due = append(g.due, now.Add(g.gap(p)))
		g.modelIdx = append(g.modelIdx, 0)
	}
	g.setNext()
}

func (g *loadGen) setNext() {
	g.next = time.Time{}
	for _, t := range g.due {
		if !t.IsZero() && (g.next.IsZero() || t.Before(g.next)) {
			g.next = t
		}
	}
}

// gap draws an inter-arrival time: gamma(shape=burstiness, mean=1/totalRate);
// zero time (never) for a stream without a rate.
func (g *loadGen) gap(p LoadProfile) time.Duration {
	rate := p.Rate * float64(len(g.s.cfg.Models))
	if rate <= 0 {
		return 1<<62 - 1
	}
	shape := p.Burstiness
	if shape <= 0 {
		shape = 1
	}
	x := gammaSample(g.rng, shape) / (shape * rate)
	return time.Duration(x * float64(time.Second))
}

// gammaSample draws Gamma(shape, 1) (Marsaglia-Tsang).
func gammaSample(r *rand.Rand, a float64) float64 {
	if a < 1 {
		return gammaSample(r, a+1) * math.Pow(r.Float64(), 1/a)
	}
	d := a - 1.0/3
	c := 1 / math.Sqrt(9*d)
	for {
		x := r.NormFloat64()
		v := 1 + c*x
		if v <= 0 {
			continue
		}
		v = v * v * v
		u := r.Float64()
		if math.Log(u) < 0.5*x*x+d-d*v+d*math.Log(v) {
			return d * v
		}
	}
}

func (d Dist) sample(r *rand.Rand) int {
	v := d.Mean
	if d.CV > 0 {
		s2 := math.Log(1 + d.CV*d.CV)
		v = math.Exp(math.Log(d.Mean) - s2/2 + math.Sqrt(s2)*r.NormFloat64())
	}
	n := int(math.Round(v))
	if d.Min > 0 && n < d.Min {
		n = d.Min
	}
	if d.Max > 0 && n > d.Max {
		n = d.Max
	}
	if n < 1 {
		n = 1
	}
	return n
}

func (g *loadGen) randomTokens(r *rand.Rand, n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = firstWordID + r.Intn(VocabSize-firstWordID)
	}
	return out
}

func (g *loadGen) prefix(group, n int) []int {
	key := group<<20 | n
	p, ok := g.prefixes[key]
	if !ok {
		p = g.randomTokens(rand.New(rand.NewSource(int64(key)^g.s.cfg.Seed)), n)
		g.prefixes[key] = p
	}
	return p
}

// fire submits the due stream's requests at now and schedules its next
// arrival.
func (g *loadGen) fire(now time.Time) {
	ps := g.streams()
	for i, t := range g.due {
		if i >= len(ps) || t.IsZero() || t.After(now) {
			continue
		}
		for range max(ps[i].BurstSize, 1) {
			g.submit(ps[i], i)
		}
		g.due[i] = now.Add(g.gap(ps[i]))
		break
	}
	g.setNext()
}

// submit sends one request of profile p (stream i).
func (g *loadGen) submit(p LoadProfile, i int) {
	s := g.s
	models := p.Models
	if len(models) == 0 {
		models = s.cfg.Models
	}
	model := models[g.modelIdx[i]%len(models)]
	g.modelIdx[i]++
	maxTok := p.MaxTokens
	if maxTok <= 0 {
		maxTok = 256
	}
	if maxTok > s.cfg.MaxModelLen-1 {
		maxTok = s.cfg.MaxModelLen - 1
	}
	plen := p.Prompt.sample(g.rng)
	if plen+maxTok > s.cfg.MaxModelLen {
		plen = s.cfg.MaxModelLen - maxTok
	}
	if plen < 1 {
		plen = 1
	}
	var prompt []int
	if p.SharedPrefixTokens > 0 && p.SharedPrefixFraction > 0 && g.rng.Float64() < p.SharedPrefixFraction {
		groups := p.PrefixGroups
		if groups < 1 {
			groups = 1
		}
		pre := g.prefix(g.rng.Intn(groups), p.SharedPrefixTokens)
		if plen < len(pre)+1 {
			plen = len(pre) + 1
		}
		prompt = append(append([]int(nil), pre...), g.randomTokens(g.rng, plen-len(pre))...)
	} else {
		prompt = g.randomTokens(g.rng, plen)
	}
	if len(prompt)+maxTok > s.cfg.MaxModelLen { // a shared prefix longer than the room left
		prompt = prompt[:s.cfg.MaxModelLen-maxTok]
	}
	out := p.Output.sample(g.rng)
	g.n++
	r := Request{Model: model, Prompt: prompt, MaxTokens: maxTok, IgnoreEOS: p.IgnoreEOS}
	if len(p.Models) == 0 {
		r.Model = s.loraTarget(model)
	}
	if len(p.Priorities) > 0 && s.cfg.SchedulingPolicy == PolicyPriority {
		r.Priority = p.Priorities[g.rng.Intn(len(p.Priorities))]
	}
	if !p.IgnoreEOS {
		r.EOSAt = out
		if out > maxTok {
			r.EOSAt = maxTok + 1 // never reached: finishes with "length"
		}
	} else if out < maxTok {
		r.MaxTokens = out
	}
	// Errors are impossible here: prompt + max_tokens is clamped to max_model_len.
	_ = s.submitLocked(r, nil)
}
