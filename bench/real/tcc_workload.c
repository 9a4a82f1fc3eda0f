/* The compiler workload of bench/real: the Tiny C Compiler (Debian's tcc source package) run
 * through its own command line, ROUNDS times in one process, on a fixed set of C sources. Each
 * round has a compiler's three phases as tcc's CLI does them:
 *
 *   tcc OPTIONS -E SOURCE... -o all.i   preprocess every source (one compiler state)
 *   tcc OPTIONS -c SOURCE...            compile each source to BASENAME.o (tcc's per-file loop)
 *   tcc -r BASENAME.o... -o all.o       link the objects into one relocatable object
 *
 * in a private temporary directory, and prints a digest of every file produced (the same in every
 * round, else exit 1), so that differently instrumented builds are checked to compute the same.
 *
 *   tcc_workload ROUNDS [TCC-OPTION...] -- SOURCE...
 *
 * tcc's main() is linked in under the name tcc_main (bench/real/workloads.py builds tcc.c so):
 * calling it again per phase is what the tcc program does per file itself (a new TCCState each
 * time, freed at the end). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int tcc_main(int argc, char **argv);

enum { kMaxSources = 256 };

/* The private directory of the outputs, removed on every way out after it is made, and the
 * caller's directory, restored first (a -pg build writes gmon.out there at exit). */
static char work_dir[4096];
static int caller_dir = -1;

static void remove_work_dir(void);

static uint64_t file_digest(const char *path) {
  /* FNV-1a, 64 bits: enough to tell two outputs apart; no library needed. */
  FILE *f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "tcc_workload: cannot read %s: %s\n", path, strerror(errno));
    remove_work_dir();
    exit(1);
  }
  uint64_t h = 14695981039346656037ULL;
  unsigned char buf[1 << 16];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0)
    for (size_t i = 0; i < n; ++i)
      h = (h ^ buf[i]) * 1099511628211ULL;
  fclose(f);
  return h;
}

/* Runs tcc's command line `tcc ARGS...`; exits with its message when it fails. */
static void run_tcc(const char *phase, char **args, int nargs) {
  char **argv = calloc((size_t)nargs + 2, sizeof *argv);
  if (!argv) {
    fputs("tcc_workload: out of memory\n", stderr);
    exit(1);
  }
  argv[0] = "tcc";
  memcpy(argv + 1, args, (size_t)nargs * sizeof *argv);
  int status = tcc_main(nargs + 1, argv);
  free(argv);
  if (status != 0) {
    fprintf(stderr, "tcc_workload: tcc %s failed (status %d)\n", phase, status);
    remove_work_dir();
    exit(1);
  }
}

/* Copies COUNT arguments to ARGS[AT...]; returns the new length. */
static int append(char **args, int at, char **from, int count) {
  memcpy(args + at, from, (size_t)count * sizeof *args);
  return at + count;
}

static const char *base_name(const char *path) {
  const char *slash = strrchr(path, '/');
  return slash ? slash + 1 : path;
}

/* BASENAME.o for SOURCE, as tcc -c names it. */
static char *object_name(const char *source) {
  const char *base = base_name(source);
  const char *dot = strrchr(base, '.');
  size_t stem = dot ? (size_t)(dot - base) : strlen(base);
  char *name = malloc(stem + 3);
  if (!name) {
    fputs("tcc_workload: out of memory\n", stderr);
    exit(1);
  }
  memcpy(name, base, stem);
  memcpy(name + stem, ".o", 3);
  return name;
}

static void remove_work_dir(void) {
  if (!work_dir[0])
    return;
  if (caller_dir >= 0 && fchdir(caller_dir) != 0)
    fprintf(stderr, "tcc_workload: cannot return to the starting directory: %s\n", strerror(errno));
  DIR *d = opendir(work_dir);
  if (d) {
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
      if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
        unlinkat(dirfd(d), e->d_name, 0);
    closedir(d);
  }
  rmdir(work_dir);
  work_dir[0] = '\0';
}

int main(int argc, char **argv) {
  if (argc < 4) {
    fputs("usage: tcc_workload ROUNDS [TCC-OPTION...] -- SOURCE...\n", stderr);
    return 2;
  }
  char *end;
  long rounds = strtol(argv[1], &end, 10);
  if (*end != '\0' || rounds < 1) {
    fprintf(stderr, "tcc_workload: ROUNDS must be a positive integer, not '%s'\n", argv[1]);
    return 2;
  }
  int separator = 2;
  while (separator < argc && strcmp(argv[separator], "--") != 0)
    ++separator;
  char **options = argv + 2;
  int noptions = separator - 2;
  char **sources = argv + separator + 1;
  int nsources = argc - separator - 1;
  if (nsources < 1 || nsources > kMaxSources) {
    fprintf(stderr, "tcc_workload: give 1 to %d sources after '--'\n", kMaxSources);
    return 2;
  }
  /* Sources are named relative to the caller's directory; the outputs go to a private one. */
  for (int i = 0; i < nsources; ++i)
    if (sources[i][0] != '/') {
      fprintf(stderr, "tcc_workload: source '%s' must be an absolute path\n", sources[i]);
      return 2;
    }

  char *objects[kMaxSources];
  for (int i = 0; i < nsources; ++i)
    objects[i] = object_name(sources[i]);

  const char *tmp_root = getenv("TMPDIR");
  snprintf(work_dir, sizeof work_dir, "%s/hcct-tcc-XXXXXX", tmp_root && *tmp_root ? tmp_root : "/tmp");
  if (!mkdtemp(work_dir)) {
    fprintf(stderr, "tcc_workload: cannot make a directory %s: %s\n", work_dir, strerror(errno));
    return 1;
  }
  /* tcc's command line calls exit() itself on a bad option: the directory goes then too. */
  atexit(remove_work_dir);
  caller_dir = open(".", O_RDONLY | O_DIRECTORY);
  if (caller_dir < 0 || chdir(work_dir) != 0) {
    fprintf(stderr, "tcc_workload: cannot enter %s: %s\n", work_dir, strerror(errno));
    remove_work_dir();
    return 1;
  }

  /* Room for the longest phase's arguments: the options, -E, the sources, -o all.i. */
  int max_args = noptions + nsources + 4;
  char **args = malloc((size_t)max_args * sizeof *args);
  uint64_t *first = calloc((size_t)nsources + 2, sizeof *first);
  if (!args || !first) {
    fputs("tcc_workload: out of memory\n", stderr);
    return 1;
  }

  int status = 0;
  for (long round = 0; round < rounds && status == 0; ++round) {
    int n = append(args, 0, options, noptions);
    args[n++] = "-E";
    n = append(args, n, sources, nsources);
    args[n++] = "-o";
    args[n++] = "all.i";
    run_tcc("-E (preprocess)", args, n);

    n = append(args, 0, options, noptions);
    args[n++] = "-c";
    n = append(args, n, sources, nsources);
    run_tcc("-c (compile)", args, n);

    n = 0;
    args[n++] = "-r";
    n = append(args, n, objects, nsources);
    args[n++] = "-o";
    args[n++] = "all.o";
    run_tcc("-r (link)", args, n);

    uint64_t digests[kMaxSources + 2];
    digests[0] = file_digest("all.i");
    for (int i = 0; i < nsources; ++i)
      digests[i + 1] = file_digest(objects[i]);
    digests[nsources + 1] = file_digest("all.o");
    if (round == 0) {
      memcpy(first, digests, ((size_t)nsources + 2) * sizeof *first);
      continue;
    }
    for (int i = 0; i < nsources + 2; ++i)
      if (digests[i] != first[i]) {
        fprintf(stderr, "tcc_workload: round %ld made another output than round 1\n", round + 1);
        status = 1;
        break;
      }
  }

  if (status == 0) {
    printf("%016llx  all.i (preprocessed)\n", (unsigned long long)first[0]);
    for (int i = 0; i < nsources; ++i)
      printf("%016llx  %s\n", (unsigned long long)first[i + 1], objects[i]);
    printf("%016llx  all.o (tcc -r)\n", (unsigned long long)first[nsources + 1]);
    printf("rounds %ld, sources %d\n", rounds, nsources);
  }
  remove_work_dir();
  for (int i = 0; i < nsources; ++i)
    free(objects[i]);
  free(args);
  free(first);
  return status;
}
