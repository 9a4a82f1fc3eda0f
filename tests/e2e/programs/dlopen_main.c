// Loads LIB with dlopen, calls plugin_entry(5) through dlsym, and unloads it before exit: the
// profile must still symbolize the library's functions.
#include <dlfcn.h>
#include <stdio.h>

int main(int argc, char **argv) {
  if (argc < 2) return 2;
  void *lib = dlopen(argv[1], RTLD_NOW);
  if (!lib) {
    fprintf(stderr, "%s\n", dlerror());
    return 2;
  }
  int (*entry)(int) = (int (*)(int))dlsym(lib, "plugin_entry");
  int r = entry(5);
  dlclose(lib);
  printf("plugin returned %d\n", r);
  return 0;
}
