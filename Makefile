# Build, test and lint intranode. `make help` lists the targets.

GO    ?= go
GOFMT ?= gofmt
BIN   ?= bin

# The tagged backends are vetted only once they hold Go files, so the lint
# target works on a checkout where they are still empty.
CUDA_GO := $(shell find backend/cuda -name '*.go' 2>/dev/null)
ROCM_GO := $(shell find backend/rocm -name '*.go' 2>/dev/null)

.PHONY: all help build plugins cabi test lint run bench conformance kernels clean

all: lint test build

help:
	@echo "build        go build ./..., the CLI into $(BIN)/intranode and the plugins"
	@echo "plugins      the example backend plugin into $(BIN)/intranode-fake-plugin"
	@echo "cabi         the C library of include/intranode.h into $(BIN)/libintranode.so (TAGS=cuda for CUDA)"
	@echo "test         go test -race -timeout 20m ./..."
	@echo "lint         gofmt check, go vet (plus -tags purego, GOARCH=arm64, and -tags cuda / rocm when those backends exist)"
	@echo "run, bench   go run ./cmd/intranode bench"
	@echo "conformance  go run ./cmd/intranode conformance"
	@echo "kernels      build the CUDA kernels (kernels/cuda)"
	@echo "clean        remove $(BIN)/"

build: plugins
	$(GO) build ./...
	$(GO) build -o $(BIN)/intranode ./cmd/intranode

# Out-of-process backends (backend/plugin): the fake served as a plugin, for
# intranode conformance --backend plugin:$(BIN)/intranode-fake-plugin.
plugins:
	$(GO) build -o $(BIN)/intranode-fake-plugin ./cmd/intranode-fake-plugin

# The C interface (include/intranode.h): TAGS=cuda or TAGS=rocm adds that
# backend to the fake.
cabi:
	$(GO) build -buildmode=c-shared -tags "$(TAGS)" -o $(BIN)/libintranode.so ./cmd/libintranode

test:
	$(GO) test -race -timeout 20m ./...

lint:
	@files=$$(find . -path './.*' -prune -o -path './$(BIN)' -prune -o -name '*.go' -print); \
	unformatted=$$($(GOFMT) -l $$files </dev/null); \
	if [ -n "$$unformatted" ]; then \
		echo "gofmt would change these files:"; echo "$$unformatted"; exit 1; \
	fi
	$(GO) vet ./...
	# The Go loops that stand in for internal/vec's assembly: the purego
	# tag, and an architecture without it.
	$(GO) vet -tags purego ./internal/... ./kernels/...
	GOARCH=arm64 $(GO) vet ./internal/... ./kernels/...
ifneq ($(CUDA_GO),)
	$(GO) vet -tags cuda ./...
endif
ifneq ($(ROCM_GO),)
	$(GO) vet -tags rocm ./...
endif

run: bench

bench:
	$(GO) run ./cmd/intranode bench

conformance:
	$(GO) run ./cmd/intranode conformance

kernels:
	cd kernels/cuda && $(MAKE)

clean:
	rm -rf $(BIN)
