/* stats.c: small statistics over measurements (see util.h). */
#include <stdlib.h>

#include "util/util.h"

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double baton__median(double *v, size_t n) {
    if (n == 0) return 0.0;
    qsort(v, n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Row 0 is 0, 1, n-1, 2, n-2, ...; row p adds p (mod n); for odd n each row is followed by its mirror. */
int baton__round_order(int n, long r, int k) {
    if (n <= 1) return 0;
    long p = n % 2 ? r / 2 : r;
    int j = n % 2 && r % 2 ? n - 1 - k : k;
    int w = j == 0 ? 0 : j % 2 ? (j + 1) / 2 : n - j / 2;
    return (int)((w + p) % n);
}

long baton__whole_designs(int n, long r) {
    long d = n <= 1 ? 1 : n % 2 ? 2L * n : n, k = (r + d / 2) / d;
    return (k < 1 ? 1 : k) * d;
}
