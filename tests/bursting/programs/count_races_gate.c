// count_races' view of its own module's count state (hcct/unit_abi.h): in a file of its own, with
// no instrumented function, so that the plugin declares nothing here.
extern __thread long __hcct_countdown __attribute__((visibility("hidden"), tls_model("initial-exec")));
extern __thread volatile unsigned char __hcct_count_exit_gate
    __attribute__((visibility("hidden"), tls_model("initial-exec")));

// Whether the calling thread's count probes in this module deliver exits (the exit gate is open).
__attribute__((no_instrument_function)) int count_races_exit_gate_open(void) { return __hcct_count_exit_gate != 0; }
// Whether the calling thread's next enter in this module calls in (its countdown is negative).
__attribute__((no_instrument_function)) int count_races_countdown_negative(void) { return __hcct_countdown < 0; }
