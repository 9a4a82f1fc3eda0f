// An interpreter shaped like Lua's, for the README's recipe (gcc -O2 -g -finstrument-functions) on
// an interpreter (issue 13): a dispatch loop calls opcode handlers through a table (one call site,
// 40 callees); an interpreted call re-enters the loop (C recursion, as luaV_execute does through
// luaD_call); errors unwind with longjmp to a protected call (luaD_rawrunprotected); a
// string-building helper has an early return gcc inlines and a cold error branch it splits off.
// `interp ROUNDS` prints what the test checks: how many times each C function ran, and the deepest
// interpreted recursion.
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  unsigned char op;
  int arg;
} Instr;

typedef struct {
  const Instr *code;
  int pc;
  long arg;
  long result;
  int done;
} Frame;

typedef struct {
  long stack[1 << 16];
  int sp;
  int depth, max_depth;
  jmp_buf *handler;
  char buf[256];
  int buf_len;
} VM;

enum { kCalls, kExecute, kPcall, kError, kAppend, kOverflow, kCounters };
static long g_counts[kCounters];
static const char *const g_count_names[kCounters] = {"op_call", "execute", "pcall", "vm_error",
                                                     "buf_append", "buf_overflow"};

typedef void (*Handler)(VM *, Frame *, int);
static long execute(VM *vm, const Instr *code, long arg);

static void push(VM *vm, long v) { vm->stack[vm->sp++] = v; }
static long pop(VM *vm) { return vm->stack[--vm->sp]; }

__attribute__((noreturn, noinline, cold)) static void vm_error(VM *vm) {
  ++g_counts[kError];
  longjmp(*vm->handler, 1);
}

__attribute__((noinline, cold)) static void buf_overflow(VM *vm) {
  ++g_counts[kOverflow];
  vm->buf_len = 0;
}

// The helper gcc splits: the early return is inlined into callers, the rest kept apart.
static void buf_append(VM *vm, long v) {
  ++g_counts[kAppend];
  if (v < 0) return;
  char digits[24];
  int n = snprintf(digits, sizeof digits, "%ld,", v);
  if (__builtin_expect(vm->buf_len + n >= (int)sizeof vm->buf, 0)) buf_overflow(vm);
  memcpy(vm->buf + vm->buf_len, digits, (size_t)n);
  vm->buf_len += n;
}

static void op_push(VM *vm, Frame *f, int arg) { (void)f; push(vm, arg); }
static void op_arg(VM *vm, Frame *f, int arg) { (void)arg; push(vm, f->arg); }
static void op_add(VM *vm, Frame *f, int arg) { (void)f; (void)arg; long b = pop(vm); push(vm, pop(vm) + b); }
static void op_sub(VM *vm, Frame *f, int arg) { (void)f; (void)arg; long b = pop(vm); push(vm, pop(vm) - b); }
static void op_lt(VM *vm, Frame *f, int arg) { (void)f; (void)arg; long b = pop(vm); push(vm, pop(vm) < b); }
static void op_jmpf(VM *vm, Frame *f, int arg) { if (!pop(vm)) f->pc = arg; }
static void op_jmp(VM *vm, Frame *f, int arg) { (void)vm; f->pc = arg; }
static void op_ret(VM *vm, Frame *f, int arg) { (void)arg; f->result = pop(vm); f->done = 1; }
static void op_error_if_zero(VM *vm, Frame *f, int arg) { (void)f; (void)arg; if (vm->stack[vm->sp - 1] == 0) vm_error(vm); }
static void op_append(VM *vm, Frame *f, int arg) { (void)f; (void)arg; buf_append(vm, vm->stack[vm->sp - 1]); }
static void op_pop(VM *vm, Frame *f, int arg) { (void)f; (void)arg; pop(vm); }

// Functions of the interpreted program, by number.
static const Instr *g_protos[4];

static void op_call(VM *vm, Frame *f, int arg) {
  (void)f;
  ++g_counts[kCalls];
  push(vm, execute(vm, g_protos[arg], pop(vm)));
}

// Thirty cheap arithmetic opcodes: the wide part of the dispatch.
#define UNARY(i) \
  static void op_u##i(VM *vm, Frame *f, int arg) { (void)f; (void)arg; vm->stack[vm->sp - 1] = (vm->stack[vm->sp - 1] * (i + 3) + i) % 1000003; }
UNARY(0) UNARY(1) UNARY(2) UNARY(3) UNARY(4) UNARY(5) UNARY(6) UNARY(7) UNARY(8) UNARY(9)
UNARY(10) UNARY(11) UNARY(12) UNARY(13) UNARY(14) UNARY(15) UNARY(16) UNARY(17) UNARY(18) UNARY(19)
UNARY(20) UNARY(21) UNARY(22) UNARY(23) UNARY(24) UNARY(25) UNARY(26) UNARY(27) UNARY(28) UNARY(29)
#undef UNARY

enum { PUSH, ARG, ADD, SUB, LT, JMPF, JMP, RET, CALL, ERRZ, APPEND, POP, U0 };
static const Handler g_handlers[] = {
    op_push, op_arg, op_add, op_sub, op_lt, op_jmpf, op_jmp, op_ret, op_call, op_error_if_zero, op_append, op_pop,
    op_u0, op_u1, op_u2, op_u3, op_u4, op_u5, op_u6, op_u7, op_u8, op_u9, op_u10, op_u11, op_u12, op_u13,
    op_u14, op_u15, op_u16, op_u17, op_u18, op_u19, op_u20, op_u21, op_u22, op_u23, op_u24, op_u25,
    op_u26, op_u27, op_u28, op_u29};
enum { kOps = sizeof g_handlers / sizeof g_handlers[0] };
static long g_op_counts[kOps];
static const char *const g_op_names[kOps] = {
    "op_push", "op_arg", "op_add", "op_sub", "op_lt", "op_jmpf", "op_jmp", "op_ret", "op_call", "op_error_if_zero",
    "op_append", "op_pop", "op_u0", "op_u1", "op_u2", "op_u3", "op_u4", "op_u5", "op_u6", "op_u7", "op_u8",
    "op_u9", "op_u10", "op_u11", "op_u12", "op_u13", "op_u14", "op_u15", "op_u16", "op_u17", "op_u18",
    "op_u19", "op_u20", "op_u21", "op_u22", "op_u23", "op_u24", "op_u25", "op_u26", "op_u27", "op_u28",
    "op_u29"};

// The interpreter loop: one call site reaches every handler.
static long execute(VM *vm, const Instr *code, long arg) {
  ++g_counts[kExecute];
  if (++vm->depth > vm->max_depth) vm->max_depth = vm->depth;
  Frame f = {code, 0, arg, 0, 0};
  while (!f.done) {
    Instr in = code[f.pc++];
    ++g_op_counts[in.op];
    g_handlers[in.op](vm, &f, in.arg);
  }
  --vm->depth;
  return f.result;
}

// A protected call: an error anywhere below comes back here.
static long pcall(VM *vm, const Instr *code, long arg) {
  ++g_counts[kPcall];
  jmp_buf here;
  jmp_buf *saved = vm->handler;
  int sp = vm->sp, depth = vm->depth;
  volatile long result = -1;
  vm->handler = &here;
  if (setjmp(here) == 0) {
    result = execute(vm, code, arg);
  } else {
    vm->sp = sp;
    vm->depth = depth;
  }
  vm->handler = saved;
  return result;
}

// fib(n) = n < 2 ? n : fib(n - 1) + fib(n - 2)
static const Instr kFib[] = {{ARG, 0}, {PUSH, 2}, {LT, 0}, {JMPF, 6}, {ARG, 0}, {RET, 0},
                             {ARG, 0}, {PUSH, 1}, {SUB, 0}, {CALL, 0}, {ARG, 0}, {PUSH, 2},
                             {SUB, 0}, {CALL, 0}, {ADD, 0}, {RET, 0}};
// down(n): n == 0 is an error; else down(n - 1) after some arithmetic.
static const Instr kDown[] = {{ARG, 0}, {ERRZ, 0}, {U0 + 3, 0}, {U0 + 17, 0}, {POP, 0}, {ARG, 0},
                              {PUSH, 1}, {SUB, 0}, {CALL, 1}, {RET, 0}};
// mix(n): every arithmetic opcode on n, then append the result to the buffer.
static Instr g_mix[32 + 4];
// loop(n) = n < 1 ? 0 : (mix(n), loop(n - 1))
static const Instr kLoop[] = {{ARG, 0}, {PUSH, 1}, {LT, 0}, {JMPF, 6}, {PUSH, 0}, {RET, 0}, {ARG, 0},
                              {CALL, 2}, {POP, 0}, {ARG, 0}, {PUSH, 1}, {SUB, 0}, {CALL, 3}, {RET, 0}};

int main(int argc, char **argv) {
  int rounds = argc > 1 ? atoi(argv[1]) : 10;
  int k = 0;
  g_mix[k++] = (Instr){ARG, 0};
  for (int i = 0; i < 30; ++i) g_mix[k++] = (Instr){(unsigned char)(U0 + (i * 7) % 30), 0};
  g_mix[k++] = (Instr){APPEND, 0};
  g_mix[k++] = (Instr){RET, 0};
  g_protos[0] = kFib;
  g_protos[1] = kDown;
  g_protos[2] = g_mix;
  g_protos[3] = kLoop;
  static VM vm;
  long check = 0;
  for (int r = 0; r < rounds; ++r) {
    check += pcall(&vm, kFib, 12 + r % 4);
    check += pcall(&vm, kDown, 20 + 5 * (r % 7));  // always ends in an error at depth n
    check += pcall(&vm, kLoop, 40);
  }
  printf("check %ld max_depth %d\n", check, vm.max_depth);
  for (int i = 0; i < kOps; ++i) printf("%s %ld\n", g_op_names[i], g_op_counts[i]);
  for (int i = 1; i < kCounters; ++i) printf("%s %ld\n", g_count_names[i], g_counts[i]);
  return 0;
}
