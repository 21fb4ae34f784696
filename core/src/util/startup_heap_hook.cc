// zt_startup_heap: linked into an executable (the trainer, the tests' programs), never into a
// library, whose DT_PREINIT_ARRAY the dynamic loader ignores. Before the initialisers of any
// library run it asks for huge pages on the heap that LibTorch's initialisers fill, and the
// executable's own initialiser, which runs after all of theirs, ends that
// (zt::advise_startup_heap in zt/host_memory.h says why). Sanitized builds leave it out: their
// allocator is the sanitizer's, and nothing instrumented may run this early.
#include "zt/host_memory.h"
#include "zt/sanitized_build.h"

namespace {

#ifndef ZT_SANITIZED_BUILD
// The environment is the one the kernel passed (`envp`): libc's environ is set only as main
// starts.
void advise_heap_before_initialisers(int, char**, char** envp) { zt::advise_startup_heap(envp); }

__attribute__((section(".preinit_array"),
               used)) void (*const advise_entry)(int, char**,
                                                 char**) = advise_heap_before_initialisers;

__attribute__((constructor)) void end_heap_advice() { zt::end_startup_heap_advice(); }
#endif

}  // namespace
