// hcct: record and inspect calling-context profiles. One subcommand per file (cmd_*.cc); this file
// only lists them.
#include <iostream>

#include "common.h"

namespace {

// The subcommands, in the order `hcct --help` lists them. To add one: write cmd_<name>.cc with
// add_<name>_command(), declare it in common.h, and add it here.
constexpr hcct::cli::Registrar kCommands[] = {
    hcct::cli::add_record_command,
    hcct::cli::add_report_command,
    hcct::cli::add_dump_command,
    hcct::cli::add_info_command,
    hcct::cli::add_paths_command,
    hcct::cli::add_guide_command,
    hcct::cli::add_export_command,
    hcct::cli::add_compare_command,
    hcct::cli::add_diff_command,
    hcct::cli::add_merge_command,
    hcct::cli::add_view_command,
};

const char kFooter[] = R"(
Typical session:
  hcct record -- ./prog args        run prog, profile into hcct.data/
  hcct report                       hot calling contexts (phi = 1e-4)
  hcct report --phi 0.01 --merge-threads
  hcct info                         what was recorded: processes, threads, N, memory
  hcct dump --no-symbols            every node of every tree
  hcct export --format folded | flamegraph.pl > flame.svg
  hcct compare hcct.data hcct.data/exact     accuracy of the HCCT against the exact CCT
  hcct diff before.data after.data          what changed between two runs
  hcct view -o report.html                  flame graph, flat profile (and diff) in one HTML page
  hcct merge run1 run2 -o merged            threads, processes and runs into one profile

The program must be instrumented: compiled with -finstrument-functions or with the hcct GCC plugin.
'hcct SUBCOMMAND --help' explains each subcommand. Exit status: 0 ok, 1 usage or input error
(record: the program's own status).)";

}  // namespace

int main(int argc, char **argv) {
  std::ios::sync_with_stdio(false);
  CLI::App app("hcct: calling-context profiler (CCT and Hot Calling Context Tree)", "hcct");
  app.footer(kFooter);
  app.set_version_flag("--version", "hcct " HCCT_VERSION);
  app.require_subcommand(1);
  hcct::cli::Action action;
  for (hcct::cli::Registrar add : kCommands) add(app, action);

  // CLI11 would call a mistyped subcommand a missing one.
  if (argc > 1 && argv[1][0] != '-' && app.get_subcommands([&](CLI::App *s) { return s->check_name(argv[1]); }).empty()) {
    std::cerr << "hcct: unknown subcommand '" << hcct::cli::escape_text(argv[1]) << "' (see hcct --help)\n";
    return 1;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp &e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp &e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion &e) {
    return app.exit(e);
  } catch (const CLI::ParseError &e) {
    std::cerr << "hcct: " << hcct::cli::escape_text(e.what()) << " (see hcct --help)\n";
    return 1;
  }
  if (!action) return 1;  // unreachable: require_subcommand(1) and every subcommand sets it
  try {
    int rc = action();
    std::cout.flush();
    if (!std::cout) {
      std::cerr << "hcct: error writing output\n";
      return 1;
    }
    return rc;
  } catch (const std::exception &e) {
    // UserError, analysis::FormatError and IoError carry complete "<file>: <problem>" messages,
    // which may quote bytes of the file: escaped, so that they cannot forge lines or reach the terminal.
    std::cerr << "hcct: " << hcct::cli::escape_text(e.what()) << "\n";
  }
  return 1;
}
