// ZT_SANITIZED_BUILD: defined where this translation unit is compiled with AddressSanitizer,
// ThreadSanitizer or MemorySanitizer (clang's and gcc's ways of saying so). Code that steps
// around the normal start or end of a process (an exec before main, an _exit after it) keeps
// the normal path there: the sanitizer's allocator, reports and leak check need it.
// Thread safety: not applicable (a macro).
#pragma once

#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || \
    __has_feature(memory_sanitizer)
#define ZT_SANITIZED_BUILD 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define ZT_SANITIZED_BUILD 1
#endif
