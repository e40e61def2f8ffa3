# levee: the two commands a newcomer needs are `make demo` and `make test`.
GO       ?= go
export GOTOOLCHAIN := local
export GOFLAGS     := -buildvcs=false
# The version stamp (`levee version` prints "vX.Y.Z (commit, date, go)"):
# the nearest v-tag (git describe: v0.1.0, or v0.1.0-3-gabc1234 after it),
# else the VERSION file (a tarball, or the image's build, which has no .git).
# DATE is the commit's date in UTC, not the build's, so that two builds of
# one commit are byte-identical (make release's reproducibility).
VERSION  ?= $(shell git describe --tags --match 'v[0-9]*' --dirty 2>/dev/null || cat VERSION)
COMMIT   ?= $(shell git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
DATE     ?= $(shell TZ=UTC git log -1 --date=format-local:%Y-%m-%dT%H:%M:%SZ --format=%cd 2>/dev/null || echo unknown)
# BUILD is the one definition of how levee is built: `make build`, `make
# release` and the Dockerfile (which runs `make build`) use it.
# CGO_ENABLED=0: a static binary (levee needs no cgo; its SQLite driver is
# pure Go). -trimpath and an empty -buildid: reproducible bytes.
BUILD    = CGO_ENABLED=0 $(GO) build -trimpath -ldflags "-buildid= -X main.version=$(VERSION) -X main.commit=$(COMMIT) -X main.date=$(DATE)"
RELEASE_PLATFORMS := linux/amd64 linux/arm64

# Every native fuzz target, as package:Target:executions. `make test` runs
# each for that many executions (a few seconds each here); crashers land in
# the package's testdata/fuzz and stay there. Budgets are execution counts,
# not durations: with a duration, Go 1.26's fuzz coordinator can report a
# spurious "context deadline exceeded" at the boundary on a busy machine
# (go.dev/issue/75804, fixed in Go 1.27). Minimising each new interesting
# input is capped too (-fuzzminimizetime, else up to 60 s per input for a
# slow target such as FuzzZoned). FUZZSCALE multiplies every budget.
FUZZSCALE ?= 1
FUZZ_TARGETS := \
	./internal/grpcwire:FuzzParseTimeout:5000 \
	./internal/grpcwire:FuzzMessage:5000 \
	./internal/proxyproto:FuzzRead:5000 \
	./internal/upstream:FuzzH2FrameScan:5000 \
	./internal/gateway:FuzzRedirectHost:5000 \
	./internal/proxy:FuzzClientAddress:5000 \
	./internal/upstream:FuzzFastHead:5000 \
	./internal/upstream:FuzzGRPCHealthAnswer:5000 \
	./internal/grpcweb:FuzzTextDecoder:5000 \
	./internal/grpcweb:FuzzTrailerFrame:5000 \
	./internal/grpcweb:FuzzTextWriter:2000 \
	./internal/proxy:FuzzAcceptEncoding:3000 \
	./internal/admin:FuzzDuplicateKey:3000 \
	./internal/admin:FuzzBrowserHeaders:3000 \
	./internal/config:FuzzParse:3000 \
	./internal/config:FuzzSchemaAgrees:2000 \
	./internal/config:FuzzEffectiveRoundTrips:2000 \
	./internal/clusterstore:FuzzDecodeRecord:2000 \
	./internal/auth:FuzzCanonicalCertValue:5000 \
	./internal/clusterstore:FuzzDecodeEntry:2000 \
	./internal/clusterstore:FuzzPushValue:2000 \
	./internal/config:FuzzParseDataAPI:3000 \
	./internal/dataquery:FuzzChoices:20000 \
	./internal/balance:FuzzSmoothWeighted:600 \
	./internal/balance:FuzzLeastRequest:5000 \
	./internal/balance:FuzzConsistentHash:300 \
	./internal/balance:FuzzZoned:1000 \
	./internal/route:FuzzMatch:50000 \
	./internal/route:FuzzParseTemplate:20000 \
	./internal/route:FuzzQueryCond:20000 \
	./internal/openapi:FuzzRender:3000 \
	./internal/telemetry:FuzzAppendJSONString:20000 \
	./internal/admin:FuzzEndpointJSON:10000 \
	./internal/telemetry:FuzzTraceIDOf:30000 \
	./internal/tracing:FuzzParseTraceparent:10000 \
	./internal/jsonstr:FuzzAppend:20000 \
	./internal/telemetry:FuzzAppendQuery:20000 \
	./client:FuzzParseRetryAfter:50000 \
	./internal/auth:FuzzParseSignatureHeader:50000 \
	./internal/auth:FuzzIndex:10000 \
	./internal/auth:FuzzParseBasic:50000 \
	./internal/jwtauth:FuzzPreCheck:20000 \
	./internal/jwtauth:FuzzMaxAge:20000 \
	./internal/jwtauth:FuzzKeepClaims:5000 \
	./internal/dataquery:FuzzParseFrom:10000 \
	./internal/discovery:FuzzParseList:5000 \
	./internal/discovery:FuzzParseInstance:10000 \
	./internal/discovery:FuzzDNSRecords:5000 \
	./internal/h1server:FuzzParseHead:30000 \
	./internal/h1server:FuzzH2Parsers:30000 \
	./internal/certset:FuzzChoice:20000 \
	./internal/urlpath:FuzzNormalizePath:20000 \
	./internal/dataquery:FuzzScanSQL:30000 \
	./internal/dataquery:FuzzStatementCheck:30000 \
	./internal/dataquery:FuzzBindSQL:30000 \
	./internal/dataquery:FuzzBindTable:30000 \
	./internal/dataquery:FuzzDecodeCursor:20000 \
	./internal/dataformat:FuzzJSONRoundTrip:5000 \
	./internal/dataformat:FuzzCSVRoundTrip:20000 \
	./internal/dataformat:FuzzNegotiate:30000 \
	./internal/datacache:FuzzOps:20000 \
	./internal/datasource:FuzzPGDecode:10000 \
	./internal/loadgen:FuzzExchange:20000 \
	./internal/memguard:FuzzParseLimits:5000 \
	./internal/config:FuzzHeaderTemplate:5000 \
	./internal/proxy:FuzzCORSPreflight:20000 \
	./internal/proxy:FuzzRedirectLocation:10000

.PHONY: all build release demo test services vet unit load fuzz bench bench-data clean

all: build

build:
	$(BUILD) -o bin/levee ./cmd/levee

## release: static, reproducible binaries for linux/amd64 and linux/arm64
## in dist/ (levee-VERSION-linux-ARCH) with their SHA256SUMS.
release:
	rm -rf dist && mkdir -p dist
	@set -e; for p in $(RELEASE_PLATFORMS); do \
		os=$${p%%/*}; arch=$${p##*/}; out=dist/levee-$(VERSION)-$$os-$$arch; \
		echo "build $$out"; GOOS=$$os GOARCH=$$arch $(BUILD) -o $$out ./cmd/levee; \
	done
	cd dist && sha256sum levee-* > SHA256SUMS && cat SHA256SUMS

## demo: start levee with three built-in demo upstreams and an embedded SQLite
## data API (no outside services).
demo: build
	./bin/levee demo

## test: install the real services the tests start (etcd, PostgreSQL), vet (go vet,
## staticcheck, gofmt), the whole suite under the race detector, then each
## fuzz target briefly.
test: services vet unit load fuzz

services:
	scripts/install-services.sh

# staticcheck and deadcode are installed on first use (pinned;
# scripts/staticcheck.sh, scripts/deadcode.sh: no function unreachable
# from main and the tests).
vet:
	$(GO) vet ./...
	GO=$(GO) scripts/staticcheck.sh ./...
	GO=$(GO) scripts/deadcode.sh
	@unformatted=$$(gofmt -l $$(find . -name '*.go' -not -path './.git/*')); \
	if [ -n "$$unformatted" ]; then echo "gofmt needed: $$unformatted"; exit 1; fi

# LEVEE_REQUIRE_SERVICES makes a test fail, not skip, when a service it
# needs (installed by `make services`) is missing.
# UNIT_FIRST: the packages whose tests take longest under -race, named
# before ./... so that go test builds and starts them first (it runs two
# packages at a time, in the order given, and drops the repeats): the
# longest, internal/gateway (~270 s), no longer starts after the ~40
# packages before it alphabetically, so the step ends near the larger of
# its time and half the total.
UNIT_FIRST := ./internal/gateway/ ./cmd/levee/ ./internal/balance/ ./internal/discovery/ \
	./internal/clusterstore/ ./internal/apps/ ./internal/datasource/ ./internal/testsvc/ ./internal/h1server/
unit:
	LEVEE_REQUIRE_SERVICES=1 $(GO) test -race -count=1 -timeout 10m $(UNIT_FIRST) ./...

# Load tests measure goodput and latency, so they are built without the
# race detector (their files say //go:build !race) and run in a step of
# their own, with nothing else competing for the cores.
# One name per line (a new load test adds a line).
LOAD_TEST_NAMES := \
	TestBasicAuthFloodCPU \
	TestClusterDataAPIPublishPropagation \
	TestOverloadGoodputAt10x \
	TestStormReplayed \
	TestRetryAmplification \
	TestMemoryLimitHolds \
	TestMillionRowsHeap \
	TestDataStormReplayed \
	TestDataSelectSpeed \
	TestAlertsFireInPrometheus \
	TestProcsSharedLimitAccuracy \
	TestProcsRedisOutage \
	TestProcsSharedApps \
	TestProcsBothStores \
	TestClusterPushPropagation \
	TestAdminEndpointPagesRSS \
	TestSlowClientsBesideNGINX \
	TestStatementCheckLargeInputs \
	TestH2FloodsAgainstNGINX \
	TestH2specConformance \
	TestIncidentCPUPerRequest \
	TestOutlierSlowStartRamp \
	TestUpstreamTLSRotationUnderLoad \
	TestDNSRecordsChangeUnderLoad \
	TestDrillAgainstLevee \
	TestDrillWithoutDefences \
	TestLongConnectionsAcrossReloads \
	TestLongConnectionsDrainTimeout \
	TestLongStreamDrainTimeout \
	TestScaleReloadAndPublish \
	TestMirrorKeepsPrimaryLatency \
	TestProcsSharedDataAPIs \
	TestH2HostileUpstreams
empty :=
space := $(empty) $(empty)
LOAD_TESTS := $(subst $(space),|,$(strip $(LOAD_TEST_NAMES)))
# internal/clusterproc (levee nodes as processes) runs after the others,
# not beside them: go test runs two packages at once on two cores.
load:
	$(GO) test -count=1 -timeout 12m -run '^($(LOAD_TESTS))$$' -v ./internal/gateway/ ./internal/dataformat/ ./internal/dataquery/
	$(GO) test -count=1 -timeout 5m -run '^($(LOAD_TESTS))$$' -v ./internal/clusterproc/
	$(GO) test -count=1 -timeout 5m -run '^($(LOAD_TESTS))$$' -v ./cmd/levee/

# scripts/fuzz.sh: each package's fuzz binary built once, two packages
# at a time, one fuzz worker each.
fuzz:
	GO=$(GO) FUZZSCALE=$(FUZZSCALE) scripts/fuzz.sh $(FUZZ_TARGETS)

## bench: the Go benchmarks with allocation counts.
bench:
	$(GO) test -run='^$$' -bench=. -benchmem ./...

## bench-data: levee's data routes against a bare net/http + pgx (and
## modernc SQLite) server, as separate processes (bench/datacompare; about
## 7 min; DATACOMPARE_PROFILE=dir adds CPU profiles of levee). Not part of
## `make test`: its figures are wall-clock ones.
bench-data: build
	$(GO) test -tags datacompare -count=1 -timeout 30m -run '^TestDataCompare$$' -v ./bench/datacompare/

clean:
	rm -rf bin dist
