// The preserve_most entries of the kpath probe ABI (hcct/kpath_abi.h, kSlowSavingSymbol), for
// whoever implements that ABI's C entries: the runtime, and the tests' stand-in for it.
//
// On x86-64 the pass calls the runtime's cold entries with LLVM's preserve_most convention (the
// callee keeps every general-purpose register but r11), so that a probe site spills and reloads
// nothing around them. GCC has no such convention: each entry is a trampoline that saves the
// eight general-purpose registers the C convention lets a callee clobber and preserve_most does
// not (all but r11), keeps the stack 16-byte aligned for the call, calls `target` (a C function
// with the same arguments: preserve_most passes them as the C convention does) and restores them.
// Vector registers are the caller's to save under both conventions.
//
// A macro because it expands to a top-level asm statement, whose text must be a string literal.
// `target` should be a hidden symbol (a direct call, not through the PLT).
#pragma once

#if defined(__x86_64__)
#define HCCT_KPATH_SAVING_ENTRY(name, target)                                   \
  asm(".pushsection .text\n"                                                    \
      ".globl " #name "\n"                                                      \
      ".type " #name ", @function\n"                                            \
      ".p2align 4\n" #name ":\n"                                                \
      ".cfi_startproc\n"                                                        \
      ".irp reg, rax, rcx, rdx, rsi, rdi, r8, r9, r10\n"                        \
      "push %\\reg\n"                                                           \
      ".cfi_adjust_cfa_offset 8\n"                                              \
      ".endr\n"                                                                 \
      "sub $8, %rsp\n"                                                          \
      ".cfi_adjust_cfa_offset 8\n"                                              \
      "call " #target "\n"                                                      \
      "add $8, %rsp\n"                                                          \
      ".cfi_adjust_cfa_offset -8\n"                                             \
      ".irp reg, r10, r9, r8, rdi, rsi, rdx, rcx, rax\n"                        \
      "pop %\\reg\n"                                                            \
      ".cfi_adjust_cfa_offset -8\n"                                             \
      ".endr\n"                                                                 \
      "ret\n"                                                                   \
      ".cfi_endproc\n"                                                          \
      ".size " #name ", . - " #name "\n"                                        \
      ".popsection\n")
#endif
