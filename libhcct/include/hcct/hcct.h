// The libhcct runtime's public interface (docs/RUNTIME-ABI.md).
#ifndef HCCT_HCCT_H
#define HCCT_HCCT_H

#ifdef __cplusplus
extern "C" {
#endif

// Nonzero while compiler probes must call into the runtime: 1 = mode empty, 2 = profiling.
extern unsigned char __hcct_gate;

void __cyg_profile_func_enter(void *fn, void *call_site) __attribute__((no_instrument_function));
void __cyg_profile_func_exit(void *fn, void *call_site) __attribute__((no_instrument_function));
void __hcct_enter(void *fn, void *call_site) __attribute__((no_instrument_function));
void __hcct_exit(void *fn, void *call_site) __attribute__((no_instrument_function));
// Probe ABI 2 (the GCC plugin's probes since issue 3): called only once the probe saw the gate open;
// the exit is never tail-called.
void __hcct_enter_open(void *fn, void *call_site) __attribute__((no_instrument_function));
void __hcct_exit_open(void *fn) __attribute__((no_instrument_function));

// Test hook of static bursting (docs/BURSTING.md): with HCCT_OPTIONS=...:burst=manual the program
// opens (on != 0) and closes (on == 0) bursts itself; otherwise it does nothing. Programs that may
// run without libhcct declare it weak and test its address.
void hcct_burst(int on) __attribute__((no_instrument_function));

#ifdef __cplusplus
}
#endif

#endif
