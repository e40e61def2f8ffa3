package discovery

import (
	"errors"
	"testing"
	"time"
)

// TestSharedPushOrder: shared pushes apply in revision order, each at most
// once: a revision below the one applied is superseded (not offered), the
// same revision again answers as it did, a later one applies; a
// confirmation of a push a later one replaced releases nothing.
func TestSharedPushOrder(t *testing.T) {
	f := newPushFeed(t, nil, func() {})
	now := time.Unix(1_700_000_000, 0)
	a := []Instance{{Address: "10.0.0.1:80", Weight: 100}, {Address: "10.0.0.2:80", Weight: 100}}
	b := append([]Instance{{Address: "10.0.0.0:80", Weight: 100}}, a...) // one added: the guard applies it
	res, superseded, err := f.ApplyShared(5, pushBody(a), now)
	if err != nil || superseded || res.Instances != 2 {
		t.Fatalf("rev 5: %+v superseded %v err %v", res, superseded, err)
	}
	if _, superseded, _ = f.ApplyShared(3, pushBody(b), now); !superseded {
		t.Fatal("rev 3 after rev 5 was offered, want superseded")
	}
	if got, _ := f.Instances(); len(got) != 2 {
		t.Fatalf("after the superseded push the feed serves %v, want rev 5's", got)
	}
	again, superseded, err := f.ApplyShared(5, pushBody(b), now) // a second delivery of rev 5
	if err != nil || superseded || again.Instances != res.Instances {
		t.Fatalf("rev 5 again: %+v superseded %v err %v, want the first answer", again, superseded, err)
	}
	if got, _ := f.Instances(); len(got) != 2 {
		t.Fatalf("a second delivery of rev 5 was offered again: serving %v", got)
	}
	if _, superseded, err = f.ApplyShared(7, pushBody(b), now); err != nil || superseded {
		t.Fatalf("rev 7: superseded %v err %v", superseded, err)
	}
	if got, _ := f.Instances(); len(got) != 3 {
		t.Fatalf("after rev 7 the feed serves %v, want rev 7's", got)
	}
	if _, err := f.ApplySharedConfirm(5, now); !errors.Is(err, ErrNothingHeld) {
		t.Fatalf("confirming rev 5 after rev 7: %v, want ErrNothingHeld", err)
	}
}
