/* ckpt.c: `baton ckpt consolidate DIR -o FILE.safetensors`: the parameters of the newest complete checkpoint
 * of DIR (written by any number of ranks, with or without ZeRO) as one ordinary safetensors file. */
#include <stdio.h>
#include <string.h>

#include "baton/status.h"
#include "ckpt/checkpoint.h"
#include "commands.h"

static const char usage_text[] =
    "usage: baton ckpt consolidate DIR -o FILE.safetensors\n"
    "  writes the parameters of DIR's newest complete checkpoint (every file checked against its COMMIT,\n"
    "  ZeRO optimizer shards included) as one safetensors file, tensors by name (docs/checkpoints.md)\n";

int baton_cmd_ckpt(int argc, char **argv) {
    if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        fputs(usage_text, stdout);
        return 0;
    }
    if (argc < 2 || strcmp(argv[1], "consolidate")) {
        fprintf(stderr, "baton ckpt: expects the subcommand consolidate (see baton ckpt --help)\n");
        return 2;
    }
    const char *dir = NULL, *out = NULL;
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "-o") || !strcmp(argv[i], "--output")) {
            if (i + 1 >= argc) {
                fprintf(stderr, "baton ckpt consolidate: %s needs a file name\n", argv[i]);
                return 2;
            }
            out = argv[++i];
        } else if (argv[i][0] == '-' || dir) {
            fprintf(stderr, "baton ckpt consolidate: unexpected argument '%s' (see baton ckpt --help)\n", argv[i]);
            return 2;
        } else {
            dir = argv[i];
        }
    }
    if (!dir || !out || !*dir || !*out) {
        fprintf(stderr, "baton ckpt consolidate: needs a checkpoint directory and -o FILE.safetensors\n");
        return 2;
    }
    long step = -1;
    int rc = baton_ckpt_consolidate(dir, out, &step);
    if (rc < 0) {
        fprintf(stderr, "baton ckpt consolidate: %s\n", baton_last_error());
        return rc == BATON_ENOTFOUND ? 2 : 1;
    }
    fprintf(stderr, "baton ckpt consolidate: %s/step-%ld -> %s\n", dir, step, out);
    return 0;
}
