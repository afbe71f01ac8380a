/* test_npy.c - .npy round trips, strided writes, and clear errors on bad files. */
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
  expect_header("fortran.npy", "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }",
                "Fortran");
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
  return io_finish("npy", 0);
}
