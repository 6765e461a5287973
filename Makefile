# hydra: build, test, bench.  `make deps` once (as root), then `make`, `make test`.
# MODE selects the flags: release (default), asan, bench. One build dir per MODE.
MODE ?= release
PKGS := lua5.4 yaml-0.1 hdf5 openblas zlib freetype2 libpng jansson libjpeg
# Debian packages hydra needs (make deps installs the missing ones).
DEB_PKGS := build-essential pkg-config liblua5.4-dev libopenblas-dev libhdf5-dev hdf5-tools \
            libyaml-dev zlib1g-dev libfreetype-dev libpng-dev libjansson-dev libjpeg62-turbo-dev gnuplot-nox fonts-dejavu-core \
            fonts-freefont-ttf fonts-liberation dataset-fashion-mnist fortunes fortunes-min \
            clang-14 libclang-rt-14-dev libomp-14-dev chromium unicode-data
# Packages needed for a single file: the file is extracted from the downloaded .deb.
DEB_EXTRACT := opencv-doc weka wordnet-base

DEPS_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null | sed 's/-I/-isystem /g')
DEPS_LIBS   := $(shell pkg-config --libs $(PKGS) 2>/dev/null) -lm
WARN := -Wall -Wextra -Wpedantic -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
        -Wold-style-definition -Wpointer-arith -Wcast-qual -Wwrite-strings -Wundef \
        -Wdouble-promotion -Wformat=2 -Wvla -Wconversion \
        -Werror=implicit-function-declaration -Werror=incompatible-pointer-types
# ARCH: release and bench builds use the host CPU's vector units (AVX2/AVX-512: the engine's
# `omp simd` exp/erf loops run 2-4x faster than at the x86-64 baseline, training 2.3x). The
# binary then runs only on CPUs like the build machine's; `make ARCH=` builds a portable one.
# -ffp-contract=off (also the -std=c11 default) keeps the compiler from fusing a*b+c into FMAs.
ARCH ?= -march=native
OPT_release := -O2 -g $(ARCH)
OPT_asan    := -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=all -DHY_DEBUG
OPT_bench   := -O3 $(ARCH) -DNDEBUG
ifeq ($(OPT_$(MODE)),)
  $(error unknown MODE=$(MODE); use release, asan or bench)
endif
CFLAGS  := -std=c11 -ffp-contract=off -fopenmp $(WARN) $(OPT_$(MODE)) $(DEPS_CFLAGS) -Icore -Ilua/bind -Itests/c -MMD -MP $(if $(WERROR),-Werror)
LDFLAGS := -fopenmp $(filter -fsanitize=%,$(OPT_$(MODE)))

# Build dir per MODE, so objects built with different flags never mix.
# BUILD=dir overrides it (parallel work trees sharing one checkout use their own).
B := $(if $(BUILD),$(BUILD),build/$(MODE))
CORE_O := $(patsubst %.c,$(B)/%.o,$(wildcard core/*/*.c))
BIND_O := $(patsubst %.c,$(B)/%.o,$(wildcard lua/bind/*.c lua/bind/*/*.c))
# Shared test helpers: check.c and the naive double-precision reference kernels ref_*.c.
TESTLIB_O := $(patsubst %.c,$(B)/%.o,tests/c/check.c $(wildcard tests/c/ref_*.c))
# Test binaries go to $(B)/bin/, not $(B)/tests/: overlapping patterns would pick the wrong rule.
CTESTS := $(patsubst tests/c/%.c,$(B)/bin/%,$(wildcard tests/c/test_*.c))
HYDRA_BIN := $(B)/bin/hydra

all: $(HYDRA_BIN) $(CTESTS) $(B)/libhydra.a
ifeq ($(MODE)$(BUILD),release)
all: hydra
hydra: $(HYDRA_BIN)
	cp $< $@
endif

$(B)/%.o: %.c Makefile
	@mkdir -p $(@D)
	@echo "  CC $<"
	@$(CC) $(CFLAGS) -c $< -o $@
# Engine kernels: their `omp simd` loops hold clamps/selects that GCC only if-converts (and so
# vectorises) at -O3; release builds compile these files at -O3 (still no fast-math).
# -fno-math-errno lets sqrtf be one instruction that vectorises (AdamW); it changes no result.
ifeq ($(MODE),release)
$(B)/core/tensor/attn.o $(B)/core/nn/layers.o $(B)/core/nn/optim.o: CFLAGS += -O3
endif
$(B)/core/tensor/attn.o $(B)/core/nn/layers.o $(B)/core/nn/optim.o: CFLAGS += -fno-math-errno
$(B)/libhydra.a: $(CORE_O)
	@rm -f $@
	$(AR) rcs $@ $^
$(HYDRA_BIN): $(B)/lua/host/main.o $(BIND_O) $(B)/libhydra.a
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) $^ $(DEPS_LIBS) -o $@
$(B)/bin/test_%: $(B)/tests/c/test_%.o $(TESTLIB_O) $(B)/libhydra.a
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) $^ $(DEPS_LIBS) -o $@
# Timing programs (tests/c/bench_*.c): built on demand, never run by `make test`.
$(B)/bin/bench_%: $(B)/tests/c/bench_%.o $(TESTLIB_O) $(B)/libhydra.a
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) $^ $(DEPS_LIBS) -o $@

# Tests run single-threaded with a fixed seed; tests/run.sh prints "N passed, N failed".
TEST_ENV := OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 HYDRA_THREADS=1 HYDRA_SEED=$${HYDRA_SEED:-1234} \
            OMP_WAIT_POLICY=passive
test: all
	@$(TEST_ENV) sh tests/run.sh $(B)
asan:
	$(MAKE) MODE=asan test
# SIZE: small (vit-fm, text-sst, the loaded vit-fm; default), real (ViT-S/16 at 224, BERT-base
# at 128; a few minutes) or all (experiments/bench.lua).
SIZE ?= small
bench:
	$(MAKE) MODE=bench all
	HYDRA_BENCH_SIZE=$(SIZE) OMP_WAIT_POLICY=passive build/bench/bin/hydra run experiments/bench.lua
demo: all
	./hydra repro quickstart
repro: all
	./hydra repro all --profile paper
	./hydra repro --write
# libFuzzer targets (tests/fuzz/fuzz_*.c, one per parser; not part of `make test`): the core is
# rebuilt with clang-14 under ASan + UBSan with fuzzer coverage in build/fuzz, then each target
# runs FUZZ_SECONDS from its seed corpus (tests/fuzz/run.sh); a crash, leak or timeout fails.
# config, idx, text and ckpt take raw bytes; ckpt_h5, gates_h5 and fused_h5 are structure-aware
# (tests/fuzz/fuzz_h5model.h: valid checkpoint / gates / fused files edited through the HDF5
# API, so the input reaches hydra's checks instead of dying in libhdf5's parser). Every target
# runs clean for FUZZ_SECONDS = 60 s, its documented time (one core shared with other jobs:
# config 271k executions / 295 edges, idx 65k / 80, text 353k / 894, ckpt 87k / 21, ckpt_h5
# 9k / 478, gates_h5 12k / 228, fused_h5 19k / 467).
FUZZ_CC ?= clang-14
FUZZ_SECONDS ?= 60
FUZZ_TARGETS ?= config idx text ckpt ckpt_h5 gates_h5 fused_h5 safetensors
FUZZ_B := build/fuzz
FUZZ_SAN := -fsanitize=address,undefined -fno-sanitize-recover=undefined
FUZZ_CFLAGS := -std=c11 -D_POSIX_C_SOURCE=200809L -ffp-contract=off -fopenmp -g -O1 -fno-omit-frame-pointer \
               -Wno-pass-failed -fsanitize=fuzzer-no-link $(FUZZ_SAN) $(DEPS_CFLAGS) -Icore -Itests/fuzz \
               -MMD -MP
FUZZ_CORE_O := $(patsubst %.c,$(FUZZ_B)/%.o,$(wildcard core/*/*.c))
FUZZ_BINS := $(patsubst %,$(FUZZ_B)/fuzz_%,$(FUZZ_TARGETS))
$(FUZZ_B)/%.o: %.c Makefile
	@mkdir -p $(@D)
	@echo "  FUZZCC $<"
	@$(FUZZ_CC) $(FUZZ_CFLAGS) -c $< -o $@
$(FUZZ_B)/libhydra.a: $(FUZZ_CORE_O)
	@rm -f $@
	$(AR) rcs $@ $^
$(FUZZ_B)/fuzz_%: $(FUZZ_B)/tests/fuzz/fuzz_%.o $(FUZZ_B)/libhydra.a
	$(FUZZ_CC) -fsanitize=fuzzer $(FUZZ_SAN) -fopenmp $^ $(DEPS_LIBS) -o $@
fuzz-build: $(FUZZ_BINS)
fuzz: fuzz-build
	sh tests/fuzz/run.sh $(FUZZ_B) $(FUZZ_SECONDS) $(FUZZ_TARGETS)
# A sweep through `hydra sweep --launcher slurm` on a private single-node Slurm (slurm-wlm and
# munge installed when missing): tests/slurm/run.sh. Without root it prints why and exits 77,
# which make reports as an error: a skip is never a pass.
test-slurm: all
	@HYDRA=$(HYDRA_BIN) sh tests/slurm/run.sh
deps:
	@sh .ci/deps.sh $(DEB_PKGS) -- $(DEB_EXTRACT)
clean:
	rm -rf build hydra
.PHONY: all test test-slurm asan bench demo repro deps clean fuzz fuzz-build
-include $(shell find build -name '*.d' 2>/dev/null)
