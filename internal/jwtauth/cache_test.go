package jwtauth

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"
)

func cachedIssuer(t testing.TB, ks *KeySet, max int, ttl time.Duration) *Issuer {
	is := newIssuer(t, ks)
	is.Cache = CacheOptions{MaxEntries: max, MaxTTL: ttl}
	return is.Init()
}

func TestCacheHitAndExpiry(t *testing.T) {
	s := newRSA(t, "k")
	p := newIDP(t, s.jwk())
	clk := newClock(testNow)
	is := cachedIssuer(t, startKeys(t, p, clk, ""), 100, 2*time.Hour)
	tok := s.sign(map[string]any{"alg": s.alg, "kid": "k"}, goodClaims()) // exp now+1h
	ctx := context.Background()
	first, err := is.Verify(ctx, tok, clk.Now())
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		id, err := is.Verify(ctx, tok, clk.Now())
		if err != nil || id.App != first.App || id.Subject != first.Subject || len(id.Scopes) != 2 {
			t.Fatalf("hit %d: %+v %v", i, id, err)
		}
	}
	if h, m := is.CacheStats(); h != 3 || m != 1 {
		t.Fatalf("hits %d misses %d, want 3 1", h, m)
	}
	// At exp+skew the cached token is refused (by a full verification).
	clk.Add(time.Hour + 31*time.Second)
	if _, err := is.Verify(ctx, tok, clk.Now()); err != errExpired {
		t.Fatalf("at exp: %v, want expired", err)
	}
	if h, _ := is.CacheStats(); h != 3 {
		t.Fatalf("hit past exp")
	}
	if is.cache.Len() != 0 {
		t.Fatalf("expired entry kept")
	}
}

func TestCacheMaxTTL(t *testing.T) {
	s := newEC(t, "k")
	p := newIDP(t, s.jwk())
	clk := newClock(testNow)
	is := cachedIssuer(t, startKeys(t, p, clk, ""), 100, time.Minute)
	tok := s.sign(map[string]any{"alg": s.alg, "kid": "k"}, goodClaims())
	ctx := context.Background()
	for i := 0; i < 2; i++ {
		if _, err := is.Verify(ctx, tok, clk.Now()); err != nil {
			t.Fatal(err)
		}
	}
	clk.Add(time.Minute)
	if _, err := is.Verify(ctx, tok, clk.Now()); err != nil {
		t.Fatal(err)
	}
	if h, m := is.CacheStats(); h != 1 || m != 2 {
		t.Fatalf("hits %d misses %d, want 1 2 (entry past max_ttl re-verified)", h, m)
	}
}

func TestCacheBoundAndInvalidNotCached(t *testing.T) {
	s := newRSA(t, "k")
	p := newIDP(t, s.jwk())
	clk := newClock(testNow)
	is := cachedIssuer(t, startKeys(t, p, clk, ""), 32, 0)
	ctx := context.Background()
	for i := 0; i < 100; i++ {
		tok := s.sign(map[string]any{"alg": s.alg, "kid": "k"}, with(goodClaims(), "jti", fmt.Sprint(i)))
		if _, err := is.Verify(ctx, tok, clk.Now()); err != nil {
			t.Fatal(err)
		}
		if n := is.cache.Len(); n > 32 {
			t.Fatalf("%d entries over the bound 32", n)
		}
	}
	n := is.cache.Len()
	bad := s.sign(map[string]any{"alg": s.alg, "kid": "k"}, with(goodClaims(), "aud", "other"))
	for i := 0; i < 3; i++ {
		if _, err := is.Verify(ctx, bad, clk.Now()); err != errWrongAudience {
			t.Fatalf("bad token: %v", err)
		}
		if _, err := is.Verify(ctx, bad+"x", clk.Now()); err == nil {
			t.Fatal("tampered token accepted")
		}
	}
	if is.cache.Len() != n {
		t.Fatalf("invalid token cached: %d entries, was %d", is.cache.Len(), n)
	}
}

func TestCacheKeyRemoved(t *testing.T) {
	s, s2 := newRSA(t, "k"), newRSA(t, "k2")
	p := newIDP(t, s.jwk(), s2.jwk())
	clk := newClock(testNow)
	ks := startKeys(t, p, clk, "")
	is := cachedIssuer(t, ks, 100, 0)
	tok := s.sign(map[string]any{"alg": s.alg, "kid": "k"}, goodClaims())
	ctx := context.Background()
	for i := 0; i < 2; i++ {
		if _, err := is.Verify(ctx, tok, clk.Now()); err != nil {
			t.Fatal(err)
		}
	}
	p.set(false, s2.jwk()) // key k removed from the JWKS
	if err := ks.fetchNow(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := is.Verify(ctx, tok, clk.Now()); err == nil {
		t.Fatal("token of a removed key accepted from the cache")
	}
	if h, _ := is.CacheStats(); h != 1 {
		t.Fatalf("hits %d, want 1", h)
	}
}

func TestCacheConcurrent(t *testing.T) {
	s := newEC(t, "k")
	p := newIDP(t, s.jwk())
	clk := newClock(testNow)
	is := cachedIssuer(t, startKeys(t, p, clk, ""), 16, 0)
	toks := make([]string, 40)
	for i := range toks {
		toks[i] = s.sign(map[string]any{"alg": s.alg, "kid": "k"}, with(goodClaims(), "jti", fmt.Sprint(i)))
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 100; i++ {
				if _, err := is.Verify(context.Background(), toks[(g*7+i)%len(toks)], clk.Now()); err != nil {
					errs <- err
					return
				}
			}
		}(g)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if n := is.cache.Len(); n > 16 {
		t.Fatalf("%d entries over 16", n)
	}
}

func BenchmarkVerifyCached(b *testing.B) {
	for _, mk := range []func(testing.TB, string) *signer{newRSA, newEC} {
		s := mk(b, "k")
		p := newIDP(b, s.jwk())
		clk := newClock(testNow)
		is := cachedIssuer(b, startKeys(b, p, clk, ""), DefaultCacheEntries, 0)
		tok := s.sign(map[string]any{"alg": s.alg, "kid": "k"}, goodClaims())
		b.Run(s.alg+"/hit", func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if _, err := is.Verify(context.Background(), tok, clk.Now()); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
