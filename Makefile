# Thin front for CMake.
#   make                 build everything
#   make test            set up (tests/packages.txt), build and run the default test suite
#   make bench           build and run the comparison against the kernel's clocks
#   make install PREFIX=/usr/local [DESTDIR=...]
#   make dev             gcc and clang builds with warnings as errors, then make test
#   make test-long | test-sanitize | test-aarch64 | test-model | fuzz   (further tiers)
#   make test-faults     as root: change the kernel's clock under the readers (runs alone)
BUILD ?= build
PREFIX ?= /usr/local
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_FLAGS ?=
SETUP = ./tests/tiers/setup.sh

.PHONY: all test bench install clean dev test-long test-sanitize test-aarch64 test-model test-faults fuzz

all: $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS)

$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) -DCMAKE_INSTALL_PREFIX=$(PREFIX) $(CMAKE_FLAGS)

# Set-up first (as root it installs the packages the tests use), then build:
# in sequence, also under make -j.
test:
	$(SETUP) build test
	$(MAKE) all
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) -LE long; rc=$$?; \
		cd $(CURDIR) && $(SETUP) --report build test; exit $$rc

bench:
	$(SETUP) build bench
	$(MAKE) all
	./bench/run.sh $(BUILD)

install: all
	cmake -S . -B $(BUILD) -DCMAKE_INSTALL_PREFIX=$(PREFIX) >/dev/null
	cmake --build $(BUILD) -j $(JOBS)
	DESTDIR=$(DESTDIR) cmake --install $(BUILD)

dev:
	cmake -S . -B build-dev -DTH_WERROR=ON >/dev/null
	cmake --build build-dev -j $(JOBS)
	cmake -S . -B build-dev-clang -DTH_WERROR=ON -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ >/dev/null
	cmake --build build-dev-clang -j $(JOBS)
	$(MAKE) test BUILD=build-dev

# The long tier's tests are registered only in a build configured for them,
# so that a bare ctest elsewhere does not run them for an hour.
test-long:
	cmake -S . -B $(BUILD) -DTH_LONG_TESTS=ON >/dev/null
	$(MAKE) all
	cd $(BUILD) && ctest --output-on-failure -L long

test-sanitize:
	./tests/tiers/sanitize.sh

test-aarch64:
	./tests/tiers/aarch64.sh

test-model:
	./tests/tiers/model.sh

test-faults:
	./tests/tiers/faults.sh

fuzz:
	./tests/tiers/fuzz.sh

clean:
	rm -rf $(BUILD)

# make deb [DEB_BUILD=build-deb]: the Debian packages (libtimehands1,
# libtimehands-dev, timehands) in $(DEB_BUILD)/, built out of tree by
# packaging/deb/build.sh. make test-deb: builds them, runs lintian and, as
# root, installs, upgrades and purges them (tests/tiers/deb.sh).
DEB_BUILD ?= build-deb
.PHONY: deb test-deb
deb:
	./packaging/deb/build.sh $(DEB_BUILD)

test-deb:
	./tests/tiers/deb.sh
