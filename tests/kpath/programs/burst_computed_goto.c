/* A bytecode interpreter that dispatches with computed gotos (tests/kpath/test_burst.cc), as Lua's
 * luaV_execute does: `goto *dispatch[op]` through a constant table of label addresses that only
 * run() reads. In a -kpath-burst=1 build each copy of run()'s body must jump through a table of its
 * own blocks (f's own for the native body, f.kpath's for its instrumented and its uninstrumented
 * copies), and all copies compute the same. Each opcode handler ends with its own dispatch, so the
 * loop's back edges come from every handler into the one indirect-goto block.
 *
 * usage: burst_computed_goto N   Runs the program N times; prints a checksum. */
#include <stdio.h>
#include <stdlib.h>

enum { OP_PUSH, OP_ADD, OP_MUL, OP_XOR, OP_DUP, OP_DEC_JNZ, OP_POP, OP_HALT };

struct insn {
  int op, arg;
};

/* sum of (x * 3 + k) ^ k over k = arg..1, on a stack machine */
static const struct insn program[] = {
    {OP_PUSH, 0},       /* 0: acc */
    {OP_PUSH, 50},      /* 1: k */
    {OP_DUP, 0},        /* 2: acc k k */
    {OP_PUSH, 3},       /* 3 */
    {OP_MUL, 0},        /* 4: acc k 3k */
    {OP_XOR, 0},        /* 5: acc k (3k^k)... (k stays below) */
    {OP_DEC_JNZ, 2},    /* 6: acc' k-1, back to 2 while k != 0 */
    {OP_POP, 0},        /* 7 */
    {OP_HALT, 0},
};

__attribute__((noinline)) long run(const struct insn *code, long seed) {
  static const void *const dispatch[] = {&&op_push, &&op_add, &&op_mul, &&op_xor,
                                         &&op_dup,  &&op_dec_jnz, &&op_pop, &&op_halt};
  long stack[64];
  int sp = 0;
  const struct insn *pc = code;
  goto *dispatch[pc->op];
op_push:
  stack[sp++] = pc->arg + (pc == code ? seed : 0);
  pc++;
  goto *dispatch[pc->op];
op_add:
  sp--;
  stack[sp - 1] += stack[sp];
  pc++;
  goto *dispatch[pc->op];
op_mul:
  sp--;
  stack[sp - 1] *= stack[sp];
  pc++;
  goto *dispatch[pc->op];
op_xor:
  /* acc k v -> acc^v+k k */
  sp--;
  stack[sp - 2] = (stack[sp - 2] ^ stack[sp]) + stack[sp - 1];
  pc++;
  goto *dispatch[pc->op];
op_dup:
  stack[sp] = stack[sp - 1];
  sp++;
  pc++;
  goto *dispatch[pc->op];
op_dec_jnz:
  if (--stack[sp - 1] != 0) pc = code + pc->arg;
  else pc++;
  goto *dispatch[pc->op];
op_pop:
  sp--;
  pc++;
  goto *dispatch[pc->op];
op_halt:
  return stack[sp - 1];
}

int main(int argc, char **argv) {
  long n = argc > 1 ? atol(argv[1]) : 1000;
  unsigned long sum = 0;
  for (long i = 0; i < n; i++) sum = sum * 31 + (unsigned long)run(program, i & 7);
  printf("checksum %lu\n", sum);
  return 0;
}
