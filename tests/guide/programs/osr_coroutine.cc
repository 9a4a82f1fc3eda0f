// A loop inside a C++20 coroutine: the loop versioner refuses it (tests/guide/test_versions.cc).
#include <coroutine>
#include <cstdio>
struct gen {
  struct promise_type {
    long value = 0;
    gen get_return_object() { return gen{std::coroutine_handle<promise_type>::from_promise(*this)}; }
    std::suspend_always initial_suspend() noexcept { return {}; }
    std::suspend_always final_suspend() noexcept { return {}; }
    std::suspend_always yield_value(long v) { value = v; return {}; }
    void return_void() {}
    void unhandled_exception() {}
  };
  std::coroutine_handle<promise_type> h;
  ~gen() { h.destroy(); }
};
gen squares(long n) {
  for (long i = 0; i < n; i++) co_yield i * i;
}
int main() {
  long sum = 0;
  for (int r = 0; r < 50; r++) {
    gen g = squares(3000);
    while (true) { g.h.resume(); if (g.h.done()) break; sum += g.h.promise().value; }
  }
  std::printf("%ld\n", sum);
}
