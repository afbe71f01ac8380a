#!/usr/bin/env bash
# deps.sh - installs the Debian packages ndfilt needs; quick and silent when all are present.
set -euo pipefail
# The file formats' reference libraries (libdeflate: gzip output compressed in parallel); clang
# for the readers' fuzzers and clang-format for the format check; nibabel, astropy and tifffile read our files back in the tests;
# scikit-image's sample images (and its Pillow) are real TIFF and PNG files for them.
PKGS=(build-essential cmake pkg-config python3 python3-numpy python3-scipy libfftw3-dev
      libnifti2-dev libtiff-dev libpng-dev libcfitsio-dev zlib1g-dev libdeflate-dev clang
      clang-format libclang-rt-dev python3-nibabel python3-astropy python3-tifffile python3-skimage)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "deps: installing ${missing[*]}"
SUDO=
if [ "$(id -u)" != 0 ]; then
  command -v sudo >/dev/null || { echo "deps: need root (or sudo) to install: ${missing[*]}" >&2; exit 1; }
  SUDO=sudo
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
