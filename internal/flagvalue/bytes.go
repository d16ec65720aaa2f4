// Package flagvalue holds flag values Pace's commands share.
package flagvalue

import (
	"fmt"
	"strconv"
	"strings"
)

// Bytes is a flag value in bytes written with an optional binary unit:
// 512KiB, 256MiB, 10GiB, or a plain number of bytes.
type Bytes int64

var byteUnits = []struct {
	suffix string
	factor int64
}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40}}

func (b *Bytes) String() string {
	for i := len(byteUnits) - 1; i >= 0; i-- {
		u := byteUnits[i]
		if *b != 0 && int64(*b)%u.factor == 0 {
			return fmt.Sprintf("%d%s", int64(*b)/u.factor, u.suffix)
		}
	}
	return strconv.FormatInt(int64(*b), 10)
}

func (b *Bytes) Set(s string) error {
	factor := int64(1)
	num := s
	for _, u := range byteUnits {
		if strings.HasSuffix(s, u.suffix) {
			num, factor = strings.TrimSuffix(s, u.suffix), u.factor
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n <= 0 {
		return fmt.Errorf("want a positive size such as 256MiB or 10GiB")
	}
	*b = Bytes(n * factor)
	return nil
}

func (b *Bytes) Type() string { return "size" }
