package engine

import (
	"fmt"
	"strings"
	"testing"
)

// TestPairsDuplicates: a duplicate key is reported with the line of its
// first use in a short mapping (searched) and a long one (indexed from
// the 16th key on), before and after the switch, and the pairs kept are
// the first of each key, in order.
func TestPairsDuplicates(t *testing.T) {
	for _, n := range []int{3, 15, 16, 17, 40} {
		var b strings.Builder
		for i := range n {
			fmt.Fprintf(&b, "k%d: %d\n", i, i)
		}
		// Duplicates of the first key and of the last, at lines n+1, n+2.
		fmt.Fprintf(&b, "k0: again\nk%d: again\n", n-1)
		root, errs := Decode([]byte(b.String()))
		if errs != nil {
			t.Fatal(errs)
		}
		p := &Parser{}
		pairs := p.Pairs("m", root)
		if len(pairs) != n {
			t.Fatalf("%d keys: %d pairs kept", n, len(pairs))
		}
		for i, kv := range pairs {
			if kv.Key != fmt.Sprintf("k%d", i) || kv.V.Value != fmt.Sprint(i) {
				t.Fatalf("%d keys: pair %d is %s: %s", n, i, kv.Key, kv.V.Value)
			}
		}
		got := p.Result()
		want := []string{
			"m.k0: duplicate key (first at line 1)",
			fmt.Sprintf("m.k%d: duplicate key (first at line %d)", n-1, n),
		}
		if got == nil || len(*got) != 2 {
			t.Fatalf("%d keys: %v, want %q", n, got, want)
		}
		for i, fe := range *got {
			if fe.Path+": "+fe.Message != want[i] || fe.Line != n+1+i {
				t.Errorf("%d keys: %s: %s at line %d, want %q at line %d", n, fe.Path, fe.Message, fe.Line, want[i], n+1+i)
			}
		}
	}
}
