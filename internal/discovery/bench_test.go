package discovery

import (
	"fmt"
	"strings"
	"testing"
)

// benchPayload is a list of n instances in the shapes registries send:
// weights as numbers and strings, zones, metadata, an unknown field.
func benchPayload(n int) []byte {
	var b strings.Builder
	b.WriteByte('[')
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		w := fmt.Sprintf("%d", i%100)
		if i%2 == 1 {
			w = fmt.Sprintf(`"%d.5"`, i%100)
		}
		fmt.Fprintf(&b, `{"address": "10.%d.%d.%d:8080", "weight": %s, "zone": "zone-%d", "metadata": {"version": "v2", "pod": "video-%d"}, "registry_id": %d}`,
			i>>16&255, i>>8&255, i&255, w, i%3, i, i)
	}
	b.WriteByte(']')
	return []byte(b.String())
}

func BenchmarkParseList(b *testing.B) {
	for _, n := range []int{100, 10000} {
		data := benchPayload(n)
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				u, err := ParseList(data, Limits{})
				if err != nil || len(u.Instances) != n {
					b.Fatalf("%d instances, %v", len(u.Instances), err)
				}
			}
		})
	}
}

func BenchmarkParseWeight(b *testing.B) {
	for _, raw := range []string{`3`, `"2.50"`, `1e3`, `"abc"`} {
		b.Run(raw, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				parseWeight([]byte(raw), DefaultMaxWeight*100)
			}
		})
	}
}
