package vllmsim

import (
	"math"
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

// appendGoFloat appends goFloat(f); a whole number below a million (most
// counts) without going through pyRepr's two formattings.
func appendGoFloat(b []byte, f float64) []byte {
	if f >= 0 && f < 1e6 && f == math.Trunc(f) && !math.Signbit(f) {
		b = strconv.AppendInt(b, int64(f), 10)
		return append(b, ".0"...)
	}
	return append(b, goFloat(f)...)
}

type label struct{ name, value string }

// labelString renders {a="x",b="y"} with names sorted, as prometheus_client does.
func labelString(ls []label) string {
	return string(appendLabels(nil, append([]label(nil), ls...)))
}

// appendLabels appends labelString(ls), sorting ls in place.
func appendLabels(b []byte, ls []label) []byte {
	if len(ls) == 0 {
		return b
	}
	// Insertion sort: a sample has a handful of labels, and sort.Slice
	// allocates.
	for i := 1; i < len(ls); i++ {
		for j := i; j > 0 && ls[j].name < ls[j-1].name; j-- {
			ls[j], ls[j-1] = ls[j-1], ls[j]
		}
	}
	b = append(b, '{')
	for i, l := range ls {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, l.name...)
		b = append(b, `="`...)
		b = append(b, escapeLabel(l.value)...)
		b = append(b, '"')
	}
	return append(b, '}')
}

var labelEscaper = strings.NewReplacer(`\`, `\\`, "\n", `\n`, `"`, `\"`)

func escapeLabel(s string) string { return labelEscaper.Replace(s) }

var helpEscaper = strings.NewReplacer(`\`, `\\`, "\n", `\n`)
