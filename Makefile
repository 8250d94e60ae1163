# attnlab build. `make` builds the tools; `make test` installs what is missing, builds and runs
# every Check suite; `make demo` trains the demo model on Moby-Dick and prints samples.
#
# Build modes (each into its own directory, so they never mix objects):
#   make            -O3 -march=native, into build/, tools copied to the repo root
#   make portable   -O3 -march=x86-64-v3 with the kernels pinned (common/portable.c), into
#                   build-portable/: the same numbers on every AVX2 machine, for reruns
#   make debug      -O0 -g3, into build-debug/
#   make asan       address + undefined-behaviour sanitizers, runs the whole suite, build-asan/
#   BUILD=dir make  any other directory (parallel work trees share one checkout this way)
#
# Threading: OpenBLAS is the pthread build, linked by path, and set to 1 thread at start-up;
# oneDNN (libdnnl, the bf16 matmuls) is Debian's OpenMP build on the same libgomp and runs
# single-threaded inside attnlab's parallel regions;
# attnlab parallelises with OpenMP itself and calls sgemm inside its own parallel regions on
# fixed blocks, so the two thread pools never compete for the 2 cores and results do not
# depend on the thread count.

CC       ?= gcc
ifeq ($(CC),cc)
CC       := gcc
endif
BUILD    ?= build
OPT      ?= -O3 -march=native
BLASDIR  := /usr/lib/x86_64-linux-gnu/openblas-pthread
BLASINC  := /usr/include/x86_64-linux-gnu/openblas-pthread
WARN     := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wvla
CFLAGS   := -std=c11 $(OPT) -fopenmp $(WARN) -D_GNU_SOURCE -I. -I$(BLASINC) -MMD -MP $(EXTRA_CFLAGS)
LDLIBS   := -L$(BLASDIR) -Wl,-rpath,$(BLASDIR) -lopenblas -ldnnl -lutf8proc -lz -lm $(EXTRA_LDLIBS)
CHECKLIB := $(shell pkg-config --libs check 2>/dev/null || echo -lcheck -lsubunit -lrt -lm -lpthread)
# OpenMPI (data-parallel training, common/dist.c; docs/distributed.md): one build, always linked.
# Only common/dist.c includes mpi.h; a process started without mpirun/srun never calls MPI.
MPI_CFLAGS := $(shell pkg-config --cflags ompi-c 2>/dev/null || echo -I/usr/lib/x86_64-linux-gnu/openmpi/include)
MPI_LIBS   := $(shell pkg-config --libs ompi-c 2>/dev/null || echo -L/usr/lib/x86_64-linux-gnu/openmpi/lib -lmpi)
LDLIBS   += $(MPI_LIBS)

LIB_SRCS  := $(sort $(wildcard common/*.c data/*.c optim/*.c attention/*.c model/*.c model/run/*.c))
LIB_OBJS  := $(LIB_SRCS:%.c=$(BUILD)/%.o)
# tool mains: train.c at the root, the other tools in tools/; every binary lands at ./NAME
CLI_SRCS  := $(sort $(wildcard tools/*.c))
CLI_NAMES := $(notdir $(basename $(CLI_SRCS)))
TOOLS     := train $(CLI_NAMES)
TOOL_BINS := $(TOOLS:%=$(BUILD)/%)
CLI_BINS  := $(CLI_NAMES:%=$(BUILD)/%)
TEST_SRCS := $(sort $(filter-out tests/test_attn64_%,$(wildcard tests/test_*.c)))
TEST_BINS := $(TEST_SRCS:%.c=$(BUILD)/%)
TEST_LIB  := $(patsubst %.c,$(BUILD)/%.o,$(filter-out tests/test_%,$(wildcard tests/*.c)))

# Double-precision attention, for the tests only: attention/*.c and the layer harness compiled
# again with -DATTN_REAL_DOUBLE into $(BUILD)/attn64/ (attention/real.h), and the suites
# tests/test_attn64_*.c built on them as $(BUILD)/tests/test_attn64_* (scripts/run_tests runs
# them with the others). Common code (util, rng, testutil) comes from the float build.
ATTN64_OBJS := $(patsubst %.c,$(BUILD)/attn64/%.o,$(wildcard attention/*.c) tests/attn_harness.c \
               tests/attn64_cfg.c)
ATTN64_TEST_SRCS := $(sort $(wildcard tests/test_attn64_*.c))
ATTN64_TEST_BINS := $(ATTN64_TEST_SRCS:%.c=$(BUILD)/%)

.PHONY: all tools bins portable deps setup test test-only demo bench debug asan format format-check clean \
        check-long fuzz check-includes check-docs docs coverage mutate test-browser test-slurm \
        test-portable test-portable-emulated identity-check
all: tools
ifeq ($(BUILD),build)
	@for t in $(TOOLS); do cp -f $(BUILD)/$$t ./$$t; done
endif

tools: $(TOOL_BINS) $(TEST_BINS) $(ATTN64_TEST_BINS)

$(BUILD)/libattnlab.a: $(LIB_OBJS)
	@mkdir -p $(dir $@)
	ar rcs $@ $^

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

# the trainer: train.c, the one source file at the root
$(BUILD)/train: $(BUILD)/train.o $(BUILD)/libattnlab.a
	$(CC) $(CFLAGS) $(BUILD)/train.o $(BUILD)/libattnlab.a $(LDLIBS) -o $@

$(CLI_BINS): $(BUILD)/%: $(BUILD)/tools/%.o $(BUILD)/libattnlab.a
	$(CC) $(CFLAGS) $< $(BUILD)/libattnlab.a $(LDLIBS) -o $@

$(TEST_BINS): $(BUILD)/tests/test_%: $(BUILD)/tests/test_%.o $(TEST_LIB) $(BUILD)/libattnlab.a
	$(CC) $(CFLAGS) $< $(TEST_LIB) $(BUILD)/libattnlab.a $(LDLIBS) $(CHECKLIB) -o $@

$(BUILD)/attn64/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -DATTN_REAL_DOUBLE -c $< -o $@

# the float library last, for common/ only (every attention symbol is already defined)
$(ATTN64_TEST_BINS): $(BUILD)/tests/test_attn64_%: $(BUILD)/attn64/tests/test_attn64_%.o \
                     $(ATTN64_OBJS) $(BUILD)/tests/testutil.o $(BUILD)/libattnlab.a
	$(CC) $(CFLAGS) $< $(ATTN64_OBJS) $(BUILD)/tests/testutil.o $(BUILD)/libattnlab.a $(LDLIBS) \
	    $(CHECKLIB) -o $@

# The attention explorer's page template (HTML, CSS, JavaScript) is compiled into the library as
# a byte array generated from model/explorer.html (scripts/embed), so ./attnmap html needs no
# file at run time.
%/gen/explorer_template.h: model/explorer.html scripts/embed
	@mkdir -p $(dir $@)
	bash scripts/embed explorer_template $< >$@.tmp && mv -f $@.tmp $@
$(BUILD)/model/explorer.o: $(BUILD)/gen/explorer_template.h
$(BUILD)/model/explorer.o: CFLAGS += -I$(BUILD)/gen
$(BUILD)/common/dist.o: CFLAGS += $(MPI_CFLAGS)
# the build's flags and what -march resolves to, recorded in every run's precision text
# (common/matmul.c): a rerun is bit-identical only on the same code path
NATIVE_ARCH := $(shell $(CC) $(OPT) -Q --help=target 2>/dev/null | awk '$$1 == "-march=" {print $$2; exit}')
$(BUILD)/common/matmul.o: CFLAGS += -DATTNLAB_OPT='"$(OPT)"' -DATTNLAB_MARCH='"$(NATIVE_ARCH)"'
$(BUILD)/common/matmul.o: Makefile

# ---- setup: Debian packages, tokenizer files (npm), default corpus -------------------------
deps:
	@bash scripts/deps

setup: deps
	@bash scripts/setup tokenizer

# ---- tests ---------------------------------------------------------------------------------
test: setup
	@$(MAKE) --no-print-directory -j2 all
	@$(MAKE) --no-print-directory check-includes check-docs
	@bash scripts/run_tests $(BUILD)

# the include direction (train.c, tools/ -> model/ -> attention/ -> common/; data/, optim/ ->
# common/), and the checker's own proof that it catches each kind of upward include
check-includes:
	@bash scripts/check_includes
	@bash scripts/check_includes --self-test

# the generated tables in docs/ (config keys, attention variants) match ./train's own output;
# `make docs` rewrites them
check-docs:
	@TRAIN=$(BUILD)/train bash scripts/gen_docs --check

docs: all
	@bash scripts/gen_docs

test-only:
	@bash scripts/run_tests $(BUILD)

# the portable build: the tools only (its tests are the default build's), into build-portable/
portable:
	@$(MAKE) --no-print-directory BUILD=build-portable OPT="-O3 -march=x86-64-v3" \
	    EXTRA_CFLAGS=-DATTNLAB_PORTABLE -j2 bins
bins: $(TOOL_BINS)

debug:
	@$(MAKE) --no-print-directory BUILD=build-debug OPT="-O0 -g3" tools

asan: setup
	@$(MAKE) --no-print-directory BUILD=build-asan \
	    OPT="-O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all" \
	    EXTRA_LDLIBS="-fsanitize=address,undefined" tools
	@ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 CK_FORK=no \
	    ATTNLAB_SANITIZED=1 bash scripts/run_tests build-asan

# Browser test of the attention explorer (tests/browser): installs Debian's chromium (deps) and
# the pinned playwright-core from npm into build-browser/, trains two tiny runs and checks the
# page in headless Chromium. Writes build-browser/out/ (pages, .npy dumps, screenshots).
test-browser: deps
	@$(MAKE) --no-print-directory -j2 all
	@bash scripts/browser_setup
	@bash tests/browser/run

# Slurm: a one-node test cluster (munged, slurmctld, slurmd from a temporary config, 127.0.0.1
# only, stopped by pid afterwards) runs a sweep through `scripts/ablate --slurm`, a time limit
# with requeue, and `srun --mpi=pmix` data parallel (tests/slurm/test_slurm). Skips, printing
# why, where the daemons cannot start (not root).
test-slurm:
	@if [ "$$(id -u)" = 0 ]; then bash scripts/deps slurm; fi
	@$(MAKE) --no-print-directory -j2 all
	@bash tests/slurm/test_slurm

# The portable build reproduces its committed runs here (tests/portable/test_portable: the
# kernel pin, scripts/rerun_check --full of an fp32 r_sinks_bb run and, on a CPU with
# AVX512-BF16, 100 steps of a bf16 r_quantized run; about 3 minutes). test-portable-emulated adds the
# same tiny run under qemu-x86_64 as a Haswell and an AMD EPYC-Rome (about 10 minutes).
test-portable: portable
	@bash tests/portable/test_portable
test-portable-emulated: portable
	@if [ "$$(id -u)" = 0 ]; then bash scripts/deps emulate; fi
	@ATTNLAB_EMULATE=1 bash tests/portable/test_portable

# Byte-identity of a refactoring: tiny runs of the portable build (positions, layer variants,
# qk-norm, residual, value residual, mlp = 0, bf16 on AVX512-BF16) trained, exported to HF and
# llm.c, and their files' sha256 compared with tests/data/identity_manifest.txt (about 15 s).
identity-check: portable
	@bash scripts/identity_check

# ---- demo and benchmark --------------------------------------------------------------------
demo: deps
	@bash scripts/setup tokenizer corpus mobydick
	@$(MAKE) --no-print-directory -j2 all
	@bash scripts/demo

bench:
	@bash scripts/deps bench
	@$(MAKE) --no-print-directory -j2 all
	@bash scripts/bench

# ---- coverage and mutation testing (not part of `make test`: they take long) ----------------
# `make coverage`: gcov + lcov HTML report in build-cov/html, per-directory line and branch figures.
# `make mutate`: mutation testing of attention/ and the model layers (scripts/mutate --help);
# MUTATE_ARGS passes options, e.g. MUTATE_ARGS="--sample 200 --seed 1".
coverage: setup
	@bash scripts/coverage

MUTATE_ARGS ?= --sample 200
mutate: setup
	@/usr/bin/python3 scripts/mutate $(MUTATE_ARGS)

# ---- formatting ----------------------------------------------------------------------------
FMT_SRCS = $(wildcard *.[ch] tools/*.c common/*.[ch] data/*.[ch] optim/*.[ch] attention/*.[ch] model/*.[ch] model/run/*.[ch] tests/*.[ch])
format:
	clang-format -i $(FMT_SRCS)
format-check: deps
	clang-format --dry-run --Werror $(FMT_SRCS)

clean:
	rm -rf build build-debug build-asan build-portable $(TOOLS)

.SECONDARY:
-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)

# ---- fuzzing: libFuzzer harnesses tests/fuzz/fuzz_*.c, built with clang into build-fuzz/ -----
# `make fuzz` runs each harness for FUZZ_RUNS executions (at most FUZZ_TIME seconds each);
# `make fuzz-smoke` runs each for FUZZ_SMOKE seconds. Corpora grow in build-fuzz/corpus/NAME;
# crash inputs land in build-fuzz/crashes/. Needs clang and libclang-rt-14-dev (installed when
# missing; `make test` does not need them).
FUZZ_BUILD  := build-fuzz
FUZZ_CC     ?= clang
FUZZ_RUNS   ?= 1000000
FUZZ_TIME   ?= 1800
FUZZ_SMOKE  ?= 5
FUZZ_CFLAGS := -std=c11 -O1 -g -fopenmp -D_GNU_SOURCE -I. -I$(BLASINC) -MMD -MP \
               -fsanitize=fuzzer-no-link,address,undefined -fno-omit-frame-pointer \
               -fno-sanitize-recover=undefined
FUZZ_SRCS   := $(sort $(wildcard tests/fuzz/fuzz_*.c))
FUZZ_NAMES  := $(FUZZ_SRCS:tests/fuzz/%.c=%)
FUZZ_BINS   := $(FUZZ_NAMES:%=$(FUZZ_BUILD)/%)
FUZZ_OBJS   := $(LIB_SRCS:%.c=$(FUZZ_BUILD)/%.o)

.PHONY: fuzz-deps fuzz-build fuzz-smoke
fuzz-deps:
	@command -v $(FUZZ_CC) >/dev/null && \
	    ls /usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a >/dev/null 2>&1 || \
	    { if [ "$$(id -u)" -eq 0 ]; then apt-get update -qq && apt-get install -y -qq --no-install-recommends \
	      clang libclang-rt-14-dev >/dev/null; else echo "fuzzing needs: apt-get install clang \
	      libclang-rt-14-dev" >&2; exit 1; fi; }

$(FUZZ_OBJS): $(FUZZ_BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -c $< -o $@
$(FUZZ_BUILD)/model/explorer.o: $(FUZZ_BUILD)/gen/explorer_template.h
$(FUZZ_BUILD)/model/explorer.o: FUZZ_CFLAGS += -I$(FUZZ_BUILD)/gen
$(FUZZ_BUILD)/common/dist.o: FUZZ_CFLAGS += $(MPI_CFLAGS)

$(FUZZ_BUILD)/fuzz_%: tests/fuzz/fuzz_%.c $(FUZZ_OBJS)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer $< $(FUZZ_OBJS) $(LDLIBS) -o $@

fuzz-build: fuzz-deps
	@$(MAKE) --no-print-directory $(FUZZ_BINS)

fuzz: fuzz-build
	@mkdir -p $(FUZZ_BUILD)/crashes
	@for f in $(FUZZ_NAMES); do mkdir -p $(FUZZ_BUILD)/corpus/$$f; echo "== $$f"; \
	    OMP_NUM_THREADS=1 ./$(FUZZ_BUILD)/$$f -runs=$(FUZZ_RUNS) -max_total_time=$(FUZZ_TIME) \
	    -max_len=4096 -print_final_stats=1 -artifact_prefix=$(FUZZ_BUILD)/crashes/$$f- \
	    $(FUZZ_BUILD)/corpus/$$f >$(FUZZ_BUILD)/$$f.log 2>&1; rc=$$?; \
	    grep -E '^(Done|stat::number_of_executed_units|stat::average_exec_per_sec)' $(FUZZ_BUILD)/$$f.log; \
	    if [ $$rc -ne 0 ]; then tail -40 $(FUZZ_BUILD)/$$f.log; exit 1; fi; done

fuzz-smoke: fuzz-build
	@mkdir -p $(FUZZ_BUILD)/crashes
	@for f in $(FUZZ_NAMES); do mkdir -p $(FUZZ_BUILD)/corpus/$$f; \
	    OMP_NUM_THREADS=1 ./$(FUZZ_BUILD)/$$f -max_total_time=$(FUZZ_SMOKE) -max_len=4096 \
	    -artifact_prefix=$(FUZZ_BUILD)/crashes/$$f- $(FUZZ_BUILD)/corpus/$$f >$(FUZZ_BUILD)/$$f.log 2>&1 \
	    && echo "fuzz-smoke $$f: ok ($$(grep -o 'DONE.*' $(FUZZ_BUILD)/$$f.log | head -1))" \
	    || { echo "fuzz-smoke $$f: FAILED"; tail -30 $(FUZZ_BUILD)/$$f.log; exit 1; }; done

-include $(wildcard $(FUZZ_BUILD)/*.d $(FUZZ_BUILD)/*/*.d)
