# Makefile: every entry point of the project. `make help` lists them.
#
# Layout it builds (see README.md): lib/, sim/ and the backends found
# (lib/comm/mpi/ with Open MPI, the .cu files with CUDA and NCCL) into one
# archive, build/libddp.a; chapters/NN-name/*.c into build/chapter-N; tools/*.c
# into build/tools/; tests/unit/test_*.c into build/tests/unit/; labs are built
# and graded by labs/lab.sh. Nothing here names a chapter, lab, tool or test:
# drop a directory or file in place and it is picked up.

.DEFAULT_GOAL := all
SHELL := /bin/bash

BUILD ?= build
# make splits a path at spaces: BUILD='my build' would make folders 'my' and
# 'build' beside the sources, and an empty BUILD would build into /.
ifneq ($(words $(BUILD)),1)
  $(error BUILD='$(BUILD)': the build folder must be one path, without spaces (BUILD=build, the default))
endif
OPT ?= -O2
SAN ?=
CFLAGS ?= $(OPT) -g
WARN := -Wall -Wextra -Werror
# override: CFLAGS=-O0 or CPPFLAGS=-DX on the command line adds to what the
# build needs (-Ilib, -std=c11, the dependency files, SAN's flags), as the
# same variable from the environment does, instead of replacing it.
override CPPFLAGS := -D_GNU_SOURCE -Ilib -I. $(CPPFLAGS)
override LDLIBS := -lz -ljansson -lopenblas -lm -pthread $(LDLIBS)
ifneq ($(SAN),)
  override CFLAGS += -fsanitize=$(SAN) -fno-sanitize-recover=all -fno-omit-frame-pointer
  override LDFLAGS += -fsanitize=$(SAN)
endif
override CFLAGS += -std=c11 -pthread -MMD -MP

# ---- packages, then features: build/config.mk, written once per build directory
# deps, demo and test install missing packages first (mk/deps.sh), so they
# must not read build/config.mk before that: their recipes build through a
# second make, which detects the features of what is installed by then.
NO_CONFIG_GOALS := help clean features deps demo test
ifeq ($(filter-out $(NO_CONFIG_GOALS),$(or $(MAKECMDGOALS),all)),)
else
include $(BUILD)/config.mk
endif
$(BUILD)/config.mk: mk/features.sh
	@mkdir -p $(BUILD)
	@sh mk/features.sh > $@.tmp && mv $@.tmp $@

features: ## detect features again (after installing a package) and print one line each
	@mkdir -p $(BUILD)
	@sh mk/features.sh > $(BUILD)/config.mk.tmp && mv $(BUILD)/config.mk.tmp $(BUILD)/config.mk

deps: ## install the Debian/Ubuntu packages the project uses (DEPS=all|required|none)
	@BUILD=$(BUILD) sh mk/deps.sh

ifeq ($(HAVE_MPI),1)
  override CPPFLAGS += -DHAVE_MPI=1
  MPI_CFLAGS := $(shell mpicc --showme:compile)
  MPI_LDLIBS := $(shell mpicc --showme:link)
  MPI_OBJS := $(patsubst %.c,$(BUILD)/obj/%.o,$(shell find lib -path '*/mpi/*' -name '*.c' | sort))
  override LDLIBS += $(MPI_LDLIBS)
endif
ifeq ($(HAVE_CUDA),1)
  override CPPFLAGS += -DHAVE_CUDA=1
  NVCC := $(CUDA_HOME)/bin/nvcc
  NVCCFLAGS ?= -O2 -g -std=c++17 -Xcompiler -Wall,-Wextra,-Werror
  # The GPU runs the arithmetic `make test` checks (lib/transfer/kernels.h):
  # no multiply-add fused behind the source's back, subnormals kept, float
  # division and square root correctly rounded. The last three are nvcc's
  # defaults, written out so that no NVCCFLAGS can drop them unseen.
  NVCC_IEEE := -fmad=false -ftz=false -prec-div=true -prec-sqrt=true
  GPU_SRCS := $(shell find lib -name '*.cu' | sort)
  ifeq ($(HAVE_NCCL),1)
    override CPPFLAGS += -DHAVE_NCCL=1
    GPU_LDLIBS := -L$(NCCL_LIBDIR) -Wl,-rpath,$(NCCL_LIBDIR) -lnccl
  else
    GPU_SRCS := $(filter-out lib/comm/nccl/%,$(GPU_SRCS))
  endif
  GPU_OBJS := $(patsubst %.cu,$(BUILD)/obj/%.o,$(GPU_SRCS))
  GPU_LDLIBS += -L$(CUDA_LIBDIR) -Wl,-rpath,$(CUDA_LIBDIR) -lcublas -lcudart -lstdc++
  override LDLIBS += $(GPU_LDLIBS)
endif

# ---- the library ------------------------------------------------------------
# MPI backends (*/mpi/ folders) are compiled with mpicc's flags, and only when MPI was found.
CORE_SRCS := $(sort $(shell find lib -name '*.c' -not -path '*/mpi/*') $(wildcard sim/*.c))
CORE_HDRS := $(shell find lib sim -name '*.h')
CORE_OBJS := $(CORE_SRCS:%.c=$(BUILD)/obj/%.o)
LIB := $(BUILD)/libddp.a
# One archive for the core and the backends. The backend table
# (lib/backend_table.c) refers to the backends and the backends to the core's
# helpers (comm_coll_describe, comm_reduce_sum): a cycle that archives of their
# own could only close by listing one of them twice. Inside one archive the
# linker keeps taking members until nothing more resolves, in any order, and
# still takes only what a program uses: chapter 1 links no communicator.
LIB_OBJS := $(CORE_OBJS) $(MPI_OBJS) $(GPU_OBJS)

$(BUILD)/obj/%.o: %.c $(BUILD)/config.mk
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(WARN) -c -o $@ $<
ifneq ($(MPI_OBJS),)
$(MPI_OBJS): override CPPFLAGS += $(MPI_CFLAGS)
endif
# The simulated device's kernel loops (bias, ReLU, BatchNorm, the optimizer's
# update) run between the matrix products of every step: vectorize them, and
# take loop-invariant branches (SGD with or without momentum) out of the loop.
# -fno-math-errno lets Adam's sqrtf be the square-root instruction, which
# vectorizes (with errno, each call keeps a scalar path for negative inputs:
# Adam's loop ran scalar and took half the simulator's CPU). This never
# changes a result: no reassociation without -ffast-math, and IEEE square
# root is correctly rounded whichever instruction computes it.
# -ffp-contract=off: no multiply and add fused into one rounding, in the
# baseline or in the AVX2 and AVX-512 clones (device_exec_kernel), whatever
# the -std (GCC fuses by default in its GNU modes).
$(BUILD)/obj/sim/device_exec.o: override CFLAGS += -ftree-vectorize -fvect-cost-model=dynamic -funswitch-loops -fno-math-errno \
    -ffp-contract=off
# The CPU backends' sum (comm_reduce_sum3) runs on every piece of every
# all-reduce the simulator and MPI move. Its output may be one of its inputs,
# so GCC must check the pointers at run time before it takes vectors, which
# -O2's cost model never does: the loop ran scalar, 4 % of the simulator's
# CPU at 4 ranks. The same sum in any vector width: one IEEE add an element.
$(BUILD)/obj/lib/comm/comm_reduce.o: override CFLAGS += -ftree-vectorize -fvect-cost-model=dynamic
$(BUILD)/obj/%.o: %.cu $(BUILD)/config.mk
	@mkdir -p $(@D)
	$(NVCC) $(CPPFLAGS) $(NVCCFLAGS) $(NVCC_IEEE) -MD -MF $(@:.o=.d) -c -o $@ $<
$(LIB): $(LIB_OBJS)
	@rm -f $@; ar rcs $@ $^

# ---- chapters: chapters/NN-name/*.c (main.c and its helpers) -> build/chapter-N
# A chapter is a folder with a main.c; a folder without one holds parts of a
# chapter still to come and builds no program.
CHAPTER_DIRS := $(sort $(patsubst %/main.c,%,$(wildcard chapters/[0-9][0-9]-*/main.c)))
chapter_num = $(patsubst 0%,%,$(firstword $(subst -, ,$(notdir $(1)))))
CHAPTERS := $(foreach d,$(CHAPTER_DIRS),$(call chapter_num,$(d)))
CHAPTER_BINS := $(CHAPTERS:%=$(BUILD)/chapter-%)
# How a recipe runs a program of the build: ./build/chapter-1 for a relative
# BUILD, /tmp/b/chapter-1 for an absolute one (./ before it would read .//tmp/b).
RUN_BUILD := $(if $(filter /%,$(BUILD)),$(BUILD),./$(BUILD))

define chapter_rules
$(BUILD)/chapter-$(call chapter_num,$(1)): $(wildcard $(1)/*.c) $(LIB)
	$$(CC) $$(CPPFLAGS) -I$(1) $$(CFLAGS) $$(WARN) $$(LDFLAGS) -o $$@ $(wildcard $(1)/*.c) $$(LIB) $$(LDLIBS)
chapter-$(call chapter_num,$(1)): $(BUILD)/chapter-$(call chapter_num,$(1))
	$(RUN_BUILD)/chapter-$(call chapter_num,$(1)) $$(ARGS)
.PHONY: chapter-$(call chapter_num,$(1))
endef
$(foreach d,$(CHAPTER_DIRS),$(eval $(call chapter_rules,$(d))))
# A chapter's source that was renamed or removed still stands in an older
# build's dependency file: it is not missing, it is gone (the link takes the
# folder's files as they are now).
chapters/%.c: ;
chapter-: # no number (make chapter-$$N, N unset): not make's built-in chapter- from chapter-.o
	@echo "make chapter-N: N is a chapter's number, 1 for chapters/01-*/ (make help)" >&2; exit 2
# A goal chapter-N with no chapters/NN-name/main.c (a rule for the goals
# only: a pattern rule would also answer for any file named chapter-N).
NO_CHAPTERS := $(filter-out chapter- $(CHAPTERS:%=chapter-%),$(filter chapter-%,$(MAKECMDGOALS)))
ifneq ($(NO_CHAPTERS),)
$(NO_CHAPTERS):
	@echo "make $@: there is no chapter $(@:chapter-%=%) (the chapters: $(CHAPTERS); make chapter-N)" >&2; exit 2
.PHONY: $(NO_CHAPTERS)
endif
# chapter-%: ## build and run chapter N's program on its defaults; ARGS='--help' and others pass through

# ---- tools: tools/*.c -> build/tools/NAME, the small programs behind make bench and make report
TOOL_BINS := $(patsubst tools/%.c,$(BUILD)/tools/%,$(wildcard tools/*.c))
$(BUILD)/tools/%: tools/%.c $(LIB)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(WARN) $(LDFLAGS) -o $@ $< $(LIB) $(LDLIBS)

# ---- tests: tests/unit/test_*.c -> build/tests/unit/test_* ---------------
HARNESS_OBJS := $(patsubst %.c,$(BUILD)/obj/%.o,$(wildcard tests/harness/*.c))
TEST_BINS := $(patsubst tests/%.c,$(BUILD)/tests/%,$(wildcard tests/unit/test_*.c))
$(BUILD)/obj/tests/%.o: override CPPFLAGS += -Itests/harness
$(BUILD)/tests/%: tests/%.c $(HARNESS_OBJS) $(LIB)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) -Itests/harness $(CFLAGS) $(WARN) -MF $@.d $(LDFLAGS) -o $@ $< $(HARNESS_OBJS) $(LIB) $(LDLIBS)

# test_comm_mpi wraps MPI's own calls (its profiling interface) to see which the backend makes
ifeq ($(HAVE_MPI),1)
$(BUILD)/tests/unit/test_comm_mpi: override CPPFLAGS += $(MPI_CFLAGS)
endif

all: $(LIB) $(CHAPTER_BINS) $(TOOL_BINS) ## build the library, every chapter program and the tools
tests: all $(TEST_BINS)

# ---- fuzzing: tests/fuzz/fuzz_*.c, clang + libFuzzer ------------------------
FUZZ_SECONDS ?= 30
FUZZ_TARGETS := $(patsubst tests/fuzz/%.c,$(BUILD)/fuzz/%,$(wildcard tests/fuzz/fuzz_*.c))
$(BUILD)/fuzz/%: tests/fuzz/%.c $(CORE_SRCS) $(CORE_HDRS)
	@[ "$(HAVE_CLANG_FUZZER)" = 1 ] || { echo "make fuzz needs clang with libFuzzer: apt-get install clang libclang-rt-14-dev, then make features" >&2; exit 1; }
	@mkdir -p $(@D)
	clang -g -O1 -std=c11 -D_GNU_SOURCE -Ilib -I. $(WARN) -fsanitize=fuzzer,address,undefined -o $@ $< $(CORE_SRCS) $(filter-out -pthread,$(LDLIBS)) -pthread
fuzz-build: $(FUZZ_TARGETS)
fuzz: $(FUZZ_TARGETS) ## run every libFuzzer target for FUZZ_SECONDS (default 30) each
	@for t in $(FUZZ_TARGETS); do \
	    mkdir -p $(BUILD)/fuzz/corpus-$$(basename $$t); \
	    echo "fuzz: $$t for $(FUZZ_SECONDS) s"; \
	    $$t -max_total_time=$(FUZZ_SECONDS) -print_final_stats=0 -artifact_prefix=$(BUILD)/fuzz/ $(BUILD)/fuzz/corpus-$$(basename $$t) tests/fuzz/seeds/$$(basename $$t) 2>$(BUILD)/fuzz/$$(basename $$t).log \
	        || { tail -n 40 $(BUILD)/fuzz/$$(basename $$t).log; exit 1; }; \
	    echo "fuzz: $$(basename $$t): no crash in $(FUZZ_SECONDS) s"; \
	done

# ---- entry points -------------------------------------------------------------
test: ## install what is missing, then run the whole suite (plain, ASan+UBSan, TSan, fuzz smoke); QUICK=1: the plain suite only
	@BUILD=$(BUILD) sh mk/deps.sh --quiet
	@bash tests/run $(if $(QUICK),--quick)
check: ## the test suite under ASan + UBSan
	@bash tests/run --suite=asan
tsan: ## the unit tests and the threaded chapter programs under ThreadSanitizer
	@bash tests/run --suite=tsan
crosscheck-kernels: tests ## the PyTorch cross-checks under each OpenBLAS kernel set (Haswell, SkylakeX, Zen, Prescott): run before you stop
	@BUILD=$(BUILD) bash tools/crosscheck_kernels.sh
lab-%: $(LIB) ## grade lab N: make lab-N [IMPL=ref|student|skeleton|mutant:FILE] [GRADE_FLAGS=--fail-fast]
	@CC="$(CC)" CFLAGS="$(CFLAGS)" CPPFLAGS="$(CPPFLAGS)" LDFLAGS="$(LDFLAGS)" LDLIBS="$(LDLIBS)" \
	    BUILD="$(BUILD)" bash labs/lab.sh $* $(or $(IMPL),student) $(GRADE_FLAGS)
lab-: # no number (make lab-$$N, N unset): not make's built-in lab- from lab-.o
	@echo "make lab-N: N is a lab's number, 1 for labs/01-*/ (make help)" >&2; exit 2
lab-skeletons: ## regenerate every lab's learner file from the reference (keeps one with changes not committed; FORCE=1 overwrites it)
	@FORCE="$(FORCE)" bash labs/lab.sh --write-skeletons
bench: all ## run every chapter's benchmarks (verdicts: ratio against a peer or limit, PASS or MISS); kept in BUILD/bench/
	@BUILD=$(BUILD) bash tools/run_benches.sh
plots: all ## run each chapter's plotted experiments: CSV, PNG and SVG into BUILD/out/ (the report's are make report's)
	@BUILD=$(BUILD) bash tools/plots.sh $(BUILD)/out
report: all ## draw every plot again into notebooks-out/, with notebooks-out/README.md: the plots and the last make bench's verdicts
	@BUILD=$(BUILD) bash tools/report.sh
demo: ## the main job: install what is missing, build, run every chapter that exists on its defaults
	@BUILD=$(BUILD) sh mk/deps.sh --quiet
	@$(MAKE) --no-print-directory demo-chapters
demo-chapters: all
	@for n in $(CHAPTERS); do echo "==== chapter $$n ===="; $(RUN_BUILD)/chapter-$$n || exit 1; done
test-gpu: all ## the GPU paths, on a machine with an NVIDIA GPU
	@bash tests/run --suite=gpu
stress: tests ## the long checks make test leaves out (tests/stress/): fifty mpirun jobs with a rank stopped under load, torch.randperm's switch at its real size
	@for s in tests/stress/*.sh; do BUILD=$(BUILD) bash $$s || exit 1; done
# What notebooks-out/ keeps (the report and what it shows, reference/): the same list as .gitignore's.
NOTEBOOKS_KEPT := README.md reference/* bench/last-run.txt chapter-*/*.svg chapter-*/*.csv chapter-*/provenance.txt
# `make -j2 clean all`: clean first, then the rest, one at a time (in parallel, all found build/ up to date
# while clean was removing it)
ifneq ($(filter clean,$(MAKECMDGOALS)),)
ifneq ($(filter-out clean,$(MAKECMDGOALS)),)
.NOTPARALLEL:
endif
endif
clean: ## remove build/ and what notebooks-out/ does not keep (the PNG copies, temporary files)
	rm -rf build
	[ ! -d notebooks-out ] || { find notebooks-out -type f $(foreach k,$(NOTEBOOKS_KEPT),! -path 'notebooks-out/$(k)') -delete && \
	    find notebooks-out -mindepth 1 -type d -empty -delete; }
help: ## list the entry points
	@echo "make targets:"
	@grep -hE '^(# )?[a-z%-]+:.*## ' $(MAKEFILE_LIST) | sed -E 's/^(# )?([a-z%-]+):.*## /  \2\t/' | sed 's/%/N/' | expand -t 22
	@echo "variables: BUILD=dir  SAN=address,undefined  WITH_CUDA=0  WITH_MPI=0  ARGS='...' (for chapter-N)"
	@echo "           DEPS=all|required|none (for deps, demo, test)  BENCH_QUICK=1 (bench in seconds, figures meaningless)"

.PHONY: deps all tests test check tsan crosscheck-kernels bench plots report demo demo-chapters clean help features fuzz fuzz-build chapter- lab- lab-skeletons test-gpu stress
.SECONDARY:
-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
