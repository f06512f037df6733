/* walltime.c: runs a command (stdout and stderr to /dev/null) and prints its wall time in ms, from just before
 * the spawn to the reaped exit, for bench/startup.sh. `date +%s%N` around the command, as the script did
 * first, also counted the start and exit of `date` itself (a few ms per reading on a virtual machine).
 * Exits with the command's status (1 when it could not run or ended by a signal). */
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: walltime CMD [ARG...]\n");
        return 2;
    }
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    pid_t pid;
    if (posix_spawnp(&pid, argv[1], &fa, NULL, argv + 1, environ) != 0) {
        perror("walltime: spawn");
        return 1;
    }
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR) return 1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    printf("%.2f\n", (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
}
