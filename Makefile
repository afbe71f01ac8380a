# SPDX-License-Identifier: BSD-3-Clause
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
# `make demo`: its volumes (about 240 MB, replaced by each run) go to the user's cache, not the
# tree; its build's output goes to $(BUILD)/build.log unless V=1.
DEMO_OUT  ?= $(if $(XDG_CACHE_HOME),$(XDG_CACHE_HOME),$(if $(HOME),$(HOME)/.cache,/tmp))/ndfilt/demo
V         ?= 0
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

# Quiet: the demo's own lines and table only (and one line before a first build, which takes
# minutes with CUDA); the build's output is in $(BUILD)/build.log, shown if the build fails.
demo: deps
ifeq ($(V),1)
	$(MAKE) --no-print-directory build
else
	@test -x $(BUILD)/ndfilt || echo "demo: building ndfilt in $(BUILD)/ (log: $(BUILD)/build.log; V=1 shows it)"
	@mkdir -p $(BUILD)
	@$(MAKE) --no-print-directory build >$(BUILD)/build.log 2>&1 || \
	  { tail -30 $(BUILD)/build.log; echo "demo: the build failed; all of it is in $(BUILD)/build.log" >&2; exit 1; }
endif
	@mkdir -p "$(DEMO_OUT)"
	@$(BUILD)/ndfilt demo --out "$(DEMO_OUT)"

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
# And every source file's licence line (docs/architecture.md, "Conventions"): SPDX first, or
# second after a #! line.
SPDX_FILES = $(shell git ls-files 2>/dev/null | grep -E '\.(c|h|cu|cuh|py|sh|cmake)$$|(^|/)(CMakeLists\.txt|Makefile)$$')
format-check:
	@command -v clang-format >/dev/null || { echo "format-check: clang-format not found (make deps)"; exit 1; }
	@clang-format --dry-run --Werror $(FORMAT_FILES) && echo "format-check: $(words $(FORMAT_FILES)) files formatted"
	@missing=$$(for f in $(SPDX_FILES); do head -2 "$$f" | grep -q 'SPDX-License-Identifier: BSD-3-Clause' || echo "$$f"; done); \
	  if [ -n "$$missing" ]; then echo "format-check: no SPDX-License-Identifier line at the top of:" $$missing; exit 1; fi; \
	  echo "format-check: $(words $(SPDX_FILES)) files with an SPDX line"

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
