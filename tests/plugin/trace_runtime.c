// A minimal stand-in for libhcct's probe ABI, preloaded by the plugin tests (LD_PRELOAD). It checks
// what only the probes themselves decide, independently of the real runtime:
//   - every exit probe pairs with the innermost open entry (strict shadow stack: exits during
//     exception unwinding included),
//   - every exit probe runs in its function's frame or below it (probe ABI 2: the exit is never a
//     tail call, so the runtime gets no call site to recognise one): its CFA is at or below its
//     entry's, and it does not return straight to the entry's call site,
//   - every call site is an address inside a loaded module,
//   - the gate: HCCT_TRACE_GATE=0 keeps the gate closed, and then no probe may call in.
// At process exit it writes HCCT_TRACE_OUT:
//   enters N / exits N / mismatches N / frame_mismatches N / bad_sites N / open N / overflow N
//   fn <module path> <offset of the function in the module, hex> <entries>
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

__attribute__((visibility("default"))) unsigned char __hcct_gate;

enum { kMaxDepth = 1 << 14, kSlots = 1 << 12 };

static __thread void *stack[kMaxDepth];
static __thread void *sites[kMaxDepth];
static __thread void *cfas[kMaxDepth];
static __thread unsigned depth;
static unsigned long enters, exits, mismatches, frame_mismatches, bad_sites, overflow;
static struct {
  void *fn;
  unsigned long count;
} counts[kSlots];

static void count_fn(void *fn) {
  uintptr_t h = ((uintptr_t)fn >> 4) * 0x9e3779b97f4a7c15ull;
  for (unsigned i = 0; i < kSlots; ++i) {
    unsigned slot = (unsigned)((h >> 20) + i) & (kSlots - 1);
    if (counts[slot].fn == fn || !counts[slot].fn) {
      counts[slot].fn = fn;
      ++counts[slot].count;
      return;
    }
  }
  ++overflow;
}

__attribute__((visibility("default"))) void __hcct_enter_open(void *fn, void *site) {
  ++enters;
  Dl_info info;
  if (!dladdr(site, &info))
    ++bad_sites;
  count_fn(fn);
  if (depth < kMaxDepth) {
    stack[depth] = fn;
    sites[depth] = site;
    cfas[depth] = __builtin_dwarf_cfa();
  }
  ++depth;
}

__attribute__((visibility("default"))) void __hcct_exit_open(void *fn) {
  ++exits;
  if (depth == 0) {
    ++mismatches;
    return;
  }
  --depth;
  if (depth < kMaxDepth && stack[depth] != fn)
    ++mismatches;
  else if (depth < kMaxDepth && ((uintptr_t)__builtin_dwarf_cfa() > (uintptr_t)cfas[depth] ||
                                  __builtin_return_address(0) == sites[depth]))
    ++frame_mismatches;
}

// gcc's -finstrument-functions hooks, recorded the same way, so that a -finstrument-functions build
// of a program can be compared with a plugin build (the probes of the two never meet in one build:
// the plugin warns when both are given).
__attribute__((visibility("default"))) void __cyg_profile_func_enter(void *fn, void *site) {
  if (__hcct_gate)
    __hcct_enter_open(fn, site);
}

__attribute__((visibility("default"))) void __cyg_profile_func_exit(void *fn, void *site) {
  (void)site;
  if (__hcct_gate)
    __hcct_exit_open(fn);
}

__attribute__((constructor)) static void trace_init(void) {
  const char *gate = getenv("HCCT_TRACE_GATE");
  __hcct_gate = !(gate && !strcmp(gate, "0"));
}

__attribute__((destructor)) static void trace_fini(void) {
  __hcct_gate = 0;
  const char *path = getenv("HCCT_TRACE_OUT");
  if (!path)
    return;
  FILE *out = fopen(path, "w");
  if (!out)
    return;
  fprintf(out,
          "enters %lu\nexits %lu\nmismatches %lu\nframe_mismatches %lu\nbad_sites %lu\nopen %u\n"
          "overflow %lu\n",
          enters, exits, mismatches, frame_mismatches, bad_sites, depth, overflow);
  for (unsigned i = 0; i < kSlots; ++i) {
    Dl_info info;
    if (!counts[i].fn)
      continue;
    if (dladdr(counts[i].fn, &info) && info.dli_fname)
      fprintf(out, "fn %s %lx %lu\n", info.dli_fname,
              (unsigned long)((uintptr_t)counts[i].fn - (uintptr_t)info.dli_fbase), counts[i].count);
    else
      fprintf(out, "fn ? %lx %lu\n", (unsigned long)(uintptr_t)counts[i].fn, counts[i].count);
  }
  fclose(out);
}
