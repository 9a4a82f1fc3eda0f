// `hcct record` as a shell would run a command: signal dispositions inherited and signals passed
// on, a previous profile moved aside instead of silently added to, unfinished dumps of dead
// processes cleaned up, and the hint printed when nothing was recorded. Real processes throughout.
#include <fcntl.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <fstream>
#include <set>
#include <thread>

#include "cli_util.h"
#include "support/skip.h"
#include "hcct/analysis/reader.h"
#include "hcct/analysis/writer.h"
#include "testutil.h"

using namespace hcct::analysis;
using hcct::test::read_text;
using hcct::test::TempDir;
namespace fs = std::filesystem;
using namespace clitest;

namespace {

using Env = std::vector<std::pair<std::string, std::string>>;

const Env kFakeRuntime = {{"HCCT_RUNTIME", FAKE_RUNTIME}, {"LD_PRELOAD", ""}};

// A process started in the background, in its own process group, with every signal at its default
// disposition except `ignored` (as nohup or a shell's background job would leave them).
class Spawned {
 public:
  Spawned(const std::vector<std::string> &args, const Env &env, const fs::path &cwd,
          const std::vector<int> &ignored = {}) {
    out_ = io_ / "out";
    err_ = io_ / "err";
    pid_ = fork();
    REQUIRE(pid_ >= 0);
    if (pid_ == 0) {
      setpgid(0, 0);
      for (int sig = 1; sig < NSIG; ++sig) signal(sig, SIG_DFL);
      for (int sig : ignored) signal(sig, SIG_IGN);
      sigset_t none;
      sigemptyset(&none);
      sigprocmask(SIG_SETMASK, &none, nullptr);
      exec_child(args, env, cwd, out_, err_);
    }
    setpgid(pid_, pid_);
  }
  ~Spawned() {
    kill(-pid_, SIGKILL);  // the group: whatever a broken hcct left behind
    if (!reaped_) waitpid(pid_, nullptr, 0);
  }
  pid_t pid() const { return pid_; }

  // The raw wait status; FAILs (and kills the group) after 60 s.
  int wait() {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    int status = 0;
    while (waitpid(pid_, &status, WNOHANG) != pid_) {
      if (std::chrono::steady_clock::now() > deadline) {
        kill(-pid_, SIGKILL);
        waitpid(pid_, &status, 0);
        reaped_ = true;
        FAIL("timed out; stderr: " << err());
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    reaped_ = true;
    return status;
  }
  std::string out() const { return read_text(out_); }
  std::string err() const { return read_text(err_); }

 private:
  TempDir io_;
  fs::path out_, err_;
  pid_t pid_ = -1;
  bool reaped_ = false;
};

// Waits (up to 60 s, a liveness bound, not a speed check) until `file` exists and contains `text`.
bool wait_for_text(const fs::path &file, const std::string &text) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (read_text(file).find(text) == std::string::npos) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

// The SigIgn mask of /proc/<pid>/status, as printed by the program itself.
uint64_t ignored_mask(const std::string &status_line) {
  auto colon = status_line.find(':');
  REQUIRE(colon != std::string::npos);
  return std::stoull(status_line.substr(colon + 1), nullptr, 16);
}
bool in_mask(uint64_t mask, int sig) { return (mask >> (sig - 1)) & 1; }

// A shell program that reports its pid (in ready.txt) and then idles until signalled.
const std::string kIdle = "echo $$ > ready.tmp; mv ready.tmp ready.txt; while :; do sleep 0.02; done";

}  // namespace

TEST_CASE("record: signals ignored when hcct starts stay ignored in the program", "[cli][record][signals]") {
  TempDir dir;
  const std::string report_ignored = "exec grep SigIgn /proc/self/status";
  SECTION("a background job of a shell: SIGINT and SIGQUIT") {
    // POSIX: a non-interactive shell starts `cmd &` with SIGINT and SIGQUIT ignored.
    Spawned sh({"/bin/sh", "-c", "\"$0\" record -- /bin/sh -c '" + report_ignored + "' > ign.txt & wait", hcct_exe()},
               kFakeRuntime, dir.path());
    REQUIRE(sh.wait() == 0);
    uint64_t mask = ignored_mask(read_text(dir / "ign.txt"));
    CHECK(in_mask(mask, SIGINT));
    CHECK(in_mask(mask, SIGQUIT));
  }
  SECTION("nohup: SIGHUP, and whatever else was ignored") {
    Spawned rec({hcct_exe(), "record", "--", "/bin/sh", "-c", report_ignored}, kFakeRuntime, dir.path(),
                {SIGHUP, SIGINT, SIGTERM, SIGUSR1});
    REQUIRE(rec.wait() == 0);
    uint64_t mask = ignored_mask(rec.out());
    for (int sig : {SIGHUP, SIGINT, SIGTERM, SIGUSR1}) CHECK(in_mask(mask, sig));
    CHECK_FALSE(in_mask(mask, SIGQUIT));
  }
  SECTION("nothing ignored: hcct's own handlers are not inherited as ignored") {
    Spawned rec({hcct_exe(), "record", "--", "/bin/sh", "-c", report_ignored}, kFakeRuntime, dir.path());
    REQUIRE(rec.wait() == 0);
    uint64_t mask = ignored_mask(rec.out());
    for (int sig : {SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGUSR1, SIGUSR2}) CHECK_FALSE(in_mask(mask, sig));
  }
}

TEST_CASE("record: signals sent to hcct reach the program, which decides", "[cli][record][signals]") {
  TempDir dir;
  Spawned rec({hcct_exe(), "record", "--", "/bin/sh", "-c",
               "trap 'echo USR1 >> got.txt' USR1; trap 'echo HUP >> got.txt' HUP; "
               "trap 'echo INT >> got.txt' INT; trap 'echo TERM >> got.txt; echo bye; exit 3' TERM; " + kIdle},
              kFakeRuntime, dir.path());
  REQUIRE(wait_for_text(dir / "ready.txt", "\n"));
  for (auto [sig, name] : {std::pair{SIGUSR1, "USR1"}, {SIGHUP, "HUP"}, {SIGINT, "INT"}}) {
    REQUIRE(kill(rec.pid(), sig) == 0);
    INFO(name << "; stderr: " << rec.err());
    REQUIRE(wait_for_text(dir / "got.txt", name));
  }
  REQUIRE(kill(rec.pid(), SIGTERM) == 0);
  int status = rec.wait();
  INFO(rec.err());
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 3);
  CHECK(rec.out() == "bye\n");
  CHECK(read_text(dir / "got.txt") == "USR1\nHUP\nINT\nTERM\n");  // each exactly once
}

TEST_CASE("record: a program killed by a signal ends hcct by the same signal", "[cli][record][signals]") {
  TempDir dir;
  Spawned rec({hcct_exe(), "record", "--", "/bin/sh", "-c", kIdle}, kFakeRuntime, dir.path());
  REQUIRE(wait_for_text(dir / "ready.txt", "\n"));
  pid_t program = std::stoi(read_text(dir / "ready.txt"));
  REQUIRE(kill(rec.pid(), SIGTERM) == 0);
  int status = rec.wait();
  INFO(rec.err());
  REQUIRE(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGTERM);
  CHECK_FALSE(WCOREDUMP(status));
  CHECK_THAT(rec.err(), Catch::Contains("killed by signal 15"));
  // hcct waited for the program (and reaped it) before it ended.
  CHECK(kill(program, 0) == -1);
  CHECK(errno == ESRCH);
}

TEST_CASE("record: an interrupt typed on the terminal reaches the program once and not again through hcct", "[cli][record][signals]") {
  TempDir dir;
  int master = posix_openpt(O_RDWR | O_NOCTTY);
  REQUIRE(master >= 0);
  REQUIRE(grantpt(master) == 0);
  REQUIRE(unlockpt(master) == 0);
  const std::string slave_name = ptsname(master);
  const fs::path log = dir / "ints.txt";
  pid_t rec = fork();
  REQUIRE(rec >= 0);
  if (rec == 0) {
    // A new session whose controlling terminal is the pty: hcct and the program form its
    // foreground process group, as under an interactive shell.
    setsid();
    int slave = open(slave_name.c_str(), O_RDWR);
    if (slave < 0 || ioctl(slave, TIOCSCTTY, 0) != 0) _exit(126);
    dup2(slave, 0);
    int devnull = open("/dev/null", O_WRONLY);
    dup2(devnull, 1);
    dup2(devnull, 2);
    for (int sig = 1; sig < NSIG; ++sig) signal(sig, SIG_DFL);
    setenv("HCCT_RUNTIME", FAKE_RUNTIME, 1);
    unsetenv("LD_PRELOAD");
    if (chdir(dir.path().c_str()) != 0) _exit(126);
    execl(hcct_exe().c_str(), "hcct", "record", "--", HCCT_CLI_SIGCOUNT, log.c_str(), (char *)nullptr);
    _exit(127);
  }
  struct Cleanup {
    pid_t pid;
    int fd;
    bool reaped = false;
    ~Cleanup() {
      if (!reaped) {
        kill(-pid, SIGKILL);
        waitpid(pid, nullptr, 0);
      }
      close(fd);
    }
  } cleanup{rec, master};
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);  // liveness bound
  while (!fs::exists(dir / "ints.txt.ready")) {
    REQUIRE(std::chrono::steady_clock::now() < deadline);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  REQUIRE(write(master, "\x03", 1) == 1);  // ^C: SIGINT to the terminal's foreground process group
  REQUIRE(wait_for_text(log, "INT"));
  // A second SIGINT that hcct passed on would have been sent before this SIGTERM, and SIGINT is
  // delivered before SIGTERM when both are pending.
  REQUIRE(kill(rec, SIGTERM) == 0);
  int status = 0;
  REQUIRE(waitpid(rec, &status, 0) == rec);
  cleanup.reaped = true;
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(read_text(log) == "INT terminal\n");
}

namespace {

// A program (through the fake runtime) that writes profile files named `names` into hcct.data/, as
// the runtime would.
std::vector<std::string> writes_profiles(const std::initializer_list<const char *> names) {
  std::string script = "mkdir -p hcct.data";
  for (const char *n : names) script += std::string("; cp template.hcct hcct.data/") + n;
  return {"/bin/sh", "-c", script};
}

std::set<std::string> file_names(const fs::path &dir) {
  std::set<std::string> names;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    names.insert(it->path().filename().string());
  return names;
}

Result record(std::vector<std::string> args, const std::vector<std::string> &command, const fs::path &cwd) {
  args.insert(args.begin(), "record");
  args.push_back("--");
  args.insert(args.end(), command.begin(), command.end());
  return hcct_cmd(args, kFakeRuntime, cwd);
}

}  // namespace

TEST_CASE("record: a second run moves the previous profile aside, --append adds to it", "[cli][record]") {
  TempDir dir;
  write_profile(dir / "template.hcct", hcct::test::small_profile());
  using Names = std::set<std::string>;

  Result first = record({}, writes_profiles({"77.0.hcct"}), dir.path());
  REQUIRE(first.status == 0);
  CHECK_THAT(first.err, !Catch::Contains("moved"));

  Result second = record({}, writes_profiles({"88.0.hcct"}), dir.path());
  REQUIRE(second.status == 0);
  CHECK_THAT(second.err, Catch::Contains("moved the previous profile hcct.data/ to hcct.data.old/"));
  CHECK(file_names(dir / "hcct.data") == Names{"88.0.hcct"});
  CHECK(file_names(dir / "hcct.data.old") == Names{"77.0.hcct"});

  Result appended = record({"--append"}, writes_profiles({"99.0.hcct"}), dir.path());
  REQUIRE(appended.status == 0);
  CHECK_THAT(appended.err, !Catch::Contains("moved"));
  CHECK_THAT(appended.err, Catch::Contains("recorded 1 thread of 1 process"));
  CHECK(file_names(dir / "hcct.data") == Names{"88.0.hcct", "99.0.hcct"});

  // The next run replaces the older .old.
  Result fourth = record({}, writes_profiles({"11.0.hcct"}), dir.path());
  REQUIRE(fourth.status == 0);
  CHECK(file_names(dir / "hcct.data") == Names{"11.0.hcct"});
  CHECK(file_names(dir / "hcct.data.old") == Names{"88.0.hcct", "99.0.hcct"});

  SECTION("a directory that also holds other files is refused, the program not run") {
    std::ofstream(dir / "hcct.data" / "notes.txt") << "mine\n";
    Result refused = record({}, {"/bin/sh", "-c", "touch ran.txt"}, dir.path());
    CHECK(refused.status == 1);
    CHECK(count_lines(refused.err) == 1);
    CHECK_THAT(refused.err, Catch::Contains("notes.txt") && Catch::Contains("--append"));
    CHECK_FALSE(fs::exists(dir / "ran.txt"));
    CHECK(file_names(dir / "hcct.data.old") == Names{"88.0.hcct", "99.0.hcct"});
  }
  SECTION("an .old that is not a profile directory is not removed") {
    std::ofstream(dir / "hcct.data.old" / "notes.txt") << "mine\n";
    Result refused = record({}, {"/bin/sh", "-c", "touch ran.txt"}, dir.path());
    CHECK(refused.status == 1);
    CHECK(count_lines(refused.err) == 1);
    CHECK_FALSE(fs::exists(dir / "ran.txt"));
    CHECK(fs::exists(dir / "hcct.data.old" / "notes.txt"));
    CHECK(file_names(dir / "hcct.data") == Names{"11.0.hcct"});
  }
  SECTION("a profile a live process is still writing is not moved") {
    std::ofstream(dir / "hcct.data" / ("." + std::to_string(getpid()) + ".0.hcct.tmp")) << "partial";
    Result refused = record({}, {"/bin/sh", "-c", "touch ran.txt"}, dir.path());
    CHECK(refused.status == 1);
    CHECK_THAT(refused.err, Catch::Contains("process " + std::to_string(getpid()) + " is still writing"));
    CHECK_FALSE(fs::exists(dir / "ran.txt"));
    CHECK(file_names(dir / "hcct.data").size() == 2);
  }
  SECTION("-o DIR/ and exact/ are the same profile") {
    fs::create_directory(dir / "hcct.data" / "exact");
    write_profile(dir / "hcct.data" / "exact" / "11.0.hcct", hcct::test::small_profile());
    Result again = record({"-o", "hcct.data/"}, writes_profiles({"12.0.hcct"}), dir.path());
    REQUIRE(again.status == 0);
    CHECK(file_names(dir / "hcct.data") == Names{"12.0.hcct"});
    CHECK(file_names(dir / "hcct.data.old") == Names{"11.0.hcct", "exact"});
  }
}

TEST_CASE("record: unfinished dumps of dead processes are removed, a live process's never", "[cli][record]") {
  TempDir dir;
  fs::create_directories(dir / "hcct.data" / "exact");
  pid_t dead = fork();
  REQUIRE(dead >= 0);
  if (dead == 0) _exit(0);
  REQUIRE(waitpid(dead, nullptr, 0) == dead);
  // The runtime's naming (`.<pid>.<seq>.hcct.<tid>.tmp`) and the older one without the tid.
  const std::string dead_tmp = "." + std::to_string(dead) + ".0.hcct." + std::to_string(dead) + ".tmp";
  const std::string old_dead_tmp = "." + std::to_string(dead) + ".0.hcct.tmp";
  const std::string live_tmp = "." + std::to_string(getpid()) + ".0.hcct.tmp";
  for (const fs::path &p : {dir / "hcct.data" / dead_tmp, dir / "hcct.data" / "exact" / old_dead_tmp,
                            dir / "hcct.data" / live_tmp, dir / "hcct.data" / ".notes.tmp"})
    std::ofstream(p) << "partial";
  // The program's own child dies after leaving an unfinished dump: removed after the run.
  Result r = record({}, {"/bin/sh", "-c", "/bin/sh -c 'touch hcct.data/.$$.3.hcct.tmp'"}, dir.path());
  REQUIRE(r.status == 0);
  CHECK_THAT(r.err, Catch::Contains("removed 3 unfinished dumps of dead processes"));
  CHECK(file_names(dir / "hcct.data") == std::set<std::string>{live_tmp, ".notes.tmp", "exact"});
  CHECK(file_names(dir / "hcct.data" / "exact").empty());
}

#ifdef HCCT_CLI_DL_MAIN
// Modules recorded as the loader mapped them (absolute path, build-id), and found again by build-id.
TEST_CASE("record: a library loaded by a relative path symbolizes from any directory", "[cli][record][modules]") {
  TempDir dir;
  const Env runtime = {{"HCCT_RUNTIME", HCCT_RUNTIME_SO}, {"HCCT_MODULE_PATH", ""}};
  fs::create_directories(dir / "bin");
  fs::copy_file(HCCT_CLI_DL_MAIN, dir / "bin" / "dl_main");
  fs::copy_file(HCCT_CLI_DL_LIB, dir / "libdl.so");
  const fs::path profile = dir / "prof";
  Result rec = hcct_cmd({"record", "--mode", "cct", "-o", "prof", "--", (dir / "bin" / "dl_main").string(),
                         "./libdl.so"},
                        runtime, dir.path());
  INFO(rec.err);
  REQUIRE(rec.status == 0);
  CHECK(rec.out == "5050\n");  // the program's output, unchanged

  auto report_from_root = [&](const Env &env) {
    return hcct_cmd({"report", profile.string(), "--phi", "0"}, env, "/");
  };
  SECTION("recorded with its absolute path") {
    Result info = hcct_cmd({"info", profile.string(), "--modules"}, {}, "/");
    REQUIRE(info.status == 0);
    CHECK(lines_with(info.out, (dir / "libdl.so").string()).size() == 1);
    Result r = report_from_root({});
    INFO(r.err);
    REQUIRE(r.status == 0);
    CHECK(lines_with(r.out, "dl_lib_work").size() == 1);
    CHECK(lines_with(r.out, "dl_lib_helper").size() == 1);
    CHECK(r.err.empty());
  }
  SECTION("moved after the run: found by build-id in HCCT_MODULE_PATH, or missing with one warning") {
    fs::create_directory(dir / "moved");
    fs::rename(dir / "libdl.so", dir / "moved" / "libdl.so");
    Result lost = report_from_root({});
    REQUIRE(lost.status == 0);
    CHECK(lines_with(lost.out, "dl_lib_work").empty());
    CHECK(lines_with(lost.out, "libdl.so+0x").size() == 2);
    CHECK(count_lines(lost.err) == 1);
    CHECK_THAT(lost.err, Catch::Contains("cannot read " + (dir / "libdl.so").string()) &&
                             Catch::Contains("HCCT_MODULE_PATH"));
    Result found = report_from_root({{"HCCT_MODULE_PATH", "/nonexistent:" + (dir / "moved").string()}});
    INFO(found.err);
    REQUIRE(found.status == 0);
    CHECK(lines_with(found.out, "dl_lib_work").size() == 1);
    CHECK(found.err.empty());
  }
  SECTION("moved next to the executable: found there") {
    fs::rename(dir / "libdl.so", dir / "bin" / "libdl.so");
    Result r = report_from_root({});
    INFO(r.err);
    CHECK(lines_with(r.out, "dl_lib_work").size() == 1);
    CHECK(r.err.empty());
  }
  SECTION("a different file at the recorded path is refused, the right one elsewhere used") {
    fs::create_directory(dir / "moved");
    fs::rename(dir / "libdl.so", dir / "moved" / "libdl.so");
    fs::copy_file(HCCT_CLI_DL_LIB_OTHER, dir / "libdl.so");
    Result refused = report_from_root({});
    REQUIRE(refused.status == 0);
    CHECK(lines_with(refused.out, "dl_lib_work").empty());
    CHECK(lines_with(refused.out, "(stale binary)").size() == 2);
    CHECK(count_lines(refused.err) == 1);
    CHECK_THAT(refused.err, Catch::Contains("build-id") && Catch::Contains("not used"));
    Result found = report_from_root({{"HCCT_MODULE_PATH", (dir / "moved").string()}});
    INFO(found.err);
    CHECK(lines_with(found.out, "dl_lib_work").size() == 1);
    CHECK(found.err.empty());
  }
}

TEST_CASE("record: a library removed while the program ran is found again by name and build-id",
          "[cli][record][modules]") {
  TempDir dir;
  fs::copy_file(HCCT_CLI_DL_LIB, dir / "libdl.so");
  Result rec = hcct_cmd({"record", "--mode", "cct", "--", HCCT_CLI_DL_MAIN, "./libdl.so", "unlink"},
                        {{"HCCT_RUNTIME", HCCT_RUNTIME_SO}}, dir.path());
  INFO(rec.err);
  REQUIRE(rec.status == 0);
  REQUIRE_FALSE(fs::exists(dir / "libdl.so"));
  fs::create_directory(dir / "reinstalled");
  fs::copy_file(HCCT_CLI_DL_LIB, dir / "reinstalled" / "libdl.so");
  Result r = hcct_cmd({"report", (dir / "hcct.data").string(), "--phi", "0"},
                      {{"HCCT_MODULE_PATH", (dir / "reinstalled").string()}}, "/");
  INFO(r.err);
  REQUIRE(r.status == 0);
  CHECK(lines_with(r.out, "dl_lib_work").size() == 1);
  CHECK(r.err.empty());
}
#endif

#ifdef HCCT_CLI_SPAWN_ENV
TEST_CASE("record: children given their own environment are followed, unless --no-follow", "[cli][record][follow]") {
  const Env runtime = {{"HCCT_RUNTIME", HCCT_RUNTIME_SO}, {"LD_PRELOAD", ""}};
  for (bool follow : {true, false}) {
    INFO((follow ? "follow" : "--no-follow"));
    TempDir dir;
    std::vector<std::string> args{"record", "--mode", "cct"};
    if (!follow) args.push_back("--no-follow");
    args.insert(args.end(), {"--", HCCT_CLI_SPAWN_ENV});
    Result r = hcct_cmd(args, runtime, dir.path());
    CHECK(r.status == 0);
    CHECK(r.out == "children exited with 0 0\n");
    ProfileSet set = read_profiles(dir / "hcct.data");
    // The parent, the posix_spawn child and the execve child; without following, the fork child
    // (which inherited the environment) writes the image it forked from until its execve.
    CHECK(set.processes.size() == (follow ? 3u : 2u));
    size_t children = 0;
    for (const Process &p : set.processes)
      for (const ThreadProfile &t : p.threads)
        if (t.meta.cmdline.size() == 2 && t.meta.cmdline[1] == "child") ++children;
    CHECK(children == (follow ? 2u : 0u));
  }
}
#endif

#ifdef HCCT_CLI_HINT_STATIC
// When nothing was recorded, record says what is actually known about why.
TEST_CASE("record: when nothing was recorded, the true reason is given", "[cli][record][hints]") {
  TempDir dir;
  const Env runtime = {{"HCCT_RUNTIME", HCCT_RUNTIME_SO}, {"LD_PRELOAD", ""}};
  auto no_profile = [&](const std::string &program) {
    Result r = hcct_cmd({"record", "--", program}, runtime, dir.path());
    CHECK_THAT(r.err, Catch::Contains("no profile was written"));
    CHECK_THAT(r.err, !Catch::Contains("is the program instrumented?"));
    return r;
  };
  SECTION("not instrumented") {
    Result r = no_profile("/bin/true");
    CHECK(r.status == 0);
    CHECK_THAT(r.err, Catch::Contains("/bin/true is not instrumented"));
  }
  SECTION("not instrumented, found in PATH") {
    Result r = no_profile("true");
    CHECK_THAT(r.err, Catch::Contains("true is not instrumented"));
  }
  SECTION("statically linked: LD_PRELOAD cannot work") {
    Result r = no_profile(HCCT_CLI_HINT_STATIC);
    CHECK(r.status == 0);
    CHECK(r.out == "135\n");
    CHECK_THAT(r.err, Catch::Contains("is statically linked"));
  }
  SECTION("its own hooks take the calls") {
    Result r = no_profile(HCCT_CLI_HINT_OWN_HOOKS);
    CHECK(r.status == 0);
    CHECK(r.out == "135\n");
    CHECK_THAT(r.err, Catch::Contains("defines __cyg_profile_func_enter itself"));
  }
  SECTION("instrumented, but killed by abort before the runtime could write") {
    Result r = no_profile(HCCT_CLI_HINT_ABORT);
    CHECK(r.status == 128 + SIGABRT);
    CHECK(r.out == "135\n");
    CHECK_THAT(r.err, Catch::Contains("was killed by signal 6 (Aborted) before the runtime could write"));
    CHECK_THAT(r.err, !Catch::Contains("not instrumented"));
  }
}

// Its own test case: it needs root and a file system without nosuid, and is SKIPPED without them.
TEST_CASE("record: a set-user-ID program of another user: the loader ignores LD_PRELOAD", "[cli][record][hints]") {
  struct statvfs mount {};
  if (geteuid() != 0 || statvfs(fs::temp_directory_path().c_str(), &mount) != 0 || (mount.f_flag & ST_NOSUID))
    hcct::test::skip_test("needs root and a file system without nosuid, to make a set-user-ID file of another user");
  TempDir dir;
  const Env runtime = {{"HCCT_RUNTIME", HCCT_RUNTIME_SO}, {"LD_PRELOAD", ""}};
  const fs::path prog = dir / "setuid_work";
  fs::copy_file(HCCT_E2E_WORK, prog);
  REQUIRE(chown(prog.c_str(), 65534, 65534) == 0);  // nobody
  REQUIRE(chmod(prog.c_str(), 04755) == 0);
  Result r = hcct_cmd({"record", "--", prog.string()}, runtime, dir.path());
  CHECK(r.status == 0);
  CHECK_THAT(r.err, Catch::Contains("no profile was written"));
  CHECK_THAT(r.err, !Catch::Contains("is the program instrumented?"));
  CHECK_THAT(r.err, Catch::Contains("is set-user-ID: the loader ignores LD_PRELOAD"));
}
#endif

// docs/INSTALL.md, "How hcct record finds the runtime": an installed hcct (here a copy, which is
// not the build tree's file) takes the runtime of its own prefix, and never falls back to the build
// tree it was built in.
TEST_CASE("record: an installed hcct preloads the runtime beside it, never the build tree's", "[cli][record][install]") {
  TempDir dir;
  const fs::path installed = dir / "prefix/bin/hcct";
  fs::create_directories(dir / "prefix/bin");
  fs::create_directories(dir / "prefix/lib");
  fs::copy_file(hcct_exe(), installed);
  const Env no_override = {{"HCCT_RUNTIME", ""}, {"LD_PRELOAD", ""}};
  auto record_preload = [&](const fs::path &hcct) {
    return run({hcct.string(), "record", "--mode", "off", "--", "/bin/sh", "-c", "printf '%s' \"$LD_PRELOAD\""},
               no_override, dir.path());
  };
  SECTION("<prefix>/bin/../lib/libhcct.so") {
    fs::copy_file(FAKE_RUNTIME, dir / "prefix/lib/libhcct.so");
    Result r = record_preload(installed);
    INFO(r.err);
    CHECK(r.status == 0);
    CHECK(r.out == fs::canonical(dir / "prefix/lib/libhcct.so").string());
  }
  SECTION("none there: one error naming where it looked, and no fallback to the build tree") {
    Result r = record_preload(installed);
    CHECK(r.status == 1);
    CHECK(r.out.empty());
    CHECK(r.err == "hcct: cannot find the runtime libhcct.so (looked at " + (dir / "prefix/lib/libhcct.so").string() +
                       "); set HCCT_RUNTIME=/path/to/libhcct.so\n");
  }
#ifdef HCCT_RUNTIME_SO
  SECTION("the build tree's own hcct still uses the build tree's runtime") {
    Result r = record_preload(HCCT_EXE);
    INFO(r.err);
    CHECK(r.status == 0);
    CHECK(r.out == fs::canonical(HCCT_RUNTIME_SO).string());
  }
#endif
}
