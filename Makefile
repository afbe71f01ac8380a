# ndfilt - top-level shortcuts over CMake. `make demo` and `make test` work on a fresh machine.
BUILD     ?= build
ASAN      ?= build-asan
FUZZ      ?= build-fuzz
FUZZ_SECONDS ?= 5
JOBS      ?= $(shell nproc 2>/dev/null || echo 2)
PREFIX    ?= /usr/local
CMAKE_FLAGS ?=
# ON in CI (.ci/run): compiler warnings are errors.
WERROR    ?= OFF
# nvcc is often installed outside PATH.
NVCC := $(shell command -v nvcc 2>/dev/null || { test -x /usr/local/cuda/bin/nvcc && echo /usr/local/cuda/bin/nvcc; })
ifneq ($(NVCC),)
CUDA_FLAG := -DCMAKE_CUDA_COMPILER=$(NVCC)
endif

.PHONY: all build configure deps demo test test-asan test-fuzz format-check gpu-check install clean

all: build

configure:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release -DNDF_WERROR=$(WERROR) $(CUDA_FLAG) \
	  $(CMAKE_FLAGS) >/dev/null

build: configure
	cmake --build $(BUILD) -j $(JOBS)

deps:
	@scripts/deps.sh

demo: deps build
	$(BUILD)/ndfilt demo

# CPU tests always run; CUDA tests report "skipped" without a usable GPU.
# Then the same tests once more under AddressSanitizer + UBSan (CPU build).
test: deps build
	$(MAKE) --no-print-directory format-check
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)
	$(MAKE) --no-print-directory test-asan
	$(MAKE) --no-print-directory test-fuzz

# The C, CUDA and header sources as the checked-in .clang-format lays them out (the generated
# golden data aside); `clang-format -i` on the files it names fixes them.
FORMAT_FILES = $(shell git ls-files 'src/*' 'include/*' 'tools/*' 'tests/*' 'fuzz/*' 2>/dev/null \
                 | grep -E '\.(c|h|cu|cuh)$$' | grep -v golden_scipy)
format-check:
	@command -v clang-format >/dev/null || { echo "format-check: clang-format not found (make deps)"; exit 1; }
	@clang-format --dry-run --Werror $(FORMAT_FILES) && echo "format-check: $(words $(FORMAT_FILES)) files formatted"

test-asan:
	cmake -S . -B $(ASAN) -DCMAKE_BUILD_TYPE=Debug -DNDF_SANITIZE=ON -DNDF_ENABLE_CUDA=OFF \
	  -DNDF_WERROR=$(WERROR) >/dev/null
	cmake --build $(ASAN) -j $(JOBS)
	cd $(ASAN) && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  ctest --output-on-failure -j $(JOBS)

# Each reader's libFuzzer harness (fuzz/fuzz_*.c) for FUZZ_SECONDS, from the committed corpus
# (fuzz/corpus/FORMAT); what it finds new goes to $(FUZZ)/corpus-FORMAT, not into the tree.
test-fuzz:
	CC=clang cmake -S . -B $(FUZZ) -DCMAKE_BUILD_TYPE=Debug -DNDF_ENABLE_CUDA=OFF -DNDF_FUZZ=ON \
	  -DNDF_BUILD_TESTS=OFF -DNDF_BUILD_TOOLS=OFF \
	  -DCMAKE_C_FLAGS="-O1 -fsanitize=fuzzer-no-link,address,undefined" >/dev/null
	cmake --build $(FUZZ) -j $(JOBS)
	@set -e; for f in fuzz/fuzz_*.c; do n=$$(basename $$f .c); fmt=$${n#fuzz_}; \
	  mkdir -p $(FUZZ)/corpus-$$fmt; echo "fuzz: $$fmt ($(FUZZ_SECONDS) s)"; \
	  $(FUZZ)/$$n -max_total_time=$(FUZZ_SECONDS) -rss_limit_mb=2048 -print_final_stats=0 \
	    -artifact_prefix=$(FUZZ)/$$n- \
	    $(FUZZ)/corpus-$$fmt fuzz/corpus/$$fmt 2>$(FUZZ)/$$n.log \
	    || { tail -40 $(FUZZ)/$$n.log; exit 1; }; \
	  grep -E "^#[0-9]+.*DONE|Done [0-9]+ runs" $(FUZZ)/$$n.log | tail -1; done

# On the lent GPU machine: build for sm_90, all tests, compute-sanitizer, summary.
gpu-check:
	scripts/gpu-check.sh

install: build
	cmake --install $(BUILD) --prefix $(PREFIX)

clean:
	rm -rf $(BUILD) $(ASAN) build-gpu demo-out
