/* test_fuzz_corpus.c: replays every checked-in fuzz corpus file (fuzz/corpus/<target>/) through its
 * libFuzzer target, built here by the ordinary compiler without libFuzzer, so a regression the fuzzers once
 * found (or any corpus input that stops satisfying a target's properties) fails `make test`.
 *
 * Each file runs in its own forked child with a timeout: a crash, an abort from a violated FUZZ_CHECK, a
 * sanitizer report (under `make asan`) or a hang is a failure naming the file. Paths are relative to the
 * repo root, where tests run. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

#define FUZZ_ENTRY fuzz_frame_one
#include "../fuzz/fuzz_frame.c"
#undef FUZZ_ENTRY
#define FUZZ_ENTRY fuzz_safetensors_one
#include "../fuzz/fuzz_safetensors.c"
#undef FUZZ_ENTRY
#define FUZZ_ENTRY fuzz_store_one
#include "../fuzz/fuzz_store.c"
#undef FUZZ_ENTRY

typedef int (*fuzz_fn)(const uint8_t *, size_t);

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Runs fn on one file in a child; returns 0, or fails the test naming the file. */
static void replay_one(fuzz_fn fn, const char *path, int timeout_s) {
    FILE *f = fopen(path, "rb");
    if (!f) th_fail(__FILE__, __LINE__, "%s: %s", path, strerror(errno));
    size_t cap = 1 << 16, n = 0;
    uint8_t *buf = malloc(cap);
    size_t r;
    while (buf && (r = fread(buf + n, 1, cap - n, f)) > 0) {
        n += r;
        if (n == cap) buf = realloc(buf, cap *= 2);
    }
    fclose(f);
    if (!buf) th_fail(__FILE__, __LINE__, "out of memory reading %s", path);
    /* an exact-size copy, as libFuzzer hands it, so a read past the input is caught under ASan */
    uint8_t *in = malloc(n ? n : 1);
    if (!in) th_fail(__FILE__, __LINE__, "out of memory");
    memcpy(in, buf, n);
    free(buf);
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) th_fail(__FILE__, __LINE__, "fork: %s", strerror(errno));
    if (pid == 0) {
        alarm((unsigned)timeout_s);
        fn(in, n);
        _exit(0);
    }
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    free(in);
    if (WIFSIGNALED(st))
        th_fail(__FILE__, __LINE__, "%s: the target died of signal %d%s", path, WTERMSIG(st),
                WTERMSIG(st) == SIGALRM ? " (hung)" : "");
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        th_fail(__FILE__, __LINE__, "%s: the target exited %d", path, WEXITSTATUS(st));
}

/* Replays fuzz/corpus/<target>/ in name order; returns how many files it replayed. */
static int replay_dir(const char *target, fuzz_fn fn, int timeout_s) {
    char dir[256];
    snprintf(dir, sizeof dir, "fuzz/corpus/%s", target);
    DIR *d = opendir(dir);
    if (!d) th_fail(__FILE__, __LINE__, "%s: %s (tests run from the repo root)", dir, strerror(errno));
    char **names = NULL;
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        names = realloc(names, (n + 1) * sizeof *names);
        if (!names || !(names[n] = strdup(e->d_name))) th_fail(__FILE__, __LINE__, "out of memory");
        n++;
    }
    closedir(d);
    if (n) qsort(names, n, sizeof *names, by_name);
    int count = 0;
    for (size_t i = 0; i < n; i++) {
        char path[600];
        struct stat sb;
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        if (stat(path, &sb) == 0 && S_ISREG(sb.st_mode)) {
            replay_one(fn, path, timeout_s);
            count++;
        }
        free(names[i]);
    }
    free(names);
    printf("    %s: %d corpus files replayed\n", target, count);
    return count;
}

TEST(frame_corpus_replays_clean) { ASSERT_TRUE(replay_dir("fuzz_frame", fuzz_frame_one, 10) >= 20); }

TEST(safetensors_corpus_replays_clean) { ASSERT_TRUE(replay_dir("fuzz_safetensors", fuzz_safetensors_one, 10) >= 20); }

TEST_T(store_corpus_replays_clean, 120) { ASSERT_TRUE(replay_dir("fuzz_store", fuzz_store_one, 30) >= 20); }

/* The replay must be able to fail: a property violation in a target is a failure naming the file. */
static int always_violates(const uint8_t *d, size_t n) {
    (void)d;
    FUZZ_CHECK(n == (size_t)-1, "deliberate violation for %zu bytes", n);
    return 0;
}

TEST(replay_reports_a_violating_input) {
    fflush(NULL);
    pid_t pid = fork();
    ASSERT_TRUE(pid >= 0);
    if (pid == 0) {
        int fd = open("/dev/null", O_WRONLY);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
        }
        replay_dir("fuzz_frame", always_violates, 10);
        _exit(0);   /* not reached: th_fail exits non-zero */
    }
    int st = 0;
    waitpid(pid, &st, 0);
    ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) != 0);
}
