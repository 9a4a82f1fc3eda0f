// hcct record: run a program with the runtime preloaded and the options set, then say where the
// profile went.
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string_view>

#include "common.h"
#include "record_hints.h"
#include "hcct/analysis/reader.h"
#include "hcct/format.h"
#include "hcct/runtime_options.h"

// Where the runtime is, compiled in by tools/hcct/CMakeLists.txt: relative to the directory of the
// installed hcct (bin/ -> lib/), and in the build tree this hcct was built in.
#ifndef HCCT_RUNTIME_INSTALL_RELPATH
#define HCCT_RUNTIME_INSTALL_RELPATH "../lib/libhcct.so"
#endif
#ifndef HCCT_RUNTIME_BUILD_PATH
#define HCCT_RUNTIME_BUILD_PATH ""
#endif
#ifndef HCCT_BUILD_TREE_TOOL
#define HCCT_BUILD_TREE_TOOL ""
#endif

namespace hcct::cli {
namespace {

namespace fs = std::filesystem;

struct RecordOptions {
  std::string mode, key, options;
  std::optional<double> epsilon;
  std::string out = "hcct.data";
  bool append = false;
  bool no_follow = false;
  std::vector<std::string> command;
};

// $HCCT_RUNTIME; else the runtime installed beside this executable (<bin>/../lib/libhcct.so, from
// /proc/self/exe, so an installed or copied prefix works wherever it is); else, only for the hcct
// of a build tree, that tree's runtime. An installed hcct never reaches into the build tree it was
// built in: that tree may be gone, or hold a newer runtime than the installed tool's.
std::string find_runtime() {
  if (const char *env = std::getenv("HCCT_RUNTIME"); env && *env) {
    std::error_code ec;
    if (!fs::is_regular_file(env, ec)) throw UserError(std::string("HCCT_RUNTIME=") + env + ": no such file");
    return fs::absolute(env).string();
  }
  std::vector<fs::path> tried;
  std::error_code ec;
  fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    tried.push_back(self.parent_path() / HCCT_RUNTIME_INSTALL_RELPATH);
    std::error_code same_ec;
    if (*HCCT_BUILD_TREE_TOOL && *HCCT_RUNTIME_BUILD_PATH && fs::equivalent(self, HCCT_BUILD_TREE_TOOL, same_ec))
      tried.push_back(HCCT_RUNTIME_BUILD_PATH);
  }
  for (const fs::path &p : tried) {
    if (fs::is_regular_file(p, ec)) return fs::weakly_canonical(p, ec).string();
  }
  std::string where;
  for (const fs::path &p : tried) where += " " + p.lexically_normal().string();
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

// ---- Signals: `hcct record` stands between the program and whoever signals it, like a shell
// running a foreground job.

// The pid the forwarding handler signals; 0 while there is no child that may be signalled (before
// the fork, and once the child has died: its pid could then be reused).
std::atomic<pid_t> g_forward_to{0};
static_assert(std::atomic<pid_t>::is_always_lock_free, "read from a signal handler");

void forward_signal(int sig, siginfo_t *info, void *) {
  // The terminal sends ^C, ^\ and its hangup to the whole foreground process group, the program
  // included: passing such a signal on would deliver it twice.
  if (info && info->si_code == SI_KERNEL) return;
  pid_t child = g_forward_to.load();
  if (child <= 0) return;
  int saved_errno = errno;
  if (info && info->si_code == SI_QUEUE) sigqueue(child, sig, info->si_value);
  else kill(child, sig);
  errno = saved_errno;
}

// The signals that end or notify a process and that someone may send to the command they started:
// not the synchronous ones (SIGSEGV, SIGPIPE, ...), not job control (SIGTSTP, SIGCONT, ...).
std::vector<int> forwarded_signals() {
  std::vector<int> sigs = {SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGUSR1, SIGUSR2, SIGALRM, SIGWINCH};
  for (int s = SIGRTMIN; s <= SIGRTMAX; ++s) sigs.push_back(s);
  return sigs;
}

// While alive, passes the forwarded signals on to the child named by g_forward_to. A signal that
// was ignored when hcct started (nohup, a background job of a non-interactive shell) stays
// ignored, so that the program inherits SIG_IGN through exec as it would without hcct.
class SignalForwarder {
 public:
  SignalForwarder() {
    sigemptyset(&forwarded_);
    for (int sig : forwarded_signals()) {
      struct sigaction old {};
      if (sigaction(sig, nullptr, &old) != 0 || old.sa_handler == SIG_IGN) continue;
      sigaddset(&forwarded_, sig);
      saved_.push_back({sig, old});
    }
    // Blocked until the child's pid is known: a signal before that is held, not lost.
    sigprocmask(SIG_BLOCK, &forwarded_, &old_mask_);
    struct sigaction forward {};
    forward.sa_sigaction = forward_signal;
    forward.sa_flags = SA_SIGINFO | SA_RESTART;
    forward.sa_mask = forwarded_;
    for (const Saved &s : saved_) sigaction(s.sig, &forward, nullptr);
  }
  ~SignalForwarder() {
    for (const Saved &s : saved_) sigaction(s.sig, &s.action, nullptr);
  }
  SignalForwarder(const SignalForwarder &) = delete;
  SignalForwarder &operator=(const SignalForwarder &) = delete;

  // In the parent after fork: forward to `child` from now on.
  void start(pid_t child) {
    g_forward_to.store(child);
    sigprocmask(SIG_SETMASK, &old_mask_, nullptr);
  }
  // Once the child has died (and before it is reaped): stop forwarding. Signals that arrive later
  // stay blocked; this process is about to exit with the child's status.
  void stop() {
    sigprocmask(SIG_BLOCK, &forwarded_, nullptr);
    g_forward_to.store(0);
  }
  // In the child between fork and exec (async-signal-safe calls only): the dispositions and mask
  // hcct started with.
  void restore_in_child() const {
    for (const Saved &s : saved_) sigaction(s.sig, &s.action, nullptr);
    sigprocmask(SIG_SETMASK, &old_mask_, nullptr);
  }

 private:
  struct Saved {
    int sig;
    struct sigaction action;
  };
  std::vector<Saved> saved_;
  sigset_t forwarded_, old_mask_;
};

// Ends this process by `sig`, so that whoever started `hcct record` sees the status it would see
// without hcct (a shell shows 128+N; one that ran the command in a loop stops on SIGINT).
[[noreturn]] void die_by_signal(int sig) {
  std::cout.flush();
  std::cerr.flush();
  // The program may have dumped core; hcct must not add a core of its own.
  prctl(PR_SET_DUMPABLE, 0);
  struct rlimit no_core {};
  setrlimit(RLIMIT_CORE, &no_core);
  signal(sig, SIG_DFL);
  sigset_t only;
  sigemptyset(&only);
  sigaddset(&only, sig);
  sigprocmask(SIG_UNBLOCK, &only, nullptr);
  raise(sig);
  _exit(128 + sig);  // a signal whose default action does not terminate
}

// Restores what the parent changed, then execs; failures travel to the parent through `err_fd`
// (close-on-exec, so a successful exec closes it with nothing written).
[[noreturn]] void exec_child(const std::vector<std::string> &command, const SignalForwarder &signals,
                             int err_fd) {
  signals.restore_in_child();
  std::vector<char *> argv;
  for (const std::string &a : command) argv.push_back(const_cast<char *>(a.c_str()));
  argv.push_back(nullptr);
  execvp(argv[0], argv.data());
  int err = errno;
  ssize_t ignored = write(err_fd, &err, sizeof err);
  (void)ignored;
  _exit(127);
}

// ---- The output directory.

// `.<pid>.<seq>.hcct.tmp`: a dump being written (libhcct/dump.cc, DumpFile::commit); its pid.
std::optional<pid_t> dump_temporary_pid(const std::string &name) {
  // `.<pid>.<seq>.hcct.<tid>.tmp` (the writer's tid; older runtimes wrote `.<pid>.<seq>.hcct.tmp`).
  constexpr std::string_view kTmpSuffix = ".tmp", kDumpSuffix = format::kFileSuffix;
  if (name.size() < 2 || name[0] != '.' || !name.ends_with(kTmpSuffix)) return std::nullopt;
  size_t dump_end = name.find(kDumpSuffix);
  if (dump_end == std::string::npos) return std::nullopt;
  dump_end += kDumpSuffix.size();
  std::string_view writer = std::string_view(name).substr(dump_end, name.size() - kTmpSuffix.size() - dump_end);
  if (!writer.empty() && (writer[0] != '.' || writer.size() == 1 ||
                          !std::all_of(writer.begin() + 1, writer.end(), [](char c) { return c >= '0' && c <= '9'; })))
    return std::nullopt;
  auto parsed = analysis::parse_profile_file_name(std::string_view(name).substr(1, dump_end - 1));
  if (!parsed || parsed->pid == 0 || parsed->pid > uint64_t(std::numeric_limits<pid_t>::max())) return std::nullopt;
  return pid_t(parsed->pid);
}

bool process_is_dead(pid_t pid) { return kill(pid, 0) != 0 && errno == ESRCH; }

// The directories the runtime writes dumps into under `out`.
std::vector<fs::path> dump_directories(const fs::path &out) { return {out, out / "exact"}; }

// Removes the temporaries of dumps whose process is gone (killed while it wrote); a live process's
// temporary is never touched. Returns how many were removed.
size_t remove_stale_temporaries(const fs::path &out) {
  size_t removed = 0;
  for (const fs::path &dir : dump_directories(out)) {
    std::error_code ec;
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
      std::optional<pid_t> pid = dump_temporary_pid(it->path().filename().string());
      std::error_code rm_ec;
      if (pid && process_is_dead(*pid) && fs::remove(it->path(), rm_ec)) ++removed;
    }
  }
  return removed;
}

struct DirectorySurvey {
  size_t profiles = 0;   // <pid>.<seq>.hcct files, in DIR or DIR/exact
  std::string foreign;   // the first entry hcct did not write, if any
  pid_t writer = 0;      // a live process with a dump in progress, if any

  void add(const std::string &name, const std::string &shown_prefix) {
    if (analysis::parse_profile_file_name(name)) {
      ++profiles;
    } else if (std::optional<pid_t> pid = dump_temporary_pid(name)) {
      if (!process_is_dead(*pid)) writer = *pid;
    } else if (foreign.empty()) {
      foreign = shown_prefix + name;
    }
  }
};

// What a profile directory holds: hcct's own files (dumps, their temporaries, exact/ with the same)
// or also others.
DirectorySurvey survey(const fs::path &out) {
  DirectorySurvey s;
  std::error_code ec;
  for (fs::directory_iterator it(out, ec), end; !ec && it != end; it.increment(ec)) {
    std::string name = it->path().filename().string();
    if (name == "exact" && it->is_directory(ec)) {
      for (fs::directory_iterator sub(it->path(), ec); !ec && sub != end; sub.increment(ec))
        s.add(sub->path().filename().string(), "exact/");
    } else {
      s.add(name, "");
    }
  }
  return s;
}

// `inner` is `outer` or below it.
bool is_within(const fs::path &inner, const fs::path &outer) {
  std::error_code ec;
  fs::path rel = fs::relative(inner, outer, ec);
  return !ec && !rel.empty() && *rel.begin() != "..";
}

// Unless --append: a directory holding a previous profile is moved aside to DIR.old (replacing an
// older DIR.old), so that report and the exports never add two runs together by accident. A
// directory that also holds files hcct did not write is left alone, and the run refused.
void set_aside_previous_profile(const fs::path &out, bool append) {
  if (append) return;
  DirectorySurvey here = survey(out);
  if (here.profiles == 0) return;
  const std::string shown = short_path(out.string());
  if (!here.foreign.empty())
    throw UserError("record: " + shown + "/ holds a previous profile and other files (" + here.foreign +
                    "); choose another directory with -o, remove it, or add --append to add this run to it");
  std::error_code ec;
  if (is_within(fs::current_path(ec), out))
    throw UserError("record: " + shown + "/ holds a previous profile and is the working directory or above it; "
                    "choose another directory with -o, or add --append to add this run to it");
  if (here.writer)
    throw UserError("record: " + shown + "/ holds a previous profile that process " + std::to_string(here.writer) +
                    " is still writing; wait for it, choose another directory with -o, or add --append");
  fs::path old = out;
  old += ".old";
  if (fs::symlink_status(old, ec).type() != fs::file_type::not_found) {
    DirectorySurvey older = survey(old);
    if (!fs::is_directory(fs::symlink_status(old, ec)) || !older.foreign.empty())
      throw UserError("record: cannot move the previous profile aside: " + short_path(old.string()) +
                      " exists and is not an hcct profile directory; remove it, or add --append");
    fs::remove_all(old, ec);
    if (ec) throw UserError("record: cannot remove " + short_path(old.string()) + ": " + ec.message());
  }
  fs::rename(out, old, ec);
  if (ec)
    throw UserError("record: cannot move the previous profile " + shown + "/ to " + short_path(old.string()) +
                    "/: " + ec.message());
  std::cerr << "hcct: moved the previous profile " << shown << "/ to " << short_path(old.string())
            << "/ (--append adds runs to a profile instead)\n";
}

int run_record(const RecordOptions &o) {
  if (o.command.empty()) throw UserError("record: no program given (hcct record [options] -- PROG ARGS...)");
  std::string runtime = find_runtime();

  fs::path out = fs::absolute(o.out).lexically_normal();
  if (!out.has_filename() && out != out.root_path()) out = out.parent_path();  // "DIR/" names DIR
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
  // Children started with an environment of their own get the runtime back (docs/RUNTIME.md).
  add(o.no_follow ? "follow=0" : "follow=1");
  if (!o.options.empty()) add(o.options);

  std::string preload = runtime;
  if (const char *old = std::getenv("LD_PRELOAD"); old && *old) preload = std::string(old) + ":" + runtime;

  size_t stale = remove_stale_temporaries(out);
  set_aside_previous_profile(out, o.append);
  auto before = snapshot(out);
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) throw UserError(std::string("record: pipe: ") + std::strerror(errno));

  // setenv before fork: the child must not allocate between fork and exec in a threaded parent;
  // this process is single-threaded, but keeping the child minimal costs nothing.
  setenv("LD_PRELOAD", preload.c_str(), 1);
  setenv("HCCT_OPTIONS", options.c_str(), 1);
  SignalForwarder signals;
  pid_t pid = fork();
  if (pid < 0) throw UserError(std::string("record: fork: ") + std::strerror(errno));
  if (pid == 0) {
    close(pipe_fds[0]);
    exec_child(o.command, signals, pipe_fds[1]);
  }
  signals.start(pid);
  close(pipe_fds[1]);
  int exec_errno = 0;
  ssize_t got;
  do {
    got = read(pipe_fds[0], &exec_errno, sizeof exec_errno);
  } while (got < 0 && errno == EINTR);
  close(pipe_fds[0]);

  // Wait for the death without reaping: until the zombie is reaped its pid cannot be reused, so a
  // signal forwarded meanwhile cannot reach another process.
  siginfo_t death {};
  while (waitid(P_PID, id_t(pid), &death, WEXITED | WNOWAIT) != 0) {
    if (errno != EINTR) throw UserError(std::string("record: waitid: ") + std::strerror(errno));
  }
  signals.stop();
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) throw UserError(std::string("record: waitpid: ") + std::strerror(errno));
  }

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
  stale += remove_stale_temporaries(out);
  if (stale)
    std::cerr << "hcct: removed " << stale << " unfinished dump" << (stale == 1 ? "" : "s") << " of dead processes ("
              << short_path(out.string()) << "/.<pid>.<thread>.hcct.tmp)\n";
  if (threads) {
    std::cerr << "hcct: recorded " << threads << (threads == 1 ? " thread" : " threads") << " of " << pids.size()
              << (pids.size() == 1 ? " process" : " processes") << " in " << short_path(out.string())
              << "/ (see: hcct report " << short_path(out.string()) << ")\n";
    warn_recorded_losses(written);
  } else if (o.mode == "off") {
    std::cerr << "hcct: mode off: nothing recorded\n";
  } else {
    std::cerr << "hcct: no profile was written to " << short_path(out.string()) << "/; "
              << explain_missing_profile(o.command[0], status) << "\n";
  }

  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) {
    std::cerr << "hcct: " << o.command[0] << " was killed by signal " << WTERMSIG(status) << " ("
              << strsignal(WTERMSIG(status)) << ")\n";
    die_by_signal(WTERMSIG(status));
  }
  return 1;
}

}  // namespace


// The runtime's options for --options, from the table the runtime parses them with.
std::string runtime_options_help() {
  std::string text = "\nRuntime options (--options, or HCCT_OPTIONS without hcct record; README.md):\n";
  for (const runtime_options::Option *o : runtime_options::kAll) {
    std::string meaning = o->meaning;
    std::erase(meaning, '`');
    text += "  " + std::string(o->name) + "=" + (o->choice ? "{" + std::string(o->values) + "}" : "<" + std::string(o->values) + ">");
    if (*o->fallback) text += " (default " + std::string(o->fallback) + ")";
    text += "\n      " + meaning + "\n";
  }
  return text;
}

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
  sub->add_option("-o,--out", o->out,
                  "profile directory; a previous profile in it is moved to DIR.old first (see --append)")
      ->capture_default_str();
  sub->add_flag("--append", o->append, "add this run to the profile already in DIR instead of moving that aside");
  sub->add_flag("--no-follow", o->no_follow,
                "do not put the runtime back into children that exec*/posix_spawn* start with an environment of their own\n"
                "(children that inherit the environment are profiled either way)");
  sub->add_option("--options", o->options, "more runtime options, appended verbatim (key=value:key=value)");
  sub->add_option("command", o->command, "PROG and its arguments (put -- before PROG if they start with -)")
      ->required();
  // Everything from PROG on is PROG's, even arguments that look like our options.
  sub->positionals_at_end();
  sub->footer(std::string("\n") +
      "Runs PROG with the hcct runtime (libhcct.so) preloaded and HCCT_OPTIONS set from the options below,\n"
      "waits for it and exits with its status, or dies of the signal that killed it. Signals sent to hcct\n"
      "(SIGINT, SIGTERM, SIGHUP, SIGUSR1, ...) are passed on to PROG; ignored signals stay ignored.\n"
      "Each thread of each process writes DIR/<pid>.<thread>.hcct when it ends; a profile already in DIR\n"
      "is first moved to DIR.old (unless --append). PROG must be instrumented (-finstrument-functions or the\n"
      "hcct GCC plugin). The runtime is HCCT_RUNTIME if set, else ../lib/libhcct.so next to hcct (installed),\n"
      "else, for a build tree's hcct, that tree's. LD_PRELOAD keeps any previous value; HCCT_OPTIONS is replaced." + "\n" + R"(
Examples:
  hcct record -- ./prog input.txt                  hcct mode, runtime's default epsilon
  hcct record --mode cct -o exact.data -- ./prog    exact CCT
  hcct record --epsilon 1e-5 --key routine -- make -j4
  hcct record --options 'foo=1' -- ./server --port 8080
)" + runtime_options_help());
  sub->callback([o, &action] { action = [o] { return run_record(*o); }; });
}

}  // namespace hcct::cli
