/* SPDX-License-Identifier: BSD-3-Clause */
/* test_context.c - device choice (auto, NDF_DEVICE, explicit), threads, version. */
#include <unistd.h>

#include "common.h"

int main(void) {
  char v[64];
  snprintf(v, sizeof v, "%d.%d.%d", NDF_VERSION_MAJOR, NDF_VERSION_MINOR, NDF_VERSION_PATCH);
  CHECK(!strcmp(ndf_version_string(), v), "version %s vs header %s", ndf_version_string(), v);

  unsetenv("NDF_DEVICE");
  unsetenv("NDF_THREADS");
  ndf_context *c = NULL;
  CHECK(ndf_context_create(&c, NULL) == NDF_OK && c, "auto context");
  ndf_place auto_place = ndf_context_place(c);
  printf("auto: %s, %d threads\n", ndf_context_device_name(c), ndf_context_threads(c));
  CHECK(ndf_context_threads(c) >= 1, "threads");
  ndf_context_destroy(c);

  ndf_context_opts o = {.struct_size = sizeof o, .device = "cpu", .threads = 3};
  CHECK(ndf_context_create(&c, &o) == NDF_OK, "cpu context");
  CHECK(ndf_context_place(c).kind == NDF_PLACE_HOST && ndf_context_threads(c) == 3,
        "cpu, 3 threads");
  CHECK(ndf_context_synchronize(c) == NDF_OK, "sync on cpu");
  CHECK(ndf_context_memory_free(c) == 0 && ndf_context_memory_free(NULL) == 0,
        "free device memory of the cpu");
  ndf_context_destroy(c);

  setenv("NDF_DEVICE", "cpu", 1);
  setenv("NDF_THREADS", "2", 1);
  CHECK(ndf_context_create(&c, NULL) == NDF_OK, "NDF_DEVICE=cpu");
  CHECK(ndf_context_place(c).kind == NDF_PLACE_HOST, "NDF_DEVICE=cpu gives the CPU");
  CHECK(ndf_context_threads(c) == 2, "NDF_THREADS=2 gives %d", ndf_context_threads(c));
  ndf_context_destroy(c);

  setenv("NDF_DEVICE", "bogus", 1);
  c = (ndf_context *)&c;
  CHECK(ndf_context_create(&c, NULL) == NDF_EINVAL && !c, "NDF_DEVICE=bogus");
  setenv("NDF_DEVICE", "cuda:99", 1);
  CHECK(ndf_context_create(&c, NULL) == NDF_ENODEV, "cuda:99");
  unsetenv("NDF_DEVICE");
  unsetenv("NDF_THREADS");

  /* With no usable GPU, asking for one fails cleanly; with one, "cuda" works. */
  o.device = "cuda";
  ndf_status st = ndf_context_create(&c, &o);
  if (auto_place.kind == NDF_PLACE_HOST) {
    CHECK(st == NDF_ENODEV, "cuda without a usable GPU gave %s", ndf_status_str(st));
  } else {
    CHECK(st == NDF_OK && ndf_context_place(c).kind == NDF_PLACE_CUDA, "cuda with a GPU");
    /* the free memory drops by a buffer's size while it is held */
    const size_t before = ndf_context_memory_free(c);
    ndf_array big;
    const int64_t n = 1 << 28; /* 1 GiB of float32 */
    CHECK(before > (size_t)4 * n && ndf_array_alloc(c, &big, NDF_F32, 1, &n) == NDF_OK,
          "a 1 GiB buffer on a device with %zu bytes free", before);
    const size_t during = ndf_context_memory_free(c);
    CHECK(during + (size_t)4 * n <= before + ((size_t)64 << 20),
          "free %zu, then %zu with 1 GiB held", before, during);
    ndf_array_free(c, &big);
    ndf_context_destroy(c);
  }
  o.struct_size = 4;
  CHECK(ndf_context_create(&c, &o) == NDF_EINVAL, "struct_size too small");
  o.struct_size = sizeof o;
  o.device = "cpu";
  o.workspace_limit = 12345;
  CHECK(ndf_context_create(&c, &o) == NDF_OK && ndf_context_workspace_limit(c) == 12345,
        "workspace limit kept");
  ndf_context_destroy(c);
  /* A caller built before workspace_limit existed passes the shorter struct: limit 0. */
  o.struct_size = offsetof(ndf_context_opts, threads) + sizeof(int);
  CHECK(ndf_context_create(&c, &o) == NDF_OK && ndf_context_workspace_limit(c) == 0,
        "struct without workspace_limit");
  ndf_context_destroy(c);
  o.struct_size = sizeof o;
  o.threads = -1;
  CHECK(ndf_context_create(&c, &o) == NDF_EINVAL, "negative threads");

  /* Thread counts: a huge request is clamped with a message; a bad NDF_THREADS is an error
   * that says why (in the caller's buffer: there is no context). */
  char why[256];
  o.threads = 100000;
  o.message = why;
  o.message_size = sizeof why;
  CHECK(ndf_context_create(&c, &o) == NDF_OK, "100000 threads");
  const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  CHECK(ndf_context_threads(c) >= 1 && ndf_context_threads(c) <= NDF_MAX_THREADS &&
            ndf_context_threads(c) <= 8 * cpus,
        "100000 threads gave %d", ndf_context_threads(c));
  CHECK(strstr(ndf_context_message(c), "clamped"), "no message: '%s'", ndf_context_message(c));
  ndf_context_destroy(c);
  o.threads = 0;
  const char *bad[] = {"-5", "abc", "0", "1.5", ""};
  for (int i = 0; i < 4; i++) {
    setenv("NDF_THREADS", bad[i], 1);
    why[0] = 0;
    c = NULL;
    ndf_status s2 = ndf_context_create(&c, &o);
    CHECK(s2 == NDF_EINVAL && !c, "NDF_THREADS=%s gave %s", bad[i], ndf_status_str(s2));
    CHECK(strstr(why, "NDF_THREADS"), "NDF_THREADS=%s: message '%s'", bad[i], why);
  }
  for (int i = 0; i < 2; i++) { /* past any count, even past long: clamped */
    setenv("NDF_THREADS", i ? "99999999999999999999" : "100000", 1);
    CHECK(ndf_context_create(&c, &o) == NDF_OK && ndf_context_threads(c) <= NDF_MAX_THREADS,
          "NDF_THREADS=%s clamped", getenv("NDF_THREADS"));
    ndf_context_destroy(c);
  }
  unsetenv("NDF_THREADS");
  /* a device that cannot be had says which setting asked for it */
  o.device = "cuda:99";
  why[0] = 0;
  CHECK(ndf_context_create(&c, &o) == NDF_ENODEV && strstr(why, "cuda:99"), "cuda:99: '%s'", why);
  o.device = NULL;
  setenv("NDF_DEVICE", "cuda:99", 1);
  why[0] = 0;
  CHECK(ndf_context_create(&c, &o) == NDF_ENODEV && strstr(why, "NDF_DEVICE=cuda:99"),
        "NDF_DEVICE=cuda:99: '%s'", why);
  unsetenv("NDF_DEVICE");
  /* device lists: malformed ones are refused as such, a device named twice too */
  const char *malformed[] = {"cuda:",    "cuda:0,", "cuda:,1",  "cuda:0,0",
                             "cuda:1,x", "cuda:-1", "cuda:0;1", "cuda:all,1"};
  for (size_t i = 0; i < sizeof malformed / sizeof *malformed; i++) {
    o.device = malformed[i];
    why[0] = 0;
    c = (ndf_context *)&c;
    st = ndf_context_create(&c, &o);
    CHECK(st == NDF_EINVAL && !c && strstr(why, "cuda:N,M"), "device '%s' gave %s: '%s'",
          malformed[i], ndf_status_str(st), why);
  }
  /* a list of devices: all usable, or which one is not; the context names every one */
  o.device = "cuda:0,99";
  CHECK(ndf_context_create(&c, &o) == NDF_ENODEV, "cuda:0,99 accepted");
  o.device = "cuda:all";
  st = ndf_context_create(&c, &o);
  if (auto_place.kind == NDF_PLACE_HOST) {
    CHECK(st == NDF_ENODEV, "cuda:all without a GPU gave %s", ndf_status_str(st));
  } else {
    int devs[64];
    const int n = ndf_context_devices(c, devs, 64);
    CHECK(st == NDF_OK && n >= 1 && devs[0] == ndf_context_place(c).device, "cuda:all: %d", n);
    for (int i = 0; i < n && i < 64; i++)
      CHECK(devs[i] == i, "cuda:all: device %d is %d", i, devs[i]);
    printf("cuda:all: %s\n", ndf_context_device_name(c));
    ndf_context_destroy(c);
  }
  o.device = "cpu";
  CHECK(ndf_context_create(&c, &o) == NDF_OK && ndf_context_devices(c, NULL, 0) == 0,
        "cpu: devices");
  ndf_context_destroy(c);
  printf("context checks: %d failures\n", t_failures);
  return t_failures ? 1 : 0;
}
