# Thin front for CMake.
#   make                 build everything
#   make test            build and run the default test suite
#   make bench           build and run the comparison against the kernel's clocks
#   make install PREFIX=/usr/local [DESTDIR=...]
#   make test-long | test-sanitize | test-aarch64 | test-model | fuzz   (further tiers)
BUILD ?= build
PREFIX ?= /usr/local
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_FLAGS ?=

.PHONY: all test bench install clean test-long test-sanitize test-aarch64 test-model fuzz

all: $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS)

$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) -DCMAKE_INSTALL_PREFIX=$(PREFIX) $(CMAKE_FLAGS)

test: all
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) -LE long

bench: all
	./bench/run.sh $(BUILD)

install: all
	cmake -S . -B $(BUILD) -DCMAKE_INSTALL_PREFIX=$(PREFIX) >/dev/null
	cmake --build $(BUILD) -j $(JOBS)
	DESTDIR=$(DESTDIR) cmake --install $(BUILD)

test-long: all
	cd $(BUILD) && ctest --output-on-failure -L long

test-sanitize:
	./tests/tiers/sanitize.sh

test-aarch64:
	./tests/tiers/aarch64.sh

test-model:
	./tests/tiers/model.sh

fuzz:
	./tests/tiers/fuzz.sh

clean:
	rm -rf $(BUILD)
