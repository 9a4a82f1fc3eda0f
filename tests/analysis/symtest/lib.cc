// Symbolizer fixture library, loaded with dlopen() by prog.c. C++ so that names must be demangled.
#include <cstdint>

namespace symtest {

struct Widget {
  static uintptr_t last_return;
  __attribute__((noinline)) static int compute(int x);
};
uintptr_t Widget::last_return;

int Widget::compute(int x) {  // MARK:widget_def
  last_return = reinterpret_cast<uintptr_t>(__builtin_return_address(0));
  asm volatile("" ::: "memory");
  return x * 3;
}

}  // namespace symtest

extern "C" uintptr_t symtest_lib_entry(uintptr_t *site) {
  volatile int r = symtest::Widget::compute(7);  // MARK:entry_calls_widget
  (void)r;
  *site = symtest::Widget::last_return;
  return reinterpret_cast<uintptr_t>(&symtest::Widget::compute);
}
