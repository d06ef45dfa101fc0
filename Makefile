# The two commands of the README, plus the sanitizer runs. Everything builds with CMake presets
# (CMakePresets.json); tools/install-deps.sh installs what a fresh Debian machine lacks.
PRESET ?= release
BUILD := build/$(PRESET)
JOBS ?= 2

.PHONY: all build test cuda-check demo asan tsan soak fuzz deps build-deps clean

all: build

# What the build needs (build-deps), and with it what the tests use (deps).
build-deps:
	@tools/install-deps.sh build

deps:
	@tools/install-deps.sh

build: build-deps
	cmake --preset $(PRESET) >/dev/null
	cmake --build --preset $(PRESET) -j $(JOBS)

# The whole CTest suite (labels: unit, transport, coll, api, fault, thread, python, install,
# examples, docs), without the long ones: soak (hundreds of failure trials) and fuzz.
test: deps build
	ctest --preset $(PRESET) --timeout 600 -LE 'soak|fuzz'

# The CUDA build (preset cuda, build/cuda; docs/cuda.md) where the toolkit is installed: it
# must build without warnings and pass, against the CUDA-enabled library, the CUDA label (no
# CUDA library linked, the host-only fallback, the device kernels' arithmetic; the GPU tests
# skip without a GPU) and a short part of the CPU suite (unit, api, a few collectives). Where
# nvcc is missing it says so and succeeds: CUDA is optional.
NVCC ?= /usr/local/cuda/bin/nvcc
cuda-check: deps
	@if [ ! -x "$(NVCC)" ]; then \
		echo "cuda-check: no nvcc at $(NVCC): the CUDA build is skipped"; \
	else \
		cmake --preset cuda >/dev/null && \
		cmake --build --preset cuda -j $(JOBS) && \
		ctest --preset cuda --timeout 600 -L 'cuda|unit|api' -LE 'soak|fuzz' && \
		ctest --preset cuda --timeout 600 -R '^coll_n[234]_shm$$|^coll_n2_tcp$$'; \
	fi

# The long failure trials: 200 kills per transport, 200 aborts from another thread.
soak: build
	ctest --preset $(PRESET) -L soak --timeout 3000

# The libFuzzer harnesses (clang, ASan+UBSan), FUZZ_SECONDS each (default 300).
fuzz: build
	tests/fuzz/run.sh $(CURDIR) $(BUILD)

# Tutti's main job: a 4-process AllReduce benchmark with correctness checking, 8 B to 64 MiB.
demo: build
	$(BUILD)/tutti-run -n 4 $(BUILD)/tutti-perf -b 8 -e 64M -f 2 -c 1

asan:
	$(MAKE) test PRESET=asan

# ThreadSanitizer (the tsan preset) over the tests whose ranks run several threads (label
# thread); a race is reported with both stacks and fails the test.
tsan:
	$(MAKE) build PRESET=tsan
	ctest --preset tsan -L thread --timeout 600

clean:
	rm -rf build
