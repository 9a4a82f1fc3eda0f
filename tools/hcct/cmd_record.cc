// hcct record: run a program with the runtime preloaded and the options set, then say where the
// profile went.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <map>
#include <set>

#include "common.h"
#include "hcct/analysis/reader.h"

#ifndef HCCT_RUNTIME_BUILD_PATH
#define HCCT_RUNTIME_BUILD_PATH ""
#endif

namespace hcct::cli {
namespace {

namespace fs = std::filesystem;

struct RecordOptions {
  std::string mode, key, options;
  std::optional<double> epsilon;
  std::string out = "hcct.data";
  std::vector<std::string> command;
};

// HCCT_RUNTIME, then the build tree's runtime, then ../lib/libhcct.so next to this executable
// (an installed layout).
std::string find_runtime() {
  if (const char *env = std::getenv("HCCT_RUNTIME"); env && *env) {
    std::error_code ec;
    if (!fs::is_regular_file(env, ec)) throw UserError(std::string("HCCT_RUNTIME=") + env + ": no such file");
    return fs::absolute(env).string();
  }
  std::vector<fs::path> tried;
  if (*HCCT_RUNTIME_BUILD_PATH) tried.push_back(HCCT_RUNTIME_BUILD_PATH);
  std::error_code ec;
  fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) tried.push_back(self.parent_path() / ".." / "lib" / "libhcct.so");
  for (const fs::path &p : tried) {
    if (fs::is_regular_file(p, ec)) return fs::weakly_canonical(p, ec).string();
  }
  std::string where;
  for (const fs::path &p : tried) where += " " + p.string();
  throw UserError("cannot find the runtime libhcct.so (looked at" + where + "); set HCCT_RUNTIME=/path/to/libhcct.so");
}

// Profile files and their modification times, to tell afterwards which ones this run wrote.
std::map<std::string, fs::file_time_type> snapshot(const fs::path &dir) {
  std::map<std::string, fs::file_time_type> files;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::string name = it->path().filename().string();
    if (analysis::parse_profile_file_name(name)) files[name] = it->last_write_time(ec);
  }
  return files;
}

// Restores what the parent changed, then execs; failures travel to the parent through `err_fd`
// (close-on-exec, so a successful exec closes it with nothing written).
[[noreturn]] void exec_child(const std::vector<std::string> &command, int err_fd) {
  signal(SIGINT, SIG_DFL);
  signal(SIGQUIT, SIG_DFL);
  std::vector<char *> argv;
  for (const std::string &a : command) argv.push_back(const_cast<char *>(a.c_str()));
  argv.push_back(nullptr);
  execvp(argv[0], argv.data());
  int err = errno;
  ssize_t ignored = write(err_fd, &err, sizeof err);
  (void)ignored;
  _exit(127);
}

int run_record(const RecordOptions &o) {
  if (o.command.empty()) throw UserError("record: no program given (hcct record [options] -- PROG ARGS...)");
  std::string runtime = find_runtime();

  fs::path out = fs::absolute(o.out);
  // The runtime's option syntax separates key=value pairs with ':'.
  if (out.string().find(':') != std::string::npos)
    throw UserError("record: the output directory must not contain ':' (" + out.string() + ")");
  std::string options;
  auto add = [&](const std::string &kv) { options += (options.empty() ? "" : ":") + kv; };
  if (!o.mode.empty()) add("mode=" + o.mode);
  if (o.epsilon) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.17g", *o.epsilon);
    add(std::string("epsilon=") + buf);
  }
  if (!o.key.empty()) add("key=" + o.key);
  add("out=" + out.string());
  if (!o.options.empty()) add(o.options);

  std::string preload = runtime;
  if (const char *old = std::getenv("LD_PRELOAD"); old && *old) preload = std::string(old) + ":" + runtime;

  auto before = snapshot(out);
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) throw UserError(std::string("record: pipe: ") + std::strerror(errno));

  // Like system(): while the child runs, ^C and ^\ are for it, not for us, so that we still report
  // the profile and pass its status on.
  struct sigaction ignore {}, old_int {}, old_quit {};
  ignore.sa_handler = SIG_IGN;
  sigaction(SIGINT, &ignore, &old_int);
  sigaction(SIGQUIT, &ignore, &old_quit);

  // setenv before fork: the child must not allocate between fork and exec in a threaded parent;
  // this process is single-threaded, but keeping the child minimal costs nothing.
  setenv("LD_PRELOAD", preload.c_str(), 1);
  setenv("HCCT_OPTIONS", options.c_str(), 1);
  pid_t pid = fork();
  if (pid < 0) throw UserError(std::string("record: fork: ") + std::strerror(errno));
  if (pid == 0) {
    close(pipe_fds[0]);
    exec_child(o.command, pipe_fds[1]);
  }
  close(pipe_fds[1]);
  int exec_errno = 0;
  ssize_t got;
  do {
    got = read(pipe_fds[0], &exec_errno, sizeof exec_errno);
  } while (got < 0 && errno == EINTR);
  close(pipe_fds[0]);

  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) throw UserError(std::string("record: waitpid: ") + std::strerror(errno));
  }
  sigaction(SIGINT, &old_int, nullptr);
  sigaction(SIGQUIT, &old_quit, nullptr);

  if (got == sizeof exec_errno)
    throw UserError("record: cannot run '" + o.command[0] + "': " + std::strerror(exec_errno));

  // What this run wrote: files that are new or newer than before.
  auto after = snapshot(out);
  std::set<uint64_t> pids;
  size_t threads = 0;
  std::vector<std::filesystem::path> written;
  for (const auto &[name, mtime] : after) {
    auto it = before.find(name);
    if (it != before.end() && it->second == mtime) continue;
    pids.insert(analysis::parse_profile_file_name(name)->pid);
    ++threads;
    written.push_back(out / name);
  }
  if (threads) {
    std::cerr << "hcct: recorded " << threads << (threads == 1 ? " thread" : " threads") << " of " << pids.size()
              << (pids.size() == 1 ? " process" : " processes") << " in " << short_path(out.string())
              << "/ (see: hcct report " << short_path(out.string()) << ")\n";
    warn_recorded_losses(written);
  } else if (o.mode == "off") {
    std::cerr << "hcct: mode off: nothing recorded\n";
  } else {
    std::cerr << "hcct: no profile was written to " << short_path(out.string())
              << "/; is the program instrumented (-finstrument-functions or the hcct GCC plugin)?\n";
  }

  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) {
    std::cerr << "hcct: " << o.command[0] << " was killed by signal " << WTERMSIG(status) << " ("
              << strsignal(WTERMSIG(status)) << ")\n";
    return 128 + WTERMSIG(status);
  }
  return 1;
}

}  // namespace

void add_record_command(CLI::App &app, Action &action) {
  auto o = std::make_shared<RecordOptions>();
  CLI::App *sub = app.add_subcommand("record", "Run a program and record its calling-context profile");
  sub->add_option("--mode", o->mode,
                  "off: no profiling; empty: events only (overhead baseline); cct: exact calling context tree;\n"
                  "hcct: bounded-memory Hot CCT with Space-Saving (default of the runtime)")
      ->check(CLI::IsMember({"off", "empty", "cct", "hcct"}));
  sub->add_option("--epsilon", o->epsilon,
                  "hcct mode: error bound; counters = ceil(1/epsilon), counts overestimate by at most epsilon*N")
      ->check(CLI::Validator(
          [](std::string &v) -> std::string {
            char *end = nullptr;
            double d = std::strtod(v.c_str(), &end);
            return !v.empty() && *end == '\0' && d > 0 && d < 1 ? "" : "must be a number in (0, 1)";
          },
          "(0,1)"));
  sub->add_option("--key", o->key, "site: a context is a chain of (function, call site); routine: functions only")
      ->check(CLI::IsMember({"site", "routine"}));
  sub->add_option("-o,--out", o->out, "profile directory")->capture_default_str();
  sub->add_option("--options", o->options, "more runtime options, appended verbatim (key=value:key=value)");
  sub->add_option("command", o->command, "PROG and its arguments (put -- before PROG if they start with -)")
      ->required();
  // Everything from PROG on is PROG's, even arguments that look like our options.
  sub->positionals_at_end();
  sub->footer(std::string("\n") +
      "Runs PROG with the hcct runtime (libhcct.so) preloaded and HCCT_OPTIONS set from the options below,\n"
      "waits for it and exits with its status (128+N if killed by signal N). Each thread of each process\n"
      "writes DIR/<pid>.<thread>.hcct when it ends. PROG must be instrumented (-finstrument-functions or the\n"
      "hcct GCC plugin). The runtime is HCCT_RUNTIME if set, else the build tree's, else ../lib/libhcct.so\n"
      "next to hcct. LD_PRELOAD keeps any previous value; HCCT_OPTIONS is replaced." + "\n" + R"(
Examples:
  hcct record -- ./prog input.txt                  hcct mode, runtime's default epsilon
  hcct record --mode cct -o exact.data -- ./prog    exact CCT
  hcct record --epsilon 1e-5 --key routine -- make -j4
  hcct record --options 'foo=1' -- ./server --port 8080
)");
  sub->callback([o, &action] { action = [o] { return run_record(*o); }; });
}

}  // namespace hcct::cli
