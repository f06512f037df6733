/* test_shm.c: the shared-memory segment's waits, against the exact interleavings that are rare under
 * load. A peer that posts its last counter (or writes its last bytes) and exits at once must not be taken
 * for dead by a rank that saw the old value a moment before. The waits call the peer-check hook right
 * before they look at the peer's liveness; these tests use that hook to make the peer finish and exit
 * exactly there, every time. */
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "baton/status.h"
#include "harness.h"
#include "transport/shm.h"
#include "util/util.h"

typedef struct {
    int cmd_fd;       /* write end: tells the peer to finish and exit */
    pid_t peer;
    int fired;
} finish_ctx;

/* The hook: on its first call, the peer finishes its part and exits, and is reaped here (so that a
 * liveness check finds it gone), before the wait goes on to look at it. */
static int finish_peer_now(void *ctx, int local_rank) {
    finish_ctx *f = ctx;
    (void)local_rank;
    if (!f->fired) {
        f->fired = 1;
        char go = 'g';
        if (write(f->cmd_fd, &go, 1) != 1) return BATON_OK;
        int st;
        waitpid(f->peer, &st, 0);
    }
    return BATON_OK;
}

static void seg_name(char *out, size_t n) { snprintf(out, n, "/baton-test-shm-%d-n0", (int)getpid()); }

/* Starts local rank 1 as a child that opens the segment, waits for the command, runs `finish` and exits. */
static pid_t start_peer(const char *name, int cmd[2], void (*finish)(baton_shm *)) {
    pid_t pid = fork();
    if (pid == 0) {
        close(cmd[1]);
        static const int globals[2] = {0, 1};
        baton_shm *shm = NULL;
        if (baton__shm_open(name, 1, 2, globals, baton__deadline_after(20), &shm) < 0) _exit(3);
        char c;
        if (read(cmd[0], &c, 1) != 1) _exit(4);
        finish(shm);
        _exit(0); /* at once, without unmapping: as a process that ends right after its last post */
    }
    close(cmd[0]);
    return pid;
}

static void post_and_go(baton_shm *shm) { baton__shm_post(shm, BATON_SHM_CTR_BIG, 1); }

/* Local rank 0 here, local rank 1 a child that runs `finish` and exits when the hook fires. */
typedef struct {
    baton_shm *shm;
    finish_ctx f;
} pair;

/* A fresh segment with local rank 1 in a child running fn; *shm is local rank 0's side, *cmd_w the write end of
 * the child's command pipe. Returns the child's pid. */
static pid_t open_with_peer(void (*fn)(baton_shm *), baton_shm **shm, int *cmd_w) {
    char name[64];
    seg_name(name, sizeof name);
    int cmd[2];
    ASSERT_OK(pipe(cmd) == 0 ? 0 : -1);
    pid_t peer = start_peer(name, cmd, fn);
    static const int globals[2] = {0, 1};
    *shm = NULL;
    ASSERT_OK(baton__shm_open(name, 0, 2, globals, baton__deadline_after(20), shm));
    *cmd_w = cmd[1];
    return peer;
}

static void open_pair(void (*finish)(baton_shm *), pair *p) {
    int cmd_w;
    pid_t peer = open_with_peer(finish, &p->shm, &cmd_w);
    p->f = (finish_ctx){.cmd_fd = cmd_w, .peer = peer};
    baton__shm_set_peer_check(p->shm, finish_peer_now, &p->f);
}

/* Receives `bytes` from local rank 1 over the shm transport. */
static int recv_from_peer(pair *p, uint8_t *buf, size_t bytes) {
    static const int g2l[2] = {0, 1};
    baton_transport *t = NULL;
    ASSERT_OK(baton__shm_transport_create(p->shm, 0, 2, g2l, &t));
    int rc = baton__recv(t, 1, buf, bytes, baton__deadline_after(10));
    t->ops->close(t);
    return rc;
}

TEST(wait_does_not_blame_a_peer_that_posted_and_exited) {
    pair p;
    open_pair(post_and_go, &p);
    int rc = baton__shm_wait_one(p.shm, 1, BATON_SHM_CTR_BIG, 1, baton__deadline_after(10));
    if (rc < 0) th_fail(__FILE__, __LINE__, "wait failed: %s", th_errdetail());
    ASSERT_TRUE(p.f.fired);
    baton__shm_close(p.shm);
}

static void send_and_go(baton_shm *shm) {
    static const int g2l[2] = {0, 1};
    baton_transport *t = NULL;
    if (baton__shm_transport_create(shm, 1, 2, g2l, &t) < 0) _exit(5);
    uint8_t msg[1000];
    for (size_t i = 0; i < sizeof msg; i++) msg[i] = (uint8_t)(i * 7 + 1);
    if (baton__send(t, 0, msg, sizeof msg, baton__deadline_after(10)) < 0) _exit(6);
}

TEST(recv_does_not_blame_a_peer_that_sent_and_exited) {
    pair p;
    open_pair(send_and_go, &p);
    uint8_t got[1000];
    int rc = recv_from_peer(&p, got, sizeof got);
    if (rc < 0) th_fail(__FILE__, __LINE__, "recv failed: %s", th_errdetail());
    for (size_t i = 0; i < sizeof got; i++) ASSERT_EQ_INT(got[i], (uint8_t)(i * 7 + 1));
    ASSERT_TRUE(p.f.fired);
    baton__shm_close(p.shm);
}

/* The fix must not hide a real death: a peer that exits without posting is still named. */
static void exit_silently(baton_shm *shm) { (void)shm; }

TEST(wait_still_names_a_peer_that_died_without_posting) {
    pair p;
    open_pair(exit_silently, &p);
    int rc = baton__shm_wait_one(p.shm, 1, BATON_SHM_CTR_BIG, 1, baton__deadline_after(10));
    ASSERT_EQ_INT(rc, BATON_EPEERDEAD);
    ASSERT_CONTAINS(th_errdetail(), "rank 1");
    ASSERT_CONTAINS(th_errdetail(), "died");
    baton__shm_close(p.shm);
}

static void exit_mid_message(baton_shm *shm) {
    static const int g2l[2] = {0, 1};
    baton_transport *t = NULL;
    if (baton__shm_transport_create(shm, 1, 2, g2l, &t) < 0) _exit(5);
    uint8_t msg[10] = {0};
    if (baton__send(t, 0, msg, sizeof msg, baton__deadline_after(10)) < 0) _exit(6);
}

TEST(recv_still_names_a_peer_that_died_mid_message) {
    pair p;
    open_pair(exit_mid_message, &p);
    uint8_t got[100]; /* the peer sends 10 bytes and exits: the other 90 never come */
    int rc = recv_from_peer(&p, got, sizeof got);
    ASSERT_EQ_INT(rc, BATON_EPEERDEAD);
    ASSERT_CONTAINS(th_errdetail(), "died");
    baton__shm_close(p.shm);
}

/* baton__shm_prefault maps pages in while messages are in flight (--algo auto calls it mid-job): it must not
 * change a byte. The child sends 100 KB (it fits in the 256 KiB ring, so the send completes unread),
 * prefaults its side with the message in its outgoing ring and exits; this side prefaults with the message
 * in its incoming ring, then receives it whole. */
enum { PREFAULT_MSG = 100000 };

static uint8_t prefault_byte(size_t i) { return (uint8_t)(i * 13 + 5); }

static void send_prefault_and_go(baton_shm *shm) {
    static const int g2l[2] = {0, 1};
    baton_transport *t = NULL;
    if (baton__shm_transport_create(shm, 1, 2, g2l, &t) < 0) _exit(5);
    static uint8_t msg[PREFAULT_MSG];
    for (size_t i = 0; i < sizeof msg; i++) msg[i] = prefault_byte(i);
    if (baton__send(t, 0, msg, sizeof msg, baton__deadline_after(10)) < 0) _exit(6);
    baton__shm_prefault(shm);
}

TEST_T(prefault_leaves_messages_in_flight_intact, 30) {
    baton_shm *shm;
    int cmd_w;
    pid_t peer = open_with_peer(send_prefault_and_go, &shm, &cmd_w);
    char go = 'g';
    ASSERT_TRUE(write(cmd_w, &go, 1) == 1);
    int st = 0;
    ASSERT_TRUE(waitpid(peer, &st, 0) == peer);
    close(cmd_w);
    ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    baton__shm_prefault(shm);
    static const int g2l[2] = {0, 1};
    baton_transport *t = NULL;
    ASSERT_OK(baton__shm_transport_create(shm, 0, 2, g2l, &t));
    static uint8_t got[PREFAULT_MSG];
    ASSERT_OK(baton__recv(t, 1, got, sizeof got, baton__deadline_after(10)));
    t->ops->close(t);
    for (size_t i = 0; i < sizeof got; i++)
        if (got[i] != prefault_byte(i)) th_fail(__FILE__, __LINE__, "byte %zu: %u, sent %u", i, got[i], prefault_byte(i));
    baton__shm_close(shm);
}

/* Waking instead of timed naps (issue 10): a wait for a counter that has reached its nap phase sleeps on the
 * posting rank's futex word, and the post wakes it. The peer posts each value only once this rank counts as
 * one of its sleepers (and a millisecond later, when the wait sleeps in a nap of up to 200 us), so the posts
 * find a sleeper to wake; the waits must see every value, and some naps must have ended by a wake. */
enum { WAKE_ROUNDS = 20 };

static void post_to_sleepers(baton_shm *shm) {
    baton_shm_rank *me = baton__shm_rank_block(shm, 1);
    int off = getenv("BATON_SHM_WAKE") != NULL; /* the waiting rank's setting (inherited): off, no sleepers */
    for (uint64_t v = 1; v <= WAKE_ROUNDS; v++) {
        uint64_t until = baton__now_ns() + 20000000000ull;
        while (!off && !atomic_load(&me->sleepers))
            if (baton__now_ns() > until) _exit(8);
        baton__sleep_ns(1000000);
        baton__shm_post(shm, BATON_SHM_CTR_BIG, v);
    }
    uint64_t sent = 0, woken = 0;
    baton__shm_wake_stats(shm, &sent, &woken);
    _exit(off ? (sent == 0 ? 0 : 7) : (sent >= 1 ? 0 : 7));
}

/* Rank 0 here waits for each of the peer's values from the nap phase on; returns the naps a post ended. */
static uint64_t wait_for_posts(int *peer_status) {
    baton_shm *shm;
    int cmd_w;
    pid_t peer = open_with_peer(post_to_sleepers, &shm, &cmd_w);
    char go = 'g';
    ASSERT_TRUE(write(cmd_w, &go, 1) == 1);
    baton__backoff_no_spin(BATON__WAIT_NAP); /* as the comm thread of a rank bound to one CPU */
    for (uint64_t v = 1; v <= WAKE_ROUNDS; v++) {
        int rc = baton__shm_wait_one(shm, 1, BATON_SHM_CTR_BIG, v, baton__deadline_after(30));
        if (rc < 0) th_fail(__FILE__, __LINE__, "wait for %d failed: %s", (int)v, th_errdetail());
        ASSERT_TRUE(atomic_load(&baton__shm_rank_block(shm, 1)->ctr[BATON_SHM_CTR_BIG].v) >= v);
    }
    baton__backoff_no_spin(BATON__WAIT_SPIN);
    ASSERT_EQ_INT(atomic_load(&baton__shm_rank_block(shm, 1)->sleepers), 0);
    uint64_t sent = 0, woken = 0;
    baton__shm_wake_stats(shm, &sent, &woken);
    waitpid(peer, peer_status, 0);
    close(cmd_w);
    baton__shm_close(shm);
    return woken;
}

TEST_T(wait_in_nap_phase_is_woken_by_the_post, 60) {
    int st = 0;
    uint64_t woken = wait_for_posts(&st);
    ASSERT_TRUE(WIFEXITED(st));
    ASSERT_EQ_INT(WEXITSTATUS(st), 0); /* the peer's posts woke a sleeper (7: never; 8: it never saw one) */
    ASSERT_TRUE(woken >= 1);
}

TEST_T(wait_naps_out_with_wake_off, 60) {
    setenv("BATON_SHM_WAKE", "off", 1);
    int st = 0;
    uint64_t woken = wait_for_posts(&st); /* the peer waits for a sleeper: with wake off there is none */
    unsetenv("BATON_SHM_WAKE");
    ASSERT_TRUE(WIFEXITED(st));
    ASSERT_EQ_INT(WEXITSTATUS(st), 0); /* and the peer never found a sleeper to wake */
    ASSERT_EQ_INT((int)woken, 0);
}
