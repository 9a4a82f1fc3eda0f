// Runtime stand-ins for gate_bench.c: a closed gate (as libhcct with mode=off) and empty hooks.
unsigned char __hcct_gate;
void __hcct_enter(void *fn, void *site) { (void)fn; (void)site; }
void __hcct_exit(void *fn, void *site) { (void)fn; (void)site; }
void __cyg_profile_func_enter(void *fn, void *site) { (void)fn; (void)site; }
void __cyg_profile_func_exit(void *fn, void *site) { (void)fn; (void)site; }
