// hcct dump: every node of every selected tree, in file (pre)order.
#include <cstdio>
#include <iostream>

#include "common.h"
#include "hcct/analysis/reader.h"

namespace hcct::cli {
namespace {

using analysis::ThreadProfile;

struct DumpOptions {
  InputOptions in;
};

std::string flag_letters(uint8_t flags) {
  std::string s;
  if (flags & format::kNodeMonitored) s += 'M';
  if (flags & format::kNodeOnPath) s += 'P';
  return s.empty() ? "-" : s;
}

// Depth of each streamed node from the current root path.
class Depths {
 public:
  uint32_t of(uint32_t i, const analysis::Node &n) {
    if (i) {
      while (path_.back() != n.parent) path_.pop_back();
    }
    path_.push_back(i);
    return uint32_t(path_.size() - 1);
  }

 private:
  std::vector<uint32_t> path_;
};

void dump_text(analysis::ProfileStream &t, Names &names) {
  const analysis::ThreadMeta &m = t.meta();
  ThreadProfile label_of;
  label_of.meta = m;
  Progress progress("reading " + t.source());
  std::cout << "# " << escape_text(t.source() + ": " + thread_label(label_of)) << "\n"
            << "# mode " << analysis::to_string(m.mode) << ", key " << analysis::to_string(m.key) << ", "
            << calls_summary(m) << ", " << with_commas(t.node_count()) << " nodes"
            << (m.mode == analysis::Mode::hcct ? ", min_count " + with_commas(m.min_count) : std::string()) << "\n";
  for (const std::string &w : loss_warnings(m)) std::cout << "# warning: " << w << "\n";
  std::cout << "#    index     parent        count  flags  context\n";
  Depths depths;
  std::string line;
  char head[96];
  analysis::Node n;
  while (t.next(n)) {
    const uint32_t i = uint32_t(t.nodes_read() - 1);
    const uint32_t depth = depths.of(i, n);
    if ((i & 0xffff) == 0) progress.update(t.bytes_read(), t.file_size());
    std::snprintf(head, sizeof head, "%10u %10s %12llu  %-5s  ", i, i ? std::to_string(n.parent).c_str() : "-",
                  static_cast<unsigned long long>(n.count), flag_letters(n.flags).c_str());
    line = head;
    if (i == analysis::kRoot) {
      line += "(thread start)";
    } else {
      line += indentation(depth);
      std::string context = describe_routine(names.routine(n.routine));
      if (n.call_site) context += "  @ " + describe_call_site(names.call_site(n.call_site));
      line += escape_text(context);
    }
    line += '\n';
    std::cout << line;
  }
  std::cout << "\n";
}

// Streamed: a tree can have millions of nodes, too many for one in-memory JSON document.
void dump_json(analysis::ProfileStream &t, Names &names, bool first) {
  const analysis::ThreadMeta &m = t.meta();
  Progress progress("reading " + t.source());
  json head = {{"file", t.source()},
               {"pid", m.pid},
               {"thread_seq", m.thread_seq},
               {"tid", m.tid},
               {"mode", analysis::to_string(m.mode)},
               {"key", analysis::to_string(m.key)},
               {"calls", m.calls},
               {"lost", m.lost},
               {"unmatched_exits", m.unmatched_exits}};
  std::string s = head.dump(-1, ' ', false, json::error_handler_t::replace);
  s.pop_back();  // reopen the object to append the node array
  std::cout << (first ? "\n" : ",\n") << s << ",\"nodes\":[";
  Depths depths;
  analysis::Node n;
  while (t.next(n)) {
    const uint32_t i = uint32_t(t.nodes_read() - 1);
    if ((i & 0xffff) == 0) progress.update(t.bytes_read(), t.file_size());
    json node = {{"id", i},
                 {"parent", i ? json(n.parent) : json()},
                 {"depth", depths.of(i, n)},
                 {"routine", hex(n.routine)},
                 {"call_site", n.call_site ? json(hex(n.call_site)) : json()},
                 {"count", n.count},
                 {"flags", n.flags},
                 {"monitored", n.monitored()},
                 {"on_path", n.on_path()}};
    if (i != analysis::kRoot) {
      node["function"] = symbol_json(names.routine(n.routine), false);
      node["call"] = n.call_site ? symbol_json(names.call_site(n.call_site), true) : json();
    }
    std::cout << (i ? ",\n" : "\n") << node.dump(-1, ' ', false, json::error_handler_t::replace);
  }
  std::cout << "\n]}";
}

// Streamed: memory does not grow with the trees. A corrupt file is detected at its end (hash),
// after its nodes were printed; the error then ends the output with exit status 1.
int run_dump(const DumpOptions &o) {
  std::vector<FileSelection> selected = select_files(o.in);
  auto cache = std::make_shared<analysis::DebugInfoCache>();
  if (o.in.json) std::cout << "{\"schema\":\"hcct-dump/1\",\"threads\":[";
  bool first = true;
  for (const FileSelection &s : selected) {
    for (const analysis::ProfileFile &f : s.files) {
      std::unique_ptr<analysis::ProfileStream> t = open_stream(f);
      Names names(t->modules(), !o.in.no_symbols, cache);
      if (o.in.json) {
        dump_json(*t, names, first);
      } else {
        dump_text(*t, names);
      }
      first = false;
    }
  }
  if (o.in.json) std::cout << "\n]}\n";
  return 0;
}

}  // namespace

void add_dump_command(CLI::App &app, Action &action) {
  auto o = std::make_shared<DumpOptions>();
  CLI::App *sub = app.add_subcommand("dump", "Every node of every tree, as recorded");
  add_input_options(sub, o->in);
  sub->footer(std::string("\n") +
      "Prints each thread's tree node by node in file order (preorder): index, parent index, count, flags\n"
      "(M = monitored by Space-Saving, P = on the thread's calling path at the dump) and the context,\n"
      "indented by depth: function (definition file:line) '@' call site. Nothing is pruned." + "\n" + R"(
Examples:
  hcct dump                            all threads of hcct.data/
  hcct dump --pid 4242 --thread 1
  hcct dump --no-symbols               raw addresses (module+offset), fast, no binaries needed
  hcct dump --json | jq '.threads[0].nodes | length'
)");
  sub->callback([o, &action] { action = [o] { return run_dump(*o); }; });
}

}  // namespace hcct::cli
