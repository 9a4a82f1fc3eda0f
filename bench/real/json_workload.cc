// The C++ workload of bench/real: nlohmann::json (Debian's nlohmann-json3 source package, header
// only) on documents generated from a fixed seed. Template-heavy: every access goes through
// basic_json's templates, iterators, the SAX parser and the serializer, so most calls are tiny
// inline functions - the case where instrumenting before inlining costs the most.
//
//   json_workload ROUNDS [PEOPLE]   ROUNDS documents of PEOPLE records (default 400); prints digests,
//                                   the same for the same arguments
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

using nlohmann::json;

namespace {

// A small fixed generator (std:: distributions differ between libraries; this does not).
struct Lcg {
  std::uint64_t state;
  std::uint32_t next() {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<std::uint32_t>(state >> 33);
  }
  int below(int n) { return static_cast<int>(next() % static_cast<std::uint32_t>(n)); }
};

json make_person(Lcg &rng, int id) {
  static const char *const kNames[] = {"ada", "bob", "cyd", "dee", "eve", "fay", "gus", "hal"};
  // One draw per statement: the operands of `+` are unsequenced, and gcc and clang order them
  // differently, which made the clang build print other digests.
  std::string name = kNames[rng.below(8)];
  name += std::to_string(rng.below(1000));
  int age = 18 + rng.below(60);
  double score = rng.below(100000) / 100.0;
  bool active = rng.below(2) == 1;
  json p = {{"id", id}, {"name", name}, {"age", age}, {"score", score}, {"active", active}};
  json tags = json::array();
  for (int i = 0, n = rng.below(5); i < n; ++i)
    tags.push_back("t" + std::to_string(rng.below(20)));
  p["tags"] = std::move(tags);
  int zip = rng.below(90000) + 10000;
  std::string city = "c" + std::to_string(rng.below(50));
  p["address"] = {{"zip", zip}, {"city", city}};
  return p;
}

std::uint64_t fold(std::uint64_t h, std::uint64_t v) { return (h ^ v) * 1099511628211ULL; }

}  // namespace

int main(int argc, char **argv) {
  int scale = argc > 1 ? std::atoi(argv[1]) : 1;
  int people = argc > 2 ? std::atoi(argv[2]) : 400;
  if (scale < 1 || people < 1) {
    std::fprintf(stderr, "usage: json_workload ROUNDS [PEOPLE] (positive integers)\n");
    return 2;
  }
  Lcg rng{42};
  std::uint64_t dump_hash = 14695981039346656037ULL, query_hash = dump_hash;
  std::size_t total_bytes = 0, patched = 0;
  std::map<std::string, int> city_count;

  for (int round = 0; round < scale; ++round) {
    // Build a document, serialise it, parse it back.
    json doc = {{"round", round}, {"people", json::array()}};
    for (int i = 0; i < people; ++i) doc["people"].push_back(make_person(rng, round * 1000 + i));
    std::string text = doc.dump(round % 2 ? 2 : -1);
    total_bytes += text.size();
    json back = json::parse(text);
    for (char c : back.dump()) dump_hash = fold(dump_hash, static_cast<unsigned char>(c));

    // Query: filter, sort by a key, aggregate.
    std::vector<json> adults;
    for (const auto &p : back["people"])
      if (p["age"].get<int>() >= 40 && p["active"].get<bool>()) adults.push_back(p);
    std::sort(adults.begin(), adults.end(), [](const json &a, const json &b) {
      return a["score"].get<double>() > b["score"].get<double>();
    });
    for (const auto &p : adults) {
      query_hash = fold(query_hash, p["id"].get<std::uint64_t>());
      ++city_count[p["address"]["city"].get<std::string>()];
    }

    // Patch: diff against a modified copy, apply the patch, check the round trip.
    json changed = back;
    for (auto &p : changed["people"])
      if (p["tags"].size() > 2) p["tags"].erase(0);
    json patch = json::diff(back, changed);
    patched += patch.size();
    if (back.patch(patch) != changed) {
      std::fprintf(stderr, "json_workload: patch round trip differs in round %d\n", round);
      return 1;
    }

    // Flatten / unflatten and the binary formats.
    json flat = back.flatten();
    json unflat = flat.unflatten();  // empty arrays and objects come back as null
    std::vector<std::uint8_t> cbor = json::to_cbor(unflat);
    if (json::from_cbor(cbor) != unflat) {
      std::fprintf(stderr, "json_workload: CBOR round trip differs in round %d\n", round);
      return 1;
    }
    query_hash = fold(query_hash, cbor.size());
  }
  std::printf("bytes %zu dump %016llx query %016llx patch-ops %zu\n", total_bytes,
              static_cast<unsigned long long>(dump_hash), static_cast<unsigned long long>(query_hash),
              patched);
  for (const auto &[city, n] : city_count)
    if (n > 6 * scale) std::printf("city %s %d\n", city.c_str(), n);
  return 0;
}
