/* train_out.c: the outputs of `baton train`. train_check_outputs checks every output path before the
 * first step, so that a typo never costs a finished run: one table, one check for all of them (--save,
 * --trace, --checkpoint, and whatever output flag comes next: add a row in train.c). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "train.h"

/* Creates and removes a private file in dir: the real test of "can files be created here" (access(2)
 * says yes to root on a read-only mount or /proc). mkstemp opens with O_CREAT|O_EXCL, mode 0600. */
static int probe_dir(const char *flag, const char *dir) {
    char probe[4200];
    if (snprintf(probe, sizeof probe, "%s/.baton-probe-XXXXXX", dir) >= (int)sizeof probe) {
        fprintf(stderr, "baton train: %s: path too long\n", flag);
        return -1;
    }
    int fd = mkstemp(probe);
    if (fd < 0) {
        fprintf(stderr, "baton train: %s: cannot create files in %s: %s; choose a writable directory\n", flag, dir,
                strerror(errno));
        return -1;
    }
    close(fd);
    unlink(probe);
    return 0;
}

/* The directory part of path ("." when there is none). */
static void parent_of(const char *path, char *out, size_t cap) {
    const char *slash = strrchr(path, '/');
    if (!slash) snprintf(out, cap, ".");
    else if (slash == path) snprintf(out, cap, "/");
    else snprintf(out, cap, "%.*s", (int)(slash - path), path);
}

static int check_one(const train_output *t) {
    struct stat st;
    char parent[4096];
    if (!*t->path) {
        fprintf(stderr, "baton train: %s: empty path\n", t->flag);
        return -1;
    }
    if (strlen(t->path) >= sizeof parent) {
        fprintf(stderr, "baton train: %s: path too long\n", t->flag);
        return -1;
    }
    int exists = stat(t->path, &st) == 0;
    if (t->is_dir && exists) {
        if (!S_ISDIR(st.st_mode)) {
            fprintf(stderr, "baton train: %s %s: exists and is not a directory; name a directory\n", t->flag, t->path);
            return -1;
        }
        return probe_dir(t->flag, t->path);
    }
    if (!t->is_dir && exists && S_ISDIR(st.st_mode)) {
        fprintf(stderr, "baton train: %s %s: is a directory; name a file in it, e.g. %s/model.safetensors\n", t->flag,
                t->path, t->path);
        return -1;
    }
    if (!t->is_dir && exists && !S_ISREG(st.st_mode)) {
        fprintf(stderr, "baton train: %s %s: exists and is not a regular file\n", t->flag, t->path);
        return -1;
    }
    parent_of(t->path, parent, sizeof parent);
    if (stat(parent, &st) != 0 || !S_ISDIR(st.st_mode)) {
        fprintf(stderr, "baton train: %s %s: directory %s does not exist; create it first (mkdir -p %s)\n", t->flag,
                t->path, parent, parent);
        return -1;
    }
    return probe_dir(t->flag, parent);
}

int train_check_outputs(const train_output *outs, int n) {
    for (int i = 0; i < n; i++)
        if (outs[i].path && check_one(&outs[i]) < 0) return 2;
    return 0;
}
