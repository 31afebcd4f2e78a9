package testenv

import "slices"

// Median is the median of v (the mean of the middle two for an even
// count), for benchmarks that report a median over rounds.
func Median(v []float64) float64 {
	s := slices.Sorted(slices.Values(v))
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
