package balance

import (
	"encoding/binary"
	"errors"
	"fmt"
	"testing"

	"github.com/levee-gw/levee/internal/endpoint"
)

// Fuzz limits: enough endpoints to reach the Pfair regime, few enough
// builds that one input runs in milliseconds.
const (
	fuzzMaxEndpoints = 1024
	fuzzMaxBuilds    = 4
)

// fuzzOp is what one input byte asks for; the bytes after it are operands.
const (
	opAdd16   = iota // add an endpoint; weight: next 2 bytes
	opAdd32          // add an endpoint; weight: next 4 bytes (any uint32)
	opAddMany        // add 1..256 endpoints (next byte) of one weight (next 2 bytes)
	opAddNil         // add a nil entry
	opDrain          // replace endpoint (next byte mod n) by a drained copy
	opRemove         // remove endpoint (next byte mod n)
	opBuild          // build a picker and check every invariant
	opPick           // pick 0..255 times (next byte) from the last picker
	numOps
)

type fuzzReader struct{ data []byte }

func (r *fuzzReader) next(n int) []byte {
	if len(r.data) < n {
		r.data = nil
		return make([]byte, n)
	}
	b := r.data[:n]
	r.data = r.data[n:]
	return b
}

func (r *fuzzReader) u8() int     { return int(r.next(1)[0]) }
func (r *fuzzReader) u16() uint32 { return uint32(binary.LittleEndian.Uint16(r.next(2))) }
func (r *fuzzReader) u32() uint32 { return binary.LittleEndian.Uint32(r.next(4)) }
func (r *fuzzReader) empty() bool { return len(r.data) == 0 }
func (r *fuzzReader) op() int     { return r.u8() % numOps }
func fuzzName(id int) string      { return fmt.Sprintf("10.0.%d.%d:80", id/256, id%256) }
func (r *fuzzReader) index(n int) int {
	return r.u8() % n
}

// FuzzSmoothWeighted reads bytes as a sequence of add/drain/remove/build/pick
// operations over an endpoint set with arbitrary uint32 weights. Every build
// must return and satisfy checkPicker's invariants; every pick must return a
// live endpoint of that snapshot, or ErrNoEndpoint exactly when it has none.
func FuzzSmoothWeighted(f *testing.F) {
	f.Add([]byte{opAdd16, 3, 0, opAdd16, 1, 0, opBuild, opPick, 8})
	f.Add([]byte{opAdd16, 5, 0, opAdd16, 1, 0, opAdd16, 1, 0, opBuild, opDrain, 0, opBuild, opPick, 20})
	f.Add([]byte{opAdd16, 0, 0, opAddNil, opBuild, opPick, 3})
	f.Add([]byte{opAdd32, 0xff, 0xff, 0xff, 0xff, opAdd32, 0, 0, 0, 0x80, opAdd16, 0x10, 0x27, opBuild})
	f.Add([]byte{opAddMany, 255, 0x10, 0x27, opAddMany, 255, 0xff, 0x00, opAdd16, 1, 0, opBuild, opPick, 255})
	f.Add([]byte{opAddMany, 63, 0, 4, opAdd16, 1, 0, opBuild, opRemove, 64, opBuild})
	f.Fuzz(func(t *testing.T, data []byte) {
		r := &fuzzReader{data: data}
		var (
			eps    []*endpoint.Endpoint
			p      *SmoothWeighted
			live   map[*endpoint.Endpoint]bool
			builds int
			id     int
		)
		add := func(w uint32) {
			if len(eps) < fuzzMaxEndpoints {
				eps = append(eps, endpoint.New(fuzzName(id), w))
				id++
			}
		}
		build := func() {
			builds++
			p = NewSmoothWeighted(eps)
			checkPicker(t, eps, p)
			live = make(map[*endpoint.Endpoint]bool, len(eps))
			for _, e := range eps {
				if e != nil && e.Weight > 0 {
					live[e] = true
				}
			}
		}
		for !r.empty() && builds < fuzzMaxBuilds {
			switch r.op() {
			case opAdd16:
				add(r.u16())
			case opAdd32:
				add(r.u32())
			case opAddMany:
				n, w := r.u8()+1, r.u16()
				for range n {
					add(w)
				}
			case opAddNil:
				if len(eps) < fuzzMaxEndpoints {
					eps = append(eps, nil)
				}
			case opDrain:
				if len(eps) > 0 {
					i := r.index(len(eps))
					if eps[i] != nil {
						// A new weight is a new Endpoint; the old snapshot keeps the old one.
						eps[i] = endpoint.New(eps[i].Address, 0)
					}
				}
			case opRemove:
				if len(eps) > 0 {
					i := r.index(len(eps))
					eps = append(eps[:i:i], eps[i+1:]...)
				}
			case opBuild:
				build()
			case opPick:
				n := r.u8()
				if p == nil {
					break
				}
				for range n {
					e, err := p.Pick()
					switch {
					case len(live) == 0:
						if e != nil || !errors.Is(err, ErrNoEndpoint) {
							t.Fatalf("no live endpoint: Pick() = %v, %v; want nil, ErrNoEndpoint", e, err)
						}
					case err != nil || !live[e]:
						t.Fatalf("Pick() = %v, %v; want a live endpoint of the snapshot", e, err)
					}
				}
			}
		}
		if builds < fuzzMaxBuilds {
			build()
		}
	})
}
