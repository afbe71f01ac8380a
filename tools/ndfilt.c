/* ndfilt.c - the ndfilt command-line tool: info, demo, correlate1d/convolve1d on .npy files. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "io/npy.h"

static const char *usage_main =
    "usage: ndfilt [--device cpu|cuda|cuda:N] [--threads N] COMMAND [ARGS]\n"
    "       ndfilt --version | --help\n"
    "\n"
    "N-dimensional image filtering on CPUs and CUDA GPUs.\n"
    "\n"
    "commands:\n"
    "  info          version, chosen device, CPU threads, solvers per operation\n"
    "  demo          filter a noisy 3-D Shepp-Logan phantom, print timings, write demo-out/\n"
    "  correlate1d   1-D correlation along an axis of a .npy array (scipy.ndimage.correlate1d)\n"
    "  convolve1d    1-D convolution along an axis (scipy.ndimage.convolve1d)\n"
    "\n"
    "Run `ndfilt COMMAND --help` for a command's options.\n"
    "The device defaults to $NDF_DEVICE, else the first usable CUDA GPU, else the CPU.\n"
    "\n"
    "exit codes: 0 success, 1 the computation failed, 2 bad usage or arguments,\n"
    "            3 a file could not be read or written\n";

static const char *usage_corr =
    "usage: ndfilt correlate1d|convolve1d IN.npy OUT.npy --weights W1,W2,... [options]\n"
    "\n"
    "options:\n"
    "  --weights LIST  comma-separated filter weights (required)\n"
    "  --axis A        axis to filter along; negative counts from the end (default -1)\n"
    "  --mode M        reflect, constant, nearest, mirror, wrap (default reflect, as scipy)\n"
    "  --cval V        value outside the array for --mode constant (default 0)\n"
    "  --origin O      shift of the filter, as scipy (default 0)\n"
    "  --method M      auto, or a solver from `ndfilt info`\n"
    "  --dtype T       output dtype u8, u16, i16, f32, f64 (default: the input's)\n"
    "\n"
    "OUT is written through a temporary file and renamed, so a failure leaves no output.\n"
    "\n"
    "example:\n"
    "  ndfilt correlate1d volume.npy smooth.npy --weights 1,4,6,4,1 --axis 0 --mode nearest\n";

static int usage_error(const char *fmt, const char *arg) {
  fprintf(stderr, "ndfilt: ");
  fprintf(stderr, fmt, arg);
  fprintf(stderr, "\n(see ndfilt --help)\n");
  return NDF_EXIT_USAGE;
}

static int parse_int(const char *s, int *v) {
  char *end;
  errno = 0;
  long x = strtol(s, &end, 10);
  if (errno || end == s || *end || x < -1000000 || x > 1000000) return 0;
  *v = (int)x;
  return 1;
}

static int cmd_info(ndf_context *ctx) {
  printf("ndfilt %s\n", ndf_version_string());
  printf("device:      %s\n", ndf_context_device_name(ctx));
  printf("cpu threads: %d\n", ndf_context_threads(ctx));
  printf("solvers:\n");
  const char *op;
  for (int i = 0; ndf_solver_name(i, &op); i++)
    printf("  %-12s %s\n", op, ndf_solver_name(i, NULL));
  return NDF_EXIT_OK;
}

static ndf_dtype parse_dtype(const char *s) {
  for (ndf_dtype t = NDF_U8; t <= NDF_F64; t++)
    if (!strcmp(s, ndf_dtype_name(t))) return t;
  return 0;
}

static int cmd_corr1d(ndf_context *ctx, int argc, char **argv, int convolve) {
  const char *in_path = NULL, *out_path = NULL, *wlist = NULL, *method = NULL;
  int axis = -1;
  ndf_dtype odt = 0;
  ndf_correlate1d_opts o = {sizeof o, NULL, NDF_MODE_REFLECT, 0, 0};
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      fputs(usage_corr, stdout);
      return NDF_EXIT_OK;
    }
    if (a[0] == '-' && a[1] == '-' && !v) return usage_error("option %s needs a value", a);
    if (!strcmp(a, "--weights"))
      wlist = argv[++i];
    else if (!strcmp(a, "--axis")) {
      if (!parse_int(argv[++i], &axis)) return usage_error("bad --axis '%s'", v);
    } else if (!strcmp(a, "--mode")) {
      if (ndf_mode_parse(argv[++i], &o.mode)) return usage_error("unknown --mode '%s'", v);
    } else if (!strcmp(a, "--cval")) {
      char *end;
      o.cval = strtod(argv[++i], &end);
      if (end == v || *end) return usage_error("bad --cval '%s'", v);
    } else if (!strcmp(a, "--origin")) {
      if (!parse_int(argv[++i], &o.origin)) return usage_error("bad --origin '%s'", v);
    } else if (!strcmp(a, "--method"))
      method = argv[++i];
    else if (!strcmp(a, "--dtype")) {
      if (!(odt = parse_dtype(argv[++i]))) return usage_error("unknown --dtype '%s'", v);
    } else if (a[0] == '-' && a[1])
      return usage_error("unknown option %s", a);
    else if (!in_path)
      in_path = a;
    else if (!out_path)
      out_path = a;
    else
      return usage_error("unexpected argument '%s'", a);
  }
  if (!in_path || !out_path) return usage_error("%s", "needs IN.npy and OUT.npy");
  if (!wlist) return usage_error("%s", "needs --weights");
  o.method = method;

  size_t cap = strlen(wlist) / 2 + 2;
  double *w = malloc(cap * sizeof *w);
  int64_t n = 0;
  for (const char *p = wlist; w;) {
    char *end;
    double x = strtod(p, &end);
    if (end == p || (*end && *end != ',')) {
      free(w);
      return usage_error("bad --weights '%s'", wlist);
    }
    w[n++] = x;
    if (!*end) break;
    p = end + 1;
  }
  if (!w) return NDF_EXIT_FAIL;

  char err[512];
  ndf_array in, out;
  ndf_status st = ndf_npy_read(in_path, &in, err, sizeof err);
  if (st != NDF_OK) {
    fprintf(stderr, "ndfilt: %s\n", err);
    free(w);
    return st == NDF_EIO ? NDF_EXIT_IO : NDF_EXIT_USAGE;
  }
  out = ndf_array_contiguous(odt ? odt : in.dtype, in.ndim, in.shape, NULL);
  out.data = malloc((size_t)ndf_array_size(&out) * ndf_dtype_size(out.dtype));
  int rc = NDF_EXIT_OK;
  if (!out.data) {
    fprintf(stderr, "ndfilt: out of memory\n");
    rc = NDF_EXIT_FAIL;
  } else {
    st = convolve ? ndf_convolve1d(ctx, &in, &out, w, n, axis, &o)
                  : ndf_correlate1d(ctx, &in, &out, w, n, axis, &o);
    if (st != NDF_OK) {
      fprintf(stderr, "ndfilt: %s: %s\n", ndf_status_str(st), ndf_context_message(ctx));
      rc = st == NDF_EINVAL ? NDF_EXIT_USAGE : NDF_EXIT_FAIL;
    } else if (ndf_npy_write(out_path, &out, err, sizeof err) != NDF_OK) {
      fprintf(stderr, "ndfilt: %s\n", err);
      rc = NDF_EXIT_IO;
    }
  }
  free(in.data);
  free(out.data);
  free(w);
  return rc;
}

int main(int argc, char **argv) {
  ndf_context_opts co = {sizeof co, NULL, 0};
  int i = 1;
  for (; i < argc && argv[i][0] == '-'; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--version")) {
      printf("ndfilt %s\n", ndf_version_string());
      return NDF_EXIT_OK;
    }
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      fputs(usage_main, stdout);
      return NDF_EXIT_OK;
    }
    if ((!strcmp(a, "--device") || !strcmp(a, "--threads")) && i + 1 >= argc)
      return usage_error("option %s needs a value", a);
    if (!strcmp(a, "--device"))
      co.device = argv[++i];
    else if (!strcmp(a, "--threads")) {
      if (!parse_int(argv[++i], &co.threads) || co.threads < 1)
        return usage_error("bad --threads '%s'", argv[i]);
    } else
      return usage_error("unknown option %s", a);
  }
  if (i >= argc) {
    fputs(usage_main, stderr);
    return NDF_EXIT_USAGE;
  }
  const char *cmd = argv[i];
  int known = !strcmp(cmd, "info") || !strcmp(cmd, "demo") || !strcmp(cmd, "correlate1d") ||
              !strcmp(cmd, "convolve1d");
  if (!known) return usage_error("unknown command '%s'", cmd);

  ndf_context *ctx;
  ndf_status st = ndf_context_create(&ctx, &co);
  if (st != NDF_OK) {
    fprintf(stderr, "ndfilt: cannot use device '%s': %s\n",
            co.device              ? co.device
            : getenv("NDF_DEVICE") ? getenv("NDF_DEVICE")
                                   : "auto",
            ndf_status_str(st));
    return st == NDF_EINVAL ? NDF_EXIT_USAGE : NDF_EXIT_FAIL;
  }
  int rc;
  if (!strcmp(cmd, "info"))
    rc = cmd_info(ctx);
  else if (!strcmp(cmd, "demo"))
    rc = ndf_cli_demo(ctx, argc - i, argv + i);
  else
    rc = cmd_corr1d(ctx, argc - i, argv + i, !strcmp(cmd, "convolve1d"));
  ndf_context_destroy(ctx);
  return rc;
}
