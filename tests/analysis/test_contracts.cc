// Single-source contracts (issue 20): the tables in libhcct/include/hcct are what the runtime, the
// compiler plugins and the analysis library include; the docs must say the same. Each check reads
// the docs as a user would and fails on any key, option or field the two disagree on.
#include <catch2/catch.hpp>

#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "hcct/meta_keys.h"

namespace meta = hcct::format::meta;

namespace {

std::string read_doc(const std::string &name) {
  std::ifstream in(std::string(HCCT_SOURCE_DIR) + "/docs/" + name);
  REQUIRE(in);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The text from the line starting with `heading` to the next heading of any level.
std::string section(const std::string &doc, const std::string &heading) {
  size_t at = doc.find("\n" + heading);
  REQUIRE(at != std::string::npos);
  size_t end = doc.find("\n#", at + 1);
  return doc.substr(at, end == std::string::npos ? std::string::npos : end - at);
}

// The `names` in the first column of a markdown table's rows (`a`, `b` | …).
std::set<std::string> first_column_names(const std::string &text) {
  std::set<std::string> out;
  std::istringstream lines(text);
  static const std::regex name("`([a-z_]+)`");
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("| `", 0) != 0) continue;
    std::string cell = line.substr(1, line.find('|', 1) - 1);
    for (std::sregex_iterator it(cell.begin(), cell.end(), name), end; it != end; ++it) out.insert((*it)[1]);
  }
  return out;
}

std::set<std::string> keys_where(bool (*pick)(const meta::Key &)) {
  std::set<std::string> out;
  for (const meta::Key *k : meta::kAll)
    if (pick(*k)) out.insert(k->name);
  return out;
}

}  // namespace

TEST_CASE("META keys: docs/FORMAT.md lists exactly the keys of hcct/meta_keys.h", "[contracts]") {
  std::string format = read_doc("FORMAT.md");
  auto core = first_column_names(section(format, "### `META`"));
  CHECK(core == keys_where([](const meta::Key &k) {
          return k.presence == meta::Presence::kAlways || k.presence == meta::Presence::kHcctMode ||
                 k.presence == meta::Presence::kOptional;
        }));
  auto time = first_column_names(section(format, "## Time keys"));
  CHECK(time == keys_where([](const meta::Key &k) {
          return k.presence == meta::Presence::kTimed || k.presence == meta::Presence::kTimedHcct;
        }));
  auto burst = first_column_names(section(format, "## Static bursting keys"));
  CHECK(burst == keys_where([](const meta::Key &k) {
          return k.presence == meta::Presence::kBursting || k.presence == meta::Presence::kBurstEvents;
        }));
  // "Keys written by `hcct merge` (…): `a`, `b`, …" in the META section.
  std::string meta_section = section(format, "### `META`");
  size_t at = meta_section.find("Keys written by `hcct merge`");
  REQUIRE(at != std::string::npos);
  std::string sentence = meta_section.substr(at, meta_section.find('.', meta_section.find("):", at)) - at);
  std::set<std::string> merged;
  static const std::regex name("`([a-z_]+)`");
  for (std::sregex_iterator it(sentence.begin(), sentence.end(), name), end; it != end; ++it)
    if ((*it)[1] != "hcct") merged.insert((*it)[1]);
  CHECK(merged == keys_where([](const meta::Key &k) { return k.presence == meta::Presence::kMerged; }));
}

TEST_CASE("META keys: docs/ANALYSIS.md gives every key a merge rule", "[contracts]") {
  auto documented = first_column_names(section(read_doc("ANALYSIS.md"), "### META of a merged profile"));
  for (const meta::Key *k : meta::kAll) {
    INFO(k->name);
    // The keys merges write are named in the rows of the keys they are made from.
    if (k->presence != meta::Presence::kMerged || k->merge != meta::Merge::kOwnRule)
      CHECK(documented.count(k->name) == 1);
  }
  for (const std::string &name : documented) {
    INFO(name);
    CHECK(meta::find(name.c_str()) != nullptr);
  }
}

TEST_CASE("META keys: names are unique and find() finds each", "[contracts]") {
  std::set<std::string> seen;
  for (const meta::Key *k : meta::kAll) {
    CHECK(seen.insert(k->name).second);
    CHECK(meta::find(k->name) == k);
  }
  CHECK(meta::find("no_such_key") == nullptr);
  static_assert(meta::find("lost") == &meta::kLost);
}
