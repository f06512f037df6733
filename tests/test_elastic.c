/* test_elastic.c: `baton run --nnodes MIN:MAX` on loopback, three launchers as separate node processes
 * training one job with checkpoints: the launcher of node 2 is SIGKILLed mid-run (its worker dies with it);
 * the two launchers left re-rendezvous, restart their workers as a world of 2, the workers resume from the
 * last checkpoint (converting the position), and the job finishes. Hard timeout; nothing left behind (the
 * killed launcher's worker dies by its parent-death signal, the others exit). */
#include <stdio.h>
#include <unistd.h>

#include "harness.h"

TEST_T(elastic_node_lost_job_continues_on_the_rest, 400) {
    char cmd[16384], ck[512], out[3][600];
    int port = th_free_port();
    snprintf(ck, sizeof ck, "%s/ck", th_tmpdir());
    for (int i = 0; i < 3; i++) snprintf(out[i], sizeof out[i], "%s/out%d", th_tmpdir(), i);
    const char *train = "--data synthetic --train-samples 2048 --hidden 32 --batch 16 --steps 120 --checkpoint-every 10 "
                        "--warmup 0 --threads 1 --resume --json";
    char node[3][4000];
    for (int i = 0; i < 3; i++)
        snprintf(node[i], sizeof node[i], "%s run -n 1 --nnodes 2:3 --node-rank %d --rdzv 127.0.0.1:%d --max-restarts 3 "
                 "-- %s train %s --checkpoint %s > %s 2>&1", th_baton(), i, port, th_baton(), train, ck, out[i]);
    snprintf(cmd, sizeof cmd,
             "export OPENBLAS_NUM_THREADS=1 BATON_TEST_SLOW_DATA_MS=15 BATON_SECRET=%s; "
             "%s & P0=$!; %s & P1=$!; %s & P2=$!; "
             "i=0; while ! ls %s/step-*/COMMIT >/dev/null 2>&1 && [ $i -lt 6000 ]; do sleep 0.05; i=$((i+1)); done; "
             "kill -9 $P2; wait $P0; r0=$?; wait $P1; r1=$?; wait $P2; echo \"r0=$r0 r1=$r1\"",
             "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff", node[0], node[1], node[2], ck);
    char *o = NULL;
    ASSERT_EQ_INT(th_run(cmd, 380, &o, NULL), 0);
    char *o0 = NULL, *o1 = NULL;
    char c2[700];
    snprintf(c2, sizeof c2, "cat %s", out[0]);
    th_run(c2, 10, &o0, NULL);
    snprintf(c2, sizeof c2, "cat %s", out[1]);
    th_run(c2, 10, &o1, NULL);
    if (!strstr(o, "r0=0 r1=0")) fprintf(stderr, "%s\n--- node 0:\n%s\n--- node 1:\n%s\n", o, o0, o1);
    ASSERT_CONTAINS(o, "r0=0 r1=0");
    /* node ranks follow the join order; rank 0 (the summary) is on whichever node joined first */
    for (int i = 0; i < 2; i++) {
        const char *oi = i ? o1 : o0;
        ASSERT_CONTAINS(oi, "of 3, world size 3");
        ASSERT_CONTAINS(oi, "re-rendezvous with the nodes that are left");
        ASSERT_CONTAINS(oi, "of 2, world size 2");
    }
    const char *r0 = strstr(o0, "\"world_size\":2") ? o0 : o1;
    ASSERT_CONTAINS(r0, "resuming from");
    ASSERT_CONTAINS(r0, "the checkpoint was written by 3 rank(s)");
    ASSERT_CONTAINS(r0, "\"world_size\":2");
    ASSERT_CONTAINS(r0, "\"steps\":120");
    char done[600];
    snprintf(done, sizeof done, "%s/step-120/COMMIT", ck);
    ASSERT_EQ_INT(access(done, F_OK), 0);
    free(o);
    free(o0);
    free(o1);
}

TEST(elastic_bad_flags_one_line) {
    static const char *const bad[] = {"--nnodes 3:2", "--nnodes 0:2", "--nnodes 2:", "--nnodes :3", "--nnodes 1:x"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char cmd[512], *out = NULL;
        snprintf(cmd, sizeof cmd, "BATON_SECRET=00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff %s run %s "
                 "--rdzv 127.0.0.1:1 -- true", th_baton(), bad[i]);
        ASSERT_EQ_INT(th_run(cmd, 20, &out, NULL), 2);
        ASSERT_CONTAINS(out, "--nnodes");
        free(out);
    }
    char cmd[512], *out = NULL;
    snprintf(cmd, sizeof cmd, "BATON_SECRET=00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff %s run "
             "--nnodes 1:2 -- true", th_baton());
    ASSERT_EQ_INT(th_run(cmd, 20, &out, NULL), 2);
    ASSERT_CONTAINS(out, "needs --rdzv");
    free(out);
}

/* A launcher that joins a running job (room below MAX): the round stops, and the job continues on 3 nodes. */
TEST_T(elastic_node_joins_running_job, 400) {
    char cmd[16384], ck[512], out[3][600], node[3][4000];
    int port = th_free_port();
    snprintf(ck, sizeof ck, "%s/ck", th_tmpdir());
    for (int i = 0; i < 3; i++) snprintf(out[i], sizeof out[i], "%s/out%d", th_tmpdir(), i);
    const char *train = "--data synthetic --train-samples 2048 --hidden 32 --batch 16 --steps 120 --checkpoint-every 10 "
                        "--warmup 0 --threads 1 --resume --json";
    for (int i = 0; i < 3; i++)
        snprintf(node[i], sizeof node[i], "%s run -n 1 --nnodes 2:3 --node-rank %d --rdzv 127.0.0.1:%d --max-restarts 3 "
                 "-- %s train %s --checkpoint %s > %s 2>&1", th_baton(), i, port, th_baton(), train, ck, out[i]);
    snprintf(cmd, sizeof cmd,
             "export OPENBLAS_NUM_THREADS=1 BATON_TEST_SLOW_DATA_MS=15 BATON_SECRET=%s; %s & P0=$!; %s & P1=$!; "
             "i=0; while ! ls %s/step-*/COMMIT >/dev/null 2>&1 && [ $i -lt 6000 ]; do sleep 0.05; i=$((i+1)); done; "
             "%s & P2=$!; wait $P0; r0=$?; wait $P1; r1=$?; wait $P2; r2=$?; echo \"r0=$r0 r1=$r1 r2=$r2\"",
             "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff", node[0], node[1], ck, node[2]);
    char *o = NULL, *o2 = NULL;
    ASSERT_EQ_INT(th_run(cmd, 380, &o, NULL), 0);
    char c2[2000];
    snprintf(c2, sizeof c2, "cat %s %s %s", out[0], out[1], out[2]);
    th_run(c2, 10, &o2, NULL);
    if (!strstr(o, "r0=0 r1=0 r2=0")) fprintf(stderr, "%s\n--- nodes:\n%s\n", o, o2);
    ASSERT_CONTAINS(o, "r0=0 r1=0 r2=0");
    ASSERT_CONTAINS(o2, "of 2, world size 2");
    ASSERT_CONTAINS(o2, "a launcher is waiting to join");
    ASSERT_CONTAINS(o2, "of 3, world size 3");
    ASSERT_CONTAINS(o2, "\"world_size\":3");
    ASSERT_CONTAINS(o2, "\"steps\":120");
    free(o);
    free(o2);
}

/* A launcher that asks to join while the job is finishing: node 1's worker has finished, node 0's is still
 * running when the request arrives. The job's completion wins: nobody restarts (each worker ran once), every
 * launcher exits 0, and the late launcher says the job finished. (Before the fix, node 0 stopped its worker
 * for the joiner and the job ran again on 3 nodes; when the finished node hosted the store instead, the others
 * lost it and failed.) */
TEST_T(elastic_join_at_the_end_does_not_restart_a_finished_job, 200) {
    char cmd[16384], dir[512], node[3][4000];
    int port = th_free_port();
    snprintf(dir, sizeof dir, "%s", th_tmpdir());
    /* rank 1 finishes at once; rank 0 waits until the third launcher has asked to join, then a little more */
    char worker[2048];
    snprintf(worker, sizeof worker, "sh -c 'echo $RANK >> %s/runs; if [ \"$RANK\" = 0 ]; then i=0; "
             "while [ ! -e %s/asked ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done; sleep 1.5; fi'", dir, dir);
    for (int i = 0; i < 3; i++)
        snprintf(node[i], sizeof node[i], "%s run -n 1 --nnodes 2:3 --node-rank %d --rdzv 127.0.0.1:%d --max-restarts 3 "
                 "-- %s > %s/out%d 2>&1", th_baton(), i, port, worker, dir, i);
    snprintf(cmd, sizeof cmd,
             "export BATON_SECRET=%s; %s & P0=$!; %s & P1=$!; "
             "i=0; while [ \"$(cat %s/runs 2>/dev/null | wc -l)\" != 2 ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done; "
             "sleep 0.5; %s & P2=$!; "
             "i=0; while ! grep -q 'joining the next one\\|job finished' %s/out2 2>/dev/null && [ $i -lt 600 ]; do sleep 0.05; "
             "i=$((i+1)); done; touch %s/asked; "
             "wait $P0; r0=$?; wait $P1; r1=$?; wait $P2; r2=$?; echo \"r0=$r0 r1=$r1 r2=$r2 runs=$(wc -l < %s/runs)\"",
             "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff", node[0], node[1], dir, node[2], dir,
             dir, dir);
    char *o = NULL, *o2 = NULL;
    ASSERT_EQ_INT(th_run(cmd, 180, &o, NULL), 0);
    char c2[2000];
    snprintf(c2, sizeof c2, "cat %s/out0 %s/out1 %s/out2", dir, dir, dir);
    th_run(c2, 10, &o2, NULL);
    if (!strstr(o, "r0=0 r1=0 r2=0 runs=2")) fprintf(stderr, "%s\n--- launchers:\n%s\n", o, o2);
    ASSERT_CONTAINS(o, "r0=0 r1=0 r2=0 runs=2");
    ASSERT_CONTAINS(o2, "the job finished");
    free(o);
    free(o2);
}

/* The host's worker fails after the other node's finished: the other launcher, waiting for the round to be done,
 * must not exit 0 (the host used to leave as soon as it gave up, and the other launcher took the vanished
 * store for "the host saw everybody done and left"). Three runs. */
TEST_T(a_node_whose_workers_succeeded_exits_1_when_the_host_failed, 120) {
    for (int run = 0; run < 3; run++) {
        char cmd[4096], *out = NULL;
        int port = th_free_port();
        snprintf(cmd, sizeof cmd,
                 "export BATON_SECRET=00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff; "
                 "%s run -n 1 --nnodes 2:2 --node-rank 1 --rdzv 127.0.0.1:%d -- true & P=$!; "
                 "%s run -n 1 --nnodes 2:2 --node-rank 0 --rdzv 127.0.0.1:%d -- sh -c 'sleep 0.5; exit 3'; r0=$?; "
                 "wait $P; echo \"rc0=$r0 rc1=$?\"",
                 th_baton(), port, th_baton(), port);
        ASSERT_EQ_INT(th_run(cmd, 100, &out, NULL), 0);
        if (!strstr(out, "rc0=1 rc1=1")) fprintf(stderr, "%s\n", out);
        ASSERT_CONTAINS(out, "rc0=1 rc1=1");
        free(out);
    }
}

/* A node that goes silent (its launcher stopped: a hung or partitioned machine) while the round's workers are
 * outside any collective: the host reads the round's heartbeats (BATON_NODE_TIMEOUT=2), stops the round, and
 * the two nodes left finish the job in the next round. Before, nobody noticed: the others waited for the silent
 * node's "done" (up to 600 s) once their workers had finished. */
TEST_T(elastic_silent_node_is_dropped_and_the_job_finishes, 120) {
    char cmd[4096], *out = NULL;
    int port = th_free_port();
    const char *prog = "sh -c 'if [ \"$BATON_RESTART_COUNT\" = 0 ]; then sleep 20; fi'";
    snprintf(cmd, sizeof cmd,
             "export BATON_SECRET=00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff BATON_NODE_TIMEOUT=2; "
             "B=%s; R=127.0.0.1:%d; "
             "$B run -n 1 --nnodes 2:3 --node-rank 0 --rdzv $R --max-restarts 2 -- %s & P0=$!; sleep 0.3; "
             "$B run -n 1 --nnodes 2:3 --node-rank 1 --rdzv $R --max-restarts 2 -- %s & P1=$!; sleep 0.3; "
             "$B run -n 1 --nnodes 2:3 --node-rank 2 --rdzv $R --max-restarts 2 -- %s > /dev/null 2>&1 & P2=$!; "
             "sleep 1.5; kill -STOP $P2; t0=$(date +%%s); wait $P0; r0=$?; wait $P1; r1=$?; t1=$(date +%%s); "
             "kill -9 $P2; wait $P2 2>/dev/null; echo \"r0=$r0 r1=$r1 after $((t1 - t0)) s\"",
             th_baton(), port, prog, prog, prog);
    ASSERT_EQ_INT(th_run(cmd, 100, &out, NULL), 0);
    if (!strstr(out, "r0=0 r1=0")) fprintf(stderr, "%s\n", out);
    ASSERT_CONTAINS(out, "r0=0 r1=0");
    ASSERT_CONTAINS(out, "has not been heard from");
    ASSERT_CONTAINS(out, "round 1: node");
    free(out);
}
