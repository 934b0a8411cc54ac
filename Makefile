# nodereg — on-node registration agent and reference registration server.
# `make help` lists the targets.

# The Go go.mod names: the go on PATH when it is new enough, else the one
# .ci/go-toolchain.sh fetches through the Go module proxy (Debian 12's go
# 1.19 predates GOTOOLCHAIN). Looked up only by the recipes that use it.
GO_BIN     = $(shell ./.ci/go-toolchain.sh)
GO        ?= $(if $(GO_BIN),$(GO_BIN)/go,$(error no Go for go.mod: see the go-toolchain line above))
BIN       := bin
# A semantic version from git describe: 1.2.3-N-gCOMMIT from the newest
# v1.2.3 tag (N commits past it, -dirty with local changes); before any
# such tag 0.1.0-dev+gCOMMIT (.dirty). `make version` prints it.
VERSION   ?= $(shell v=$$(git describe --tags --match 'v[0-9]*' --long --dirty 2>/dev/null) && echo "$${v#v}" || \
               { c=$$(git describe --always --exclude '*' --dirty=.dirty 2>/dev/null) && echo "0.1.0-dev+g$$c"; } || echo 0.1.0-dev)
LDFLAGS   := -s -w -X main.version=$(VERSION)
# The default build is static and cgo-free; only build-emulated needs cgo.
STATIC    := CGO_ENABLED=0
# -p 4: twice the packages of the default on two cores, as most of the
# suite's time is spent waiting on deadlines and child processes.
# GOTEST_WRAP: tests/stages.sh runs go test through tests/gotest, which
# records the skipped tests and their reasons for make test's summary.
GOTEST    ?= $(GOTEST_WRAP) $(GO) test -count=1 -p 4

.PHONY: help version build build-emulated man package package-build test test-loaded test-unit test-race test-slow test-emulated test-fuzz test-boot test-vm demo bench bench-short lint clean

help: ## list the targets
	@awk 'BEGIN{FS=":.*## "} /^[a-zA-Z_-]+:.*## /{printf "  %-16s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

version: ## print the version the binaries are built with
	@echo '$(VERSION)'

build: ## build bin/nodereg-agent and bin/regserver (static, no cgo)
	$(STATIC) $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/nodereg-agent ./cmd/agent
	$(STATIC) $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/regserver ./cmd/regserver

build-emulated: ## build bin/nodereg-agent-emulated with the in-process emulated TPM (cgo, OpenSSL; slow first time)
	CGO_ENABLED=1 $(GO) build -trimpath -tags emulatedtpm -ldflags '$(LDFLAGS)' -o $(BIN)/nodereg-agent-emulated ./cmd/agent

# Every stage runs, each printed with its wall time and a closing table
# (tests/stages.sh); make test fails if any stage failed. Stages joined by
# '+' run at the same time: one that mostly waits on timers (the unit
# tests' deadlines, the boot simulation's NetworkManagers) beside one that
# compiles or fuzzes. TEST_STAGES='lint test-unit ...' runs them one by one.
TEST_STAGES ?= lint+test-unit test-race+test-emulated test-fuzz+test-boot
test: ## run every test (the README's test command), each stage timed
	@MAKE='$(MAKE)' ./tests/stages.sh $(TEST_STAGES)

# The same stages while stress-ng --cpu 8 keeps both cores busy (Debian's
# stress-ng, installed with apt-get when missing; tests/loaded.sh): a test
# whose verdict depends on the machine's speed fails here. LOADED_STAGES
# narrows it, e.g. LOADED_STAGES='test-unit test-race'.
STRESS_CPU    ?= 8
LOADED_STAGES ?= $(TEST_STAGES)
test-loaded: ## make test while stress-ng --cpu 8 loads both cores (installs stress-ng if missing)
	@STRESS_CPU='$(STRESS_CPU)' ./tests/loaded.sh $(MAKE) --no-print-directory test TEST_STAGES='$(LOADED_STAGES)'

test-unit: ## go test ./... (default build)
	$(GOTEST) -timeout 20m ./...

# The packages with goroutines of their own: the run (inventory in the
# background), retries, both sides of the conversation, the server and its
# store, the sd_notify watchdog, and the fault tests' parallel runs.
RACE_PKGS ?= ./agent/... ./protocol/... ./server/... ./systemd/... ./apply/... ./internal/... ./tests/faults/ ./tests/e2e/
test-race: ## go test -race for the packages with concurrency (needs cgo)
	CGO_ENABLED=1 $(GOTEST) -race -timeout 20m $(RACE_PKGS)

test-slow: ## go test ./... and the ten slowest tests (wall time each)
	@mkdir -p $(BIN); $(GOTEST) -json -timeout 20m ./... >$(BIN)/test-slow.json || { grep -h '"Action":"fail"' $(BIN)/test-slow.json | head; exit 1; }
	@$(GO) run ./tests/slowest <$(BIN)/test-slow.json

# The packages whose tests change with the tag: tpm (the simulator),
# tpmauth (verifies the simulator's EK), e2e (emulated registrations) and
# examples (examples/node/emulated-tpm.yaml registers with the emulated
# agent). The rest compile the same tests either way and ran in test-unit.
EMULATED_PKGS := ./tpm/... ./server/tpmauth/ ./tests/e2e/ ./tests/examples/
test-emulated: ## tests that need the emulated TPM (build tag emulatedtpm, cgo)
	CGO_ENABLED=1 $(GOTEST) -timeout 20m -tags emulatedtpm $(EMULATED_PKGS)

# The boot cases run in parallel, each in namespaces of its own; they
# mostly wait on NetworkManager, DAD and the agent's timers, not the CPU.
BOOT_PARALLEL ?= 20
test-boot: ## boot simulation: real NetworkManager, yip and agent in namespaces (root; docs/boot-simulation.md)
	@mkdir -p $(BIN); rc=0; $(GOTEST) -tags bootsim -timeout 15m -parallel $(BOOT_PARALLEL) -v ./tests/boot/ >$(BIN)/test-boot.log 2>&1 || rc=$$?; \
	  grep -E '^(bootsim:|--- |ok|FAIL)' $(BIN)/test-boot.log; [ $$rc = 0 ] || cat $(BIN)/test-boot.log; exit $$rc

# The VM boot lab: a Debian guest under QEMU, the agent as its systemd
# service (root, QEMU, swtpm, mmdebstrap; docs/vmlab.md).
test-vm: ## boot a Debian guest under QEMU: agent under systemd, vTPM, reboot, recovery, bond/VLAN (NODEREG_SKIP_VM=1 skips)
	@GO='$(GO)' VM_CASES='$(VM_CASES)' ./tests/vm/run.sh

FUZZTIME ?= 3
FUZZJOBS ?= 2
test-fuzz: ## run each fuzz target for FUZZTIME seconds (default 3), FUZZJOBS at a time
	./tests/fuzz.sh $(FUZZTIME) $(FUZZJOBS)

demo: build ## reference server + agent end to end on loopback (the main job)
	./tests/demo.sh

# Timings are figures, never failures: bench exits 1 only when a
# measurement could not be made (a row ERROR, or a storm machine that gave
# up). The full run takes about seven minutes, five of them the 5,000
# machines behind one NAT address, which the per-address limits pace on
# purpose (docs/performance.md, Reboot storm); bench-short is CI's stage.
bench: build build-emulated ## benchmarks with budgets: one table of medians, PASS/OVER per line, and the reboot storms (about 7 minutes)
	CGO_ENABLED=1 $(GO) run -tags emulatedtpm ./tests/bench -bin $(BIN)
	@echo "== nmstate seed template -> keyfile: built-in translator vs the nmstatectl stand-in's process round trip"
	$(GO) test -run '^$$' -bench SeedTemplate -benchmem ./nmstate

bench-short: build build-emulated ## make bench with a few seconds of each figure and storms of 300 machines (CI)
	CGO_ENABLED=1 $(GO) run -tags emulatedtpm ./tests/bench -bin $(BIN) -short
	$(GO) test -run '^$$' -bench SeedTemplate -benchtime 200x -benchmem ./nmstate

# staticcheck (honnef.co/go/tools) is the field's standard Go linter; the
# version is pinned here, and `go run pkg@version` keeps it out of go.mod (the
# agent's module graph) and works offline once the module cache has it.
STATICCHECK ?= $(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2
lint: ## gofmt, go vet and staticcheck (pinned)
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) vet -tags bootsim ./tests/boot/
	$(STATICCHECK) ./...
	$(STATICCHECK) -tags bootsim ./tests/boot/
	$(GO) vet -tags vmlab ./tests/vm/
	$(STATICCHECK) -tags vmlab ./tests/vm/...

clean: ## remove build output
	rm -rf $(BIN)

-include systemd/install.mk
install: $(if $(filter yes,$(EMULATED)),build-emulated,build) man

# The man pages come from the command tree (cobra/doc): a build with the
# tag genman has the hidden gen-man-pages command; the shipped agent not.
man: ## generate the agent's man pages into bin/man (section 8, from the cobra commands)
	$(STATIC) $(GO) build -tags genman -ldflags '$(LDFLAGS)' -o $(BIN)/genman/nodereg-agent ./cmd/agent
	rm -rf $(BIN)/man && $(BIN)/genman/nodereg-agent gen-man-pages $(BIN)/man

# nfpm (goreleaser's packager) at a pinned version through the Go module
# proxy, verified against the checksum database; built once into bin/.
NFPM_VERSION ?= v2.48.0
NFPM := $(BIN)/nfpm-$(NFPM_VERSION)
$(NFPM):
	@mkdir -p $(BIN)/nfpm-build
	GOBIN=$(abspath $(BIN)/nfpm-build) $(GO) install github.com/goreleaser/nfpm/v2/cmd/nfpm@$(NFPM_VERSION)
	mv $(BIN)/nfpm-build/nfpm $@

PKG_DIR := $(BIN)/pkg
package: package-build ## build the .deb and .rpm (nfpm) from make install's files into bin/pkg, and check both against make install (tests/package; needs dpkg, rpm, man)
	$(GOTEST) ./tests/package/ -args -pkg-dir=$(abspath $(PKG_DIR))

package-build: build man $(NFPM) ## build the .deb and .rpm into bin/pkg, unchecked
	rm -rf $(PKG_DIR) && mkdir -p $(PKG_DIR)
	$(MAKE) --no-print-directory -s -f systemd/install.mk install BIN=$(BIN) DESTDIR=$(abspath $(PKG_DIR)/root) >/dev/null
	$(MAKE) --no-print-directory -s -f systemd/install.mk install-list BIN=$(BIN) >$(PKG_DIR)/files.txt
	./packaging/nfpm.sh $(abspath $(PKG_DIR)/root) '$(VERSION)' <$(PKG_DIR)/files.txt >$(PKG_DIR)/nfpm.yaml
	$(NFPM) package -f $(PKG_DIR)/nfpm.yaml -p deb -t $(PKG_DIR)/
	$(NFPM) package -f $(PKG_DIR)/nfpm.yaml -p rpm -t $(PKG_DIR)/
