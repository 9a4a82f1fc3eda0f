// A shared library loaded with dlopen by dlopen_main.c.
volatile int plugin_sink;
__attribute__((noinline)) int plugin_leaf(int x) { plugin_sink += x; return x * 3; }
int plugin_entry(int n) {
  int total = 0;
  for (int i = 0; i < n; ++i) total += plugin_leaf(i);
  return total;
}
