package testenv

import (
	"fmt"
	"io"
	"math"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// The Prometheus text format is read with the Prometheus client's own
// parser (expfmt), for dsmount's /metrics and MinIO's alike.

// ScrapeMetrics GETs url and returns the status and the samples it holds,
// as the text format's lines (a histogram as its _bucket, _sum and _count
// lines).
func ScrapeMetrics(url string) (int, []PromSample, error) {
	code, fams, err := ScrapeFamilies(url)
	if err != nil {
		return code, nil, err
	}
	return code, flatten(fams), nil
}

// ScrapeFamilies GETs url and returns the status and the metric families
// it holds, by name: their types, and histograms whole.
func ScrapeFamilies(url string) (int, map[string]*dto.MetricFamily, error) {
	hc := &http.Client{Timeout: 10 * time.Second}
	resp, err := hc.Get(url)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	fams, err := parseFamilies(resp.Body)
	return resp.StatusCode, fams, err
}

func parseFamilies(r io.Reader) (map[string]*dto.MetricFamily, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(r)
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	return fams, nil
}

// PromSample is one line of the Prometheus text format.
type PromSample struct {
	Name   string
	Labels map[string]string
	Value  float64
}

// ParsePrometheus parses the Prometheus text exposition format into its
// samples.
func ParsePrometheus(text string) ([]PromSample, error) {
	fams, err := parseFamilies(strings.NewReader(text))
	if err != nil {
		return nil, err
	}
	return flatten(fams), nil
}

// flatten lists the families' samples as the text format's lines, in name
// order.
func flatten(fams map[string]*dto.MetricFamily) []PromSample {
	names := make([]string, 0, len(fams))
	for n := range fams {
		names = append(names, n)
	}
	sort.Strings(names)
	var out []PromSample
	for _, name := range names {
		f := fams[name]
		for _, m := range f.GetMetric() {
			labels := func(extra ...string) map[string]string {
				l := make(map[string]string, len(m.GetLabel())+1)
				for _, lp := range m.GetLabel() {
					l[lp.GetName()] = lp.GetValue()
				}
				for i := 0; i+1 < len(extra); i += 2 {
					l[extra[i]] = extra[i+1]
				}
				return l
			}
			add := func(n string, v float64, extra ...string) {
				out = append(out, PromSample{Name: n, Labels: labels(extra...), Value: v})
			}
			switch f.GetType() {
			case dto.MetricType_COUNTER:
				add(name, m.GetCounter().GetValue())
			case dto.MetricType_GAUGE:
				add(name, m.GetGauge().GetValue())
			case dto.MetricType_SUMMARY:
				s := m.GetSummary()
				for _, q := range s.GetQuantile() {
					add(name, q.GetValue(), "quantile", formatFloat(q.GetQuantile()))
				}
				add(name+"_sum", s.GetSampleSum())
				add(name+"_count", float64(s.GetSampleCount()))
			case dto.MetricType_HISTOGRAM:
				h := m.GetHistogram()
				inf := false
				for _, b := range h.GetBucket() {
					inf = inf || math.IsInf(b.GetUpperBound(), 1)
					add(name+"_bucket", float64(b.GetCumulativeCount()), "le", formatFloat(b.GetUpperBound()))
				}
				if !inf {
					add(name+"_bucket", float64(h.GetSampleCount()), "le", "+Inf")
				}
				add(name+"_sum", h.GetSampleSum())
				add(name+"_count", float64(h.GetSampleCount()))
			default:
				add(name, m.GetUntyped().GetValue())
			}
		}
	}
	return out
}

func formatFloat(v float64) string {
	if math.IsInf(v, 1) {
		return "+Inf"
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

// PromFind returns the value of the sample called name whose labels include
// all of want (pairs of key, value), and how many samples matched.
func PromFind(samples []PromSample, name string, want ...string) (float64, int) {
	var v float64
	n := 0
outer:
	for _, s := range samples {
		if s.Name != name {
			continue
		}
		for i := 0; i+1 < len(want); i += 2 {
			if s.Labels[want[i]] != want[i+1] {
				continue outer
			}
		}
		v = s.Value
		n++
	}
	return v, n
}
