# IronBus build, test and measurement entry points. `make test` is what CI
# runs (.ci/run); everything slow lives behind its own target.

GO        ?= go
FUZZTIME  ?= 30s
BENCH_DIR ?= /var/tmp
SOAK_SEEDS ?= 5000

.PHONY: all build test backends lint unit fuzz-smoke fuzz soak bench bench-consume testdata clean

all: build

build:
	$(GO) build -o bin/ironbus ./cmd/ironbus

# lint: formatting and vet, on this platform and on the ones we must keep
# compiling for (platform code is picked by file suffix).
lint:
	@unformatted=$$(gofmt -l $$(find . -name '*.go' -not -path './.git/*')); \
	if [ -n "$$unformatted" ]; then echo "gofmt would change:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...
	GOOS=darwin $(GO) vet ./...
	GOOS=windows $(GO) vet ./...

# test: lint first, then every test with the race detector. This includes
# the crash sweeps (power cut at every write), 200 seeded power cuts and the
# bit-flip sweep; longer versions are `make soak` and `make fuzz`. Then the
# broker and end-to-end suites again on every network backend this system
# runs (the first pass took auto), so each backend passes the same tests.
test: lint
	$(GO) test -race -count=1 -timeout 20m ./...
	$(MAKE) backends

BACKENDS ?= std epoll uring
backends:
	@$(GO) run ./cmd/ironbus version | sed -n '/network backends/,$$p'
	@set -e; for backend in $(BACKENDS); do \
	  echo "== broker and end-to-end suites on the $$backend backend (skipped if unavailable above)"; \
	  IRONBUS_TEST_LOOP=$$backend $(GO) test -race -count=1 -timeout 10m ./broker/ ./cmd/ironbus/; \
	done

unit:
	$(GO) test -count=1 ./...

# fuzz-smoke: every fuzz target for $(FUZZTIME) each.
fuzz-smoke:
	@set -e; for pkg in $$($(GO) list ./...); do \
	  for target in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz' || true); do \
	    echo "== $$pkg $$target"; \
	    $(GO) test -run '^$$' -fuzz "^$$target$$" -fuzztime $(FUZZTIME) $$pkg; \
	  done; \
	done

fuzz:
	$(MAKE) fuzz-smoke FUZZTIME=10m

# soak: many more seeded power cuts and crash sweeps than `make test`.
soak:
	IRONBUS_POWERCUT_SEEDS=$(SOAK_SEEDS) $(GO) test -count=1 -timeout 2h \
	  -run 'TestPowerCutSeeded|TestCrash' ./segment/

# bench: durable appends through the committer, then the broker over
# loopback, each against the raw device in the same run (see
# docs/BENCHMARKS.md), then the Go micro-benchmarks.
bench:
	$(GO) run ./benchrig/cmd/logbench -dir $(BENCH_DIR) -duration 3s -runs 5
	$(GO) run ./benchrig/cmd/netbench -dir $(BENCH_DIR) -duration 3s -runs 5
	$(GO) test -run '^$$' -bench . -benchmem ./wire/ ./ring/ ./arena/ ./segment/... ./client/...

# bench-consume: 1,000,000 stored records of 256 B and 1 KiB consumed over
# loopback: the streaming tier (DeliverBatch) and work groups acked with
# one AckRange per 1,000-record fetch (docs/BENCHMARKS.md, "Consume").
bench-consume:
	$(GO) run ./benchrig/cmd/consumebench -dir $(BENCH_DIR) -records 1000000 -runs 5 -sizes 256,1024

# bench-peers: the head-to-head table (benchrig/peers, its own module, so
# the broker's module never depends on NATS): IronBus against NATS
# JetStream with sync_interval always and default, NATS core and the raw
# disk, one after another in one run; medians of 3. Prints the table,
# writes bench-results/peers.json and regenerates the peers block of
# docs/BENCHMARKS.md from it. bench-peers-quick: one shorter run, table
# and JSON only.
.PHONY: bench-peers bench-peers-quick
bench-peers:
	cd benchrig/peers && $(GO) run . -dir $(BENCH_DIR) -runs 3 -json ../../bench-results/peers.json \
	  -docs ../../docs/BENCHMARKS.md -command 'make bench-peers'

bench-peers-quick:
	cd benchrig/peers && $(GO) run . -dir $(BENCH_DIR) -quick -json ../../bench-results/peers.json \
	  -command 'make bench-peers-quick'

# crash-test: the kill -9 harness on the real binary, 1,000 cycles (make
# test runs 50); IRONBUS_SEED replays a run (docs/RELIABILITY.md).
.PHONY: crash-test
crash-test:
	IRONBUS_CRASH_CYCLES=$${IRONBUS_CRASH_CYCLES:-1000} $(GO) test -count=1 -timeout 60m -run TestCrashHarnessKill9 -v ./cmd/ironbus/

# powercut-test: the same harness with the data directory on a lazyfs FUSE
# mount and a power cut (unsynced writes dropped, kept in part, reordered
# or torn) after every kill, 1,000 cycles (make test runs 30); then the
# live fsync-failure checks. Needs root and /dev/fuse (skips otherwise);
# IRONBUS_SEED replays a run (docs/RELIABILITY.md).
.PHONY: powercut-test
powercut-test:
	IRONBUS_POWERCUT_CYCLES=$${IRONBUS_POWERCUT_CYCLES:-1000} $(GO) test -count=1 -timeout 120m \
	  -run 'TestPowerCutHarness|TestLiveSyncFailureFreezesTheLog' -v ./cmd/ironbus/

# testdata: regenerate the checked-in demo and damaged data directories.
testdata:
	$(GO) test ./segment -run TestGenerateTestdata -update -count=1

clean:
	rm -rf bin
