// A C++ program whose work is mostly calls to small members of std::string, std::vector and
// std::map: inline functions from the headers, several of them explicit instantiations of
// libstdc++ (`extern template`), whose only out-of-line copy is libstdc++.so's, without probes.
// tests/plugin/plugin_test.cc builds it with -finstrument-functions and with the plugin and compares
// the functions entered at run time.
#include <cstdio>
#include <map>
#include <string>
#include <vector>

namespace {

__attribute__((noinline)) std::size_t count_words(const std::string &text) {
  std::size_t words = 0;
  bool in_word = false;
  for (auto it = text.begin(); it != text.end(); ++it) {
    bool letter = *it != ' ';
    words += letter && !in_word;
    in_word = letter;
  }
  return words;
}

__attribute__((noinline)) std::vector<std::string> split(const std::string &text) {
  std::vector<std::string> out;
  std::string::size_type start = 0;
  while (start < text.size()) {
    std::string::size_type end = text.find(' ', start);
    if (end == std::string::npos)
      end = text.size();
    if (end > start)
      out.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

__attribute__((noinline)) std::string joined(const std::vector<std::string> &words,
                                            const std::allocator<char> &alloc) {
  std::string out(alloc);
  for (const std::string &w : words) {
    if (!out.empty())
      out.insert(out.size(), 1, '-');
    out.append(w);
  }
  return out;
}

}  // namespace

int main(int argc, char **argv) {
  std::string text = argc > 5 ? argv[1] : "the quick brown fox jumps over the lazy dog the end";
  std::map<std::string, int> counts;
  std::size_t total = 0, letters = 0;
  std::allocator<char> alloc;
  for (int round = 0; round < 20; ++round) {
    std::string line = text.substr(round % 4) + " r" + std::to_string(round);
    total += count_words(line);
    std::vector<std::string> words = split(line);
    for (const std::string &w : words)
      ++counts[w];
    std::string j = joined(words, alloc);
    letters += j.size() + (j.empty() ? 0 : j.compare(0, 3, "the") == 0);
  }
  std::printf("%zu %zu %zu %d\n", total, letters, counts.size(), counts["the"]);
  return 0;
}
