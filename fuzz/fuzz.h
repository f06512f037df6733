/* fuzz.h: shared by the libFuzzer targets in fuzz/ and by their corpus replay in `make test`.
 *
 * Each target fuzz/fuzz_<name>.c defines FUZZ_ENTRY, which is LLVMFuzzerTestOneInput unless the includer
 * renames it; tests/test_fuzz_corpus.c includes all targets into one binary under distinct names:
 *
 *   #define FUZZ_ENTRY fuzz_frame_one
 *   #include "../fuzz/fuzz_frame.c"
 *   #undef FUZZ_ENTRY
 *
 * FUZZ_CHECK(cond, fmt, ...) states a property the code under test must keep on every input; a violation
 * prints what was wrong and aborts, which libFuzzer reports as a crash and the replay test as a failure.
 * File-local names in the targets carry a per-target prefix so the targets can share one translation unit. */
#ifndef BATON_FUZZ_H
#define BATON_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define FUZZ_CHECK(cond, ...)                                                                     \
    do {                                                                                          \
        if (!(cond)) {                                                                            \
            fprintf(stderr, "fuzz property violated at %s:%d: %s: ", __FILE__, __LINE__, #cond);   \
            fprintf(stderr, __VA_ARGS__);                                                         \
            fputc('\n', stderr);                                                                  \
            abort();                                                                              \
        }                                                                                         \
    } while (0)

#endif

#ifndef FUZZ_ENTRY
#define FUZZ_ENTRY LLVMFuzzerTestOneInput
#endif
