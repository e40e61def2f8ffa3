# levee: the two commands a newcomer needs are `make demo` and `make test`.
GO       ?= go
export GOTOOLCHAIN := local
export GOFLAGS     := -buildvcs=false
VERSION  ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
FUZZTIME ?= 5s

# Every native fuzz target, as package:Target. `make test` runs each for
# FUZZTIME; crashers land in the package's testdata/fuzz and stay there.
FUZZ_TARGETS := \
	./internal/config:FuzzParse \
	./internal/balance:FuzzSmoothWeighted \
	./internal/balance:FuzzLeastRequest \
	./internal/balance:FuzzConsistentHash \
	./internal/route:FuzzMatch \
	./internal/telemetry:FuzzAppendJSONString \
	./client:FuzzParseRetryAfter \
	./internal/discovery:FuzzParseList \
	./internal/discovery:FuzzParseInstance

.PHONY: all build demo test services vet unit fuzz bench clean

all: build

build:
	$(GO) build -ldflags "-X main.version=$(VERSION)" -o bin/levee ./cmd/levee

## demo: start levee with three built-in demo upstreams (no outside services).
demo: build
	./bin/levee demo

## test: install the real services the tests start (etcd), vet, the whole
## suite under the race detector, then each fuzz target briefly.
test: services vet unit fuzz

services:
	scripts/install-services.sh

vet:
	$(GO) vet ./...
	@unformatted=$$(gofmt -l $$(find . -name '*.go' -not -path './.git/*')); \
	if [ -n "$$unformatted" ]; then echo "gofmt needed: $$unformatted"; exit 1; fi

# LEVEE_REQUIRE_SERVICES makes a test fail, not skip, when a service it
# needs (installed by `make services`) is missing.
unit:
	LEVEE_REQUIRE_SERVICES=1 $(GO) test -race -count=1 -timeout 10m ./...

fuzz:
	@set -e; for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; name=$${t##*:}; \
		echo "fuzz $$pkg $$name for $(FUZZTIME)"; \
		$(GO) test -run='^$$' -fuzz="^$$name\$$" -fuzztime=$(FUZZTIME) $$pkg; \
	done

## bench: the Go benchmarks with allocation counts.
bench:
	$(GO) test -run='^$$' -bench=. -benchmem ./...

clean:
	rm -rf bin
