# ndfilt - top-level shortcuts over CMake. `make demo` and `make test` work on a fresh machine.
BUILD     ?= build
ASAN      ?= build-asan
JOBS      ?= $(shell nproc 2>/dev/null || echo 2)
PREFIX    ?= /usr/local
CMAKE_FLAGS ?=
# nvcc is often installed outside PATH.
NVCC := $(shell command -v nvcc 2>/dev/null || { test -x /usr/local/cuda/bin/nvcc && echo /usr/local/cuda/bin/nvcc; })
ifneq ($(NVCC),)
CUDA_FLAG := -DCMAKE_CUDA_COMPILER=$(NVCC)
endif

.PHONY: all build configure deps demo test test-asan gpu-check install clean

all: build

configure:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(CUDA_FLAG) $(CMAKE_FLAGS) >/dev/null

build: configure
	cmake --build $(BUILD) -j $(JOBS)

deps:
	@scripts/deps.sh

demo: deps build
	$(BUILD)/ndfilt demo

# CPU tests always run; CUDA tests report "skipped" without a usable GPU.
# Then the same tests once more under AddressSanitizer + UBSan (CPU build).
test: deps build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)
	$(MAKE) --no-print-directory test-asan

test-asan:
	cmake -S . -B $(ASAN) -DCMAKE_BUILD_TYPE=Debug -DNDF_SANITIZE=ON -DNDF_ENABLE_CUDA=OFF >/dev/null
	cmake --build $(ASAN) -j $(JOBS)
	cd $(ASAN) && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  ctest --output-on-failure -j $(JOBS)

# On the lent GPU machine: build for sm_90, all tests, compute-sanitizer, summary.
gpu-check:
	scripts/gpu-check.sh

install: build
	cmake --install $(BUILD) --prefix $(PREFIX)

clean:
	rm -rf $(BUILD) $(ASAN) build-gpu demo-out
