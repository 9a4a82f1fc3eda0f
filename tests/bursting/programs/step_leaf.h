// The call-intensive loop body of the fork programs (count_fork.c, count_fork_dlclose.c): each
// step(i) is two enters (step, then leaf), which their tests count exactly.
#pragma once

static volatile unsigned long sink;
__attribute__((noinline)) void leaf(long i) { sink += (unsigned long)i; }
__attribute__((noinline)) void step(long i) {
  leaf(i);
  sink ^= 1;
}
