#include "harness.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <unordered_map>

extern char **environ;

namespace e2e {

namespace fs = std::filesystem;
namespace ha = hcct::analysis;

fs::path fresh_dir(const std::string &name) {
  static std::atomic<int> counter{0};
  fs::path dir = fs::temp_directory_path() /
                 ("hcct-e2e-" + std::to_string(getpid()) + "-" + std::to_string(counter++) + "-" + name);
  fs::remove_all(dir);
  return dir;
}

static std::string slurp(const fs::path &p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

Result run(const std::vector<std::string> &argv, const std::vector<std::string> &env) {
  fs::path tmp = fresh_dir("io");
  fs::create_directories(tmp);
  std::vector<std::string> envs;
  for (char **e = environ; *e; ++e) {
    std::string entry = *e;
    bool overridden = false;
    for (auto &x : env)
      if (entry.substr(0, entry.find('=') + 1) == x.substr(0, x.find('=') + 1)) overridden = true;
    if (!overridden && entry.rfind("LD_PRELOAD=", 0) != 0 && entry.rfind("HCCT_OPTIONS=", 0) != 0)
      envs.push_back(entry);
  }
  for (auto &x : env) envs.push_back(x);
  std::vector<char *> cargv, cenv;
  for (auto &a : argv) cargv.push_back(const_cast<char *>(a.c_str()));
  cargv.push_back(nullptr);
  for (auto &e : envs) cenv.push_back(const_cast<char *>(e.c_str()));
  cenv.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, (tmp / "out").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&actions, 2, (tmp / "err").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_t pid;
  int rc = posix_spawn(&pid, cargv[0], &actions, nullptr, cargv.data(), cenv.data());
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) throw std::runtime_error("cannot run " + argv[0]);
  int status = 0;
  rusage usage{};
  wait4(pid, &status, 0, &usage);
  Result r;
  r.max_rss_kb = usage.ru_maxrss;
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = slurp(tmp / "out");
  r.err = slurp(tmp / "err");
  fs::remove_all(tmp);
  return r;
}

Profiled run_profiled(const std::vector<std::string> &argv, const std::string &options) {
  Profiled p;
  p.dir = fresh_dir(fs::path(argv[0]).filename().string());
  std::string opts = options.empty() ? "" : options + ":";
  p.result = run(argv, {std::string("LD_PRELOAD=") + HCCT_RUNTIME,
                        "HCCT_OPTIONS=" + opts + "out=" + p.dir.string()});
  return p;
}

std::string short_name(const std::string &demangled) {
  // Drop the parameter list (and any cv-qualifier after it), keep template arguments.
  int depth = 0;
  for (size_t i = 0; i < demangled.size(); ++i) {
    char c = demangled[i];
    if (c == '<') ++depth;
    if (c == '>') --depth;
    if (c == '(' && depth == 0 && i > 0) {
      std::string name = demangled.substr(0, i);
      // "double scaled<double>" -> "scaled<double>": a template's return type comes first.
      size_t space = name.rfind(' ');
      if (space != std::string::npos && name.find('<') != std::string::npos && space < name.find('<'))
        name = name.substr(space + 1);
      return name;
    }
  }
  return demangled;
}

// The short name of every node's routine (index 0, the root, has none): each routine is symbolized
// once, not once per context it appears in.
static std::vector<const std::string *> node_names(const ha::ThreadProfile &profile,
                                                   std::unordered_map<uint64_t, std::string> &by_address) {
  ha::Symbolizer symbols(profile.modules);
  std::vector<const std::string *> names(profile.nodes.size(), nullptr);
  for (size_t i = 1; i < profile.nodes.size(); ++i) {
    uint64_t routine = profile.nodes[i].routine;
    auto [it, fresh] = by_address.try_emplace(routine);
    if (fresh) it->second = short_name(symbols.routine(routine).function);
    names[i] = &it->second;
  }
  return names;
}

std::map<NamePath, uint64_t> named_counts(const ha::ThreadProfile &profile) {
  return projected_counts(profile, {});
}

std::map<NamePath, uint64_t> projected_counts(const ha::ThreadProfile &profile,
                                              const std::set<std::string> &keep) {
  std::unordered_map<uint64_t, std::string> by_address;
  const auto names = node_names(profile, by_address);
  std::vector<NamePath> paths(profile.nodes.size());
  std::map<NamePath, uint64_t> out;
  for (uint32_t i = 1; i < profile.nodes.size(); ++i) {
    const ha::Node &n = profile.nodes[i];
    paths[i] = paths[n.parent];
    // A frame spliced out by the projection shares its parent's context and contributes nothing.
    if (!keep.empty() && !keep.count(*names[i])) continue;
    paths[i].push_back(*names[i]);
    // Zero counts are contexts on a calling path that never completed an entry (after fork).
    if (!profile.countable(i) || n.count == 0) continue;
    out[paths[i]] += n.count;
  }
  return out;
}

std::map<NamePath, uint64_t> named_samples(const ha::ThreadProfile &profile) {
  std::unordered_map<uint64_t, std::string> by_address;
  const auto names = node_names(profile, by_address);
  std::vector<NamePath> paths(profile.nodes.size());
  std::map<NamePath, uint64_t> out;
  if (profile.self_samples(ha::kRoot)) out[{}] += profile.self_samples(ha::kRoot);
  for (uint32_t i = 1; i < profile.nodes.size(); ++i) {
    paths[i] = paths[profile.nodes[i].parent];
    paths[i].push_back(*names[i]);
    if (uint64_t n = profile.self_samples(i)) out[paths[i]] += n;
  }
  return out;
}

std::string frame_run(const std::string &name, uint64_t run) {
  return run > 1 ? name + "*" + std::to_string(run) : name;
}

std::map<std::string, uint64_t> run_length_counts(const ha::ThreadProfile &profile) {
  std::unordered_map<uint64_t, std::string> by_address;
  const auto names = node_names(profile, by_address);
  // A node's path is `head` (the encoded frames before its last run) then `run` frames of `last`:
  // within a recursion only the run grows, so what is copied per node stays short.
  struct Encoded {
    std::string head;
    const std::string *last = nullptr;
    uint64_t run = 0;
    std::string text() const {
      if (!last) return head;
      return head.empty() ? frame_run(*last, run) : head + ">" + frame_run(*last, run);
    }
  };
  std::vector<Encoded> paths(profile.nodes.size());
  std::map<std::string, uint64_t> out;
  for (uint32_t i = 1; i < profile.nodes.size(); ++i) {
    const ha::Node &n = profile.nodes[i];
    const Encoded &parent = paths[n.parent];
    Encoded &e = paths[i];
    if (parent.last && *parent.last == *names[i]) {
      e = {parent.head, parent.last, parent.run + 1};
    } else {
      e = {parent.text(), names[i], 1};
    }
    // Zero counts are contexts on a calling path that never completed an entry (after fork).
    if (profile.countable(i) && n.count != 0) out[e.text()] += n.count;
  }
  return out;
}

}  // namespace e2e
