package vllm

import (
	"bytes"
	"os"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// benchBodies are the bodies the scrape benchmarks read (scripts/bench-scrape.sh
// prints their ratios): the V1 fixture of one model, the simulator's 16
// models x 8 engines, and SCRAPE_BODY's file as "file" (scripts/growth.sh).
func benchBodies(b *testing.B) []benchBody {
	bodies := []benchBody{{"one-model", fixture(b, "vllm-main-2026-08-v1.txt")}, {"16x8", simBody(b, 16, 8)}}
	if file := os.Getenv("SCRAPE_BODY"); file != "" {
		body, err := os.ReadFile(file)
		if err != nil {
			b.Fatal(err)
		}
		bodies = append(bodies, benchBody{"file", body})
	}
	return bodies
}

type benchBody struct {
	name string
	body []byte
}

// steadyScraper is a scraper of body over loopback whose history spans the
// default windows, with every opt-in series on.
func steadyScraper(b *testing.B, body []byte) *Scraper {
	srv := newFakeVLLM(b, body, "text/plain; version=0.0.4")
	s := newTestScraper(b, srv.URL, nil)
	for i := range 70 {
		scrapeAt(s, t0.Add(time.Duration(i)*5*time.Second))
	}
	if !s.Latest().Up {
		b.Fatal(s.Latest().Error)
	}
	return s
}

// BenchmarkScrape is, per body, prometheus/common's text parser alone
// ("expfmt": what a scraper built on it pays before reading a value) beside
// one whole scrape ("scrape": loopback GET, scan, normalize, history and
// windows, at a steady history).
func BenchmarkScrape(b *testing.B) {
	for _, c := range benchBodies(b) {
		b.Run(c.name+"/expfmt", func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(c.body)))
			for b.Loop() {
				p := expfmt.NewTextParser(model.UTF8Validation)
				if _, err := p.TextToMetricFamilies(bytes.NewReader(c.body)); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(c.name+"/scrape", func(b *testing.B) {
			s := steadyScraper(b, c.body)
			at := t0.Add(70 * 5 * time.Second)
			b.ReportAllocs()
			b.SetBytes(int64(len(c.body)))
			for b.Loop() {
				scrapeAt(s, at)
				at = at.Add(5 * time.Second)
			}
			if !s.Latest().Up {
				b.Fatal(s.Latest().Error)
			}
		})
	}
}

// BenchmarkRender is one /metrics render of the scraper's state: a
// registry gathering its const metrics.
func BenchmarkRender(b *testing.B) {
	for _, c := range benchBodies(b) {
		b.Run(c.name, func(b *testing.B) {
			s := steadyScraper(b, c.body)
			reg := prometheus.NewRegistry()
			reg.MustRegister(s)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := reg.Gather(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
