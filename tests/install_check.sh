#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# install_check.sh - `make install PREFIX=...` as a user meets it: the build installed to a
# temporary prefix, a program built against it by pkg-config and by CMake's find_package, the
# installed tool run, all again after the prefix is moved (ndf.pc and the RPATHs are relative).
# usage: install_check.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "install_check: $*" >&2; exit 1; }
unset LD_LIBRARY_PATH NDFILT_LIBRARY PKG_CONFIG_PATH CMAKE_PREFIX_PATH
export NDF_DEVICE=cpu

cmake --install "$build" --prefix "$tmp/a" >"$tmp/install.log" || { cat "$tmp/install.log"; fail "cmake --install failed"; }
libdir=$(find "$tmp/a" -name 'libndfilt.so' -printf '%h\n' | head -1)
[ -n "$libdir" ] || fail "no libndfilt.so installed"
pcdir=$libdir/pkgconfig
[ -f "$pcdir/ndf.pc" ] || fail "no ndf.pc in $pcdir"
[ -x "$tmp/a/bin/ndfilt" ] || fail "no bin/ndfilt"

check() { # the installed copy at prefix $1
  local p=$1 lib=${libdir/#$tmp\/a/$1}
  # pkg-config: the prefix the file names is where it lies now
  local pc="env PKG_CONFIG_PATH=${pcdir/#$tmp\/a/$p} pkg-config"
  local got
  got=$(cd "$($pc --variable=prefix ndf)" && pwd -P)
  [ "$got" = "$(cd "$p" && pwd -P)" ] || fail "ndf.pc's prefix is $got, not $p"
  [ "$($pc --modversion ndf)" = "$("$p/bin/ndfilt" --version | awk '{print $2}')" ] ||
    fail "ndf.pc's version differs from the tool's"
  # shellcheck disable=SC2046
  cc -o "$tmp/consumer_pc" "$src/tests/install/consumer.c" $($pc --cflags --libs ndf) -lm \
    -Wl,-rpath,"$($pc --variable=libdir ndf)" || fail "build by pkg-config failed"
  "$tmp/consumer_pc" || fail "the pkg-config build failed to run"
  # CMake: find_package(ndf) and ndf::ndfilt
  rm -rf "$tmp/cm"
  if ! { cmake -S "$src/tests/install" -B "$tmp/cm" -DCMAKE_PREFIX_PATH="$p" &&
    cmake --build "$tmp/cm"; } >"$tmp/cm.log" 2>&1; then
    cat "$tmp/cm.log"
    fail "build by find_package(ndf) failed"
  fi
  grep -q "ndf_DIR:PATH=$p/" "$tmp/cm/CMakeCache.txt" || fail "find_package(ndf) found another copy"
  "$tmp/cm/consumer" || fail "the find_package build failed to run"
  # The tool: it loads the installed library (RPATH $ORIGIN/../lib), with every dependency found
  got=$(ldd "$p/bin/ndfilt" | awk '/libndfilt/ {print $3}')
  if [ -z "$got" ] || [ "$(realpath "$(dirname "$got")")" != "$(realpath "$lib")" ]; then
    fail "bin/ndfilt loads '$got', not $lib/libndfilt.so"
  fi
  ! ldd "$p/bin/ndfilt" "$lib/libndfilt.so" | grep "not found" || fail "unresolved dependencies"
  "$p/bin/ndfilt" --version
  "$p/bin/ndfilt" demo --size 16 --out "$tmp/demo" >"$tmp/demo.log" 2>&1 || { cat "$tmp/demo.log"; fail "bin/ndfilt demo failed"; }
  compgen -G "$tmp/demo/smoothed.*" >/dev/null || fail "the demo wrote no smoothed volume"
}
check "$tmp/a"
mv "$tmp/a" "$tmp/b"
check "$tmp/b"
echo "install_check: pkg-config, find_package(ndf) and bin/ndfilt work from the prefix, moved too"
