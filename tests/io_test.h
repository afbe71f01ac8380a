/* SPDX-License-Identifier: BSD-3-Clause */
/* io_test.h - what the file-format tests (test_io_*.c, test_npy.c) share: their scratch
 * directory and paths in it, whole files written and read back, the temporaries a write may
 * leave, reads and io_convert runs that must fail, and writes under a file size limit. */
#ifndef NDF_IO_TEST_H
#define NDF_IO_TEST_H

#include <dirent.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "common.h"
#include "io/image.h"

enum { IO_PATH = 256 }; /* room for a path in the directory */

static char io_dir[64];           /* the test's directory, made by io_dir_make */
static const char *io_convert_at; /* the io_convert tool, for io_convert_fails */

/* Makes the test's directory, /tmp/ndf_TAG_XXXXXX: 0, or -1. */
static inline int io_dir_make(const char *tag) {
  snprintf(io_dir, sizeof io_dir, "/tmp/ndf_%s_XXXXXX", tag);
  return mkdtemp(io_dir) ? 0 : -1;
}

/* name in the directory, written into buf (IO_PATH bytes), which it returns. */
static inline const char *io_path(char *buf, const char *name) {
  snprintf(buf, IO_PATH, "%s/%s", io_dir, name);
  return buf;
}

/* name in the directory, in one of 4 buffers used in turn: valid for 3 more calls. */
static inline const char *io_at(const char *name) {
  static char buf[4][IO_PATH];
  static int k;
  k = (k + 1) % 4;
  return io_path(buf[k], name);
}

/* 1 if something exists at path. */
static inline int io_exists(const char *path) {
  struct stat sb;
  return stat(path, &sb) == 0;
}

/* Files in the directory whose name holds part. */
static inline int io_files_with(const char *part) {
  DIR *d = opendir(io_dir);
  int n = 0;
  for (struct dirent *e; d && (e = readdir(d));)
    n += strstr(e->d_name, part) != NULL;
  if (d) closedir(d);
  return n;
}

/* Temporary files in the directory (".NAME.tmpXXXXXX": a write's, which a failed one must
 * not leave behind). */
static inline int io_leftovers(void) { return io_files_with(".tmp"); }

/* Writes the n bytes at b to path (aborts where it cannot). */
static inline void io_write_file(const char *path, const void *b, size_t n) {
  FILE *f = fopen(path, "wb");
  if (!f || (n && fwrite(b, 1, n, f) != n)) abort();
  fclose(f);
}

/* The whole file at path (malloc'd, one spare byte after its *n for a terminator), or NULL
 * where it cannot be opened. */
static inline unsigned char *io_read_file(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long len = ftell(f);
  fseek(f, 0, SEEK_SET);
  unsigned char *b = len < 0 ? NULL : malloc((size_t)len + 1);
  if (!b || fread(b, 1, (size_t)len, f) != (size_t)len) abort();
  fclose(f);
  *n = (size_t)len;
  return b;
}

/* A read of path must fail with status want (0: any) and a message naming the file and
 * holding needle (NULL: anything). */
static inline void io_read_fails(const char *path, ndf_status want, const char *needle) {
  ndf_image img;
  ndf_image_init(&img);
  char err[512] = "";
  ndf_status st = ndf_image_read(path, NULL, &img, err, sizeof err);
  if (st == NDF_OK) ndf_image_free(&img);
  CHECK(st != NDF_OK && (!want || st == want), "%s: read gave %s, expected %s (%s)", path,
        ndf_status_str(st), want ? ndf_status_str(want) : "an error", err);
  CHECK(strstr(err, path) && (!needle || strstr(err, needle)),
        "%s: message '%s' lacks the path or '%s'", path, err, needle ? needle : "");
}

/* An image (no metadata) over a new test array src of random data (t_arr_make, t_fill_random;
 * strided or not): free src, not the image. */
static inline ndf_image io_random_image(t_arr *src, uint64_t *r, ndf_dtype t, int nd,
                                        const int64_t *shape, int strided) {
  t_arr_make(src, r, t, nd, shape, strided, NULL);
  t_fill_random(src, r);
  ndf_image img;
  ndf_image_init(&img);
  img.a = src->hview;
  return img;
}

/* ndf_image_write(path, img) while files may not grow past limit bytes (SIGXFSZ ignored,
 * so that the write fails instead of the process): its status, its message in err. */
static inline ndf_status io_write_limited(const char *path, const ndf_image *img, rlim_t limit,
                                          char *err, size_t errlen) {
  struct rlimit old, lim;
  getrlimit(RLIMIT_FSIZE, &old);
  void (*prev)(int) = signal(SIGXFSZ, SIG_IGN);
  lim = old;
  lim.rlim_cur = limit;
  setrlimit(RLIMIT_FSIZE, &lim);
  ndf_status st = ndf_image_write(path, img, err, errlen);
  setrlimit(RLIMIT_FSIZE, &old);
  signal(SIGXFSZ, prev);
  return st;
}

/* `io_convert IN OUT` (after the shell words pre, "" for none) must exit 3 and leave no OUT
 * and no temporary file. */
static inline void io_convert_fails(const char *pre, const char *in, const char *out) {
  char cmd[1024];
  snprintf(cmd, sizeof cmd, "%s '%s' '%s' '%s' 2>/dev/null", pre, io_convert_at, in, out);
  int rc = system(cmd);
  CHECK(rc != -1 && WIFEXITED(rc) && WEXITSTATUS(rc) == 3, "io_convert %s %s: exit %d", in, out,
        rc != -1 && WIFEXITED(rc) ? WEXITSTATUS(rc) : -1);
  CHECK(!io_exists(out), "a failed io_convert left %s", out);
  CHECK(!io_leftovers(), "a failed io_convert left a temporary file");
}

/* The end of a test: "NAME checks: N failures", and the directory removed (after a failure
 * kept, and said so, where keep is set). The exit code. */
static inline int io_finish(const char *name, int keep) {
  printf("%s checks: %d failures\n", name, t_failures);
  if (t_failures && keep) {
    printf("files kept in %s\n", io_dir);
    return 1;
  }
  char cmd[100];
  snprintf(cmd, sizeof cmd, "rm -rf %s", io_dir);
  if (system(cmd) != 0) return 1;
  return t_failures ? 1 : 0;
}

#endif
