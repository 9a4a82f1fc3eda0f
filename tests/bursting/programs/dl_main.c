// Loads each library named on the command line in turn (dlopen), runs its lib_run(K) and unloads
// it (dlclose); prints "same" if a library was loaded where the one before it had been.
//
//   dl_main K LIB...
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
  if (argc < 3) return 2;
  int k = atoi(argv[1]);
  void *last = NULL;
  for (int i = 2; i < argc; ++i) {
    void *lib = dlopen(argv[i], RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      fprintf(stderr, "%s\n", dlerror());
      return 1;
    }
    void (*run)(int) = (void (*)(int))dlsym(lib, "lib_run");
    if (!run) return 1;
    if (last == (void *)run) printf("same\n");
    last = (void *)run;
    run(k);
    dlclose(lib);
  }
  return 0;
}
