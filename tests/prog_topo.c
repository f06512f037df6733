/* prog_topo.c: joins the job the environment describes and prints what baton found, one line per rank:
 *   topo: rank R/W local L/S node N/M transport T launcher X sum OK
 * (after an all-reduce of the ranks' numbers, checked), so tests can assert the topology each launcher
 * family yields, not only that results are right. */
#include <stdio.h>

#include "baton/comm.h"

int main(void) {
    baton_launch_env le;
    if (baton_launch_env_read(&le) < 0) {
        fprintf(stderr, "prog_topo: %s\n", baton_last_error());
        return 2;
    }
    baton_comm *c;
    if (baton_init(&c, NULL) < 0) {
        fprintf(stderr, "prog_topo: baton_init: %s\n", baton_last_error());
        return 1;
    }
    int r = baton_comm_rank(c), w = baton_comm_size(c);
    double x = r + 1, sum = 0;
    int rc = baton_allreduce(c, &x, &sum, 1, BATON_F64, BATON_SUM);
    printf("topo: rank %d/%d local %d/%d node %d/%d transport %s launcher %s sum %s\n", r, w, baton_comm_local_rank(c),
           baton_comm_local_size(c), baton_comm_node_rank(c), baton_comm_num_nodes(c),
           baton_transport_name(baton_comm_transport(c)), le.launcher,
           rc == 0 && sum == (double)w * (w + 1) / 2 ? "OK" : "WRONG");
    fflush(stdout);
    baton_comm_free(c);
    return rc == 0 ? 0 : 1;
}
