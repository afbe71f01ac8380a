# SPDX-License-Identifier: BSD-3-Clause
"""ndfilt.sitk - ndfilt's filters on SimpleITK images: an image in, a new image out with the
input's origin, spacing, direction and metadata.

gaussian_filter (smooth), gaussian_laplace and gaussian_gradient_magnitude take sigma, or fwhm,
in the image's physical units (its spacing's: mm for medical images), one value or one per
axis in SimpleITK's order (x, y, z), as SimpleITK's filters; derivatives are per unit length,
and the boundary mode defaults to 'nearest' (the CLI's, and ITK's zero-flux Neumann). The
other filters are ndfilt's functions applied to the image's array (image_filter): their
arguments are ndfilt's, in voxels and in numpy's axis order (z, y, x); SimpleITK images among
them (a kernel, ks's sigma maps) are passed as their arrays.

Pixel types: uint8, uint16, int16, float32 and float64 are filtered as they are; other real
types (int8, int32, uint32, int64, uint64) in float32, the result rounded and clamped back to
the image's type unless output names a dtype. Results keep the image's pixel type (integers
rounded and clamped, as every ndfilt filter's) unless output names another. Vector images are
filtered one component at a time (as the CLI's colour channels); complex images are refused.
Importing ndfilt does not import SimpleITK; importing ndfilt.sitk does.
"""
import functools
import inspect

import numpy as np
import SimpleITK as sitk

import ndfilt

__all__ = ["image_filter", "gaussian_filter", "smooth", "gaussian_laplace",
           "gaussian_gradient_magnitude", "correlate1d", "convolve1d", "sepfilter", "correlate",
           "convolve", "correlate_bank", "convolve_bank", "ks", "sobel", "prewitt", "laplace",
           "generic_laplace", "generic_gradient_magnitude", "uniform_filter", "uniform_filter1d"]

_NATIVE = frozenset(map(np.dtype, (np.uint8, np.uint16, np.int16, np.float32, np.float64)))


def _check(image):
    if not isinstance(image, sitk.Image):
        raise TypeError(f"expected a SimpleITK.Image, not {type(image).__qualname__}")


def _view(image):
    """image's pixels as a read-only numpy view (z, y, x[, component]), and whether the image
    has vector pixels."""
    _check(image)
    a = sitk.GetArrayViewFromImage(image)
    if a.dtype.kind not in "uif":
        raise TypeError(f"pixel type {image.GetPixelIDTypeAsString()} is not supported (real "
                        "scalar or vector pixels)")
    vector = "vector" in image.GetPixelIDTypeAsString()
    if vector and a.ndim == image.GetDimension():  # one component: no component axis
        a = a[..., None]
    return a, vector


def _to_image(arr, like, vector):
    """A new image of arr (z, y, x[, component]) with like's origin, spacing, direction and
    metadata."""
    out = sitk.GetImageFromArray(arr, isVector=vector)
    out.CopyInformation(like)
    for k in like.GetMetaDataKeys():
        out.SetMetaData(k, like.GetMetaData(k))
    return out


def _arrays(v):
    """v with SimpleITK images (also in a list or tuple) replaced by their arrays."""
    if isinstance(v, sitk.Image):
        return _view(v)[0]
    if isinstance(v, (list, tuple)) and any(isinstance(e, sitk.Image) for e in v):
        return type(v)(_view(e)[0] if isinstance(e, sitk.Image) else e for e in v)
    return v


def _apply(image, f, output=None, bank=False):
    """f(array) over image's array (each component's, for vector pixels) as a new image with
    image's geometry. bank: f returns (F, *shape), made an F-component vector image."""
    a, vector = _view(image)
    if output is not None and not isinstance(output, (type, np.dtype, str)):
        raise TypeError("output must be None or a dtype: the result is a new image")
    back = None
    if a.dtype not in _NATIVE:
        back = a.dtype if output is None else None
        a = a.astype(np.float32)
    if vector:
        if bank:
            raise TypeError("a filter bank takes a scalar image, not vector pixels")
        res = np.stack([np.asarray(f(a[..., c])) for c in range(a.shape[-1])], axis=-1)
    else:
        res = np.asarray(f(a))
        if bank:
            res, vector = np.moveaxis(res, 0, -1), True
    if back is not None:
        if back.kind in "iu":
            info = np.iinfo(back)
            res = np.clip(np.rint(res), info.min, info.max)
        res = res.astype(back)
    return _to_image(np.ascontiguousarray(res), image, vector)


def image_filter(f, bank=False):
    """f, a function of an array (image first: any ndfilt filter), as a function of a SimpleITK
    image: the image's array in (z, y, x; each component of vector pixels in turn), a new image
    out with the image's origin, spacing, direction and metadata (CopyInformation). Other
    arguments go to f as they are, SimpleITK images among them as their arrays; output may be
    None or a dtype. bank: f returns (F, *image shape), which becomes an F-component vector
    image."""
    at = list(inspect.signature(f).parameters).index("output") - 1  # in args past image

    @functools.wraps(f)
    def g(image, *args, **kwargs):
        output = args[at] if len(args) > at else kwargs.get("output")
        # (views: args and kwargs keep their images alive)
        va = [_arrays(v) for v in args]
        vk = {k: _arrays(v) for k, v in kwargs.items()}
        return _apply(image, lambda a: f(a, *va, **vk), output, bank)

    return g


def _rev(v):
    """A per-axis sequence from SimpleITK's order (x, y, z) to the array's (z, y, x)."""
    if v is None or isinstance(v, (str, bytes)) or np.ndim(v) == 0:
        return v
    return tuple(v)[::-1]


def _spacing(image):
    return tuple(image.GetSpacing())[::-1]


def gaussian_filter(image, sigma=None, order=0, output=None, mode="nearest", cval=0.0,
                    truncate=4.0, *, fwhm=None, radius=None, method="auto", iir_order=0,
                    tolerance=0.0):
    """Gaussian smoothing of a SimpleITK image with sigma, or fwhm in its place (FWHM = 2.3548
    sigma), in the image's physical units (sigma / spacing voxels along each axis): one value,
    or one per axis in SimpleITK's order (x, y, z); so are order (derivatives per voxel, as
    ndfilt.gaussian_filter's), mode (default 'nearest') and radius. Other arguments as
    ndfilt.gaussian_filter's. Returns a new image with the input's geometry."""
    _check(image)
    sp = _spacing(image)
    return _apply(image, lambda a: ndfilt.gaussian_filter(
        a, _rev(sigma), _rev(order), output, _rev(mode), cval, truncate, radius=_rev(radius),
        method=method, iir_order=iir_order, tolerance=tolerance, spacing=sp, fwhm=_rev(fwhm)),
        output)


def smooth(image, sigma=None, *, fwhm=None, **kwargs):
    """gaussian_filter(image, sigma, fwhm=fwhm, ...): smoothing by a Gaussian of sigma or FWHM
    in physical units (fslmaths -s, AFNI 3dmerge -1blur_fwhm, SimpleITK's
    SmoothingRecursiveGaussian)."""
    return gaussian_filter(image, sigma, fwhm=fwhm, **kwargs)


def gaussian_laplace(image, sigma=None, output=None, mode="nearest", cval=0.0, *, fwhm=None,
                     **kwargs):
    """The Laplacian of the Gaussian in physical units (as ITK's LaplacianRecursiveGaussian):
    sigma or fwhm as gaussian_filter's, second derivatives per unit length squared; kwargs as
    ndfilt.gaussian_laplace's."""
    _check(image)
    sp = _spacing(image)
    return _apply(image, lambda a: ndfilt.gaussian_laplace(
        a, _rev(sigma), output, _rev(mode), cval, spacing=sp, fwhm=_rev(fwhm), **kwargs), output)


def gaussian_gradient_magnitude(image, sigma=None, output=None, mode="nearest", cval=0.0, *,
                                fwhm=None, **kwargs):
    """The Gaussian gradient's magnitude in physical units (as ITK's
    GradientMagnitudeRecursiveGaussian): sigma or fwhm as gaussian_filter's, derivatives per
    unit length; kwargs as ndfilt.gaussian_gradient_magnitude's."""
    _check(image)
    sp = _spacing(image)
    return _apply(image, lambda a: ndfilt.gaussian_gradient_magnitude(
        a, _rev(sigma), output, _rev(mode), cval, spacing=sp, fwhm=_rev(fwhm), **kwargs), output)


def ks(image, sigma, **kwargs):
    """ndfilt.ks on the image's array: sigma maps (arrays or images of the image's size; a
    list or tuple of them in numpy's axis order, z, y, x) in voxels; output 'same' only (the
    image's grid). Other arguments as ndfilt.ks's."""
    if kwargs.get("output", "same") != "same":
        raise ValueError("ndfilt.sitk.ks gives the image's grid (output='same'); for 'full' use "
                         "ndfilt.ks on the array")
    return _apply(image, lambda a: ndfilt.ks(a, _arrays(sigma), **kwargs))


correlate1d = image_filter(ndfilt.correlate1d)
convolve1d = image_filter(ndfilt.convolve1d)
sepfilter = image_filter(ndfilt.sepfilter)
correlate = image_filter(ndfilt.correlate)
convolve = image_filter(ndfilt.convolve)
correlate_bank = image_filter(ndfilt.correlate_bank, bank=True)
convolve_bank = image_filter(ndfilt.convolve_bank, bank=True)
sobel = image_filter(ndfilt.sobel)
prewitt = image_filter(ndfilt.prewitt)
laplace = image_filter(ndfilt.laplace)
generic_laplace = image_filter(ndfilt.generic_laplace)
generic_gradient_magnitude = image_filter(ndfilt.generic_gradient_magnitude)
uniform_filter = image_filter(ndfilt.uniform_filter)
uniform_filter1d = image_filter(ndfilt.uniform_filter1d)
