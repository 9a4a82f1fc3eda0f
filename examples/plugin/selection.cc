// Example for the plugin's selection options (tests/plugin). Every function's fate under each option
// is spelled out next to it; the statement counts are those of gcc 12's GIMPLE before lowering.
#include <cstdio>

#include "selection.h"

namespace app {
// Leaf, 2 statements (`D = x + 1; return D;`): skipped by min-size=3 and above.
int tiny_leaf(int x) { return x + 1; }
// 2 statements too, but it makes a call: never skipped for size.
int tiny_caller(int x) { return tiny_leaf(x); }
// Leaf, but well above any small threshold (loop).
int big_leaf(int n) {
  int s = 0;
  for (int i = 0; i < n; ++i)
    s += i * i - (i >> 1);
  return s;
}

struct Widget {
  int limit = 3;
  int check(int x) const;
};
int Widget::check(int x) const { return x > limit ? big_leaf(x) : tiny_caller(x); }

template <typename T> T twice(T x) { return x + x; }
} // namespace app

namespace util {
int helper(int x) { return app::twice(x) + int(app::twice(1.5)); }
} // namespace util

// Never instrumented, whatever the options.
__attribute__((no_instrument_function)) int opted_out(int x) { return app::tiny_caller(x); }
extern "C" __attribute__((naked, used)) void naked_fn() { __asm__("ret"); }

int main(int argc, char **) {
  app::Widget w;
  int s = w.check(argc) + w.check(argc + 10) + util::helper(argc) + opted_out(argc) +
          hdr::header_caller(argc);
  std::printf("%d\n", s);
  return 0;
}
