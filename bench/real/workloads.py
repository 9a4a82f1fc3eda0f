"""Real workloads from Debian source packages, shared by bench/real/run.py and bench/real/exact.py.

A workload knows its Debian source package, how to build its program with a given compiler and
flags (each build cached by a key of compiler, flags and plugin), and how to run it on a FIXED
input: `full` (1-3 s native on a quiet machine) or `short` (a fraction of a second, for exact
checks and callgrind). Inputs are generated here, deterministically, so no data is downloaded.

Sources come from scripts/debian-source.sh (apt-get source, cached in ~/.cache/hcct/sources);
builds and inputs are cached in $HCCT_REAL_CACHE (default ~/.cache/hcct/real).
"""
import hashlib
import os
import platform
import random
import resource
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
CACHE = os.environ.get("HCCT_REAL_CACHE", os.path.expanduser("~/.cache/hcct/real"))


class Unavailable(Exception):
    """A workload that cannot be had here (no source, no tool): skipped with this message."""


def publish_dir(tmp, final):
    """Renames a finished directory into place; if another session published it first, theirs is
    kept (the two are made the same way) and ours removed."""
    try:
        os.rename(tmp, final)
    except OSError:
        if not os.path.isdir(final):
            raise
        shutil.rmtree(tmp, ignore_errors=True)


def fetch_source(package):
    """The unpacked upstream tree of a Debian source package (cached by debian-source.sh)."""
    proc = subprocess.run([os.path.join(ROOT, "scripts", "debian-source.sh"), package],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise Unavailable(proc.stderr.strip() or f"debian-source.sh {package} failed")
    return proc.stdout.strip()


def file_digest(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def compiler_identity(cc):
    """The compiler's version line: a compiler upgrade must not reuse old builds."""
    first = cc.split()[0]
    if not shutil.which(first):
        raise Unavailable(f"compiler {first} not found")
    proc = subprocess.run([first, "--version"], capture_output=True, text=True)
    if proc.returncode != 0:
        raise Unavailable(f"compiler {first} --version failed")
    return proc.stdout.splitlines()[0]


class Flavour:
    """How a program is compiled: compiler family and flags. `plugin` is the hcct_plugin.so path
    when the flags load it (its content is part of the cache key: a new plugin rebuilds)."""

    def __init__(self, name, family, cflags, ldflags=(), plugin=None):
        self.name = name
        self.family = family  # "gcc" or "clang"
        self.cflags = list(cflags)
        self.ldflags = list(ldflags)
        self.plugin = plugin

    def cc(self):
        return "gcc" if self.family == "gcc" else "clang"

    def cxx(self):
        return "g++" if self.family == "gcc" else "clang++"

    def key(self, workload):
        h = hashlib.sha256()
        for part in [workload.name, workload.build_version, workload.key_extra(), compiler_identity(self.cc()),
                     *self.cflags, "|", *self.ldflags]:
            h.update(part.encode() + b"\0")
        if self.plugin:
            if not os.path.exists(self.plugin):
                raise Unavailable(f"plugin {self.plugin} not built "
                                  "(cmake --build BUILD --target hcct_plugin hcct_kpath_plugin)")
            h.update(file_digest(self.plugin).encode())
        return f"{self.name}-{h.hexdigest()[:12]}"


def flavours(plugin):
    """Every build the suite needs. Base flags: -O2 -g, as the README's recipe."""
    plugin_flags = ["-fplugin=" + plugin]
    return {
        "native": Flavour("native", "gcc", []),
        "gprof": Flavour("gprof", "gcc", ["-pg"], ["-pg"]),
        "finstr": Flavour("finstr", "gcc", ["-finstrument-functions"]),
        "plugin-early": Flavour("plugin-early", "gcc", plugin_flags + ["-fplugin-arg-hcct_plugin-stage=early"],
                                plugin=plugin),
        "plugin-late": Flavour("plugin-late", "gcc", plugin_flags + ["-fplugin-arg-hcct_plugin-stage=late"],
                               plugin=plugin),
        "plugin-late-count": Flavour("plugin-late-count", "gcc",
                                     plugin_flags + ["-fplugin-arg-hcct_plugin-stage=late",
                                                     "-fplugin-arg-hcct_plugin-clock=count"],
                                     plugin=plugin),
        "clang-after-inlining": Flavour("clang-after-inlining", "clang",
                                        ["-finstrument-functions-after-inlining"]),
    }


def path_flavours(kpath_plugin, runtime_dir):
    """The builds of the path-profiling suite (run.py --paths): clang -O2 -g, as docs/KPATH.md's
    recipe. kpath builds link libhcct (the pass's probes call it); `late` selects the pass's
    OptimizerLast stage (-mllvm needs the plugin loaded with -Xclang -load as well)."""
    link = ["-L" + runtime_dir, "-lhcct", "-Wl,-rpath," + runtime_dir]
    early = ["-fpass-plugin=" + kpath_plugin]
    late = early + ["-Xclang", "-load", "-Xclang", kpath_plugin, "-mllvm", "-kpath-stage=late"]
    return {
        "clang-native": Flavour("clang-native", "clang", []),
        "clang-instr-gen": Flavour("clang-instr-gen", "clang", ["-fprofile-instr-generate"],
                                   ["-fprofile-instr-generate"]),
        "kpath-early": Flavour("kpath-early", "clang", early, link, plugin=kpath_plugin),
        # Issue 25's accuracy runs compare two runs of one input: Lua seeds its string hashes from
        # the clock and addresses, so this build fixes the seed (as tests/kpath/test_real_lua.cc
        # does; the runs also have address randomisation off). A no-op define for the others.
        "kpath-early-seeded": Flavour("kpath-early-seeded", "clang", early + ["-Dluai_makeseed=sizeof"], link,
                                      plugin=kpath_plugin),
        "kpath-late": Flavour("kpath-late", "clang", late, link, plugin=kpath_plugin),
        # Static bursting of path profiles (docs/KPATH.md, "Bursting"): two versions of every body
        # (-kpath-burst=1), seeded like kpath-early-seeded so that a bursting run and an exhaustive
        # run of this one binary can be compared sequence by sequence.
        "kpath-burst-seeded": Flavour("kpath-burst-seeded", "clang",
                                      early + ["-Xclang", "-load", "-Xclang", kpath_plugin, "-mllvm", "-kpath-burst=1",
                                               "-mllvm", "-kpath-stage=early",  # (-kpath-burst=1 alone: late)
                                               "-Dluai_makeseed=sizeof"], link, plugin=kpath_plugin),
        "kpath-burst-late-seeded": Flavour("kpath-burst-late-seeded", "clang",
                                           late + ["-mllvm", "-kpath-burst=1", "-Dluai_makeseed=sizeof"], link,
                                           plugin=kpath_plugin),
        # The same with process-wide start counters (before session 12; docs/KPATH.md, "Bursting").
        "kpath-burst-shared-seeded": Flavour("kpath-burst-shared-seeded", "clang",
                                             late + ["-mllvm", "-kpath-burst=1", "-mllvm",
                                                     "-kpath-burst-thread-counters=0", "-Dluai_makeseed=sizeof"],
                                             link, plugin=kpath_plugin),
        # The same on the time gate (-kpath-burst-event-clock=0, the only clock before session 13:
        # bursts of the process-wide timer, not of path starts; docs/KPATH.md, "The event clock").
        "kpath-burst-time-seeded": Flavour("kpath-burst-time-seeded", "clang",
                                           late + ["-mllvm", "-kpath-burst=1", "-mllvm", "-kpath-burst-event-clock=0",
                                                   "-Dluai_makeseed=sizeof"], link, plugin=kpath_plugin),
        "kpath-burst-goto-time-seeded": Flavour("kpath-burst-goto-time-seeded", "clang",
                                                late + ["-mllvm", "-kpath-burst=1", "-mllvm", "-kpath-burst-indirectbr=1",
                                                        "-mllvm", "-kpath-burst-event-clock=0", "-Dluai_makeseed=sizeof"],
                                                link, plugin=kpath_plugin),
        # The same with computed-goto functions versioned too (Lua's luaV_execute; docs/KPATH.md,
        # "Computed gotos": the default on the event clock since session 13, so now the same code as
        # kpath-burst-late-seeded).
        "kpath-burst-goto-seeded": Flavour("kpath-burst-goto-seeded", "clang",
                                           late + ["-mllvm", "-kpath-burst=1", "-mllvm", "-kpath-burst-indirectbr=1",
                                                   "-Dluai_makeseed=sizeof"], link, plugin=kpath_plugin),
    }


def children_cpu_seconds():
    """User + system CPU of every waited-for descendant so far (the compilers a build ran)."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run_logged(cmd, log, cwd=None, env=None):
    with open(log, "a") as out:
        out.write("$ " + " ".join(cmd) + "\n")
        out.flush()
        proc = subprocess.run(cmd, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT)
    if proc.returncode != 0:
        raise RuntimeError(f"build step failed ({proc.returncode}): {' '.join(cmd)}; log: {log}")


class Workload:
    name = ""
    package = ""
    build_version = "1"  # bump when the build recipe changes
    description = ""

    def build(self, flavour, quiet=False):
        """The program built with `flavour`, from the cache when it was built before."""
        out = os.path.join(CACHE, self.name, "builds", flavour.key(self))
        binary = os.path.join(out, self.binary_name)
        if os.path.exists(binary):
            return binary
        src = self.prepare_source()
        tmp = f"{out}.tmp{os.getpid()}"  # two sessions building at once do not collide
        shutil.rmtree(tmp, ignore_errors=True)
        os.makedirs(tmp)
        log = os.path.join(tmp, "build.log")
        if not quiet:
            print(f"  building {self.name} [{flavour.name}] (log {out}/build.log)", file=sys.stderr)
        try:
            cpu_before = children_cpu_seconds()
            self.compile(src, tmp, flavour, log)
            # The build's CPU time (compilers and linker), kept with the build: run.py --paths
            # compares compile times from it (measured under the load of the session that built).
            with open(os.path.join(tmp, "compile-cpu-seconds"), "w") as f:
                f.write(f"{children_cpu_seconds() - cpu_before:.3f}\n")
            os.rename(tmp, out)
        except OSError:
            if not os.path.exists(binary):  # not another session's complete build
                raise
        finally:
            if os.path.exists(tmp) and os.path.exists(binary):
                shutil.rmtree(tmp, ignore_errors=True)
        return binary

    def prepare_source(self):
        return fetch_source(self.package)

    def compile_seconds(self, flavour):
        """CPU seconds the cached build of `flavour` took, or None (built before this was kept)."""
        path = os.path.join(CACHE, self.name, "builds", flavour.key(self), "compile-cpu-seconds")
        try:
            with open(path) as f:
                return float(f.read())
        except (OSError, ValueError):
            return None

    def key_extra(self):
        """More of the build's identity than its flags (e.g. a driver source of ours)."""
        return ""

    def input_identity(self):
        """Everything the generated inputs depend on: a change makes new inputs."""
        return ""

    def input_dir(self):
        tag = hashlib.sha256(self.input_identity().encode()).hexdigest()[:12]
        d = os.path.join(CACHE, self.name, "inputs-" + tag)
        if not os.path.isdir(d):
            tmp = f"{d}.tmp{os.getpid()}"  # two sessions generating at once do not collide
            shutil.rmtree(tmp, ignore_errors=True)
            os.makedirs(tmp)
            self.make_inputs(tmp)
            publish_dir(tmp, d)
        return d

    def make_inputs(self, d):
        pass

    def argv(self, binary, size):
        """(argv, stdin path or None) for size "full" or "short"."""
        raise NotImplementedError

    def exact_argv(self, binary, size):
        """The run bench/real/exact.py compares with uftrace (by default the same as argv)."""
        return self.argv(binary, size)


LUA_SCRIPT = r"""
-- Mixed interpreter work: strings, tables, sort, recursion, coroutines, closures.
local scale = tonumber(arg[1]) or 1
local coroutines = arg[2] ~= "no-coroutines"
local out = {}
local function emit(...) out[#out + 1] = table.concat({...}, " ") end

-- strings: concatenation, formatting, pattern matching
local words = {}
for i = 1, 20000 * scale do
  words[#words + 1] = string.format("w%05d", (i * 7919) % 100003) .. "_" .. (i % 97)
end
local joined = table.concat(words, ",")
local hits = 0
for w in joined:gmatch("w(%d+)_1%d") do hits = hits + #w end
emit("strings", #joined, hits, joined:sub(1, 20):upper())

-- tables: hash and array parts, rehash, sort with a comparator
local t = {}
for i = 1, 30000 * scale do t[i] = (i * 2654435761) % 1000003 end
table.sort(t, function(a, b) return a > b end)
local map = {}
for i = 1, #t do local k = "k" .. (t[i] % 5000); map[k] = (map[k] or 0) + 1 end
local distinct = 0
for _ in pairs(map) do distinct = distinct + 1 end
emit("tables", t[1], t[#t], distinct)

-- recursion
local function fib(n) if n < 2 then return n end return fib(n - 1) + fib(n - 2) end
local function ack(m, n)
  if m == 0 then return n + 1 end
  if n == 0 then return ack(m - 1, 1) end
  return ack(m - 1, ack(m, n - 1))
end
emit("recursion", fib(22 + (scale > 1 and 2 or 0)), ack(2, 300))

-- coroutines: a generator pipeline
local function gen(n) return coroutine.wrap(function() for i = 1, n do coroutine.yield(i) end end) end
local function filter(src, f)
  return coroutine.wrap(function() for v in src do if f(v) then coroutine.yield(v) end end end)
end
if coroutines then
  local s = 0
  for v in filter(gen(50000 * scale), function(x) return x % 3 == 0 end) do s = s + v end
  emit("coroutines", s)
end

-- closures: counters and composition
local function counter() local c = 0; return function(d) c = c + d; return c end end
local function compose(f, g) return function(x) return f(g(x)) end end
local inc = counter()
local h = compose(function(x) return x * 2 end, function(x) return inc(x) end)
local acc = 0
for i = 1, 100000 * scale do acc = (acc + h(i % 13)) % 1000000007 end
emit("closures", acc)

-- objects with metatables
local Vec = {}
Vec.__index = Vec
Vec.__add = function(a, b) return setmetatable({x = a.x + b.x, y = a.y + b.y}, Vec) end
function Vec.len2(v) return v.x * v.x + v.y * v.y end
local v = setmetatable({x = 0, y = 0}, Vec)
for i = 1, 40000 * scale do v = v + setmetatable({x = i % 7, y = i % 11}, Vec) end
emit("objects", v:len2())

print(table.concat(out, "\n"))
"""


class Lua(Workload):
    name = "lua"
    package = "lua5.4"
    binary_name = "lua"
    description = "Lua 5.4 interpreter running a mixed script (strings, tables, sort, recursion, coroutines, closures)"
    full_scale, short_scale = "5", "0.05"

    def compile(self, src, out, flavour, log):
        shutil.copytree(os.path.join(src, "src"), os.path.join(out, "src"))
        cc = flavour.cc() + " -std=gnu99"
        run_logged(["make", "-C", os.path.join(out, "src"), "-j2", "linux", "CC=" + cc,
                    "MYCFLAGS=" + " ".join(["-g"] + flavour.cflags),
                    "MYLDFLAGS=" + " ".join(flavour.ldflags)], log)
        shutil.copy(os.path.join(out, "src", "lua"), os.path.join(out, "lua"))
        shutil.rmtree(os.path.join(out, "src"))

    def input_identity(self):
        return LUA_SCRIPT

    def make_inputs(self, d):
        with open(os.path.join(d, "mixed.lua"), "w") as f:
            f.write(LUA_SCRIPT)

    def argv(self, binary, size):
        scale = self.full_scale if size == "full" else self.short_scale
        return [binary, os.path.join(self.input_dir(), "mixed.lua"), scale], None

    def exact_argv(self, binary, size):
        """Without the coroutine section: a Lua yield from a C function is a longjmp, which uftrace
        (the oracle) does not follow with --no-libcall: its depth grows by one per yield until it
        stops recording at depth 1024 (docs/BENCHMARKS.md, "Exact CCT check"). libhcct recovers."""
        argv, stdin = self.argv(binary, size)
        return argv + ["no-coroutines"], stdin


def sqlite_script(rows):
    """A speedtest-style SQL script: bulk inserts, indexes, joins, aggregates, updates, deletes."""
    return f"""
PRAGMA journal_mode = OFF;
CREATE TABLE t1(a INTEGER PRIMARY KEY, b INTEGER, c TEXT);
CREATE TABLE t2(a INTEGER PRIMARY KEY, b INTEGER, c TEXT);
BEGIN;
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < {rows})
  INSERT INTO t1 SELECT i, (i * 7919) % 100003, printf('row %d of t1 %x', i, i * 31) FROM n;
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < {rows // 2})
  INSERT INTO t2 SELECT i, (i * 104729) % 50021, printf('t2-%06d', (i * 13) % 99991) FROM n;
COMMIT;
CREATE INDEX t1b ON t1(b);
CREATE INDEX t2c ON t2(c);
SELECT count(*), sum(b), min(c), max(c) FROM t1;
SELECT count(*), avg(t1.b + t2.b) FROM t1 JOIN t2 ON t1.b % 50021 = t2.b;
SELECT b % 10, count(*), sum(length(c)) FROM t1 GROUP BY b % 10 ORDER BY 1;
SELECT count(*) FROM t1 WHERE b BETWEEN 1000 AND 20000;
SELECT c FROM t2 WHERE c LIKE 't2-0001%' ORDER BY c LIMIT 5;
UPDATE t1 SET c = upper(c) WHERE a % 3 = 0;
DELETE FROM t2 WHERE b % 5 = 0;
SELECT count(*), group_concat(DISTINCT substr(c, 1, 3)) FROM t1;
SELECT t2.a, t2.c, (SELECT count(*) FROM t1 WHERE t1.b < t2.b) FROM t2 ORDER BY t2.b DESC LIMIT 3;
CREATE TABLE t3 AS SELECT b % 1000 AS k, count(*) AS n, total(a) AS s FROM t1 GROUP BY k;
SELECT k, n, s FROM t3 ORDER BY s DESC, k LIMIT 5;
SELECT count(*) FROM t1 AS x JOIN t3 ON x.b % 1000 = t3.k WHERE t3.n > 2;
"""


class Sqlite(Workload):
    name = "sqlite"
    package = "sqlite3"
    binary_name = "sqlite3"
    description = "SQLite 3.40 shell (amalgamation) on a speedtest-style SQL script in memory"
    full_rows, short_rows = 400000, 2000

    def prepare_source(self):
        """Debian ships the canonical tree: the amalgamation (sqlite3.c, shell.c) is generated once
        with upstream's makefile (needs tclsh) and cached."""
        amal = os.path.join(CACHE, self.name, "amalgamation")
        if os.path.exists(os.path.join(amal, "shell.c")):
            return amal
        if not shutil.which("tclsh"):
            raise Unavailable("tclsh not found (apt-get install tcl): needed to make sqlite3's amalgamation")
        src = fetch_source(self.package)
        work = f"{amal}.work{os.getpid()}"
        shutil.rmtree(work, ignore_errors=True)
        shutil.copytree(src, work, symlinks=True)
        log = os.path.join(os.path.dirname(amal), "amalgamation.log")
        print(f"  making sqlite3's amalgamation (log {log})", file=sys.stderr)
        run_logged(["./configure", "--disable-tcl"], log, cwd=work)
        run_logged(["make", "-j2", "sqlite3.c", "shell.c"], log, cwd=work)
        tmp = f"{amal}.tmp{os.getpid()}"
        os.makedirs(tmp, exist_ok=True)
        for f in ("sqlite3.c", "sqlite3.h", "shell.c"):
            shutil.copy(os.path.join(work, f), os.path.join(tmp, f))
        publish_dir(tmp, amal)
        shutil.rmtree(work, ignore_errors=True)
        return amal

    def compile(self, src, out, flavour, log):
        run_logged([flavour.cc(), "-O2", "-g", *flavour.cflags, "-DSQLITE_THREADSAFE=0",
                    "-DSQLITE_OMIT_LOAD_EXTENSION", "-I", src, os.path.join(src, "shell.c"),
                    os.path.join(src, "sqlite3.c"), "-o", os.path.join(out, "sqlite3"),
                    *flavour.ldflags, "-lm"], log)

    def input_identity(self):
        return sqlite_script(self.full_rows) + sqlite_script(self.short_rows)

    def make_inputs(self, d):
        for size, rows in (("full", self.full_rows), ("short", self.short_rows)):
            with open(os.path.join(d, size + ".sql"), "w") as f:
                f.write(sqlite_script(rows))

    def argv(self, binary, size):
        return [binary, ":memory:"], os.path.join(self.input_dir(), size + ".sql")


class Zstd(Workload):
    name = "zstd"
    package = "libzstd"
    binary_name = "zstd"
    build_version = "3"
    description = "zstd 1.5.4 CLI compressing generated text with 4 worker threads"

    def compile(self, src, out, flavour, log):
        tree = os.path.join(out, "tree")
        os.makedirs(tree)
        for part in ("lib", "programs"):
            shutil.copytree(os.path.join(src, part), os.path.join(tree, part))
        # The compressor-only CLI (what is measured; half the code to build), with threads (our
        # CPPFLAGS replace the makefile's, so -DZSTD_MULTITHREAD is ours), no zlib/lzma/lz4 back
        # ends, no assembly (the same code in every build).
        # The flavour's flags go into CC: the makefile repeats CFLAGS on the zstd-compress line,
        # and the hcct plugin rejects an option given twice (even the same one).
        run_logged(["make", "-C", os.path.join(tree, "programs"), "zstd-compress",
                    "CC=" + " ".join([flavour.cc(), *flavour.cflags]), "CFLAGS=-O2 -g",
                    "LDFLAGS=" + " ".join(["-pthread", *flavour.ldflags]),
                    "CPPFLAGS=-DZSTD_MULTITHREAD -DZSTD_DISABLE_ASM",
                    "HAVE_ZLIB=0", "HAVE_LZMA=0", "HAVE_LZ4=0"], log)
        shutil.copy(os.path.join(tree, "programs", "zstd-compress"), os.path.join(out, "zstd"))
        shutil.rmtree(tree)

    input_sizes_mb = (("full", 48), ("short", 2), ("exact", 0.0625))

    def input_identity(self):
        return f"zipf-text seed=20261126 {self.input_sizes_mb}"

    def make_inputs(self, d):
        """Text with the statistics of prose (a Zipf-like vocabulary), from a fixed seed."""
        rng = random.Random(20261126)
        vocab = ["".join(rng.choice("etaoinshrdlucmfwypvbgkjqxz") for _ in range(rng.randint(2, 10)))
                 for _ in range(5000)]
        weights = [1.0 / (i + 1) for i in range(len(vocab))]
        for size, megabytes in self.input_sizes_mb:
            with open(os.path.join(d, size + ".txt"), "w") as f:
                written = 0
                while written < megabytes * (1 << 20):
                    line = " ".join(rng.choices(vocab, weights, k=12)) + ".\n"
                    f.write(line)
                    written += len(line)

    def argv(self, binary, size):
        return [binary, "-q", "-c", "-9", "-T4", "--block-size=1M", os.path.join(self.input_dir(), size + ".txt")], None

    def exact_argv(self, binary, size):
        """64 KB for the exact check: the short input's 2 MB already make 3 GB of uftrace events.
        Still two threads (zstd's -T mode compresses in a worker thread)."""
        argv, stdin = self.argv(binary, size)
        return argv[:-1] + [os.path.join(self.input_dir(), "exact.txt")], stdin


class Json(Workload):
    name = "json"
    package = "nlohmann-json3"
    binary_name = "json_workload"
    build_version = "1"
    description = "nlohmann::json 3.11 (header-only, template-heavy C++): build, dump, parse, query, patch documents"
    full_args, short_args = ["60"], ["1", "40"]

    def compile(self, src, out, flavour, log):
        run_logged([flavour.cxx(), "-std=c++17", "-O2", "-g", *flavour.cflags,
                    "-I", os.path.join(src, "single_include"), os.path.join(HERE, "json_workload.cc"),
                    "-o", os.path.join(out, self.binary_name), *flavour.ldflags], log)

    def key_extra(self):
        return file_digest(os.path.join(HERE, "json_workload.cc"))

    def argv(self, binary, size):
        return [binary, *(self.full_args if size == "full" else self.short_args)], None


# The Tiny C Compiler's configuration when it compiles its own sources (config.h is made by its
# configure script at build time; the inputs carry a fixed one, so that they do not depend on a build).
TCC_INPUT_CONFIG_H = '#define TCC_VERSION "0.9.27"\n#define CONFIG_TCCDIR "/usr/local/lib/tcc"\n'


class Tcc(Workload):
    """tcc compiling its own sources: every round preprocesses them (-E), compiles each to an
    object (-c) and links the objects (-r), through tcc's command line (bench/real/tcc_workload.c)."""
    name = "tcc"
    package = "tcc"
    binary_name = "tcc_workload"
    build_version = "2"  # 2: -O2 (version 1 built tcc at -O0: --extra-cflags=-g replaced configure's -O2)
    description = "Tiny C Compiler 0.9.27 compiling its own sources: preprocess, compile, link (-r), repeated"
    # The compiler's translation units (its Makefile's x86_64 list, ONE_SOURCE=no) and the C sources
    # of its runtime library libtcc1.a (lib/Makefile's x86_64 list, less bt-exe.c, which includes
    # tccrun.c again). The short input is the runtime library alone: every tcc.h includer costs
    # ~5 M calls (tcc.h pulls in elf.h and libc's headers), the four library files 1.8 M together.
    runtime_sources = ("lib/libtcc1.c", "lib/va_list.c", "lib/bcheck.c", "lib/bt-log.c")
    full_sources = ("tcc.c", "libtcc.c", "tccpp.c", "tccgen.c", "tccelf.c", "tccasm.c", "tccrun.c",
                    "x86_64-gen.c", "x86_64-link.c", "i386-asm.c") + runtime_sources
    short_sources = runtime_sources
    full_rounds, short_rounds = 6, 1

    def prepare_source(self):
        # The inputs are tcc's x86_64 back end, compiled for x86_64 (argv's -D options).
        if platform.machine() != "x86_64":
            raise Unavailable(f"tcc's inputs are its x86_64 sources; this machine is {platform.machine()}")
        return fetch_source(self.package)

    def compile(self, src, out, flavour, log):
        tree = os.path.join(out, "tree")
        shutil.copytree(src, tree)
        # configure with the bare compiler (its test programs are linked without libhcct, which
        # kpath builds need); the flavour's flags go into CC, once, as for zstd. --extra-cflags
        # replaces configure's default CFLAGS ("-Wall -O2"), so it gives the suite's -O2 -g whole.
        # tcc.c's main() becomes tcc_main (through tcc's own hook for extra make settings), called
        # by our driver.
        run_logged(["./configure", "--cc=" + flavour.cc(), "--extra-cflags=-O2 -g"], log, cwd=tree)
        with open(os.path.join(tree, "config-extra.mak"), "w") as f:
            f.write("tcc.o : DEFINES += -Dmain=tcc_main\n")
        run_logged(["make", "-C", tree, "-j2", "libtcc.a", "tcc.o",
                    "CC=" + " ".join([flavour.cc(), *flavour.cflags])], log)
        run_logged([flavour.cc(), "-O2", "-g", *flavour.cflags, os.path.join(HERE, "tcc_workload.c"),
                    os.path.join(tree, "tcc.o"), os.path.join(tree, "libtcc.a"),
                    "-o", os.path.join(out, self.binary_name), *flavour.ldflags, "-lm", "-ldl", "-lpthread"], log)
        shutil.rmtree(tree)

    def key_extra(self):
        return file_digest(os.path.join(HERE, "tcc_workload.c"))

    def input_identity(self):
        return os.path.basename(fetch_source(self.package)) + " lib/" + TCC_INPUT_CONFIG_H

    def make_inputs(self, d):
        """tcc's sources and headers, its runtime library's C sources (lib/), its own include
        directory (tcc -B), and a fixed config.h."""
        src = fetch_source(self.package)
        for sub in ("", "lib"):
            os.makedirs(os.path.join(d, sub), exist_ok=True)
            for f in sorted(os.listdir(os.path.join(src, sub))):
                if f.endswith((".c", ".h", ".def")):
                    shutil.copy(os.path.join(src, sub, f), os.path.join(d, sub, f))
        shutil.copytree(os.path.join(src, "include"), os.path.join(d, "tcc", "include"))
        with open(os.path.join(d, "config.h"), "w") as f:
            f.write(TCC_INPUT_CONFIG_H)

    def argv(self, binary, size):
        d = self.input_dir()
        rounds, sources = ((self.full_rounds, self.full_sources) if size == "full"
                           else (self.short_rounds, self.short_sources))
        options = ["-B" + os.path.join(d, "tcc"), "-I" + d, "-DONE_SOURCE=0", "-DTCC_TARGET_X86_64",
                   '-DCONFIG_TRIPLET="x86_64-linux-gnu"']
        return [binary, str(rounds), *options, "--", *(os.path.join(d, s) for s in sources)], None


WORKLOADS = {w.name: w for w in (Lua(), Sqlite(), Zstd(), Json(), Tcc())}
