# IronBus build, test and measurement entry points. `make test` is what CI
# runs (.ci/run); everything slow lives behind its own target.

GO        ?= go
FUZZTIME  ?= 30s
BENCH_DIR ?= /var/tmp
SOAK_SEEDS ?= 5000
SOAK_IDEMPOTENT_CYCLES ?= 200
SOAK_CAS_ROUNDS ?= 200
SOAK_SIM_SEEDS ?= 10000
SOAK_CLUSTER_CYCLES ?= 50

.PHONY: all build test backends rig lint unit fuzz-smoke fuzz fuzz-soak soak bench bench-consume testdata clean docs size boundaries

all: build

build:
	$(GO) build -o bin/ironbus ./cmd/ironbus

# lint: formatting and vet, on this platform and on the ones we must keep
# compiling for (platform code is picked by file suffix). 32-bit armv7 is
# vetted too: an int is 32 bits there, so a constant like math.MaxUint32
# compared with a length stops compiling (docs/PACKAGING.md).
lint:
	@unformatted=$$(gofmt -l $$(find . -name '*.go' -not -path './.git/*')); \
	if [ -n "$$unformatted" ]; then echo "gofmt would change:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...
	GOOS=darwin $(GO) vet ./...
	GOOS=windows $(GO) vet ./...
	CGO_ENABLED=0 GOARCH=arm GOARM=7 $(GO) vet ./...
	$(MAKE) boundaries

# boundaries: the package boundaries DESIGN.md draws, checked on the
# dependency graph: the engine speaks no protocol (no wire, even through a
# dependency), the SDK carries no storage engine, and the record codec
# stands alone.
boundaries:
	@set -e; check() { if $(GO) list -deps "$$1" | grep -qx "github.com/ironbus/ironbus/$$2"; then \
	  echo "boundaries: $$1 depends on $$2 ($$3)"; exit 1; fi; }; \
	check ./broker wire "the engine imports no protocol: the wire protocol lives in session"; \
	check ./client segment "the SDK shares the record codec (package record), not the storage engine"; \
	check ./client broker "the SDK does not link the engine"; \
	check ./record segment "record is the shared codec below segment"; \
	echo "boundaries: broker without wire, client without segment or broker, record alone"

# test: lint first, then every test with the race detector. This includes
# the crash sweeps (power cut at every write), 200 seeded power cuts and the
# bit-flip sweep; longer versions are `make soak` and `make fuzz`. Then the
# session (wire) and end-to-end suites again on every network backend this system
# runs (the first pass took auto), so each backend passes the same tests.
# The size budget is checked first (`make size`, one build).
test: lint
	$(MAKE) size
	$(GO) test -race -count=1 -timeout 20m ./...
	$(MAKE) backends
	$(MAKE) rig

BACKENDS ?= std epoll uring
backends:
	@$(GO) run ./cmd/ironbus version | sed -n '/network backends/,$$p'
	@set -e; for backend in $(BACKENDS); do \
	  echo "== session and end-to-end suites on the $$backend backend (skipped if unavailable above)"; \
	  IRONBUS_TEST_LOOP=$$backend $(GO) test -race -count=1 -timeout 10m ./session/ ./cmd/ironbus/; \
	done

# rig: the head-to-head rig (benchrig/peers) is a module of its own, so that
# the broker's module never depends on nats-server, and ./... does not reach
# it. Vet and test it here, so that a change to the broker's packages cannot
# break the rig unseen. Its first build downloads nats-server and nats.go.
rig:
	cd benchrig/peers && $(GO) vet ./... && $(GO) test -race -count=1 -timeout 5m ./...

# docs: regenerate the command reference at the end of docs/CLI.md and the
# man pages in docs/man from the command tree; `make test` fails while they
# are stale (TestGeneratedDocsAreFresh).
docs:
	IRONBUS_UPDATE_DOCS=1 $(GO) test -count=1 -run '^TestGeneratedDocsAreFresh$$' ./cmd/ironbus/

# size: the release build of linux/amd64 (static, stripped, as `make
# dist` makes it) into a temporary directory, its size against the budget
# (SIZE_BUDGET bytes), its sections, and its largest packages and modules
# by machine code (packaging/binsize); fails over budget. The budget rises
# to 20,000,000 bytes only with the cluster, MQTT and console features,
# each recording what it adds (docs/PACKAGING.md, "What the binary is
# made of").
SIZE_BUDGET ?= 18000000
size:
	@dir=$$(mktemp -d) && trap 'rm -rf "$$dir"' EXIT && \
	CGO_ENABLED=0 GOOS=linux GOARCH=amd64 $(GO) build -trimpath -ldflags='-s -w' -o "$$dir/ironbus" ./cmd/ironbus && \
	$(GO) run ./packaging/binsize -budget $(SIZE_BUDGET) -top 15 \
	  -later 'after the cluster, MQTT and console features: 20,000,000 (docs/PACKAGING.md)' "$$dir/ironbus"

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

# fuzz-soak: every fuzz target for $(FUZZTIME) each (FUZZ_SOAK_TIME, 5m by
# default), summarising executions and findings per target in
# bench-results/fuzz-soak.txt; a finding prints its log and fails the run
# at the end (the failing input is in the package's testdata/fuzz).
FUZZ_SOAK_TIME ?= 5m
fuzz-soak:
	@mkdir -p bench-results; : > bench-results/fuzz-soak.txt; log=$$(mktemp); \
	for pkg in $$($(GO) list ./...); do \
	  for target in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz' || true); do \
	    if $(GO) test -run '^$$' -fuzz "^$$target$$" -fuzztime $(FUZZ_SOAK_TIME) $$pkg > $$log 2>&1; \
	    then outcome=clean; else outcome=FINDING; cat $$log; fi; \
	    execs=$$(grep -o 'execs: [0-9]*' $$log | tail -1 | cut -d' ' -f2); \
	    printf '%-48s %-28s %-8s execs=%s\n' "$$pkg" "$$target" "$$outcome" "$$execs" | tee -a bench-results/fuzz-soak.txt; \
	  done; \
	done; rm -f $$log; \
	! grep -q FINDING bench-results/fuzz-soak.txt

# soak: many more seeded power cuts and crash sweeps than `make test`, then
# many more kills under idempotent producers and conditional-append races.
soak:
	IRONBUS_POWERCUT_SEEDS=$(SOAK_SEEDS) $(GO) test -count=1 -timeout 2h \
	  -run 'TestPowerCutSeeded|TestCrash' ./segment/
	IRONBUS_IDEMPOTENT_CYCLES=$(SOAK_IDEMPOTENT_CYCLES) IRONBUS_CAS_ROUNDS=$(SOAK_CAS_ROUNDS) \
	  $(GO) test -count=1 -timeout 1h -run 'TestIdempotentProducersKill9|TestConditional.*UnderConcurrentWriters' ./cmd/ironbus/ ./client/
	IRONBUS_SIM_SEEDS=$(SOAK_SIM_SEEDS) $(GO) test -count=1 -timeout 2h -run TestSeeds ./replica/sim/
	IRONBUS_CLUSTER_CYCLES=$(SOAK_CLUSTER_CYCLES) $(GO) test -count=1 -timeout 1h -run 'TestCluster.*Kill9' ./cmd/ironbus/

# bench: durable appends through the committer, then the broker over
# loopback, each against the raw device in the same run (see
# docs/BENCHMARKS.md), then the Go micro-benchmarks.
bench:
	$(GO) run ./benchrig/cmd/logbench -dir $(BENCH_DIR) -duration 3s -runs 5
	$(GO) run ./benchrig/cmd/netbench -dir $(BENCH_DIR) -duration 3s -runs 5
	$(GO) test -run '^$$' -bench . -benchmem ./wire/ ./ring/ ./arena/ ./segment/... ./codec/ ./client/...

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

# bench-peers-subjects: issue 9's rows (docs/STREAMS.md): publish over 1,
# 1,000 and 10,000 subjects against NATS core, and a 1-in-100 filtered
# read against JetStream's filtered consumer on the same data.
.PHONY: bench-peers-subjects
bench-peers-subjects:
	cd benchrig/peers && $(GO) run . -suite subjects -dir $(BENCH_DIR) -runs 3 -duration 3s -consume-messages 200000 \
	  -json ../../bench-results/peers-subjects.json

# crash-test: the kill -9 harness on the real binary, 1,000 cycles (make
# test runs 50); IRONBUS_SEED replays a run (docs/RELIABILITY.md).
.PHONY: crash-test
crash-test:
	IRONBUS_CRASH_CYCLES=$${IRONBUS_CRASH_CYCLES:-1000} $(GO) test -count=1 -timeout 60m -run TestCrashHarnessKill9 -v ./cmd/ironbus/

# dist: the release binaries, static (CGO_ENABLED=0) for the edge targets,
# stripped and stamped with VERSION, plus SHA256SUMS; then a test checks
# that each is a static ELF for the architecture its name says
# (docs/PACKAGING.md).
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo devel)
DIST_DIR ?= dist
DIST_ARCHES ?= amd64 arm64 armv7
.PHONY: dist
dist:
	@mkdir -p $(DIST_DIR)
	rm -f $(DIST_DIR)/ironbus-* $(DIST_DIR)/SHA256SUMS
	@set -e; for arch in $(DIST_ARCHES); do \
	  goarch=$$arch; goarm=; \
	  if [ $$arch = armv7 ]; then goarch=arm; goarm=7; fi; \
	  echo "== linux/$$arch"; \
	  CGO_ENABLED=0 GOOS=linux GOARCH=$$goarch GOARM=$$goarm $(GO) build -trimpath \
	    -ldflags "-s -w -X main.stampedVersion=$(VERSION)" \
	    -o $(DIST_DIR)/ironbus-$(VERSION)-linux-$$arch ./cmd/ironbus; \
	done
	cd $(DIST_DIR) && sha256sum ironbus-$(VERSION)-linux-* > SHA256SUMS
	@ls -l $(DIST_DIR)/ironbus-$(VERSION)-linux-*
	IRONBUS_DIST_DIR=$(abspath $(DIST_DIR)) IRONBUS_TEST_BINARY=$(abspath $(DIST_DIR))/ironbus-$(VERSION)-linux-amd64 \
	  $(GO) test -count=1 -run 'TestDistBinariesAreStatic' ./cmd/ironbus/

# test-arm: every package's tests, end-to-end suite included, built for
# arm64 and 32-bit armv7 and run under qemu-user (Debian's
# qemu-user-static, installed here when missing). qemu-user has no
# io_uring, so serve --loop auto falls back as it must on such kernels.
# No -race: the race detector does not run there. IRONBUS_TEST_EXEC makes
# the end-to-end suite start the arm binaries it builds through the same
# emulator, since without binfmt_misc the kernel cannot exec them. Slow:
# run times in docs/PACKAGING.md. ARM_PACKAGES narrows it.
ARM_ARCHES ?= armv7 arm64
ARM_PACKAGES ?= ./...
.PHONY: test-arm qemu-user
test-arm: qemu-user
	@set -e; for arch in $(ARM_ARCHES); do \
	  case $$arch in \
	    arm64) goarch=arm64; goarm=; emulator=qemu-aarch64-static;; \
	    armv7) goarch=arm; goarm=7; emulator=qemu-arm-static;; \
	    *) echo "unknown arm target $$arch (arm64 or armv7)"; exit 1;; \
	  esac; \
	  echo "== linux/$$arch under $$emulator"; \
	  CGO_ENABLED=0 GOARCH=$$goarch GOARM=$$goarm IRONBUS_TEST_EXEC=$$(command -v $$emulator) \
	    $(GO) test -count=1 -timeout 90m -exec $$emulator $(ARM_PACKAGES); \
	done

qemu-user:
	@if ! command -v qemu-aarch64-static >/dev/null || ! command -v qemu-arm-static >/dev/null; then \
	  echo "installing qemu-user-static (needs root and apt)"; \
	  apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y qemu-user-static; \
	fi
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
