/* SPDX-License-Identifier: BSD-3-Clause */
/* convert.h - samples stored in a file's own type, for the format files: what a writer
 * does with the exact widenings of image.h (i8 -> i16; u32, i32, u64, i64 -> f64) when it
 * writes an array back as the type it came from. */
#ifndef NDF_IO_CONVERT_H
#define NDF_IO_CONVERT_H

#include <stdint.h>

#include "core/elem.h"

/* The sample types of files: the array dtypes and the ones readers widen. */
typedef enum ndf_io_type {
  NDF_IO_U8,
  NDF_IO_I8,
  NDF_IO_U16,
  NDF_IO_I16,
  NDF_IO_U32,
  NDF_IO_I32,
  NDF_IO_U64,
  NDF_IO_I64,
  NDF_IO_F32,
  NDF_IO_F64
} ndf_io_type;

/* Stores v as sample n of type t at p: integers rounded half to even and clamped to t's
 * range, NaN to 0 (ndf__round_clamp; 2^63 and 2^64, the doubles just past the 64-bit
 * ranges, to the largest value); floats as they are (f32 rounded). */
static inline void ndf_io_store(ndf_io_type t, void *p, int64_t n, double v) {
  switch (t) {
  case NDF_IO_U8: ((uint8_t *)p)[n] = (uint8_t)ndf__round_clamp(v, 0, 255); break;
  case NDF_IO_I8: ((int8_t *)p)[n] = (int8_t)ndf__round_clamp(v, -128, 127); break;
  case NDF_IO_U16: ((uint16_t *)p)[n] = (uint16_t)ndf__round_clamp(v, 0, 65535); break;
  case NDF_IO_I16: ((int16_t *)p)[n] = (int16_t)ndf__round_clamp(v, -32768, 32767); break;
  case NDF_IO_U32: ((uint32_t *)p)[n] = (uint32_t)ndf__round_clamp(v, 0, 4294967295.0); break;
  case NDF_IO_I32:
    ((int32_t *)p)[n] = (int32_t)ndf__round_clamp(v, -2147483648.0, 2147483647.0);
    break;
  case NDF_IO_U64: {
    double r = ndf__round_clamp(v, 0, 18446744073709551616.0); /* 2^64: not a uint64 */
    ((uint64_t *)p)[n] = r >= 18446744073709551616.0 ? UINT64_MAX : (uint64_t)r;
    break;
  }
  case NDF_IO_I64: {
    double r = ndf__round_clamp(v, -9223372036854775808.0, 9223372036854775808.0);
    ((int64_t *)p)[n] = r >= 9223372036854775808.0 ? INT64_MAX : (int64_t)r;
    break;
  }
  case NDF_IO_F32: ((float *)p)[n] = (float)v; break;
  case NDF_IO_F64: ((double *)p)[n] = v; break;
  }
}

#endif
