package exposition

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/proto"

	"github.com/vllm-exporter/vllm_exporter/internal/snapshot"
)

// libraryHistogram is what client_golang's const histogram writes for h:
// the reference a Writer must reproduce.
func libraryHistogram(t *testing.T, desc *prometheus.Desc, h snapshot.Histogram, labels ...string) *dto.Metric {
	t.Helper()
	buckets := make(map[float64]uint64, len(h.Bounds))
	for i, b := range h.Bounds {
		buckets[b] = uint64(math.Round(h.Counts[i]))
	}
	m, err := prometheus.NewConstHistogram(desc, uint64(math.Round(h.Count)), h.Sum, buckets, labels...)
	if err != nil {
		t.Fatal(err)
	}
	var out dto.Metric
	if err := m.Write(&out); err != nil {
		t.Fatal(err)
	}
	return &out
}

// writtenHistogram is what a Writer writes for h as the one series of
// desc's family (desc recorded in ds).
func writtenHistogram(t *testing.T, ds Descs, desc *prometheus.Desc, h snapshot.Histogram, labels ...string) *dto.Metric {
	t.Helper()
	w := NewWriter(ds, Sizes{})
	w.Histogram(desc, h, labels)
	mfs, err := w.Done()
	if err != nil {
		t.Fatal(err)
	}
	if len(mfs) != 1 || len(mfs[0].Metric) != 1 {
		t.Fatalf("wrote %v, want one series", mfs)
	}
	return mfs[0].Metric[0]
}

func TestHistogramWriterWritesWhatTheLibraryWrites(t *testing.T) {
	ds := Descs{}
	desc := ds.New("vllm_test_seconds", "A test histogram.", "model_name", "engine")
	rng := rand.New(rand.NewPCG(1, 2))
	random := func(n int) snapshot.Histogram {
		h := snapshot.Histogram{}
		b, c := 0.0, 0.0
		for range n {
			b += 0.001 + rng.Float64()
			c += math.Floor(rng.Float64() * 1e6)
			h.Bounds = append(h.Bounds, b)
			h.Counts = append(h.Counts, c)
		}
		h.Count = c + math.Floor(rng.Float64()*10)
		h.Sum = rng.Float64() * 1e5
		return h
	}
	cases := map[string]snapshot.Histogram{
		"no buckets":       {Count: 3, Sum: 1.5},
		"one bucket":       {Bounds: []float64{0.5}, Counts: []float64{2}, Count: 3, Sum: 1.5},
		"fractional count": {Bounds: []float64{0.1, 1}, Counts: []float64{2.4999, 7.5}, Count: 9.5, Sum: 2},
		"huge counts":      {Bounds: []float64{1, 2}, Counts: []float64{1 << 52, 1 << 53}, Count: 1 << 53, Sum: 1e12},
		// Not strictly increasing and finite: the library's map decides.
		"duplicate bound": {Bounds: []float64{0.1, 0.1, 1}, Counts: []float64{1, 2, 3}, Count: 3, Sum: 1},
		"NaN bound":       {Bounds: []float64{0.1, math.NaN()}, Counts: []float64{1, 2}, Count: 2, Sum: 1},
		"-Inf bound":      {Bounds: []float64{math.Inf(-1), 1}, Counts: []float64{0, 2}, Count: 2, Sum: 1},
		"unsorted":        {Bounds: []float64{1, 0.1}, Counts: []float64{2, 1}, Count: 2, Sum: 1},
	}
	for i := range 50 {
		cases["random "+string(rune('a'+i%26))+string(rune('a'+i/26))] = random(1 + rng.IntN(40))
	}
	for name, h := range cases {
		t.Run(name, func(t *testing.T) {
			got, want := writtenHistogram(t, ds, desc, h, "model-a", "0"), libraryHistogram(t, desc, h, "model-a", "0")
			// NaN != NaN, and the library's order of a NaN bound varies
			// with its map: compare the NaN case by the buckets' text.
			if !proto.Equal(got, want) && bucketText(got) != bucketText(want) {
				t.Fatalf("the Writer wrote\n%v\nthe library writes\n%v", got, want)
			}
		})
	}
}

// bucketText is m as text with its buckets in the order of their text.
func bucketText(m *dto.Metric) string {
	m = proto.Clone(m).(*dto.Metric)
	b := m.GetHistogram().GetBucket()
	slices.SortFunc(b, func(x, y *dto.Bucket) int { return strings.Compare(x.String(), y.String()) })
	return m.String()
}

// The written buckets are the families' own: a later change to the
// snapshot's bounds or counts does not reach families already written
// (gathered families may be handed out until the next scrape).
func TestHistogramWriterOwnsWhatItWrote(t *testing.T) {
	ds := Descs{}
	desc := ds.New("vllm_test_seconds", "A test histogram.", "model_name")
	h := snapshot.Histogram{Bounds: []float64{0.1, 1}, Counts: []float64{1, 2}, Count: 3, Sum: 1}
	out := writtenHistogram(t, ds, desc, h, "m")
	h.Bounds[0], h.Counts[0] = 0.2, 9
	if b := out.GetHistogram().GetBucket()[0]; b.GetUpperBound() != 0.1 || b.GetCumulativeCount() != 1 {
		t.Fatalf("written bucket changed with the snapshot: %v", b)
	}
}

// A writer sized from the last gather writes a histogram in a fixed number
// of allocations, not a few per bucket as the library's map, sort and
// per-bucket values do.
func TestHistogramWriterAllocations(t *testing.T) {
	ds := Descs{}
	desc := ds.New("vllm_test_seconds", "A test histogram.", "model_name", "engine")
	hist := func(n int) snapshot.Histogram {
		h := snapshot.Histogram{Count: 1000, Sum: 5}
		for i := range n {
			h.Bounds = append(h.Bounds, float64(i+1)/10)
			h.Counts = append(h.Counts, float64(i*4))
		}
		return h
	}
	allocs := func(h snapshot.Histogram) float64 {
		first := NewWriter(ds, Sizes{})
		first.Histogram(desc, h, []string{"m", "0"})
		last := first.Sizes()
		return testing.AllocsPerRun(50, func() {
			w := NewWriter(ds, last)
			w.Histogram(desc, h, []string{"m", "0"})
			if _, err := w.Done(); err != nil {
				t.Fatal(err)
			}
		})
	}
	short, long := allocs(hist(22)), allocs(hist(44))
	lib := testing.AllocsPerRun(50, func() {
		m, err := ConstHistogram(desc, hist(22), "m", "0")
		if err != nil {
			t.Fatal(err)
		}
		var out dto.Metric
		_ = m.Write(&out)
	})
	if short != long {
		t.Fatalf("Writer: %.0f allocations for 22 buckets, %.0f for 44: not independent of the buckets", short, long)
	}
	if short >= lib/2 {
		t.Fatalf("Writer: %.0f allocations, the library %.0f for 22 buckets: no saving", short, lib)
	}
	t.Logf("allocations for one 22-bucket histogram: %.0f, whole writer included (library's const histogram: %.0f)", short, lib)
}
