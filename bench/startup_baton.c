/* startup_baton.c: the smallest baton job, for bench/startup.sh: baton_init, one 4-byte all-reduce (f32 sum,
 * checked), baton_comm_free, exit. Under `baton run -n 2` the whole command is what the startup floor of
 * issue 8 times. Exits 1 when anything fails or the sum is wrong. */
#include <stdio.h>

#include "baton/comm.h"

int main(void) {
    baton_comm *c;
    if (baton_init(&c, NULL) < 0) {
        fprintf(stderr, "startup_baton: %s\n", baton_last_error());
        return 1;
    }
    int w = baton_comm_size(c);
    float x = (float)(baton_comm_rank(c) + 1), sum = 0;
    int rc = baton_allreduce(c, &x, &sum, 1, BATON_F32, BATON_SUM);
    baton_comm_free(c);
    if (rc < 0 || sum != (float)w * (float)(w + 1) / 2) {
        fprintf(stderr, "startup_baton: all-reduce %s\n", rc < 0 ? baton_last_error() : "wrong");
        return 1;
    }
    return 0;
}
