package vllmsim

import (
	"math"
	"testing"
)

func TestGoFloatMatchesPrometheusClient(t *testing.T) {
	// Values and renderings taken from the fixtures (rendered by prometheus_client).
	for v, want := range map[float64]string{
		0:                     "0.0",
		1:                     "1.0",
		7:                     "7.0",
		0.25:                  "0.25",
		0.001:                 "0.001",
		2560:                  "2560.0",
		21873:                 "21873.0",
		828476:                "828476.0",
		1102914:               "1.102914e+06",
		1048576:               "1.048576e+06",
		1220352:               "1.220352e+06",
		1.92396e+06:           "1.92396e+06",
		1000000:               "1e+06",
		2.14308864e+09:        "2.14308864e+09",
		1.7863512000000212e9:  "1.7863512000000212e+09",
		1.786351200000191e9:   "1.786351200000191e+09",
		1.3873303552e10:       "1.3873303552e+010", // prometheus_client's real (odd) form
		0.3142486578:          "0.3142486578",
		9.75010481363281e-06:  "9.75010481363281e-06",
		1e-05:                 "1e-05",
		0.0001:                "0.0001",
		-1:                    "-1.0",
		90.025767558484:       "90.025767558484",
		6652.1276837585865:    "6652.1276837585865",
		1.7399808085099974e09: "1.7399808085099974e+09",
	} {
		if got := goFloat(v); got != want {
			t.Errorf("goFloat(%v) = %q, want %q", v, got, want)
		}
	}
}

// TestAppendGoFloatIsGoFloat: the render's fast path for whole numbers
// writes what goFloat writes.
func TestAppendGoFloatIsGoFloat(t *testing.T) {
	vals := []float64{0, math.Copysign(0, -1), 1, 7, 0.5, 999999, 1e6, 1e6 - 0.5, 1e6 + 1, -1, -3, 123456,
		math.Inf(1), math.Inf(-1), math.NaN(), 1e-7, 4503599627370496}
	for i := 0; i < 2000; i++ {
		vals = append(vals, float64(i*i*7), float64(i)/8, float64(i*977))
	}
	for _, v := range vals {
		if got, want := string(appendGoFloat([]byte("x"), v)), "x"+goFloat(v); got != want {
			t.Errorf("appendGoFloat(%v) = %q, want %q", v, got, want)
		}
	}
}

func TestLabelStringSortsAndEscapes(t *testing.T) {
	got := labelString([]label{{"model_name", `a"b\c` + "\n"}, {"le", "0.5"}, {"engine", "0"}})
	want := `{engine="0",le="0.5",model_name="a\"b\\c\n"}`
	if got != want {
		t.Fatalf("got %s want %s", got, want)
	}
}

func TestTokenizerDeterministicAndExact(t *testing.T) {
	a := Tokenize("Hello world, how are you?")
	b := Tokenize("Hello world, how are you?")
	if len(a) != len(b) {
		t.Fatal("not deterministic")
	}
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("token %d differs", i)
		}
	}
	// BOS + Hello + " world" + "," + " how" + " are" + " you" + "?"
	if len(a) != 8 {
		t.Fatalf("len = %d (%v), want 8", len(a), a)
	}
	if n := len(TextTokens("internationalization")); n != 4 { // 20 bytes in 6-byte pieces
		t.Fatalf("long word pieces = %d, want 4", n)
	}
	if n := len(TextTokens("  a")); n != 2 { // one lone space + " a"
		t.Fatalf("got %d tokens for two spaces and a word, want 2", n)
	}
	// Every generated token re-tokenizes to exactly itself.
	for i := uint64(0); i < uint64(len(outputWords)); i++ {
		id, text := outputToken(i)
		got := TextTokens(text)
		if len(got) != 1 || got[0] != id {
			t.Fatalf("output word %q tokenizes to %v, want [%d]", text, got, id)
		}
	}
	msgs := []ChatMessage{{Role: "system", Content: "Be brief."}, {Role: "user", Content: "Hi there"}}
	want := 1 + (4 + 1 + 3) + (4 + 1 + 2) + 4 + 1
	if n := len(ChatTokens(msgs)); n != want {
		t.Fatalf("chat tokens = %d, want %d", n, want)
	}
}
