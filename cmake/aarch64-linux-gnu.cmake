# Cross build for 64-bit Arm Linux with Debian's toolchain
# (gcc-aarch64-linux-gnu, libc6-dev-arm64-cross); tests run under qemu-user.
#
#   cmake -S . -B build-aarch64 -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake
#   ctest --test-dir build-aarch64        (each test binary runs through qemu-aarch64)
#
# qemu-user executes aarch64 code with the host's (x86, TSO) memory ordering:
# it runs the cntvct_el0 counter read and the fences, but cannot show a
# missing barrier (see the barrier comments in src/counter/counter.h).
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)

set(TH_CROSS_TRIPLE aarch64-linux-gnu)
set(TH_CROSS_SYSROOT /usr/${TH_CROSS_TRIPLE} CACHE PATH "target libraries for qemu-user (-L)")

set(CMAKE_C_COMPILER ${TH_CROSS_TRIPLE}-gcc)
find_program(TH_CROSS_CXX ${TH_CROSS_TRIPLE}-g++)
if(TH_CROSS_CXX)
  set(CMAKE_CXX_COMPILER ${TH_CROSS_CXX})
else()
  # The project builds no C++ code of its own; a C++ compiler is only used to
  # check that the public header compiles as C++. Without g++-aarch64-linux-gnu,
  # clang compiles for the target and links without libstdc++ (whose
  # development files for arm64 are not installed).
  set(CMAKE_CXX_COMPILER clang++)
  set(CMAKE_CXX_COMPILER_TARGET ${TH_CROSS_TRIPLE})
  # (CXX flags are also passed when linking C++ targets.)
  set(CMAKE_CXX_FLAGS_INIT "-nostdlib++ -Wno-unused-command-line-argument")
endif()

set(CMAKE_FIND_ROOT_PATH ${TH_CROSS_SYSROOT})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)

# add_test() commands naming a target run through the emulator.
find_program(TH_QEMU_AARCH64 qemu-aarch64)
if(TH_QEMU_AARCH64)
  set(CMAKE_CROSSCOMPILING_EMULATOR ${TH_QEMU_AARCH64} -L ${TH_CROSS_SYSROOT})
endif()
