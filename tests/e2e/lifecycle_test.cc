// The runtime inside programs that leave, die, fork, exec, close their stderr or bring their own
// malloc (tests/e2e/programs/ways_out.c, own_malloc.c, thread_dtors.cc): the program's output and
// exit status never change, and the profile is complete, or absent with one message.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>

#include "harness.h"
#include "support/skip.h"

using namespace e2e;
namespace ha = hcct::analysis;
namespace fs = std::filesystem;

namespace {

const std::string kWaysOut = std::string(E2E_DIR) + "/e2e_ways_out";

std::string slurp(const fs::path &p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<std::string> runtime_env(const fs::path &dir, const std::string &options) {
  return {std::string("LD_PRELOAD=") + HCCT_RUNTIME,
          "HCCT_OPTIONS=" + options + (options.empty() ? "" : ":") + "out=" + dir.string()};
}

// Files whose name starts with '.' in `dir` (the runtime's temporaries).
std::vector<std::string> hidden_files(const fs::path &dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    if (it->path().filename().string()[0] == '.') out.push_back(it->path().filename().string());
  return out;
}

// Runs argv in a child set up by `prepare` (after fork, before exec); stdout to a file; stderr as
// `prepare` leaves it.
template <typename Prepare>
Result run_prepared(const std::vector<std::string> &argv, const std::vector<std::string> &env,
                    Prepare prepare) {
  fs::path tmp = fresh_dir("io");
  fs::create_directories(tmp);
  std::vector<std::string> envs = env;
  envs.push_back("PATH=/usr/bin:/bin");
  std::vector<char *> cargv, cenv;
  for (auto &a : argv) cargv.push_back(const_cast<char *>(a.c_str()));
  cargv.push_back(nullptr);
  for (auto &e : envs) cenv.push_back(const_cast<char *>(e.c_str()));
  cenv.push_back(nullptr);
  std::string out_path = (tmp / "out").string();
  pid_t pid = fork();
  if (pid == 0) {
    int fd = open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, 1);
    close(fd);
    prepare();
    execve(cargv[0], cargv.data(), cenv.data());
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  Result r;
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = slurp(tmp / "out");
  fs::remove_all(tmp);
  return r;
}

// The counts of a run that must have written exactly one process of one thread.
std::map<NamePath, uint64_t> only_thread_counts(const Profiled &p) {
  auto set = ha::read_profiles(p.dir);
  REQUIRE(set.processes.size() == 1);
  REQUIRE(set.processes[0].threads.size() == 1);
  return named_counts(set.processes[0].threads[0]);
}

const ha::ThreadProfile *thread_with(const ha::ProfileSet &set, const std::string &function) {
  for (auto &proc : set.processes)
    for (auto &t : proc.threads)
      for (auto &[path, count] : named_counts(t))
        if (std::find(path.begin(), path.end(), function) != path.end()) return &t;
  return nullptr;
}

}  // namespace

TEST_CASE("messages: a dead-pipe stderr never raises SIGPIPE in the program", "[e2e][lifecycle]") {
  // Every message the runtime can print at run time: the memory cap, verbose exit, a bad option.
  for (const std::string options : {"mode=cct:max_mb=1:verbose=1", "mode=nonsense"}) {
    INFO(options);
    fs::path dir = fresh_dir("deadpipe");
    auto native = run({kWaysOut, "quiet"});
    auto profiled = run_prepared({kWaysOut, "quiet"}, runtime_env(dir, options), [] {
      int p[2];
      if (pipe(p) == 0) {
        close(p[0]);  // no reader: a write raises SIGPIPE
        dup2(p[1], 2);
        close(p[1]);
      }
      signal(SIGPIPE, SIG_DFL);
    });
    CHECK(profiled.status == native.status);
    CHECK(profiled.out == native.out);
  }
}

TEST_CASE("messages: never into a descriptor the program reused as fd 2", "[e2e][lifecycle]") {
  fs::path dir = fresh_dir("reusefd2");
  fs::create_directories(dir);
  fs::path data = dir / "data.txt", native_data = dir / "native.txt";
  auto native = run({kWaysOut, "reuse-fd2", native_data.string()});
  auto profiled = run({kWaysOut, "reuse-fd2", data.string()}, runtime_env(dir / "out", "mode=cct:verbose=1"));
  CHECK(profiled.status == native.status);
  CHECK(profiled.out == native.out);
  CHECK(slurp(data) == slurp(native_data));
  CHECK(slurp(data) == "data written by the program\n");
}

TEST_CASE("messages: log=FILE collects them instead of stderr", "[e2e][lifecycle]") {
  fs::path dir = fresh_dir("log");
  fs::create_directories(dir);
  auto r = run({kWaysOut, "quiet"}, runtime_env(dir / "out", "mode=cct:verbose=1:log=" + (dir / "log.txt").string()));
  CHECK(r.status == 0);
  CHECK(r.err.empty());
  CHECK(slurp(dir / "log.txt").find("hcct: process ") == 0);
}

TEST_CASE("exit() from a signal handler while the main thread is in instrumented code", "[e2e][lifecycle]") {
  // The handler very likely interrupts one of the runtime's own events: the thread's profile is
  // still written (as it stands), every run.
  for (int round = 0; round < 5; ++round) {
    INFO("round " << round);
    auto p = run_profiled({kWaysOut, "exit-in-handler"}, "mode=cct");
    CHECK(p.result.status == 0);
    CHECK(p.result.out == "looping\n");
    CHECK(p.result.err.empty());
    auto counts = only_thread_counts(p);
    CHECK(counts.count({"main", "exit_in_handler", "work"}) == 1);
  }
}

TEST_CASE("a dump under a file-size limit the program respects: no signal, no partial file, one message", "[e2e][lifecycle]") {
  auto native = run({kWaysOut, "many-contexts"});
  fs::path dir = fresh_dir("fsize");
  auto r = run_prepared({kWaysOut, "many-contexts"}, runtime_env(dir, "mode=cct"), [] {
    rlimit limit{2048, 2048};  // bytes: the program's own output fits, the profile does not
    setrlimit(RLIMIT_FSIZE, &limit);
    signal(SIGXFSZ, SIG_DFL);
    int fd = open("/dev/null", O_WRONLY);
    dup2(fd, 2);
  });
  CHECK(r.status == native.status);
  CHECK(r.out == native.out);
  CHECK(hidden_files(dir).empty());
  CHECK_FALSE(fs::exists(dir / (std::to_string(0) + ".0.hcct")));
  std::error_code ec;
  size_t files = 0;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) ++files;
  CHECK(files == 0);

  // The same with stderr captured: exactly one message.
  fs::path dir2 = fresh_dir("fsize2");
  fs::create_directories(dir2);
  fs::path err = dir2 / "err.txt";
  std::string err_path = err.string();
  auto r2 = run_prepared({kWaysOut, "many-contexts"}, runtime_env(dir2 / "out", "mode=cct"), [&] {
    int fd = open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, 2);
    rlimit limit{2048, 2048};
    setrlimit(RLIMIT_FSIZE, &limit);
  });
  CHECK(r2.status == native.status);
  std::string message = slurp(err);
  CHECK(message.find("hcct: cannot write the profile to '") == 0);
  CHECK(message.find("File too large") != std::string::npos);
  CHECK(std::count(message.begin(), message.end(), '\n') == 1);
}

TEST_CASE("a forked child exits while another thread holds the module-list lock: no hang", "[e2e][lifecycle]") {
  auto p = run_profiled({kWaysOut, "fork-while-dumping"}, "mode=cct");
  CHECK(p.result.out == "150 children exited\n");
  CHECK(p.result.status == 0);
}

TEST_CASE("temporary dump files are created exclusively, never through a planted symlink", "[e2e][lifecycle]") {
  fs::path dir = fresh_dir("plant");
  fs::create_directories(dir);
  fs::path victim = fs::path(fresh_dir("victim")).string() + ".txt";
  { std::ofstream(victim) << "precious\n"; }
  auto r = run({kWaysOut, "plant", dir.string(), victim.string()}, runtime_env(dir, "mode=cct"));
  CHECK(r.status == 0);
  CHECK(r.out == "planted\n");
  CHECK(slurp(victim) == "precious\n");
  auto set = ha::read_profiles(dir);
  REQUIRE(set.processes.size() == 1);
  CHECK(named_counts(set.processes[0].threads[0]).at({"main", "plant", "work"}) == 1);
  fs::remove(victim);
}

TEST_CASE("stale temporaries of dead processes are removed at start-up, live ones kept", "[e2e][lifecycle]") {
  fs::path dir = fresh_dir("stale");
  fs::create_directories(dir);
  // A pid that cannot exist (above pid_max's ceiling of 2^22) and this test's own (alive).
  std::string dead = ".4194305.0.hcct.4194305.tmp", old_dead = ".4194305.1.hcct.tmp";
  std::string alive = "." + std::to_string(getpid()) + ".0.hcct.1.tmp";
  for (const std::string &name : {dead, old_dead, alive}) std::ofstream(dir / name) << "partial";
  auto r = run({kWaysOut, "quiet"}, runtime_env(dir, "mode=cct"));
  CHECK(r.status == 0);
  CHECK_FALSE(fs::exists(dir / dead));
  CHECK_FALSE(fs::exists(dir / old_dead));
  CHECK(fs::exists(dir / alive));
}

TEST_CASE("an instrumented malloc that holds its lock at the first event", "[e2e][lifecycle]") {
  // Before the fix the thread's registration called malloc (stdio in pthread_getattr_np) and the
  // program waited for its own lock for ever: the timeout makes that a failure, not a hang.
  fs::path dir = fresh_dir("malloc");
  auto r = run({"/usr/bin/timeout", "20", std::string(E2E_DIR) + "/e2e_own_malloc"}, runtime_env(dir, "mode=cct"));
  CHECK(r.status == 0);
  CHECK(r.out == "allocated\n");
  auto set = ha::read_profiles(dir);
  REQUIRE(set.processes.size() == 1);
  CHECK(named_counts(set.processes[0].threads[0]).count({"account"}) == 1);
}

TEST_CASE("daemon(): both processes recorded, the child's parent pid the real one", "[e2e][lifecycle]") {
  fs::path dir = fresh_dir("daemon");
  fs::create_directories(dir);
  fs::path done = dir / "done";
  auto r = run({kWaysOut, "daemon", done.string()}, runtime_env(dir / "out", "mode=cct"));
  CHECK(r.status == 0);
  for (int i = 0; i < 500 && !fs::exists(done); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  REQUIRE(fs::exists(done));
  // The daemon writes its profile right after creating `done`.
  ha::ProfileSet set;
  for (int i = 0; i < 500; ++i) {
    try {
      set = ha::read_profiles(dir / "out");
      if (set.processes.size() == 2) break;
    } catch (const std::exception &) {
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  REQUIRE(set.processes.size() == 2);
  const ha::ThreadProfile *parent = thread_with(set, "work");
  const ha::ThreadProfile *child = thread_with(set, "in_child");
  REQUIRE(parent);
  REQUIRE(child);
  REQUIRE(parent != child);
  CHECK(child->meta.ppid == parent->meta.pid);
  CHECK(named_counts(*parent).at({"main", "become_daemon", "work"}) == 1);
  CHECK(named_counts(*child).at({"main", "become_daemon", "in_child"}) == 5);
}

TEST_CASE("a forked child that ends with _exit or _Exit keeps its calls", "[e2e][lifecycle]") {
  for (const char *c : {"fork-_exit", "fork-_Exit"}) {
    INFO(c);
    auto p = run_profiled({kWaysOut, c}, "mode=cct");
    CHECK(p.result.status == 0);
    CHECK(p.result.out == "child exited with 3\n");
    auto set = ha::read_profiles(p.dir);
    REQUIRE(set.processes.size() == 2);
    const ha::ThreadProfile *child = thread_with(set, "in_child");
    REQUIRE(child);
    CHECK(named_counts(*child) ==
          std::map<NamePath, uint64_t>{{{"main", "fork_then_underscore_exit", "in_child"}, 20}});
  }
}

TEST_CASE("exec from a thread keeps the image that called it: main and the thread", "[e2e][lifecycle]") {
  auto p = run_profiled({kWaysOut, "exec-in-thread"}, "mode=cct");
  CHECK(p.result.status == 0);
  CHECK(p.result.out == "after exec\n");
  CHECK(p.result.err.empty());
  auto set = ha::read_profiles(p.dir);
  REQUIRE(set.processes.size() == 1);  // one pid: the image before exec and the one after
  auto &threads = set.processes[0].threads;
  REQUIRE(threads.size() == 3);
  const ha::ThreadProfile *main_thread = thread_with(set, "exec_in_thread");
  const ha::ThreadProfile *thread = thread_with(set, "in_thread");
  const ha::ThreadProfile *after = thread_with(set, "run_after");
  REQUIRE(main_thread);
  REQUIRE(thread);
  REQUIRE(after);
  CHECK(named_counts(*main_thread).at({"main", "exec_in_thread", "work"}) == 2);
  CHECK(named_counts(*thread).at({"exec_from_thread", "in_thread"}) == 3);
  CHECK(named_counts(*after).at({"main", "run_after", "after"}) == 7);
  CHECK(after->meta.thread_seq == 2);  // numbered after the first image's files
}

TEST_CASE("a failed exec resumes profiling", "[e2e][lifecycle]") {
  auto p = run_profiled({kWaysOut, "failed-exec"}, "mode=cct");
  CHECK(p.result.status == 0);
  CHECK(p.result.out == "exec failed: No such file or directory\n");
  auto counts = only_thread_counts(p);
  CHECK(counts.at({"main", "failed_exec", "work"}) == 4);
  CHECK(counts.at({"main", "failed_exec", "after"}) == 6);
}

TEST_CASE("follow=1: children given their own environment get the runtime back", "[e2e][lifecycle]") {
  for (const char *follow : {"follow=1", "follow=0"}) {
    INFO(follow);
    auto p = run_profiled({kWaysOut, "spawn-own-env"}, std::string("mode=cct:") + follow);
    CHECK(p.result.status == 0);
    CHECK(p.result.out == "children exited with 0 0\n");
    auto set = ha::read_profiles(p.dir);
    size_t expected = std::string(follow) == "follow=1" ? 3 : 2;  // follow=0: the fork child only
    CHECK(set.processes.size() == expected);
  }
}

TEST_CASE("follow=1 passes on only what the process started with", "[e2e][lifecycle]") {
  // Profiling off (or a bad option after follow=1): nothing to pass on, the child's environment
  // is exactly the one the program gave (before, two empty entries were added).
  for (const char *options : {"mode=off:follow=1", "follow=1:mode=nonsense"}) {
    INFO(options);
    fs::path dir = fresh_dir("follow-off");
    auto r = run({kWaysOut, "spawn-env-printer"}, runtime_env(dir, options));
    CHECK(r.status == 0);
    CHECK(r.out == "A=1\n");
  }
  fs::path dir = fresh_dir("follow-on");
  auto r = run({kWaysOut, "spawn-env-printer"}, runtime_env(dir, "mode=cct:follow=1"));
  CHECK(r.status == 0);
  CHECK(r.out == "A=1\nLD_PRELOAD=" + std::string(HCCT_RUNTIME) + "\nHCCT_OPTIONS=mode=cct:follow=1:out=" +
                     dir.string() + "\n");
}

TEST_CASE("a vfork child that execs writes nothing for the parent", "[e2e][lifecycle]") {
  auto p = run_profiled({kWaysOut, "vfork-exec"}, "mode=cct");
  CHECK(p.result.status == 0);
  CHECK(p.result.out == "vfork child exited with 0\n");
  auto counts = only_thread_counts(p);
  CHECK(counts.at({"main", "vfork_exec", "work"}) == 1);
  CHECK(counts.at({"main", "vfork_exec", "after"}) == 3);
}

TEST_CASE("threads that finish while the process exits are each written once", "[e2e][lifecycle]") {
  // Repeated: the race (a thread had claimed its state but not yet said it was writing it, and
  // the final dump did not wait for it) is a matter of timing. time=cpu widens it as it was.
  for (int run = 0; run < 25; ++run) {
    INFO("run " << run);
    auto p = run_profiled({kWaysOut, "exit-while-threads-exit"}, "mode=cct:time=cpu");
    REQUIRE(p.result.status == 0);
    REQUIRE(p.result.out == "exiting\n");
    auto set = ha::read_profiles(p.dir);
    REQUIRE(set.processes.size() == 1);
    size_t with_calls = 0;
    for (auto &t : set.processes[0].threads)
      if (named_counts(t).count({"exiting_thread", "in_thread"})) {
        CHECK(named_counts(t).at({"exiting_thread", "in_thread"}) == 5);
        ++with_calls;
      }
    REQUIRE(with_calls == 24);
  }
}

TEST_CASE("execs that fail in two threads at once leave profiling on", "[e2e][lifecycle]") {
  auto p = run_profiled({kWaysOut, "failed-execs-concurrently"}, "mode=cct");
  CHECK(p.result.status == 0);
  CHECK(p.result.out == "execs failed\n");
  auto set = ha::read_profiles(p.dir);
  const ha::ThreadProfile *main_thread = thread_with(set, "failed_execs_concurrently");
  REQUIRE(main_thread);
  CHECK(named_counts(*main_thread).at({"main", "failed_execs_concurrently", "after"}) == 6);
}

TEST_CASE("threads that exit during a failed exec's dump are written as exited and only once", "[e2e][lifecycle]") {
  auto p = run_profiled({kWaysOut, "threads-exit-during-exec"}, "mode=cct");
  CHECK(p.result.status == 0);
  CHECK(p.result.out == "rounds done\n");
  auto set = ha::read_profiles(p.dir);
  REQUIRE(set.processes.size() == 1);
  size_t workers = 0;
  for (auto &t : set.processes[0].threads) {
    auto counts = named_counts(t);
    if (counts.count({"round_thread", "in_thread"})) {
      ++workers;
      CHECK(counts.at({"round_thread", "in_thread"}) == 3);
      CHECK(t.meta.status == ha::ThreadStatus::exited);  // it did exit, before the process
    }
  }
  CHECK(workers == 60);  // 10 rounds of 6: each thread once
  const ha::ThreadProfile *main_thread = thread_with(set, "threads_exit_during_exec");
  REQUIRE(main_thread);
  CHECK(named_counts(*main_thread).at({"main", "threads_exit_during_exec", "after"}) == 2);
}

TEST_CASE("daemon() whose fork fails: the process goes on and stays profiled", "[e2e][lifecycle]") {
  auto p = run_profiled({kWaysOut, "daemon-fork-fails"}, "mode=cct");
  if (p.result.status == 77) hcct::test::skip_test("seccomp filters are not available here");
  CHECK(p.result.status == 0);
  CHECK(p.result.out == "daemon returned -1: Resource temporarily unavailable\n");
  auto counts = only_thread_counts(p);
  CHECK(counts.at({"main", "daemon_fork_fails", "work"}) == 1);
  CHECK(counts.at({"main", "daemon_fork_fails", "after"}) == 6);
}

TEST_CASE("vfork children that exec with their own environment leave the parent's memory as it was", "[e2e][lifecycle]") {
  auto p = run_profiled({kWaysOut, "vfork-exec-own-env"}, "mode=cct:follow=1");
  CHECK(p.result.status == 0);
  CHECK(p.result.out == "address space grew by less than 64 KB\n");
  CHECK(p.result.err.empty());
  auto set = ha::read_profiles(p.dir);
  const ha::ThreadProfile *parent = thread_with(set, "vfork_exec_own_env");
  REQUIRE(parent);
  CHECK(named_counts(*parent).at({"main", "vfork_exec_own_env", "work"}) == 1);
}

TEST_CASE("a fork child with a recycled pid never replaces the earlier process's file", "[e2e][lifecycle]") {
  fs::path dir = fresh_dir("recycled-pid");
  fs::create_directories(dir);
  // The earlier process with pid 2 (in the namespace the program makes) left this file.
  const std::string planted = "a file another process named 2.0.hcct\n";
  { std::ofstream(dir / "2.0.hcct") << planted; }
  auto r = run({kWaysOut, "fork-in-pid-namespace"}, runtime_env(dir, "mode=cct"));
  if (r.status == 77) hcct::test::skip_test("cannot make a pid namespace here (unshare(CLONE_NEWPID) refused)");
  CHECK(r.status == 0);
  CHECK(r.out == "children exited with 0\n");
  CHECK(slurp(dir / "2.0.hcct") == planted);
  fs::remove(dir / "2.0.hcct");
  auto set = ha::read_profiles(dir);
  const ha::ThreadProfile *second = thread_with(set, "in_child");
  REQUIRE(second);
  CHECK(second->meta.pid == 2);
  CHECK(second->meta.thread_seq == 1);
  CHECK(named_counts(*second).at({"main", "fork_in_pid_namespace", "in_child"}) == 4);
}

TEST_CASE("calls in thread-exit destructors are counted in the exiting thread", "[e2e][lifecycle]") {
  auto p = run_profiled({std::string(E2E_DIR) + "/e2e_thread_dtors"}, "mode=cct");
  CHECK(p.result.status == 0);
  CHECK(p.result.out == "joined\n");
  auto set = ha::read_profiles(p.dir);
  REQUIRE(set.processes.size() == 1);
  uint64_t key_calls = 0, tl_calls = 0;
  for (auto &t : set.processes[0].threads)
    for (auto &[path, count] : named_counts(t)) {
      if (path.back() == "in_key_destructor") key_calls += count;
      if (path.back() == "in_thread_local_destructor") tl_calls += count;
    }
  CHECK(key_calls == 2);
  CHECK(tl_calls == 2);
}

TEST_CASE("ThreadSanitizer: the runtime's cross-thread flags are atomic", "[e2e][lifecycle][tsan]") {
  // e2e_tsan_threads and the runtime are both built with -fsanitize=thread: thread exits, threads
  // live at exit (the final dump stops them and reads their trees) and a fork.
  // hcct mode samples time (issue 17): live threads keep taking samples while the final dump, in
  // another thread, reads their counters (a race TSan found before they were atomic).
  for (const char *mode : {"mode=cct", "mode=hcct"}) {
    INFO(mode);
    fs::path dir = fresh_dir("tsan");
    auto r = run({std::string(E2E_DIR) + "/e2e_tsan_threads"},
                 {std::string("HCCT_OPTIONS=") + mode + ":out=" + dir.string(), "TSAN_OPTIONS=halt_on_error=1:exitcode=66"});
    CHECK(r.err.find("ThreadSanitizer") == std::string::npos);
    INFO(r.err);
    CHECK(r.status == 0);
    CHECK(r.out == "done\n");
    auto set = ha::read_profiles(dir);
    REQUIRE(set.processes.size() == 2);
    size_t threads = set.processes[0].threads.size() + set.processes[1].threads.size();
    CHECK(threads == 1 + 2 + 80 + 1);  // main, two live at exit, 20 rounds of 4, the fork child
  }
}
