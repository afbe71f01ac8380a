/* test_cli.c - the ndfilt tool end to end: commands, exit codes, no output on failure.
 * usage: test_cli PATH/TO/ndfilt */
#include <sys/stat.h>
#include <sys/wait.h>

#include "common.h"
#include "io/npy.h"
#include "ref/ref.h"

static const char *exe;
static char dir[] = "/tmp/ndf_cli_XXXXXX";

static int run(const char *args) {
  char cmd[2048];
  snprintf(cmd, sizeof cmd, "NDF_DEVICE=cpu '%s' %s >%s/stdout 2>%s/stderr", exe, args, dir, dir);
  int s = system(cmd);
  return WIFEXITED(s) ? WEXITSTATUS(s) : -1;
}

static int file_has(const char *name, const char *needle) {
  char path[512], buf[8192];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = 0;
  return strstr(buf, needle) != NULL;
}

int main(int argc, char **argv) {
  if (argc < 2 || !mkdtemp(dir)) return 1;
  exe = argv[1];
  uint64_t r = t_seed();
  char args[1024], in[256], out[256], err[512];
  snprintf(in, sizeof in, "%s/in.npy", dir);
  snprintf(out, sizeof out, "%s/out.npy", dir);

  CHECK(run("--version") == 0 && file_has("stdout", ndf_version_string()), "--version");
  CHECK(run("--help") == 0 && file_has("stdout", "exit codes"), "--help");
  CHECK(run("info") == 0 && file_has("stdout", "cpu_direct") && file_has("stdout", "device:"),
        "info");
  CHECK(run("correlate1d --help") == 0 && file_has("stdout", "--weights"), "correlate1d --help");
  CHECK(run("demo --help") == 0 && file_has("stdout", "phantom"), "demo --help");
  CHECK(run("frobnicate") == 2 && file_has("stderr", "unknown command"), "unknown command");
  CHECK(run("--device nowhere info") == 2, "bad device");

  int64_t shape[3] = {5, 6, 7};
  t_arr x;
  t_arr_make(&x, &r, NDF_F32, 3, shape, 0, NULL);
  t_fill_random(&x, &r);
  CHECK(ndf_npy_write(in, &x.hview, err, sizeof err) == NDF_OK, "%s", err);
  const double w[4] = {0.25, -1, 2, 0.5};
  double ref[210];
  ndf_ref_convolve1d(&x.hview, ref, w, 4, 1, NDF_MODE_WRAP, 0, -1);
  snprintf(args, sizeof args,
           "convolve1d %s %s --weights 0.25,-1,2,0.5 --axis -2 --mode wrap --origin -1", in, out);
  CHECK(run(args) == 0, "convolve1d run");
  ndf_array y;
  if (ndf_npy_read(out, &y, err, sizeof err) == NDF_OK) {
    double worst = 0;
    for (int i = 0; i < 210; i++)
      worst = fmax(worst, fabs(((float *)y.data)[i] - ref[i]));
    CHECK(y.dtype == NDF_F32 && worst < 1e-5, "convolve1d output off by %g", worst);
    free(y.data);
  } else {
    CHECK(0, "output unreadable: %s", err);
  }
  snprintf(args, sizeof args, "correlate1d %s %s --weights 1,2,1 --dtype f64", in, out);
  CHECK(run(args) == 0 && ndf_npy_read(out, &y, err, sizeof err) == NDF_OK && y.dtype == NDF_F64,
        "--dtype f64");
  free(y.data);

  /* Failures: the right code, a message naming the problem, no output written. */
  unlink(out);
  struct stat sb;
  snprintf(args, sizeof args, "correlate1d %s/missing.npy %s --weights 1", dir, out);
  CHECK(run(args) == 3 && file_has("stderr", "missing.npy") && stat(out, &sb) != 0,
        "missing input");
  snprintf(args, sizeof args, "correlate1d %s %s --weights 1,x", in, out);
  CHECK(run(args) == 2 && stat(out, &sb) != 0, "bad weights");
  snprintf(args, sizeof args, "correlate1d %s %s --weights 1,2,3 --origin 5", in, out);
  CHECK(run(args) == 2 && file_has("stderr", "origin") && stat(out, &sb) != 0, "bad origin");
  snprintf(args, sizeof args, "correlate1d %s %s --weights 1 --axis 3", in, out);
  CHECK(run(args) == 2 && file_has("stderr", "axis"), "bad axis");
  snprintf(args, sizeof args, "correlate1d %s %s/nodir/out.npy --weights 1", in, dir);
  CHECK(run(args) == 3, "unwritable output");
  /* an existing output survives a failed run */
  FILE *f = fopen(out, "w");
  fputs("keep", f);
  fclose(f);
  snprintf(args, sizeof args, "correlate1d %s %s --weights 1 --mode sideways", in, out);
  CHECK(run(args) == 2 && stat(out, &sb) == 0 && sb.st_size == 4, "existing output clobbered");

  t_arr_free(&x, NULL);
  printf("cli checks: %d failures\n", t_failures);
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  if (system(cmd) != 0) return 1;
  return t_failures ? 1 : 0;
}
