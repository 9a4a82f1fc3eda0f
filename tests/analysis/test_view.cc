// The views of `hcct report` (analysis/view.h): subtree totals, recursion folding, re-rooting at a
// focus, the flat profile, shortened names.
#include <catch2/catch.hpp>
#include <map>

#include "hcct/analysis/view.h"
#include "testutil.h"

using namespace hcct::analysis;

namespace {

ContextView view_of(const ThreadProfile &p, ViewOptions o = {}) {
  MemorySource source(p);
  return build_view(source, o);
}

// A chain root -> main -> f -> f -> ... (depth of f: 2 .. depth+1), every node counted once.
ThreadProfile recursion_profile(uint32_t depth, std::vector<uint64_t> cycle) {
  std::vector<Node> nodes(2);
  nodes[1] = {0x1000, 0, 1, 0, 0};
  for (uint32_t i = 0; i < depth; ++i)
    nodes.push_back({cycle[i % cycle.size()], uint64_t(0x1100 + (i ? 0x10 : 0)), 1, uint32_t(nodes.size() - 1), 0});
  std::mt19937_64 rng(1);
  ThreadProfile p = hcct::test::make_profile(nodes, Mode::cct, rng);
  for (size_t i = 1; i < p.nodes.size(); ++i) p.nodes[i].count = 1;
  p.meta.calls = p.nodes.size() - 1;
  return p;
}

// Every view node: total = self + Σ children's totals; and the root's total is Σ of the known counts.
void check_totals(const ThreadProfile &p, const ContextView &v) {
  std::vector<uint64_t> children(v.nodes.size(), 0);
  for (size_t i = 1; i < v.nodes.size(); ++i) {
    REQUIRE(v.nodes[i].parent < i);
    children[v.nodes[i].parent] += v.nodes[i].total;
  }
  for (size_t i = 0; i < v.nodes.size(); ++i) {
    INFO("view node " << i);
    CHECK(v.nodes[i].total == v.nodes[i].self + children[i]);
  }
  uint64_t sum = 0;
  for (size_t i = 1; i < p.nodes.size(); ++i)
    if (p.countable(uint32_t(i))) sum += p.nodes[i].count;
  CHECK(v.nodes[kViewRoot].total == sum);
}

}  // namespace

TEST_CASE("view: subtree totals are self plus the children's totals", "[view]") {
  std::mt19937_64 rng(GENERATE(1, 2, 3));
  for (Mode mode : {Mode::cct, Mode::hcct}) {
    ThreadProfile p = hcct::test::make_profile(hcct::test::random_tree(rng, 3000), mode, rng);
    for (bool fold : {true, false}) {
      ViewOptions o;
      o.fold_recursion = fold;
      ContextView v = view_of(p, o);
      check_totals(p, v);
      // Unfolded: one view node per context (random_tree may give two siblings one key: one context).
      if (!fold) CHECK(v.nodes.size() <= p.nodes.size());
      uint64_t instances = 0;  // every context is in exactly one view node
      for (const ViewNode &n : v.nodes) instances += n.instances;
      CHECK(instances == p.nodes.size() - 1);
      if (mode == Mode::cct) CHECK(v.nodes[kViewRoot].total == p.meta.calls);
    }
  }
}

TEST_CASE("view: a million-deep recursion folds into one node with its depth range", "[view]") {
  ThreadProfile p = recursion_profile(1000000, {0x2000});
  ContextView v = view_of(p);
  REQUIRE(v.nodes.size() == 3);  // root, main, f
  const ViewNode &f = v.nodes[2];
  CHECK(f.routine == 0x2000);
  CHECK(f.instances == 1000000);
  CHECK(f.min_depth == 2);
  CHECK(f.max_depth == 1000001);
  CHECK(f.self == 1000000);
  CHECK(v.nodes[1].total == 1000001);
  CHECK(v.folded == 999999);
  check_totals(p, v);
  ViewOptions unfolded;
  unfolded.fold_recursion = false;
  CHECK(view_of(p, unfolded).nodes.size() == p.nodes.size());
}

TEST_CASE("view: a mutual recursion folds into its first round", "[view]") {
  ThreadProfile p = recursion_profile(1000, {0x2000, 0x3000, 0x4000});
  ContextView v = view_of(p);
  REQUIRE(v.nodes.size() == 5);  // root, main, a, b, c
  CHECK(v.nodes[2].instances == 334);
  CHECK(v.nodes[3].instances == 333);
  CHECK(v.nodes[4].instances == 333);
  check_totals(p, v);
}

TEST_CASE("view: the flat profile adds up to N and counts a recursion once", "[view][flat]") {
  std::mt19937_64 rng(7);
  ThreadProfile p = hcct::test::make_profile(hcct::test::random_tree(rng, 5000, 20, 3), Mode::cct, rng);
  // Oracle: per routine, self = Σ counts, contexts = #nodes, total = Σ subtree sums of the nodes with
  // no ancestor of the same routine.
  std::vector<uint64_t> subtree(p.nodes.size(), 0);
  for (size_t i = p.nodes.size(); i-- > 1;) {
    subtree[i] += p.nodes[i].count;
    subtree[p.nodes[i].parent] += subtree[i];
  }
  std::map<uint64_t, FlatEntry> expect;
  for (size_t i = 1; i < p.nodes.size(); ++i) {
    FlatEntry &e = expect[p.nodes[i].routine];
    e.self += p.nodes[i].count;
    e.calls += p.nodes[i].count;
    ++e.contexts;
    bool outermost = true;
    for (uint32_t a = p.nodes[i].parent; a != 0 && outermost; a = p.nodes[a].parent)
      outermost = p.nodes[a].routine != p.nodes[i].routine;
    if (outermost) e.total += subtree[i];
  }
  {
    MemorySource source(p);
    std::vector<FlatEntry> flat = flat_profile(source, {});
    REQUIRE(flat.size() == expect.size());
    uint64_t self_sum = 0;
    for (const FlatEntry &e : flat) {
      INFO("routine " << e.routine);
      const FlatEntry &x = expect.at(e.routine);
      CHECK(e.self == x.self);
      CHECK(e.total == x.total);
      CHECK(e.calls == x.calls);
      CHECK(e.contexts == x.contexts);
      self_sum += e.self;
    }
    CHECK(self_sum == p.meta.calls);
    for (size_t k = 1; k < flat.size(); ++k) CHECK(flat[k - 1].total >= flat[k].total);
  }
}

TEST_CASE("view: --focus re-roots at the function, callers listed", "[view][focus]") {
  // root -> main -> a -> F -> leaf ; root -> main -> b -> F -> leaf (other site) ; main -> c
  std::vector<Node> nodes = {{},
                             {0x1000, 0, 1, 0, 0},
                             {0x2000, 0x1001, 2, 1, 0},
                             {0xF000, 0x2001, 10, 2, 0},
                             {0x5000, 0xF001, 100, 3, 0},
                             {0x3000, 0x1002, 3, 1, 0},
                             {0xF000, 0x3001, 20, 5, 0},
                             {0x5000, 0xF001, 200, 6, 0},
                             {0x4000, 0x1003, 7, 1, 0}};
  std::mt19937_64 rng(1);
  ThreadProfile p = hcct::test::make_profile(nodes, Mode::cct, rng);
  p.nodes = nodes;
  p.meta.calls = 343;
  ViewOptions o;
  o.focus = [](uint64_t r) { return r == 0xF000; };
  ContextView v = view_of(p, o);
  REQUIRE(v.nodes.size() == 3);  // root, F (both instances), leaf (one site: merged)
  CHECK(v.nodes[1].routine == 0xF000);
  CHECK(v.nodes[1].self == 30);
  CHECK(v.nodes[1].total == 330);
  CHECK(v.nodes[2].self == 300);
  CHECK(v.nodes[2].parent == 1);
  REQUIRE(v.callers.size() == 1);
  REQUIRE(v.callers[0].chains.size() == 2);
  CHECK(v.callers[0].chains[0].routines == std::vector<uint64_t>{0x1000, 0x3000});  // 220 first
  CHECK(v.callers[0].chains[0].total == 220);
  CHECK(v.callers[0].chains[1].total == 110);
  CHECK(v.ignored == 4);  // main, a, b, c: outside the focus

  o.focus = [](uint64_t) { return false; };
  CHECK(view_of(p, o).nodes.size() == 1);
}

TEST_CASE("view: --ignore leaves out whole subtrees", "[view]") {
  std::mt19937_64 rng(11);
  ThreadProfile p = hcct::test::make_profile(hcct::test::random_tree(rng, 2000), Mode::cct, rng);
  ViewOptions o;
  o.ignore = [](uint64_t r) { return r == 0x401010; };
  ContextView v = view_of(p, o);
  for (const ViewNode &n : v.nodes) CHECK(n.routine != 0x401010);
  CHECK(v.nodes[kViewRoot].total + v.ignored_value == p.meta.calls);
}

TEST_CASE("view: template arguments elided", "[view]") {
  CHECK(elide_template_arguments("std::vector<int, std::allocator<int> >::push_back(int const&)") ==
        "std::vector<…>::push_back(int const&)");
  CHECK(elide_template_arguments("bool operator< <Foo>(Foo const&, Foo const&)") == "bool operator< <…>(Foo const&, Foo const&)");
  CHECK(elide_template_arguments("std::ostream::operator<<(int)") == "std::ostream::operator<<(int)");
  CHECK(elide_template_arguments("Foo::operator->() const") == "Foo::operator->() const");
  CHECK(elide_template_arguments("f(std::map<int, std::pair<int, int> >)") == "f(std::map<…>)");
  CHECK(elide_template_arguments("plain_c_function") == "plain_c_function");
  CHECK(elide_template_arguments("broken<name") == "broken<name");
}
