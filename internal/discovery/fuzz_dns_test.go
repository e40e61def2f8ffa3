package discovery

import (
	"net/netip"
	"testing"
)

// FuzzDNSRecords turns arbitrary bytes into a SRV answer (8 bytes a
// record: priority, weight, port, target index, address byte) and checks
// the record → instance conversion: SRVTier keeps only the lowest
// priority and never a "." target, and RecordsUpdate either refuses whole
// with a *PayloadError or returns unique instances within max_weight, one
// per distinct address, with every record accounted for.
func FuzzDNSRecords(f *testing.F) {
	f.Add([]byte{0, 10, 0, 5, 0x1f, 0x90, 0, 1}, uint32(100))
	f.Add([]byte{0, 1, 0, 0, 0, 80, 1, 1, 0, 1, 0, 0, 0, 80, 2, 2}, uint32(1))
	f.Add([]byte{0, 0, 0xff, 0xff, 0, 0, 3, 3, 0, 0, 0, 0, 0, 1, 0, 3}, uint32(10000))
	f.Fuzz(func(t *testing.T, data []byte, maxWeight uint32) {
		maxWeight = 1 + maxWeight%MaxWeightLimit
		targets := []string{".", "a.test.", "b.test.", "c.test."}
		var rs []SRVTarget
		var addr []byte
		for i := 0; i+8 <= len(data) && len(rs) < 512; i += 8 { // bound: 512 records
			rs = append(rs, SRVTarget{
				Priority: uint16(data[i])<<8 | uint16(data[i+1]),
				Weight:   uint16(data[i+2])<<8 | uint16(data[i+3]),
				Port:     uint16(data[i+4])<<8 | uint16(data[i+5]),
				Target:   targets[int(data[i+6])%len(targets)],
			})
			addr = append(addr, data[i+7])
		}
		tier := SRVTier(append([]SRVTarget(nil), rs...))
		lowest := -1
		for _, r := range rs {
			if r.Target != "." && (lowest < 0 || int(r.Priority) < lowest) {
				lowest = int(r.Priority)
			}
		}
		var recs []DNSRecord
		for i, r := range tier {
			if r.Target == "." || int(r.Priority) != lowest {
				t.Fatalf("tier kept %+v, lowest priority %d", r, lowest)
			}
			recs = append(recs, DNSRecord{IP: netip.AddrFrom4([4]byte{10, 0, 0, addr[i%len(addr)]}), Port: r.Port, Weight: srvWeight(r.Weight)})
		}
		u, err := RecordsUpdate(recs, Limits{MaxWeight: maxWeight})
		if err != nil {
			if _, ok := err.(*PayloadError); !ok {
				t.Fatalf("refusal %T %v, want a *PayloadError", err, err)
			}
			return
		}
		if len(u.Instances)+len(u.Rejected) != len(recs) {
			t.Fatalf("%d instances + %d rejected from %d records", len(u.Instances), len(u.Rejected), len(recs))
		}
		seen := map[string]bool{}
		for _, in := range u.Instances {
			if seen[in.Address] || in.Weight > maxWeight*100 {
				t.Fatalf("instance %+v duplicate or over max weight %d", in, maxWeight)
			}
			seen[in.Address] = true
		}
	})
}
