/* test_scale.c: the limits that let a job grow to hundreds of ranks, each at its edge: a node segment of 512
 * local ranks (every rank attached, a message larger than the shrunken p2p ring passed around the ring of
 * all 512), 513 refused with a one-line error naming the limit, the ring sizes, and the oversubscribed wait
 * mode. The whole-job runs (512 local ranks, 256 ranks on 4 simulated nodes) are tests/cluster/test_scale.sh. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "transport/shm.h"
#include "util/util.h"

enum { MSG = 10000 }; /* bytes: more than twice the 4 KiB ring of 512 ranks, so it wraps */

typedef struct {
    const char *name;
    int rank, size, rc;
    int *g2l;
    char err[300];
} shm_arg;

static void *shm_rank(void *p) {
    shm_arg *a = p;
    baton_shm *shm = NULL;
    baton_transport *tp = NULL;
    uint64_t deadline = baton__deadline_after(90);
    a->rc = baton__shm_open(a->name, a->rank, a->size, NULL, deadline, &shm);
    if (a->rc >= 0) a->rc = baton__shm_transport_create(shm, a->rank, a->size, a->g2l, &tp);
    if (a->rc >= 0) { /* pass a message to the next rank, receive one from the previous */
        unsigned char out[MSG], in[MSG];
        int prev = (a->rank + a->size - 1) % a->size;
        for (int i = 0; i < MSG; i++) out[i] = (unsigned char)(a->rank * 7 + i);
        a->rc = tp->ops->sendrecv(tp, (a->rank + 1) % a->size, out, MSG, prev, in, MSG, deadline, NULL);
        for (int i = 0; a->rc >= 0 && i < MSG; i++)
            if (in[i] != (unsigned char)(prev * 7 + i)) {
                snprintf(a->err, sizeof a->err, "rank %d: byte %d from rank %d is wrong", a->rank, i, prev);
                a->rc = -1;
                return NULL;
            }
    }
    if (a->rc < 0 && !a->err[0]) snprintf(a->err, sizeof a->err, "rank %d: %s", a->rank, baton_last_error());
    if (tp) tp->ops->close(tp);
    baton__shm_close(shm);
    return NULL;
}

/* All 512 local ranks of one node (threads here, processes in a job) attach to one segment and pass a message
 * around the ring through their 4 KiB p2p rings; the segment's name is gone afterwards. */
TEST_T(shm_segment_of_512_local_ranks, 120) {
    enum { L = BATON_SHM_MAX_LOCAL };
    ASSERT_EQ_INT(L, 512);
    char name[64];
    snprintf(name, sizeof name, "/baton-test-scale-%d", (int)getpid());
    static shm_arg args[L];
    static pthread_t th[L];
    static int g2l[L];
    for (int r = 0; r < L; r++) g2l[r] = r;
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setstacksize(&at, 256 << 10);
    baton__backoff_set_load(L, 2);
    for (int r = 0; r < L; r++) {
        args[r] = (shm_arg){.name = name, .rank = r, .size = L, .g2l = g2l};
        ASSERT_EQ_INT(pthread_create(&th[r], &at, shm_rank, &args[r]), 0);
    }
    for (int r = 0; r < L; r++) pthread_join(th[r], NULL);
    for (int r = 0; r < L; r++)
        if (args[r].rc < 0) th_fail(__FILE__, __LINE__, "%s", args[r].err);
    char path[96];
    snprintf(path, sizeof path, "/dev/shm%s", name);
    ASSERT_TRUE(access(path, F_OK) != 0);
}

TEST(shm_refuses_513_local_ranks_naming_the_limit) {
    baton_shm *shm = NULL;
    int rc = baton__shm_open("/baton-test-scale-513", 0, BATON_SHM_MAX_LOCAL + 1, NULL, baton__deadline_after(5), &shm);
    ASSERT_EQ_INT(rc, BATON_EINVAL);
    ASSERT_TRUE(shm == NULL);
    const char *e = baton_last_error();
    ASSERT_CONTAINS(e, "513 local ranks");
    ASSERT_CONTAINS(e, "limit of 512");
    ASSERT_CONTAINS(e, "BATON_SHM_MAX_LOCAL");
    ASSERT_TRUE(strchr(e, '\n') == NULL);
    ASSERT_TRUE(access("/dev/shm/baton-test-scale-513", F_OK) != 0);
}

/* 256 KiB rings up to 64 ranks, a quarter per doubling past it, 4 KiB at 512: L*L rings stay <= 1 GiB. */
TEST(shm_rings_shrink_past_64_ranks) {
    ASSERT_EQ_INT(baton__shm_chan_bytes(2), 256 << 10);
    ASSERT_EQ_INT(baton__shm_chan_bytes(64), 256 << 10);
    ASSERT_EQ_INT(baton__shm_chan_bytes(65), 64 << 10);
    ASSERT_EQ_INT(baton__shm_chan_bytes(128), 64 << 10);
    ASSERT_EQ_INT(baton__shm_chan_bytes(256), 16 << 10);
    ASSERT_EQ_INT(baton__shm_chan_bytes(512), 4 << 10);
    for (int L = 1; L <= BATON_SHM_MAX_LOCAL; L++)
        ASSERT_TRUE((uint64_t)L * (uint64_t)L * baton__shm_chan_bytes(L) <= (uint64_t)1 << 30);
}

/* Waits stop spinning past 4 ranks per CPU (512 ranks on 2 cores), and spin again below. */
TEST(waits_stop_spinning_when_ranks_outnumber_cpus) {
    baton__backoff_set_load(8, 2);
    ASSERT_EQ_INT(baton__backoff_oversubscribed(), 0);
    baton_backoff b;
    baton__backoff_init(&b);
    ASSERT_EQ_INT(b.iter, 0);
    baton__backoff_set_load(512, 2);
    ASSERT_EQ_INT(baton__backoff_oversubscribed(), 1);
    baton__backoff_init(&b);
    int i = 0;
    while (b.nap_ns < b.nap_max_ns && i < 100) {
        baton__backoff(&b);
        i++;
    }
    ASSERT_TRUE(i < 100);                     /* reaches its longest nap within a few dozen calls */
    ASSERT_TRUE(b.nap_max_ns >= 1000000);     /* and naps are long (>= 1 ms at 256 ranks per CPU) */
    baton__backoff_set_load(1, 2);
    ASSERT_EQ_INT(baton__backoff_oversubscribed(), 0);
}

/* With more ranks than CPUs at all (3 on 2 cores, not yet oversubscribed past 4 per CPU), a wait starts at
 * sched_yield instead of spinning 4000 pauses on a CPU the awaited rank may share; with a CPU each it spins
 * first. A thread told to nap from its first wait (a comm thread) still naps. */
TEST(waits_start_at_yield_when_ranks_share_cpus) {
    baton_backoff b;
    baton__backoff_set_load(3, 2);
    ASSERT_EQ_INT(baton__backoff_cpus_shared(), 1);
    ASSERT_EQ_INT(baton__backoff_oversubscribed(), 0);
    baton__backoff_init(&b);
    ASSERT_EQ_INT(baton__backoff_naps(&b), 0);
    baton__backoff(&b);
    ASSERT_EQ_INT((int)b.iter, 4001); /* the first call was the first sched_yield */
    ASSERT_EQ_INT(baton__backoff_wait_mode(), BATON__WAIT_YIELD); /* what the MPI transport's wait follows */
    baton__backoff_no_spin(BATON__WAIT_NAP);
    baton__backoff_init(&b);
    ASSERT_EQ_INT(baton__backoff_naps(&b), 1);
    ASSERT_EQ_INT(baton__backoff_wait_mode(), BATON__WAIT_NAP);
    baton__backoff_no_spin(BATON__WAIT_SPIN);
    baton__backoff_set_load(2, 2);
    ASSERT_EQ_INT(baton__backoff_cpus_shared(), 0);
    ASSERT_EQ_INT(baton__backoff_wait_mode(), BATON__WAIT_SPIN);
    baton__backoff_init(&b);
    baton__backoff(&b);
    ASSERT_EQ_INT((int)b.iter, 1);    /* a pause */
    baton__backoff_set_load(1, 2);
}

/* Past the limit, the launcher and baton_init refuse at once (before starting or joining anything), each
 * with one line naming BATON_SHM_MAX_LOCAL (not at the join timeout, which is longer than the test's). */
TEST(launcher_and_init_refuse_513_local_ranks) {
    char cmd[1024], *out = NULL;
    snprintf(cmd, sizeof cmd, "unset BATON_TRANSPORT; %s run -n 513 -- /bin/true", th_baton());
    int rc = th_run(cmd, 30, &out, NULL);
    ASSERT_EQ_INT(rc, 2);
    ASSERT_CONTAINS(out, "-n 513 is over the limit of 512 ranks per node");
    ASSERT_CONTAINS(out, "BATON_SHM_MAX_LOCAL");
    ASSERT_EQ_INT(strchr(out, '\n') - out, (long)strlen(out) - 1);
    free(out);
    snprintf(cmd, sizeof cmd, "unset BATON_TRANSPORT BATON_STORE_ADDR; BATON_RANK=3 BATON_WORLD_SIZE=513 BATON_LOCAL_RANK=3 "
             "BATON_LOCAL_WORLD_SIZE=513 BATON_NODE_RANK=0 BATON_NNODES=1 BATON_JOIN_TIMEOUT=30 %s/tests/prog_topo",
             th_build_dir());
    rc = th_run(cmd, 20, &out, NULL);
    ASSERT_EQ_INT(rc, 1);
    ASSERT_CONTAINS(out, "513 local ranks on one node is over the limit of 512");
    ASSERT_CONTAINS(out, "BATON_SHM_MAX_LOCAL");
    free(out);
}
