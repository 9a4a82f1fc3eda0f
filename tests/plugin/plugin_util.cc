#include "plugin_util.h"

#include "support/command.h"

#include <catch2/catch.hpp>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <sys/wait.h>

namespace plugintest {

RunResult run(const std::string &cmd) {
  // LC_ALL=C: gcc quotes with plain apostrophes, which the tests match.
  return hcct::test::run_status("export LC_ALL=C; exec 2>&1; " + cmd);
}

std::string sh_quote(const std::string &s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'')
      out += "'\\''";
    else
      out += c;
  }
  return out + "'";
}

std::string work_dir(const std::string &name) {
  std::string clean;
  for (char c : name)
    clean += isalnum(static_cast<unsigned char>(c)) ? c : '_';
  std::filesystem::path dir = std::filesystem::path(HCCT_PLUGIN_WORK) / clean;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

std::string read_file(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write_file(const std::string &path, const std::string &text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  REQUIRE(out);
  out << text;
  out.close();
  REQUIRE(out);
}

std::vector<std::string> split_lines(const std::string &text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line))
    lines.push_back(line);
  return lines;
}

std::string plugin_flags_as_given(const std::vector<std::string> &args) {
  std::string flags = "-fplugin=" + sh_quote(HCCT_PLUGIN);
  for (const std::string &a : args)
    flags += " " + sh_quote("-fplugin-arg-hcct_plugin-" + a);
  return flags;
}

std::string plugin_flags(const std::vector<std::string> &args) {
  for (const std::string &a : args)
    if (a == "stage" || a.rfind("stage=", 0) == 0) return plugin_flags_as_given(args);
  std::vector<std::string> early = args;
  early.push_back("stage=early");
  return plugin_flags_as_given(early);
}

std::string example(const std::string &file) { return std::string(HCCT_PLUGIN_EXAMPLES) + "/" + file; }

std::vector<ListEntry> read_list(const std::string &path) {
  std::vector<ListEntry> entries;
  for (const std::string &line : split_lines(read_file(path))) {
    INFO("list line: " << line);
    size_t t1 = line.find('\t');
    REQUIRE(t1 != std::string::npos);
    size_t t2 = line.find('\t', t1 + 1);
    REQUIRE(t2 != std::string::npos);
    REQUIRE(line.find('\t', t2 + 1) == std::string::npos);
    ListEntry e;
    e.name = line.substr(0, t1);
    std::string where = line.substr(t1 + 1, t2 - t1 - 1);
    size_t colon = where.rfind(':');
    REQUIRE(colon != std::string::npos);
    e.file = where.substr(0, colon);
    e.line = std::atoi(where.c_str() + colon + 1);
    e.symbol = line.substr(t2 + 1);
    REQUIRE(!e.name.empty());
    REQUIRE(!e.symbol.empty());
    REQUIRE(e.line > 0);
    entries.push_back(e);
  }
  return entries;
}

std::set<std::string> list_names(const std::vector<ListEntry> &entries) {
  std::set<std::string> names;
  for (const ListEntry &e : entries)
    names.insert(e.name);
  return names;
}

std::set<std::string> selected_names(const std::string &dir, const std::vector<std::string> &args,
                                     const std::string &opt) {
  static int seq = 0;
  std::string list = dir + "/list" + std::to_string(++seq) + ".txt";
  std::vector<std::string> all = args;
  all.push_back("list=" + list);
  RunResult r = run(std::string(HCCT_CXX) + " " + opt + " -c " + sh_quote(example("selection.cc")) +
                    " -o " + sh_quote(dir + "/selection.o") + " " + plugin_flags(all));
  INFO(r.output);
  REQUIRE(r.status == 0);
  return list_names(read_list(list));
}

Built build_examples(const std::string &name, const std::string &opt, const std::string &instrument) {
  Built b;
  b.dir = work_dir(name);
  b.lib = b.dir + "/libcct_lib.so";
  b.c_exe = b.dir + "/cct_c";
  b.cxx_exe = b.dir + "/cct_cxx";
  // -fchecking makes gcc verify its IL after every pass.
  std::string common = opt + " -g -fchecking -Wall -Werror " + instrument;
  std::string link = " -I" + sh_quote(HCCT_PLUGIN_EXAMPLES) + " -L" + sh_quote(b.dir) +
                     " -lcct_lib -Wl,-rpath," + sh_quote(b.dir);
  for (const std::string &cmd :
       {std::string(HCCT_CC) + " " + common + " -fPIC -shared " + sh_quote(example("cct_lib.c")) +
            " -o " + sh_quote(b.lib),
        std::string(HCCT_CC) + " " + common + " " + sh_quote(example("cct_main.c")) + link + " -o " +
            sh_quote(b.c_exe),
        std::string(HCCT_CXX) + " " + common + " " + sh_quote(example("cct_main.cc")) + link +
            " -o " + sh_quote(b.cxx_exe)}) {
    RunResult r = run(cmd);
    INFO(cmd << "\n" << r.output);
    REQUIRE(r.status == 0);
    CHECK(r.output.empty());  // no diagnostics, -fchecking ones included
  }
  return b;
}

namespace {

// Function symbols of a module by their link-time address: from the symbol table, else (a stripped
// system library such as libstdc++.so.6) from the dynamic symbol table, without version suffixes.
std::map<unsigned long, std::string> module_symbols(const std::string &path) {
  std::map<unsigned long, std::string> syms;
  for (const char *table : {"", "-D "}) {
    RunResult r = run(std::string("nm -P --defined-only ") + table + sh_quote(path));
    REQUIRE(r.status == 0);
    for (const std::string &line : split_lines(r.output)) {
      std::istringstream in(line);
      std::string name, type, value;
      if (!(in >> name >> type >> value))
        continue;
      if (type != "T" && type != "t" && type != "W" && type != "w" && type != "i")
        continue;
      unsigned long addr = std::stoul(value, nullptr, 16);
      // Prefer a real name over local aliases gcc may add (e.g. .cold parts never start functions).
      syms.emplace(addr, name.substr(0, name.find('@')));
    }
  }
  return syms;
}

} // namespace

Trace read_trace(const std::string &path) {
  Trace t;
  std::map<std::string, std::map<unsigned long, std::string>> modules;
  std::string text = read_file(path);
  REQUIRE(!text.empty());
  for (const std::string &line : split_lines(text)) {
    std::istringstream in(line);
    std::string key;
    in >> key;
    if (key != "fn") {
      unsigned long v = 0;
      in >> v;
      t.totals[key] = v;
      continue;
    }
    std::string module, offset;
    unsigned long count = 0;
    in >> module >> offset >> count;
    REQUIRE(module != "?");
    if (!modules.count(module))
      modules[module] = module_symbols(module);
    const auto &syms = modules[module];
    auto it = syms.find(std::stoul(offset, nullptr, 16));
    INFO("function at " << module << "+" << offset);
    REQUIRE(it != syms.end());
    t.calls[it->second] += count;
  }
  return t;
}

} // namespace plugintest
