/* SPDX-License-Identifier: BSD-3-Clause */
/* test_npy.c - .npy round trips, strided writes, Fortran-order files, and clear errors on
 * bad files (overflowing shapes, special files, the read limit; raw files for the last two). */
#include <signal.h>

#include "io/formats.h"
#include "io/npy.h"
#include "io_test.h"

static void expect_error(const char *name, const char *bytes, size_t n, const char *needle) {
  char path[IO_PATH], err[512] = "";
  io_path(path, name);
  io_write_file(path, bytes, n);
  ndf_array a;
  ndf_status st = ndf_npy_read(path, &a, err, sizeof err);
  CHECK(st != NDF_OK, "%s read", name);
  CHECK(strstr(err, needle) && strstr(err, path), "%s: message '%s' lacks '%s' or the path", name,
        err, needle);
}

/* A v1 file with this header dict and 64 bytes of data. */
static void expect_header(const char *name, const char *dict, const char *needle) {
  char buf[256];
  size_t k = strlen(dict), hlen = 128 - 10;
  memset(buf, ' ', sizeof buf);
  memcpy(buf, "\x93NUMPY\x01\x00", 8);
  buf[8] = (char)hlen;
  buf[9] = 0;
  memcpy(buf + 10, dict, k);
  buf[127] = '\n';
  memset(buf + 128, 0, 64);
  expect_error(name, buf, 192, needle);
}

/* A v1 .npy file of header dict and the data bytes, at path. */
static void write_npy_file(const char *path, const char *dict, const void *data, size_t n) {
  size_t k = strlen(dict), total = (10 + k + 1 + 63) / 64 * 64;
  unsigned char *b = malloc(total + n);
  memset(b, ' ', total);
  memcpy(b, "\x93NUMPY\x01\x00", 8);
  b[8] = (unsigned char)((total - 10) & 255);
  b[9] = (unsigned char)((total - 10) >> 8);
  memcpy(b + 10, dict, k);
  b[total - 1] = '\n';
  if (n) memcpy(b + total, data, n);
  io_write_file(path, b, total + n);
  free(b);
}

/* A Fortran-order file (numpy.save of a Fortran-ordered array) of dtype t and shape, of
 * distinct values where the type has room, must read as the array in C order. */
static void fortran_case(ndf_dtype t, int nd, const int64_t *shape) {
  static const char *descr[] = {NULL, "|u1", "<u2", "<i2", "<f4", "<f8"};
  ndf_array c = ndf_array_contiguous(t, nd, shape, NULL);
  const int64_t n = ndf_array_size(&c);
  const size_t es = ndf_dtype_size(t);
  c.data = malloc((size_t)n * es);
  unsigned char *f = malloc((size_t)n * es);
  for (int64_t i = 0; i < n; i++)
    ndf__store(t, c.data, i, (double)(t == NDF_U8 ? i % 251 : i % 30011) - (t == NDF_I16) * 9000);
  for (int64_t i = 0; i < n; i++) { /* element i (C order) to its place in the file */
    int64_t rest = i, at = 0, stride = 1, idx[NDF_MAX_DIMS];
    for (int d = nd - 1; d >= 0; d--) {
      idx[d] = rest % shape[d];
      rest /= shape[d];
    }
    for (int d = 0; d < nd; d++) { /* the first index fastest */
      at += idx[d] * stride;
      stride *= shape[d];
    }
    memcpy(f + at * (int64_t)es, (char *)c.data + i * (int64_t)es, es);
  }
  char dict[200], name[64], err[512];
  int k =
      snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': True, 'shape': (", descr[t]);
  for (int d = 0; d < nd; d++)
    k += snprintf(dict + k, sizeof dict - (size_t)k, "%lld,%s", (long long)shape[d],
                  d + 1 < nd ? " " : "");
  snprintf(dict + k, sizeof dict - (size_t)k, "), }");
  snprintf(name, sizeof name, "fortran_%s_%lld_%d.npy", ndf_dtype_name(t), (long long)n, nd);
  const char *path = io_at(name);
  write_npy_file(path, dict, f, (size_t)n * es);
  ndf_array back;
  if (ndf_npy_read(path, &back, err, sizeof err) == NDF_OK) {
    CHECK(back.dtype == t && back.ndim == nd &&
              !memcmp(back.shape, shape, (size_t)nd * sizeof shape[0]) &&
              !memcmp(back.data, c.data, (size_t)n * es),
          "%s: not the array in C order", name);
    free(back.data);
  } else {
    CHECK(0, "%s: %s", name, err);
  }
  free(c.data);
  free(f);
}

/* Fortran-order files are read into C order: every dtype with 1-4 axes, and arrays of more
 * than one read chunk (1 MiB). */
static void fortran_order(uint64_t *r) {
  for (ndf_dtype t = NDF_U8; t <= NDF_F64; t++)
    for (int nd = 1; nd <= 4; nd++) {
      int64_t shape[4];
      for (int d = 0; d < nd; d++)
        shape[d] = t_randint(r, 1, 7);
      fortran_case(t, nd, shape);
    }
  fortran_case(NDF_U8, 4, (const int64_t[]){17, 19, 23, 181});
  fortran_case(NDF_F64, 3, (const int64_t[]){37, 61, 83});
}

/* Shapes whose element or byte count overflows are refused with a message (and the file
 * size is not read from an unset struct stat). */
static void overflow(void) {
  static const struct {
    const char *dict, *needle;
  } cases[] = {{"{'descr': '<f8', 'fortran_order': False, 'shape': (4611686018427387904, 4), }",
                "more elements than can be"},
               {"{'descr': '<f8', 'fortran_order': False, 'shape': (3037000500, 3037000500), }",
                "more elements than can be"},
               {"{'descr': '<f8', 'fortran_order': False, 'shape': (99999999999999999999,), }",
                "more elements than can be"},
               {"{'descr': '<f8', 'fortran_order': False, 'shape': (2305843009213693952, 2), }",
                "more bytes than can be"},
               {"{'descr': '<f8', 'fortran_order': False, 'shape': (576460752303423488,), }",
                "truncated data"},
               {"{'descr': '<f4', 'fortran_order': maybe, 'shape': (2,), }", "malformed header"}};
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    char name[32], err[512] = "";
    snprintf(name, sizeof name, "overflow%zu.npy", k);
    const char *path = io_at(name);
    write_npy_file(path, cases[k].dict, "\0\0\0\0\0\0\0\0", 8);
    ndf_array a;
    ndf_status st = ndf_npy_read(path, &a, err, sizeof err);
    CHECK(st == NDF_EINVAL && strstr(err, path) && strstr(err, cases[k].needle),
          "%s: %s, '%s' lacks '%s'", name, ndf_status_str(st), err, cases[k].needle);
    if (st == NDF_OK) free(a.data);
  }
}

/* A read of path with options o must fail with status want and a message naming the file
 * and holding needle. */
static void io_read_opts_fails(const char *path, const ndf_read_opts *o, ndf_status want,
                               const char *needle) {
  ndf_image img;
  ndf_image_init(&img);
  char err[512] = "";
  ndf_status st = ndf_image_read(path, o, &img, err, sizeof err);
  if (st == NDF_OK) ndf_image_free(&img);
  CHECK(st == want && strstr(err, path) && strstr(err, needle), "%s: %s, '%s' (expected %s, '%s')",
        path, ndf_status_str(st), err, ndf_status_str(want), needle);
}

/* The read limit, for .npy and raw files. */
static void read_limit(void) {
  float v[100] = {0};
  const char *path = io_at("limit.npy");
  write_npy_file(path, "{'descr': '<f4', 'fortran_order': False, 'shape': (10, 10), }", v,
                 sizeof v);
  char err[512];
  ndf_array a;
  ndf_io_set_read_limit(399);
  ndf_status st = ndf_npy_read(path, &a, err, sizeof err);
  CHECK(st == NDF_ENOMEM && strstr(err, path) && strstr(err, "read limit"), "npy: %s: %s",
        ndf_status_str(st), err);
  if (st == NDF_OK) free(a.data);
  ndf_io_set_read_limit(400);
  st = ndf_npy_read(path, &a, err, sizeof err);
  CHECK(st == NDF_OK, "npy at the limit: %s", err);
  if (st == NDF_OK) free(a.data);

  const char *raw = io_at("limit.raw");
  io_write_file(raw, v, sizeof v);
  ndf_read_opts o;
  memset(&o, 0, sizeof o);
  o.format = NDF_FORMAT_RAW;
  o.ndim = 2;
  o.shape[0] = o.shape[1] = 10;
  o.dtype = NDF_F32;
  ndf_io_set_read_limit(399);
  io_read_opts_fails(raw, &o, NDF_ENOMEM, "read limit");
  ndf_io_set_read_limit(0);
  o.shape[0] = INT64_C(1) << 60; /* 2^61 elements of 4 bytes */
  o.shape[1] = 2;
  io_read_opts_fails(raw, &o, NDF_EINVAL, "more bytes than can be");
}

/* Readers open the file themselves: a FIFO is refused without blocking (the alarm fails a
 * reader that waits for a writer), as are a device and a directory. */
static void special_files(void) {
  alarm(20);
  mkfifo(io_at("fifo.npy"), 0600);
  CHECK(symlink("/dev/null", io_at("null.npy")) == 0, "symlink to /dev/null");
  mkdir(io_at("dir.npy"), 0700);
  static const struct {
    const char *name, *needle;
  } cases[] = {
      {"fifo.npy", "a FIFO"}, {"null.npy", "a character device"}, {"dir.npy", "a directory"}};
  ndf_read_opts o;
  memset(&o, 0, sizeof o);
  o.format = NDF_FORMAT_RAW;
  o.ndim = 1;
  o.shape[0] = 4;
  o.dtype = NDF_U8;
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    const char *path = io_at(cases[k].name);
    char err[512] = "";
    ndf_array a;
    ndf_status st = ndf_npy_read(path, &a, err, sizeof err);
    CHECK(st == NDF_EIO && strstr(err, path) && strstr(err, cases[k].needle),
          "npy %s: %s, '%s' (expected '%s')", cases[k].name, ndf_status_str(st), err,
          cases[k].needle);
    if (st == NDF_OK) free(a.data);
    ndf_image img;
    ndf_image_init(&img);
    err[0] = 0;
    st = ndf__raw_read(path, &o, &img, err, sizeof err);
    CHECK(st == NDF_EIO && strstr(err, path) && strstr(err, cases[k].needle),
          "raw %s: %s, '%s' (expected '%s')", cases[k].name, ndf_status_str(st), err,
          cases[k].needle);
    if (st == NDF_OK) ndf_image_free(&img);
  }
  alarm(0);
}

int main(void) {
  if (io_dir_make("npy")) return 1;
  uint64_t r = t_seed();
  char path[IO_PATH], err[512];
  for (ndf_dtype t = NDF_U8; t <= NDF_F64; t++)
    for (int nd = 1; nd <= 4; nd++) {
      int64_t shape[4];
      for (int d = 0; d < nd; d++)
        shape[d] = t_randint(&r, 1, 7);
      t_arr src;
      t_arr_make(&src, &r, t, nd, shape, 1, NULL); /* strided source */
      t_fill_random(&src, &r);
      char name[32];
      snprintf(name, sizeof name, "a_%d_%d.npy", (int)t, nd);
      io_path(path, name);
      CHECK(ndf_npy_write(path, &src.hview, err, sizeof err) == NDF_OK, "write: %s", err);
      ndf_array back;
      CHECK(ndf_npy_read(path, &back, err, sizeof err) == NDF_OK, "read: %s", err);
      CHECK(back.dtype == t && back.ndim == nd, "dtype/ndim");
      int64_t n = ndf_array_size(&src.hview), bad = 0;
      for (int64_t i = 0; i < n; i++)
        bad +=
            ndf__load(t, back.data, i) != ndf__load(t, src.hview.data, ndf__offset(&src.hview, i));
      CHECK(bad == 0, "%lld elements differ (dtype %s ndim %d)", (long long)bad, ndf_dtype_name(t),
            nd);
      /* the header is what numpy writes: 64-byte aligned data */
      struct stat sb;
      stat(path, &sb);
      CHECK((sb.st_size - n * (int64_t)ndf_dtype_size(t)) % 64 == 0, "header not 64-aligned");
      free(back.data);
      t_arr_free(&src, NULL);
    }
  static const char good_hdr[] =
      "\x93NUMPY\x01\x00\x76\x00{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
  expect_error("magic.npy", "NOTNUMPY\x01\x00", 10, "bad magic");
  expect_error("short.npy", "\x93NUM", 4, "bad magic");
  expect_error("trunc_hdr.npy", good_hdr, 30, "truncated header");
  {
    char buf[256];
    memset(buf, ' ', sizeof buf);
    memcpy(buf, good_hdr, sizeof good_hdr - 1);
    buf[127] = '\n';
    memcpy(buf + 128, "\0\0\0\0\0\0\0\0", 8);
    expect_error("trunc_data.npy", buf, 136, "truncated data");
  }
  expect_header("bigendian.npy", "{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }",
                ">f4");
  expect_header("5d.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1, 1, 1, 2), }",
                "4 dimensions");
  expect_header("int64.npy", "{'descr': '<i8', 'fortran_order': False, 'shape': (2,), }",
                "not supported");
  expect_header("noshape.npy", "{'descr': '<f4', 'fortran_order': False}", "malformed header");
  expect_header("scalar.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (), }", "0-d");
  expect_header("empty.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (0, 3), }",
                "empty");
  ndf_array a;
  CHECK(ndf_npy_read("/nonexistent/x.npy", &a, err, sizeof err) == NDF_EIO, "missing file");

  /* A failed write leaves nothing behind, and an existing file intact. */
  float v[3] = {1, 2, 3};
  int64_t s1[1] = {3};
  ndf_array x = ndf_array_contiguous(NDF_F32, 1, s1, v);
  CHECK(ndf_npy_write("/nonexistent/dir/y.npy", &x, err, sizeof err) == NDF_EIO,
        "write to missing dir");
  io_path(path, "keep.npy");
  io_write_file(path, "keep", 4);
  x.data = NULL;
  CHECK(ndf_npy_write(path, &x, err, sizeof err) == NDF_EINVAL, "write NULL data");
  struct stat sb;
  CHECK(stat(path, &sb) == 0 && sb.st_size == 4, "existing file clobbered");
  fortran_order(&r);
  overflow();
  read_limit();
  special_files();
  return io_finish("npy", 0);
}
