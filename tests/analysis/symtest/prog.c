// Symbolizer fixture: a PIE that dlopen()s a library and prints its module map (as the runtime
// records it: path, load bias, PT_LOAD range, build-id) and the runtime addresses the test then
// symbolizes. Source lines the test expects are marked with MARK: comments; keep them unique.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <elf.h>
#include <limits.h>
#include <link.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uintptr_t g_ret;

__attribute__((noinline)) void fixture_leaf(void) {  // MARK:leaf_def
  g_ret = (uintptr_t)__builtin_return_address(0);
  __asm__ volatile("" ::: "memory");
}

static inline __attribute__((always_inline)) void fixture_helper(void) {
  fixture_leaf();  // MARK:helper_calls_leaf
}

static int print_module(struct dl_phdr_info *info, size_t size, void *data) {
  (void)size;
  (void)data;
  uintptr_t lo = UINTPTR_MAX, hi = 0;
  const unsigned char *id = NULL;
  size_t id_len = 0;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type == PT_LOAD) {
      uintptr_t a = info->dlpi_addr + ph->p_vaddr;
      if (a < lo) lo = a;
      if (a + ph->p_memsz > hi) hi = a + ph->p_memsz;
    } else if (ph->p_type == PT_NOTE) {
      const char *p = (const char *)(info->dlpi_addr + ph->p_vaddr), *end = p + ph->p_memsz;
      while (p + sizeof(ElfW(Nhdr)) <= end) {
        const ElfW(Nhdr) *n = (const ElfW(Nhdr) *)p;
        const char *name = p + sizeof *n;
        const unsigned char *desc = (const unsigned char *)name + ((n->n_namesz + 3) & ~3u);
        if (n->n_type == NT_GNU_BUILD_ID && n->n_namesz == 4 && memcmp(name, "GNU", 4) == 0) {
          id = desc;
          id_len = n->n_descsz;
        }
        p = (const char *)desc + ((n->n_descsz + 3) & ~3u);
      }
    }
  }
  char path[PATH_MAX];
  if (info->dlpi_name[0] == '\0') {
    if (!realpath("/proc/self/exe", path)) return 0;
  } else if (!realpath(info->dlpi_name, path)) {
    return 0;  // the vDSO has no file
  }
  printf("module %lx %lx %lx ", (unsigned long)info->dlpi_addr, (unsigned long)lo, (unsigned long)hi);
  if (!id_len) printf("-");
  for (size_t i = 0; i < id_len; ++i) printf("%02x", id[i]);
  printf(" %s\n", path);
  return 0;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s LIBRARY\n", argv[0]);
    return 2;
  }
  void *lib = dlopen(argv[1], RTLD_NOW);
  if (!lib) {
    fprintf(stderr, "%s\n", dlerror());
    return 1;
  }
  uintptr_t (*lib_entry)(uintptr_t *) = (uintptr_t(*)(uintptr_t *))dlsym(lib, "symtest_lib_entry");
  if (!lib_entry) return 1;

  fixture_leaf();  // MARK:main_calls_leaf
  printf("site direct %lx\n", (unsigned long)g_ret);
  fixture_helper();  // MARK:main_calls_helper
  printf("site inlined %lx\n", (unsigned long)g_ret);
  printf("routine leaf %lx\n", (unsigned long)(uintptr_t)&fixture_leaf);
  printf("routine main %lx\n", (unsigned long)(uintptr_t)&main);

  uintptr_t lib_site = 0;
  uintptr_t widget = lib_entry(&lib_site);
  printf("routine widget %lx\n", (unsigned long)widget);
  printf("site lib %lx\n", (unsigned long)lib_site);
  dl_iterate_phdr(print_module, NULL);
  return 0;
}
