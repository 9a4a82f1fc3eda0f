// Loads the library named by argv[1] with dlopen() exactly as given (a relative path, say), calls
// into it, then leaves the directory it was started in: the runtime must record the library where
// the loader mapped it, not as a name relative to a working directory that no longer applies.
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv) {
  if (argc < 2) return 2;
  void *lib = dlopen(argv[1], RTLD_NOW);
  if (!lib) {
    fprintf(stderr, "dl_main: %s\n", dlerror());
    return 2;
  }
  // "unlink": remove the library's file while it is mapped, as a reinstall would.
  if (argc > 2 && strcmp(argv[2], "unlink") == 0 && unlink(argv[1]) != 0) return 2;
  int (*work)(int) = (int (*)(int))dlsym(lib, "dl_lib_work");
  if (!work) return 2;
  int sum = 0;
  for (int i = 0; i < 100; ++i) sum += work(i);
  if (chdir("/") != 0) return 2;
  printf("%d\n", sum);
  return 0;
}
