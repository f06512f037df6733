/* copy.c: non-temporal copies (see copy.h). */
#include "comm/copy.h"

#include <stdint.h>
#include <string.h>

#if defined(__x86_64__)
#include <immintrin.h>

__attribute__((target("avx512f"))) static void stream_avx512(uint8_t *d, const uint8_t *s, size_t n) {
    size_t head = (64 - ((uintptr_t)d & 63)) & 63;
    if (head > n) head = n;
    memcpy(d, s, head);
    d += head, s += head, n -= head;
    for (; n >= 256; d += 256, s += 256, n -= 256) {
        __m512i a = _mm512_loadu_si512(s), b = _mm512_loadu_si512(s + 64);
        __m512i c = _mm512_loadu_si512(s + 128), e = _mm512_loadu_si512(s + 192);
        _mm512_stream_si512((void *)d, a);
        _mm512_stream_si512((void *)(d + 64), b);
        _mm512_stream_si512((void *)(d + 128), c);
        _mm512_stream_si512((void *)(d + 192), e);
    }
    for (; n >= 64; d += 64, s += 64, n -= 64) _mm512_stream_si512((void *)d, _mm512_loadu_si512(s));
    memcpy(d, s, n);
}

__attribute__((target("avx2"))) static void stream_avx2(uint8_t *d, const uint8_t *s, size_t n) {
    size_t head = (32 - ((uintptr_t)d & 31)) & 31;
    if (head > n) head = n;
    memcpy(d, s, head);
    d += head, s += head, n -= head;
    for (; n >= 128; d += 128, s += 128, n -= 128) {
        __m256i a = _mm256_loadu_si256((const __m256i *)s), b = _mm256_loadu_si256((const __m256i *)(s + 32));
        __m256i c = _mm256_loadu_si256((const __m256i *)(s + 64)), e = _mm256_loadu_si256((const __m256i *)(s + 96));
        _mm256_stream_si256((__m256i *)d, a);
        _mm256_stream_si256((__m256i *)(d + 32), b);
        _mm256_stream_si256((__m256i *)(d + 64), c);
        _mm256_stream_si256((__m256i *)(d + 96), e);
    }
    for (; n >= 32; d += 32, s += 32, n -= 32) _mm256_stream_si256((__m256i *)d, _mm256_loadu_si256((const __m256i *)s));
    memcpy(d, s, n);
}

typedef void (*copy_fn)(uint8_t *, const uint8_t *, size_t);

static copy_fn pick(void) {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) return stream_avx512;
    if (__builtin_cpu_supports("avx2")) return stream_avx2;
    return NULL;
}

void baton__copy_stream(void *dst, const void *src, size_t n) {
    static copy_fn fn;
    static int picked;
    if (!__atomic_load_n(&picked, __ATOMIC_ACQUIRE)) {
        __atomic_store_n(&fn, pick(), __ATOMIC_RELAXED);
        __atomic_store_n(&picked, 1, __ATOMIC_RELEASE);
    }
    copy_fn f = __atomic_load_n(&fn, __ATOMIC_RELAXED);
    if (f)
        f(dst, src, n);
    else
        memcpy(dst, src, n);
}

void baton__copy_stream_fence(void) { _mm_sfence(); }

#else
void baton__copy_stream(void *dst, const void *src, size_t n) { memcpy(dst, src, n); }
void baton__copy_stream_fence(void) {}
#endif
