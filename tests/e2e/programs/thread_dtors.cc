// Calls made at thread exit: a pthread key destructor and a C++ thread_local destructor each call
// an instrumented function, which the program also calls once explicitly.
#include <pthread.h>
#include <stdio.h>

volatile int sink;
extern "C" __attribute__((noinline)) void in_key_destructor() { sink = sink + 1; }
extern "C" __attribute__((noinline)) void in_thread_local_destructor() { sink = sink + 1; }

static pthread_key_t key;
static void key_destructor(void *) { in_key_destructor(); }

struct Tracked {
  ~Tracked() { in_thread_local_destructor(); }
  void touch() { sink = sink + 1; }
};
thread_local Tracked tracked;

static void *body(void *) {
  tracked.touch();
  pthread_setspecific(key, &key);
  in_key_destructor();
  in_thread_local_destructor();
  return nullptr;
}

int main() {
  pthread_key_create(&key, key_destructor);
  pthread_t t;
  pthread_create(&t, nullptr, body, nullptr);
  pthread_join(t, nullptr);
  printf("joined\n");
  return 0;
}
