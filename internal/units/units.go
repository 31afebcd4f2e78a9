// Package units reads and writes byte counts the way dsmount's flags and
// messages show them: powers of 1024 ("4M", "1.5 GiB").
package units

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// ParseSize reads a byte count: a number with an optional K, M, G or T
// suffix in powers of 1024 ("4M", "1.5G", "200GiB", "512").
func ParseSize(s string) (int64, error) {
	in := strings.TrimSpace(s)
	num := strings.TrimRight(in, "KMGTPkmgtpiIbB")
	suffix := strings.ToUpper(in[len(num):])
	mult := map[string]float64{
		"": 1, "B": 1,
		"K": 1 << 10, "KB": 1 << 10, "KIB": 1 << 10,
		"M": 1 << 20, "MB": 1 << 20, "MIB": 1 << 20,
		"G": 1 << 30, "GB": 1 << 30, "GIB": 1 << 30,
		"T": 1 << 40, "TB": 1 << 40, "TIB": 1 << 40,
	}[suffix]
	v, err := strconv.ParseFloat(num, 64)
	if mult == 0 || err != nil || v < 0 || math.IsInf(v, 0) || math.IsNaN(v) || v*mult > math.MaxInt64/2 {
		return 0, fmt.Errorf("invalid size %q: want a number with an optional K, M, G or T suffix (powers of 1024), e.g. 4M or 200G", s)
	}
	return int64(v * mult), nil
}

// Bytes shows n in the largest power-of-1024 unit under which it is at
// least 1 ("512 B", "4.0 MiB").
func Bytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
