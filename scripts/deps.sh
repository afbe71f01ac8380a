#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# deps.sh - installs the Debian packages ndfilt needs; quick and silent when all are present.
set -euo pipefail
# The file formats' reference libraries (libdeflate: gzip output compressed in parallel); clang
# for the readers' fuzzers and clang-format for the format check; nibabel, astropy and tifffile read our files back in the tests;
# scikit-image's sample images (and its Pillow) are real TIFF and PNG files for them.
# python3-venv: the pip_install test's fresh venv.
PKGS=(build-essential cmake pkg-config python3 python3-numpy python3-scipy libfftw3-dev
      libnifti2-dev libtiff-dev libpng-dev libcfitsio-dev zlib1g-dev libdeflate-dev clang
      clang-format libclang-rt-dev python3-nibabel python3-astropy python3-tifffile python3-skimage
      python3-pip python3-venv time)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
SUDO=
if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi
if [ ${#missing[@]} -gt 0 ]; then
  echo "deps: installing ${missing[*]}"
  [ -z "$SUDO" ] || command -v sudo >/dev/null ||
    { echo "deps: need root (or sudo) to install: ${missing[*]}" >&2; exit 1; }
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
# The tests' interpreter (tests/CMakeLists.txt: Debian's, beside the python3-* packages above),
# whatever python3 comes first on PATH.
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
# SimpleITK for ndfilt.sitk's tests (python/tests/test_interop.py), from PyPI; it has no
# dependencies, so Debian's numpy and scipy stay.
if ! "$PY" -c "import SimpleITK" 2>/dev/null; then
  echo "deps: installing SimpleITK (pip)"
  $SUDO "$PY" -m pip install -q --root-user-action=ignore --break-system-packages SimpleITK
fi
# scikit-build-core, the build backend of `pip install .` (pyproject.toml), for the pip_install
# test, which builds with --no-build-isolation so that it needs no network.
if ! "$PY" -c "import scikit_build_core" 2>/dev/null; then
  echo "deps: installing scikit-build-core (pip)"
  $SUDO "$PY" -m pip install -q --root-user-action=ignore --break-system-packages scikit-build-core
fi
# Dask for ndfilt.dask and its tests, from PyPI into the system's python3 (beside Debian's numpy
# and scipy, which it keeps: zarr 2 rather than 3, which wants a newer numpy); dask-image for the
# benchmark against it.
if ! python3 -c "import dask.array, distributed, zarr, dask_image" 2>/dev/null; then
  echo "deps: installing dask, distributed, zarr, dask-image (pip)"
  $SUDO python3 -m pip install -q --root-user-action=ignore --break-system-packages "dask[array]" distributed "zarr<3" \
    dask-image
fi
