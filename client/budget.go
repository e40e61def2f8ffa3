package client

// budget is the client-side retry budget of gRPC's retry throttling
// (https://github.com/grpc/proposal/blob/master/A6-client-retries.md,
// "Throttling Retry Attempts and Hedged RPCs").
//
//	tokens starts at max
//	failed attempt:     tokens = max(0, tokens − 1)
//	successful attempt: tokens = min(max, tokens + ratio)
//	retry allowed  <=>  tokens > max/2
//
// Tokens are kept in thousandths, as gRPC specifies, so that repeated
// additions of 0.1 land exactly on the threshold. Every method is O(1); the
// caller holds the Transport's mutex.
type budget struct {
	max, ratio, tokens int64 // thousandths of a token
}

func newBudget(maxMilli, ratioMilli int64) budget {
	return budget{max: maxMilli, ratio: ratioMilli, tokens: maxMilli}
}

func (b *budget) failure() { b.tokens = max(0, b.tokens-1000) }

func (b *budget) success() { b.tokens = min(b.max, b.tokens+b.ratio) }

// allowsRetry reports whether tokens > max/2, exactly.
func (b *budget) allowsRetry() bool { return 2*b.tokens > b.max }
