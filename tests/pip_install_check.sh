#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# pip_install_check.sh - `pip install .` as a user meets it: a fresh venv (the system's numpy
# and scipy through --system-site-packages; scikit-build-core from scripts/deps.sh, so no
# network: --no-index --no-build-isolation), the source tree built and installed by pip
# (CPU only, for time), then the binding tests against the installed package, run from a
# directory outside the source tree with no NDFILT_LIBRARY, so that nothing but the installed
# package can be imported. Exit 77 (skipped) without venv or scikit-build-core.
# usage: pip_install_check.sh SOURCE_DIR [PYTHON]
set -euo pipefail
src=$(cd "$1" && pwd -P)
py=${2:-python3}
fail() { echo "pip_install_check: $*" >&2; exit 1; }
"$py" -c "import scikit_build_core, venv, ensurepip" 2>/dev/null ||
  { echo "pip_install_check: skipped: $py lacks scikit-build-core or venv (make deps)"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
unset NDFILT_LIBRARY PYTHONPATH PIP_CONFIG_FILE
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1
# Parallel when scikit-build-core falls back to make (no ninja).
export CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc 2>/dev/null || echo 2)}

t0=$(date +%s)
"$py" -m venv --system-site-packages "$tmp/venv"
vpy=$tmp/venv/bin/python
"$vpy" -m pip install -q --no-index --no-build-isolation \
  --config-settings=cmake.define.NDF_ENABLE_CUDA=OFF --config-settings=build-dir="$tmp/build" \
  "$src" >"$tmp/pip.log" 2>&1 || { tail -40 "$tmp/pip.log"; fail "pip install failed"; }
t1=$(date +%s)

# The tests as the tree has them, outside it: test_binding.py puts its folder's parent on
# sys.path (here $tmp/run, with no ndfilt in it) and so imports the installed package.
mkdir "$tmp/run"
cp -r "$src/python/tests" "$tmp/run/tests"
rm -rf "$tmp/run/tests/__pycache__"
cd "$tmp/run"
"$vpy" - "$tmp/venv" <<'PY' || fail "the installed package is not the one imported"
import importlib.metadata, os, sys
import ndfilt, ndfilt._lib as L
venv = os.path.realpath(sys.argv[1])
pkg = os.path.realpath(os.path.dirname(ndfilt.__file__))
lib = os.path.realpath(L.lib._name)
assert pkg.startswith(venv + os.sep), pkg
assert lib == os.path.join(pkg, "libndfilt.so"), lib
dist = importlib.metadata.version("ndfilt")
assert dist == ndfilt.__version__, (dist, ndfilt.__version__)  # both the C library's version
print(f"pip_install_check: ndfilt {dist} from {pkg}, library {os.path.basename(lib)}")
PY
"$vpy" tests/test_binding.py >"$tmp/test.log" 2>&1 || { tail -60 "$tmp/test.log"; fail "test_binding.py failed"; }
tail -3 "$tmp/test.log"
echo "pip_install_check: pip install $((t1 - t0)) s, binding tests $(($(date +%s) - t1)) s"
