#!/bin/sh
# Install into a scratch prefix, then build a C and a C++ program with
# `pkg-config timehands` and run them.
set -eu
build=$1 src=$2
for tool in pkg-config:pkg-config c++:g++; do
	command -v "${tool%%:*}" >/dev/null 2>&1 ||
		{ echo "SKIP: ${tool%%:*} is needed (Debian package: ${tool#*:})"; exit 77; }
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
pc=$(find "$tmp/prefix" -name timehands.pc | head -n 1)
[ -n "$pc" ] || { echo "timehands.pc not installed"; exit 1; }
export PKG_CONFIG_PATH=$(dirname "$pc")
# the .pc names the configured prefix; point it at the scratch one
sed -i "s|^prefix=.*|prefix=$tmp/prefix|" "$pc"
libdir=$(pkg-config --variable=libdir timehands)
cc -Wall -Wextra -Werror -o "$tmp/c" "$src/pkgconfig_prog.c" $(pkg-config --cflags --libs timehands)
c++ -Wall -Wextra -Werror -x c++ -o "$tmp/cxx" "$src/pkgconfig_prog.c" $(pkg-config --cflags --libs timehands)
LD_LIBRARY_PATH=$libdir "$tmp/c"
LD_LIBRARY_PATH=$libdir "$tmp/cxx"
# only th_ symbols exported
bad=$(nm -D --defined-only "$libdir"/libtimehands.so | awk '$2 ~ /[TDBR]/ {print $3}' | grep -v '^th_' || true)
[ -z "$bad" ] || { echo "unexpected exports: $bad"; exit 1; }
soname=$(objdump -p "$libdir"/libtimehands.so | awk '/SONAME/ {print $2}')
[ "$soname" = libtimehands.so.1 ] || { echo "SONAME $soname"; exit 1; }
echo "pkgconfig: ok"
