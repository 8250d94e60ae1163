# attnlab build. `make` builds the tools; `make test` installs what is missing, builds and runs
# every Check suite; `make demo` trains the demo model on Moby-Dick and prints samples.
#
# Build modes (each into its own directory, so they never mix objects):
#   make            -O3 -march=native, into build/, tools copied to the repo root
#   make debug      -O0 -g3, into build-debug/
#   make asan       address + undefined-behaviour sanitizers, runs the whole suite, build-asan/
#   BUILD=dir make  any other directory (parallel work trees share one checkout this way)
#
# Threading: OpenBLAS is the pthread build, linked by path, and set to 1 thread at start-up;
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
LDLIBS   := -L$(BLASDIR) -Wl,-rpath,$(BLASDIR) -lopenblas -lutf8proc -lz -lm $(EXTRA_LDLIBS)
CHECKLIB := $(shell pkg-config --libs check 2>/dev/null || echo -lcheck -lsubunit -lrt -lm -lpthread)

LIB_SRCS  := $(sort $(wildcard common/*.c data/*.c optim/*.c attention/*.c model/*.c))
LIB_OBJS  := $(LIB_SRCS:%.c=$(BUILD)/%.o)
TOOLS     := $(basename $(wildcard train.c tokenize.c prepare.c attnmap.c export.c evaluate.c))
TOOL_BINS := $(TOOLS:%=$(BUILD)/%)
TEST_SRCS := $(sort $(wildcard tests/test_*.c))
TEST_BINS := $(TEST_SRCS:%.c=$(BUILD)/%)
TEST_LIB  := $(patsubst %.c,$(BUILD)/%.o,$(filter-out $(TEST_SRCS),$(wildcard tests/*.c)))

.PHONY: all tools deps setup test test-only demo bench debug asan format format-check clean \
        check-long fuzz
all: tools
ifeq ($(BUILD),build)
	@for t in $(TOOLS); do cp -f $(BUILD)/$$t ./$$t; done
endif

tools: $(TOOL_BINS) $(TEST_BINS)

$(BUILD)/libattnlab.a: $(LIB_OBJS)
	@mkdir -p $(dir $@)
	ar rcs $@ $^

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

$(BUILD)/%: $(BUILD)/%.o $(BUILD)/libattnlab.a
	$(CC) $(CFLAGS) $< $(BUILD)/libattnlab.a $(LDLIBS) -o $@

$(BUILD)/tests/test_%: $(BUILD)/tests/test_%.o $(TEST_LIB) $(BUILD)/libattnlab.a
	$(CC) $(CFLAGS) $< $(TEST_LIB) $(BUILD)/libattnlab.a $(LDLIBS) $(CHECKLIB) -o $@

# ---- setup: Debian packages, tokenizer files (npm), default corpus -------------------------
deps:
	@bash scripts/deps

setup: deps
	@bash scripts/setup tokenizer

# ---- tests ---------------------------------------------------------------------------------
test: setup
	@$(MAKE) --no-print-directory all
	@bash scripts/run_tests $(BUILD)

test-only:
	@bash scripts/run_tests $(BUILD)

debug:
	@$(MAKE) --no-print-directory BUILD=build-debug OPT="-O0 -g3" tools

asan: setup
	@$(MAKE) --no-print-directory BUILD=build-asan \
	    OPT="-O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all" \
	    EXTRA_LDLIBS="-fsanitize=address,undefined" tools
	@ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 CK_FORK=no \
	    ATTNLAB_SANITIZED=1 bash scripts/run_tests build-asan

# ---- demo and benchmark --------------------------------------------------------------------
demo: deps
	@bash scripts/setup tokenizer corpus mobydick
	@$(MAKE) --no-print-directory all
	@bash scripts/demo

bench: deps
	@$(MAKE) --no-print-directory all
	@bash scripts/bench

# ---- formatting ----------------------------------------------------------------------------
FMT_SRCS = $(wildcard *.c common/*.[ch] data/*.[ch] optim/*.[ch] attention/*.[ch] model/*.[ch] tests/*.[ch])
format:
	clang-format -i $(FMT_SRCS)
format-check:
	clang-format --dry-run --Werror $(FMT_SRCS)

clean:
	rm -rf build build-debug build-asan $(TOOLS)

.SECONDARY:
-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
