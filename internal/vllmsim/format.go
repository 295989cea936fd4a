package vllmsim

import (
	"math"
	"sort"
	"strconv"
	"strings"
)

// pyRepr formats f like Python's repr(float): shortest round-trip digits,
// fixed notation for decimal exponents in [-4, 16), otherwise "1.5e+16".
func pyRepr(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	case math.IsNaN(f):
		return "nan"
	}
	e := strconv.FormatFloat(f, 'e', -1, 64)
	exp, _ := strconv.Atoi(e[strings.IndexByte(e, 'e')+1:])
	if exp < -4 || exp >= 16 {
		return e
	}
	s := strconv.FormatFloat(f, 'f', -1, 64)
	if !strings.Contains(s, ".") {
		s += ".0"
	}
	return s
}

// goFloat is prometheus_client's floatToGoString: "+Inf", "-Inf", "NaN", and
// for positive values with 7+ integer digits Go-style exponents
// ("1.102914e+06", "1.7863512000000212e+09", "1.3873303552e+010").
func goFloat(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return "+Inf"
	case math.IsInf(f, -1):
		return "-Inf"
	case math.IsNaN(f):
		return "NaN"
	}
	s := pyRepr(f)
	if dot := strings.IndexByte(s, '.'); f > 0 && dot > 6 {
		mant := strings.TrimRight(s[:1]+"."+s[1:dot]+s[dot+1:], "0.")
		return mant + "e+0" + strconv.Itoa(dot-1)
	}
	return s
}

type label struct{ name, value string }

// labelString renders {a="x",b="y"} with names sorted, as prometheus_client does.
func labelString(ls []label) string {
	if len(ls) == 0 {
		return ""
	}
	sorted := append([]label(nil), ls...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].name < sorted[j].name })
	var b strings.Builder
	b.WriteByte('{')
	for i, l := range sorted {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(l.name)
		b.WriteString(`="`)
		b.WriteString(escapeLabel(l.value))
		b.WriteByte('"')
	}
	b.WriteByte('}')
	return b.String()
}

var labelEscaper = strings.NewReplacer(`\`, `\\`, "\n", `\n`, `"`, `\"`)

func escapeLabel(s string) string { return labelEscaper.Replace(s) }

var helpEscaper = strings.NewReplacer(`\`, `\\`, "\n", `\n`)
