package metrics

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Value gathers g and returns the sum over the series of metric name whose labels
// include the given name, value pairs: a counter's or gauge's value, a histogram's
// sample count. A metric without a matching series is 0. For tests and tools.
func Value(g prometheus.Gatherer, name string, labels ...string) (float64, error) {
	if len(labels)%2 != 0 {
		return 0, fmt.Errorf("metrics: odd label list %q", labels)
	}
	mfs, err := g.Gather()
	if err != nil {
		return 0, err
	}
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			for i := 0; i < len(labels); i += 2 {
				v := "" // an absent label has the empty value
				for _, lp := range m.GetLabel() {
					if lp.GetName() == labels[i] {
						v = lp.GetValue()
						break
					}
				}
				if v != labels[i+1] {
					continue series
				}
			}
			switch {
			case m.GetCounter() != nil:
				sum += m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				sum += m.GetGauge().GetValue()
			case m.GetHistogram() != nil:
				sum += float64(m.GetHistogram().GetSampleCount())
			case m.GetUntyped() != nil:
				sum += m.GetUntyped().GetValue()
			}
		}
	}
	return sum, nil
}

// Names gathers g and returns the names of the metric families it exports.
func Names(g prometheus.Gatherer) (map[string]bool, error) {
	mfs, err := g.Gather()
	if err != nil {
		return nil, err
	}
	names := make(map[string]bool, len(mfs))
	for _, mf := range mfs {
		names[mf.GetName()] = true
	}
	return names, nil
}
