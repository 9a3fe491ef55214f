# sweep (runner/) and fp4serve (engine/): one non-recursive Makefile.
#
#   make                 build build/bin/sweep and build/bin/fp4serve
#   make run             install what is missing, build, run experiments/quickstart.yaml
#   make test            build, scan for banned calls, run every test (unit, cases,
#                        fuzz replay, integration)
#   make bench           benchmarks (ratios measured side by side, never pass/fail)
#   make cuda-host       the CUDA kernels run on the CPU through tests/cudahost/ (parity
#                        with the CPU backend, memory checks); also part of make test
#   make check-gpu       the CUDA backend on a GPU (tests/gpu/check.sh; skips without one;
#                        PREBUILT=DIR: binaries from tests/gpu/check.sh --bundle DIR)
#   make fuzz            libFuzzer on every fuzz target (FUZZ_SECONDS each)
#   make models          fetch SmolLM2-135M-Instruct Q4_1 into models/
#   make pydeps          Python packages the tests use (tokenizers, transformers, gguf, llama-cpp-python) in build/venv
#   make pyclients       GuideLLM and lm-evaluation-harness in build/venv (tests/integration/serve_clients.sh)
#   make check           banned calls, the include layer order, paths named in comments
#   make format          clang-format every C/CUDA source
#   make SAN=address,undefined test    the same tests under sanitizers
#   make CUDA_ARCHS=sm_90              CUDA code for one GPU only (default: sm_80 to sm_121)
#   make install PREFIX=/usr/local
#
# Sources are found by wildcard: a new module is a new .c/.h pair, nothing
# to register here. engine/cpu/*_avx2.c and *_avx512.c get their ISA flags;
# the code picks a kernel at run time. CUDA objects are built when nvcc is found,
# for every architecture in CUDA_ARCHS (below), with PTX for the last one.

BUILD    ?= build
.DEFAULT_GOAL := all
PREFIX   ?= /usr/local
CC       ?= cc
SAN      ?=
FUZZ_SECONDS ?= 60

OPT      ?= -O2
CFLAGS   ?= -g
CFLAGS   += $(EXTRA_CFLAGS) $(OPT) -std=c11 -D_GNU_SOURCE -pthread -Wall -Wextra -Wno-unused-parameter \
            -Wno-missing-field-initializers -MMD -MP -Icommon -I$(BUILD)/gen
LDFLAGS  ?=
LDLIBS   := -lm -pthread
ifneq ($(SAN),)
CFLAGS   += -fsanitize=$(SAN) -fno-omit-frame-pointer -fno-sanitize-recover=undefined
LDFLAGS  += -fsanitize=$(SAN)
endif

# ---- dependencies: installed (as root) or named, then pkg-config flags ----
NODEPS_GOALS := clean format help check
ifneq ($(filter-out $(NODEPS_GOALS),$(or $(MAKECMDGOALS),all)),)
-include $(BUILD)/config.mk
endif

$(BUILD)/config.mk: scripts/deps.sh scripts/deps.list
	@sh scripts/deps.sh
	@mkdir -p $(BUILD)
	@{ echo "RUNNER_PC_CFLAGS := $$(pkg-config --cflags yaml-0.1 libcurl libpcre2-8 jansson)"; \
	   echo "RUNNER_PC_LIBS := $$(pkg-config --libs yaml-0.1 libcurl libpcre2-8 jansson)"; \
	   echo "ENGINE_PC_CFLAGS := $$(pkg-config --cflags libmicrohttpd jansson libpcre2-8)"; \
	   echo "ENGINE_PC_LIBS := $$(pkg-config --libs libmicrohttpd jansson libpcre2-8)"; } > $@.tmp
	@mv $@.tmp $@

# ---- version baked into both binaries ----
# Rewritten only when it changes; objects depend on it only through the
# -MMD lists of the files that include it (main.c, manifest.c, ...), so a
# new commit rebuilds those, not everything.
VERSION := $(shell git describe --always --dirty --tags 2>/dev/null || echo unknown)
$(BUILD)/gen/version.h: FORCE
	@mkdir -p $(dir $@)
	@echo '#define BUILD_VERSION "$(VERSION)"' > $@.tmp
	@cmp -s $@.tmp $@ && rm -f $@.tmp || mv $@.tmp $@

# ---- build flags: a change of compiler, flags or sanitizers rebuilds everything ----
BUILD_FLAGS = $(CC) | $(CFLAGS) | $(LDFLAGS) | $(NVCC) | $(CUDA_GENCODE)
$(BUILD)/gen/flags: FORCE
	@mkdir -p $(dir $@)
	@echo '$(subst ','\'',$(BUILD_FLAGS))' > $@.tmp
	@cmp -s $@.tmp $@ && rm -f $@.tmp || mv $@.tmp $@
GEN := $(BUILD)/gen/version.h $(BUILD)/config.mk

# ---- gnuplot chart templates (plots/*.gp), embedded into sweep ----
$(BUILD)/gen/plot_templates.h: $(wildcard plots/*.gp) scripts/embed-templates.sh
	@mkdir -p $(dir $@)
	@sh scripts/embed-templates.sh $(sort $(wildcard plots/*.gp)) > $@.tmp && mv $@.tmp $@
$(BUILD)/obj/runner/analysis/plot.o: $(BUILD)/gen/plot_templates.h

# ---- sources ----
COMMON_SRC := $(wildcard common/*.c)
RUNNER_SRC := $(filter-out runner/main.c,$(wildcard runner/*.c runner/*/*.c))
ENGINE_SRC := $(filter-out engine/main.c,$(wildcard engine/*.c engine/*/*.c))
obj = $(patsubst %.c,$(BUILD)/obj/%.o,$(1))

NVCC ?= $(shell command -v nvcc 2>/dev/null || ls /usr/local/cuda/bin/nvcc 2>/dev/null)
CUDA_SRC := $(if $(NVCC),$(wildcard engine/cuda/*.cu))
ifneq ($(CUDA_SRC),)
CUDA_HOME := $(patsubst %/bin/nvcc,%,$(NVCC))
CUDA_OBJ  := $(patsubst %.cu,$(BUILD)/obj/%.o,$(CUDA_SRC))
ENGINE_DEFS := -DHAVE_CUDA=1
CUDA_LIBS := -L$(CUDA_HOME)/lib64 -lcudart_static -ldl -lrt -lstdc++
endif

# ---- CUDA architectures: machine code (SASS) for each of CUDA_ARCHS, and PTX
# for the last (newest) one, which the driver compiles for GPUs newer than
# the list. Written "sm_80 sm_90", "80 90" or "sm_80,sm_90"; CUDA_ARCH=sm_XX
# (one architecture) is an alias. The default is Ampere (sm_80, sm_86), Ada
# (sm_89), Hopper (sm_90) and Blackwell (sm_100 to sm_121), less what this
# nvcc does not list in `nvcc --list-gpu-code` (CUDA 13 has no sm_101, 12.x
# no sm_110). $(BUILD)/gen/cuda-archs records what the build used
# (tests/integration/cuda_archs.sh checks the binary against it).
CUDA_ARCHS_DEFAULT := sm_80 sm_86 sm_89 sm_90 sm_100 sm_101 sm_103 sm_110 sm_120 sm_121
comma := ,
ifneq ($(CUDA_SRC),)
ifeq ($(strip $(CUDA_ARCHS)),)
ifneq ($(CUDA_ARCH),)
CUDA_ARCHS := $(CUDA_ARCH)
else
CUDA_KNOWN := $(shell $(NVCC) --list-gpu-code 2>/dev/null)
CUDA_ARCHS := $(or $(filter $(CUDA_KNOWN),$(CUDA_ARCHS_DEFAULT)),$(CUDA_ARCHS_DEFAULT))
CUDA_DEFAULT := 1
endif
endif
CUDA_ARCH_NUMS := $(patsubst sm_%,%,$(patsubst compute_%,%,$(subst $(comma), ,$(CUDA_ARCHS))))
CUDA_PTX := $(lastword $(CUDA_ARCH_NUMS))
CUDA_GENCODE := $(foreach a,$(CUDA_ARCH_NUMS),-gencode arch=compute_$(a)$(comma)code=sm_$(a)) \
	$(if $(CUDA_PTX),-gencode arch=compute_$(CUDA_PTX)$(comma)code=compute_$(CUDA_PTX))
endif
$(BUILD)/gen/cuda-archs: FORCE
	@mkdir -p $(dir $@)
	@printf "NVCC='%s'\nCUDA_ARCHS='%s'\nCUDA_PTX='%s'\nCUDA_DEFAULT='%s'\n" \
	    '$(if $(CUDA_SRC),$(NVCC))' '$(if $(CUDA_SRC),$(addprefix sm_,$(CUDA_ARCH_NUMS)))' \
	    '$(if $(CUDA_SRC),$(addprefix compute_,$(CUDA_PTX)))' '$(CUDA_DEFAULT)' > $@.tmp
	@cmp -s $@.tmp $@ && rm -f $@.tmp || mv $@.tmp $@

LIB_COMMON := $(BUILD)/lib/libcommon.a
LIB_SWEEP  := $(BUILD)/lib/libsweep.a
LIB_FP4    := $(BUILD)/lib/libfp4.a
SWEEP      := $(BUILD)/bin/sweep
FP4SERVE   := $(BUILD)/bin/fp4serve
FAKESERVER := $(BUILD)/bin/fakeserver
TOOLS      := $(patsubst tests/tools/%.c,$(BUILD)/bin/%,$(wildcard tests/tools/*.c))

RUNNER_LIBS = $(RUNNER_PC_LIBS) $(LDLIBS)
ENGINE_LIBS = $(ENGINE_PC_LIBS) $(CUDA_LIBS) $(LDLIBS)

.PHONY: all run test bench check-gpu fuzz models pydeps pyclients check format install clean help FORCE
all: $(SWEEP) $(FP4SERVE) $(FAKESERVER) $(TOOLS)

# ---- compile rules ----
$(BUILD)/obj/common/%.o: common/%.c $(BUILD)/gen/flags | $(GEN)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(RUNNER_PC_CFLAGS) -c -o $@ $<
$(BUILD)/obj/runner/%.o: runner/%.c $(BUILD)/gen/flags | $(GEN)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(RUNNER_PC_CFLAGS) -Irunner -c -o $@ $<
$(BUILD)/obj/engine/%.o: engine/%.c $(BUILD)/gen/flags | $(GEN)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(ISA_FLAGS) $(ENGINE_DEFS) $(ENGINE_PC_CFLAGS) -Iengine -c -o $@ $<
$(BUILD)/obj/engine/%.o: engine/%.cu $(BUILD)/gen/flags
	@mkdir -p $(dir $@)
	$(NVCC) -O3 -std=c++17 $(CUDA_GENCODE) -Iengine -Icommon -MMD -MP -c -o $@ $<
$(BUILD)/obj/tests/%.o: tests/%.c $(BUILD)/gen/flags | $(GEN)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(RUNNER_PC_CFLAGS) $(ENGINE_PC_CFLAGS) -Itests -c -o $@ $<

# Kernels: hot loops get -O3 (the kernels and the CPU backend's forward
# pass); ISA-specific files get their instruction sets.
$(BUILD)/obj/engine/cpu/%.o: OPT = -O3
$(BUILD)/obj/engine/model/backend_cpu.o: OPT = -O3
# (x86 targets only: elsewhere those files compile to nothing, and
# matmul_neon.c serves aarch64)
X86_TARGET := $(filter x86_64% i386% i486% i586% i686%,$(shell $(CC) -dumpmachine 2>/dev/null))
$(BUILD)/obj/engine/cpu/%_avx2.o: ISA_FLAGS = $(if $(X86_TARGET),-mavx2 -mfma -mf16c)
$(BUILD)/obj/engine/cpu/%_avx512.o: ISA_FLAGS = $(if $(X86_TARGET),-mavx2 -mfma -mf16c -mavx512f \
	-mavx512bw -mavx512vl -mavx512dq -mavx512vnni)

$(LIB_COMMON): $(call obj,$(COMMON_SRC))
$(LIB_SWEEP): $(call obj,$(RUNNER_SRC))
$(LIB_FP4): $(call obj,$(ENGINE_SRC)) $(CUDA_OBJ)
$(BUILD)/lib/%.a:
	@mkdir -p $(dir $@)
	@rm -f $@
	$(AR) rcs $@ $^

$(SWEEP): $(BUILD)/obj/runner/main.o $(LIB_SWEEP) $(LIB_COMMON)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(RUNNER_LIBS)
$(FP4SERVE): $(BUILD)/obj/engine/main.o $(LIB_FP4) $(LIB_COMMON) | $(BUILD)/gen/cuda-archs
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(ENGINE_LIBS)
$(FAKESERVER): $(call obj,$(wildcard tests/fakeserver/*.c)) $(LIB_COMMON)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(ENGINE_PC_LIBS) $(LDLIBS)
$(BUILD)/bin/%: $(BUILD)/obj/tests/tools/%.o $(LIB_COMMON)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(RUNNER_PC_LIBS) $(ENGINE_PC_LIBS) $(LDLIBS)

# ---- unit tests: tests/unit/{common,runner,engine}_NAME.c, one binary each ----
UNIT_SRC := $(wildcard tests/unit/*.c)
UNIT_BIN := $(patsubst tests/unit/%.c,$(BUILD)/tests/%,$(UNIT_SRC))
$(BUILD)/tests/common_%: $(BUILD)/obj/tests/unit/common_%.o $(LIB_COMMON)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)
$(BUILD)/tests/runner_%: $(BUILD)/obj/tests/unit/runner_%.o $(LIB_SWEEP) $(LIB_COMMON)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(RUNNER_LIBS)
$(BUILD)/tests/engine_%: $(BUILD)/obj/tests/unit/engine_%.o $(LIB_FP4) $(LIB_COMMON)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(ENGINE_LIBS)
$(BUILD)/obj/tests/unit/engine_%.o: TEST_FLAGS = $(ENGINE_DEFS) -Iengine
$(BUILD)/obj/tests/unit/runner_%.o: TEST_FLAGS = -Irunner
$(BUILD)/obj/tests/unit/%.o: tests/unit/%.c $(BUILD)/gen/flags | $(GEN)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(TEST_FLAGS) $(RUNNER_PC_CFLAGS) $(ENGINE_PC_CFLAGS) -Itests -c -o $@ $<

# ---- fuzz targets: tests/fuzz/{runner,engine}_NAME.c define LLVMFuzzerTestOneInput.
# make test links them with a replay main over tests/fuzz/corpus/NAME/;
# make fuzz links them with libFuzzer (clang) and runs each for FUZZ_SECONDS.
FUZZ_SRC := $(wildcard tests/fuzz/runner_*.c tests/fuzz/engine_*.c)
FUZZ_BIN := $(patsubst tests/fuzz/%.c,$(BUILD)/fuzz/%,$(FUZZ_SRC))
$(BUILD)/obj/tests/fuzz/engine_%.o: TEST_FLAGS = $(ENGINE_DEFS) -Iengine
$(BUILD)/obj/tests/fuzz/runner_%.o: TEST_FLAGS = -Irunner
$(BUILD)/obj/tests/fuzz/%.o: tests/fuzz/%.c $(BUILD)/gen/flags | $(GEN)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(TEST_FLAGS) $(RUNNER_PC_CFLAGS) $(ENGINE_PC_CFLAGS) -Itests -c -o $@ $<
FUZZ_MAIN := $(if $(FUZZ_ENGINE),,$(BUILD)/obj/tests/fuzz/replay/replay_main.o)
$(BUILD)/obj/tests/fuzz/replay/%.o: tests/fuzz/replay/%.c $(BUILD)/gen/flags | $(GEN)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c -o $@ $<
$(BUILD)/fuzz/runner_%: $(BUILD)/obj/tests/fuzz/runner_%.o $(FUZZ_MAIN) $(LIB_SWEEP) $(LIB_COMMON)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) $(FUZZ_ENGINE) -o $@ $^ $(RUNNER_LIBS)
$(BUILD)/fuzz/engine_%: $(BUILD)/obj/tests/fuzz/engine_%.o $(FUZZ_MAIN) $(LIB_FP4) $(LIB_COMMON)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) $(FUZZ_ENGINE) -o $@ $^ $(ENGINE_LIBS)

# ---- benchmarks: tests/bench/NAME.c -> build/bench/NAME (run by tests/bench/bench_*.sh) ----
BENCH_SRC := $(wildcard tests/bench/*.c)
BENCH_BIN := $(patsubst tests/bench/%.c,$(BUILD)/bench/%,$(BENCH_SRC))
$(BUILD)/obj/tests/bench/%.o: tests/bench/%.c $(BUILD)/gen/flags | $(GEN)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(ENGINE_DEFS) -Iengine -Itests -c -o $@ $<
$(BUILD)/bench/%: $(BUILD)/obj/tests/bench/%.o $(LIB_FP4) $(LIB_COMMON)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(ENGINE_LIBS)

# ---- aarch64: the NEON kernel table's unit tests and the portable ops' (whose
# bits engine_ops pins), cross-compiled (static);
# tests/integration/engine_neon.sh runs them under qemu-user. Only the kernel
# sources: no other library is needed. The cross compiler counts as present
# only when it works: scripts/probe-a64.sh builds a tiny static program with
# <stdint.h> and <math.h> (a compiler without libc6-dev-arm64-cross fails
# there) and runs it under qemu; when that fails, the reason goes to
# $(BUILD)/aarch64/SKIP and engine_neon.sh skips with it. Probed only for
# the goals that use it.
A64_CC   ?= $(shell command -v aarch64-linux-gnu-gcc 2>/dev/null)
A64_SRC  := engine/format/quant.c engine/cpu/act.c engine/cpu/matmul.c engine/cpu/matmul_neon.c \
            engine/cpu/ops.c engine/cpu/ops_avx2.c engine/cpu/ops_avx512.c common/xalloc.c
ifneq ($(filter test cuda-host,$(MAKECMDGOALS))$(filter $(BUILD)/aarch64/%,$(MAKECMDGOALS)),)
A64_OK   := $(shell sh scripts/probe-a64.sh '$(A64_CC)' '$(BUILD)/aarch64' >/dev/null 2>&1 && echo 1)
endif
A64_BIN  := $(if $(A64_OK),$(BUILD)/aarch64/engine_kernels $(BUILD)/aarch64/engine_quant \
            $(BUILD)/aarch64/engine_ops)
$(BUILD)/aarch64/%: tests/unit/%.c $(A64_SRC) $(wildcard engine/cpu/*.h engine/format/*.h common/*.h)
	@mkdir -p $(dir $@)
	$(A64_CC) -O2 -g -std=c11 -D_GNU_SOURCE -Wall -Wextra -Wno-unused-parameter -static \
	    -Iengine -Icommon -Itests -o $@ $< $(A64_SRC) -lm

# ---- cudahost: engine/cuda/*.cu compiled by g++ against tests/cudahost/ (no GPU, no
# nvcc needed), so the kernels run in every make test (docs/cudahost.md). Every
# load and store of the .cu files calls the harness's checker: GCC's kernel-address
# instrumentation with outline calls, whose __asan_* hooks runtime.cc defines.
# engine/model/backend.c and engine/cuda/cuda.c are compiled again with HAVE_CUDA;
# the rest of the engine's objects are the ordinary ones.
CUDAHOST_CXX ?= g++
CH           := $(BUILD)/cudahost
CH_OPT       ?= -O2
CH_CXXFLAGS  := -std=c++17 $(CH_OPT) -g -ffp-contract=off -fno-strict-aliasing -Wall \
    -Wno-unknown-pragmas -Wno-unused-parameter -Wno-unused-function -Wno-parentheses -MMD -MP \
    -Itests/cudahost/include -Itests/cudahost -Iengine -Icommon -I$(BUILD)/gen
CH_CHECKED   := -fsanitize=kernel-address --param asan-instrumentation-with-call-threshold=0 \
    --param asan-stack=0 --param asan-globals=0
CH_CU_OBJ    := $(patsubst engine/cuda/%.cu,$(CH)/obj/engine/%.o,$(filter-out %/selftest.cu,$(wildcard engine/cuda/*.cu)))
CH_RT_OBJ    := $(CH)/obj/runtime.o
CH_LIB       := $(CH)/libfp4host.a
CUDAHOST_BIN := $(BUILD)/tests/cudahost_parity $(BUILD)/tests/cudahost_memcheck \
    $(BUILD)/tests/cudahost_sched $(BUILD)/tests/cudahost_qwen3 $(BUILD)/tests/cudahost_gptoss \
    $(CH)/bin/fp4serve
$(CH)/obj/engine/%.o: engine/cuda/%.cu $(wildcard tests/cudahost/*.h) $(BUILD)/gen/flags | $(GEN)
	@mkdir -p $(dir $@)
	$(CUDAHOST_CXX) $(CH_CXXFLAGS) $(CH_CHECKED) -x c++ -c -o $@ $<
$(CH)/obj/%.o: tests/cudahost/%.cu $(wildcard tests/cudahost/*.h) $(BUILD)/gen/flags | $(GEN)
	@mkdir -p $(dir $@)
	$(CUDAHOST_CXX) $(CH_CXXFLAGS) $(CH_CHECKED) -Itests -x c++ -c -o $@ $<
$(CH_RT_OBJ): tests/cudahost/runtime.cc $(wildcard tests/cudahost/*.h) $(BUILD)/gen/flags
	@mkdir -p $(dir $@)
	$(CUDAHOST_CXX) $(CH_CXXFLAGS) -c -o $@ $<
$(CH)/obj/c/%.o: engine/%.c $(BUILD)/gen/flags | $(GEN)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -DHAVE_CUDA=1 $(ENGINE_PC_CFLAGS) -Iengine -c -o $@ $<
$(CH_LIB): $(CH_CU_OBJ) $(CH_RT_OBJ) $(CH)/obj/c/model/backend.o $(CH)/obj/c/cuda/cuda.o \
    $(filter-out $(BUILD)/obj/engine/model/backend.o $(BUILD)/obj/engine/cuda/%,$(call obj,$(ENGINE_SRC)))
	@rm -f $@
	$(AR) rcs $@ $^
$(CH)/obj/tests/%.o: tests/unit/%.c $(BUILD)/gen/flags | $(GEN)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -DCUDAHOST_SHAPES $(ENGINE_PC_CFLAGS) -Iengine -Itests -c -o $@ $<
$(BUILD)/tests/cudahost_parity: $(CH)/obj/tests/engine_cuda.o $(CH_LIB) $(LIB_COMMON)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(ENGINE_PC_LIBS) $(LDLIBS) -lstdc++
# qwen3 and qwen3moe against the CPU backend.
$(BUILD)/tests/cudahost_qwen3: $(CH)/obj/tests/engine_cuda_qwen3.o $(CH_LIB) $(LIB_COMMON)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(ENGINE_PC_LIBS) $(LDLIBS) -lstdc++
# gpt-oss against the CPU backend.
$(BUILD)/tests/cudahost_gptoss: $(CH)/obj/tests/engine_cuda_gptoss.o $(CH_LIB) $(LIB_COMMON)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(ENGINE_PC_LIBS) $(LDLIBS) -lstdc++
# The scheduler's prefix-cache tests driving the CUDA backend.
$(CH)/obj/tests/engine_sched.o: tests/unit/engine_sched.c $(BUILD)/gen/flags | $(GEN)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -DCUDAHOST_SCHED $(ENGINE_PC_CFLAGS) -Iengine -Itests -c -o $@ $<
$(BUILD)/tests/cudahost_sched: $(CH)/obj/tests/engine_sched.o $(CH_LIB) $(LIB_COMMON)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(ENGINE_PC_LIBS) $(LDLIBS) -lstdc++
$(BUILD)/tests/cudahost_memcheck: $(CH)/obj/memcheck.o $(CH_LIB) $(LIB_COMMON)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(ENGINE_PC_LIBS) $(LDLIBS) -lstdc++
$(CH)/bin/fp4serve: $(BUILD)/obj/engine/main.o $(CH_LIB) $(LIB_COMMON)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(ENGINE_PC_LIBS) $(LDLIBS) -lstdc++
.PHONY: cuda-host
cuda-host: all $(CUDAHOST_BIN)
	@BUILD=$(BUILD) TESTS=cudahost sh tests/run.sh
# Not with SAN=: the checker's hooks carry the names of ASan's own entry points.
test: $(if $(SAN),,$(CUDAHOST_BIN))
-include $(shell find $(CH)/obj -name '*.d' 2>/dev/null)

# ---- entry points ----
test: all $(UNIT_BIN) $(FUZZ_BIN) $(A64_BIN)
	@sh scripts/check-banned.sh
	@sh scripts/check-layers.sh
	@sh scripts/check-paths.sh
	-@$(MAKE) --no-print-directory models
	-@$(MAKE) --no-print-directory pydeps
	-@$(MAKE) --no-print-directory pyclients
	@BUILD=$(BUILD) sh tests/run.sh

bench: all $(BENCH_BIN)
	@BUILD=$(BUILD) sh tests/bench/run.sh

check-gpu:
	@BUILD=$(BUILD) bash tests/gpu/check.sh $(if $(PREBUILT),--prebuilt $(PREBUILT))

fuzz:
	$(MAKE) BUILD=$(BUILD)/libfuzzer CC=clang SAN=address,undefined \
	    EXTRA_CFLAGS=-fsanitize=fuzzer-no-link FUZZ_ENGINE=-fsanitize=fuzzer fuzz-bins
	@for t in $(patsubst tests/fuzz/%.c,%,$(FUZZ_SRC)); do \
	    mkdir -p $(BUILD)/libfuzzer/corpus/$$t; \
	    echo "fuzz: $$t for $(FUZZ_SECONDS)s"; \
	    $(BUILD)/libfuzzer/fuzz/$$t -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 \
	        $(BUILD)/libfuzzer/corpus/$$t tests/fuzz/corpus/$$t || exit 1; \
	done
fuzz-bins: $(FUZZ_BIN)

MODEL_SMOLLM2 := models/SmolLM2-135M-Instruct.Q4_1.gguf
MODEL_SHA256  := b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
models: $(MODEL_SMOLLM2)
$(MODEL_SMOLLM2):
	@sh scripts/fetch-model.sh $@ $(MODEL_SHA256)

# Python packages for tests, in a venv under build/ (nothing installed
# system-wide; it also sees the system's packages, and tests/lib.sh puts its
# bin/ first on PATH): tokenizers and transformers (tokenizer_export.sh loads
# our exported tokenizer with both; no torch), gguf (gguf-py's reader checks our writer:
# gguf_synth.sh, fp4_quantize.sh) and llama-cpp-python (llama.cpp loads our
# files and scores text: gguf_synth.sh, fp4_quantize.sh, fp4_eval.sh; built
# from source, a few minutes once). Without PyPI the tests that need them say
# they skipped.
#
# llama.cpp is compiled for what this process may use, never GGML_NATIVE:
# build/bin/isaprobe --cmake gives GGML_NATIVE=OFF and each extension ON or
# OFF (AMX only when the kernel grants the tile permission here; a VM that
# lists amx_tile but withholds it made -march=native's build die with
# SIGILL). The flags are recorded in $(PYVENV)/ggml-flags; other flags
# rebuild the venv.
PYVENV := $(BUILD)/venv
PYPKGS := tokenizers transformers gguf llama-cpp-python
pydeps: $(PYVENV)/.ok-4 $(PYVENV)/.ok-openai
# the official openai client (tests/integration/serve_openai.sh, serve_embed.sh), a step of its own
$(PYVENV)/.ok-openai: $(PYVENV)/.ok-4
	@$(PYVENV)/bin/pip install -q --disable-pip-version-check openai && touch $@ || \
	    { echo "pydeps: pip could not install openai into $(PYVENV)" >&2; exit 1; }
$(BUILD)/gen/ggml-flags: $(BUILD)/bin/isaprobe FORCE
	@mkdir -p $(dir $@)
	@$(BUILD)/bin/isaprobe --cmake > $@.tmp
	@cmp -s $@.tmp $@ && rm -f $@.tmp || mv $@.tmp $@
$(PYVENV)/.ok-4: $(BUILD)/gen/ggml-flags
	@echo "pydeps: $(PYPKGS) into $(PYVENV); llama.cpp with $$(cat $<)" >&2
	@python3 -m venv --clear --system-site-packages $(PYVENV) && \
	    CMAKE_ARGS="$$(cat $<)" FORCE_CMAKE=1 $(PYVENV)/bin/pip install -q --disable-pip-version-check \
	        --no-binary llama-cpp-python --no-cache-dir $(PYPKGS) && cp $< $(PYVENV)/ggml-flags && touch $@ || \
	    { echo "pydeps: pip could not install $(PYPKGS) into $(PYVENV)" >&2; exit 1; }

# The real clients tests/integration/serve_clients.sh runs against fp4serve,
# into the same venv but on a stamp of their own (adding them never rebuilds
# llama.cpp): GuideLLM and lm-evaluation-harness's API models, at the
# versions tested. GuideLLM is installed without its torch requirement
# (PyPI's Linux torch drags several GB of CUDA libraries; GuideLLM uses
# torch only for its DataLoader, and the test supplies a stand-in,
# tests/tools/torchshim, when torch cannot be imported; pip then says
# "guidellm 0.8.1 requires torch, which is not installed", as expected);
# lm-eval's API path needs no torch. About 700 MB on top of pydeps'
# packages (1 GB in a fresh venv, 124 s with a fast mirror). Without PyPI
# the test says it skipped.
PYCLIENTS := guidellm==0.8.1 'lm_eval[api]==0.4.13'
GUIDELLM_DEPS := 'click~=8.4.0' 'culsans~=0.10.0' 'datasets>=5.0.1' eval_type_backport faker \
    'ftfy>=6.0.0' 'httpx[http2]<1.0.0' loguru msgpack protobuf 'pydantic>=2.11.7' \
    'pydantic-settings>=2.0.0' pyyaml rich sanic tabulate 'uvloop>=0.18' 'more-itertools>=10.8.0' \
    'typing-extensions>=4.15.0' 'websockets>=13.0' 'numpy>=2.0.0' transformers
pyclients: $(PYVENV)/.ok-clients-1
$(PYVENV)/.ok-clients-1:
	@[ -x $(PYVENV)/bin/pip ] || { echo "pyclients: no venv in $(PYVENV) (make pydeps makes it)" >&2; exit 1; }
	@echo "pyclients: $(PYCLIENTS) into $(PYVENV) (GuideLLM without torch)" >&2
	@$(PYVENV)/bin/pip install -q --disable-pip-version-check --no-deps guidellm==0.8.1 && \
	    $(PYVENV)/bin/pip install -q --disable-pip-version-check $(GUIDELLM_DEPS) 'lm_eval[api]==0.4.13' && \
	    touch $@ || { echo "pyclients: pip could not install $(PYCLIENTS) into $(PYVENV)" >&2; exit 1; }

run: all
	@sh scripts/quickstart.sh $(BUILD)

check:
	@sh scripts/check-banned.sh; b=$$?; sh scripts/check-layers.sh; l=$$?; \
	    sh scripts/check-paths.sh; p=$$?; [ $$b$$l$$p = 000 ]

format:
	clang-format -i $$(git ls-files '*.c' '*.h' '*.cu' '*.cuh')

install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/sweep/plots
	install -m 0755 $(SWEEP) $(FP4SERVE) $(DESTDIR)$(PREFIX)/bin/
	install -m 0644 plots/*.gp $(DESTDIR)$(PREFIX)/share/sweep/plots/ 2>/dev/null || true

clean:
	rm -rf $(BUILD)

help:
	@sed -n '3,/^$$/p' Makefile | sed 's/^# \{0,1\}//'

FORCE:

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)
.SECONDARY:
