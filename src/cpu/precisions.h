/* SPDX-License-Identifier: BSD-3-Clause */
/* precisions.h - a solver's code written once over its precision, FFTW's X() idea in C: the file
 * named by NDF__PRECISION_BODY is included twice, with R (the element type), RT (its dtype) and
 * X(name) (name with the precision's suffix) for float32 (_f32), then float64 (_f64). The
 * including solver picks between X(...)_f32 and _f64 by its plan's input dtype. */
#define R float
#define RT NDF_F32
#define X(name) name##_f32
#include NDF__PRECISION_BODY
#undef R
#undef RT
#undef X
#define R double
#define RT NDF_F64
#define X(name) name##_f64
#include NDF__PRECISION_BODY
#undef R
#undef RT
#undef X
#undef NDF__PRECISION_BODY
