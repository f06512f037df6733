/* generate.c: `baton generate MODEL.safetensors`: loads a GPT saved by `baton train --model gpt --save` (its
 * configuration is in the file's metadata) and samples text from a prompt (byte tokens). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "baton/gpt.h"
#include "baton/text.h"
#include "ckpt/safetensors.h"
#include "cli.h"
#include "commands.h"
#include "util/util.h"

static const char usage_text[] =
    "usage: baton generate MODEL.safetensors [options]   (docs/gpt.md)\n"
    "  --prompt S          text to continue (default: a newline)\n"
    "  --tokens N          bytes to generate (default 200)\n"
    "  --temperature T     softmax temperature (default 0.8; 0 = always the most likely byte)\n"
    "  --top-k K           sample among the K most likely bytes (default 40; 0 = all)\n"
    "  --seed N            sampling seed (default 1): the same seed gives the same text\n"
    "  --threads T         compute threads (default 1)\n";

static int bad(const char *flag, const char *why) {
    fprintf(stderr, "baton generate: %s: %s (see baton generate --help)\n", flag, why);
    return 2;
}

static int meta_int(baton_st_file *f, const char *path, const char *key, long lo, long hi, int *out) {
    const char *v = baton_st_meta(f, key);
    long l;
    if (!v || baton__parse_long(v, lo, hi, &l) < 0) {
        fprintf(stderr, "baton generate: %s: metadata \"%s\" is %s (a GPT saved by baton train --model gpt --save has it)\n",
                path, key, v ? "out of range" : "missing");
        return -1;
    }
    *out = (int)l;
    return 0;
}

int baton_cmd_generate(int argc, char **argv) {
    const char *model = NULL, *prompt = "\n";
    long tokens = 200, top_k = 40, threads = 1;
    double temp = 0.8;
    uint64_t seed = 1;
    cli_opts it = {.argc = argc, .argv = argv, .usage = usage_text, .positional = 1};
    int rc;
    while ((rc = cli_opts_next(&it)) > 0) {
        if (rc == 2) {
            if (model) return bad(it.val, "one model file only");
            model = it.val;
            continue;
        }
        if (!strcmp(it.flag, "--help")) {
            fputs(usage_text, stdout);
            return 0;
        }
        if (!strcmp(it.flag, "--prompt")) {
            prompt = it.val;
            continue;
        }
        if (cli_long(&it, "--tokens", 1, 1000000, &tokens) || cli_long(&it, "--top-k", 0, BATON_TEXT_VOCAB, &top_k) ||
            cli_long(&it, "--threads", 1, 1024, &threads) || cli_double(&it, "--temperature", 0.0, 100.0, &temp) ||
            cli_seed(&it, "--seed", &seed)) {
            if (it.why) return bad(it.flag, it.why);
            continue;
        }
        return bad(it.flag, "unknown option");
    }
    if (rc < 0) return bad(it.flag, it.why);
    if (!model) return bad("MODEL.safetensors", "missing (a file written by baton train --model gpt --save)");
    size_t np = strlen(prompt);
    if (np == 0) return bad("--prompt", "is empty (give at least one character)");
    baton_set_threads((int)threads);
    baton_st_file *f;
    if (baton_st_open(&f, model) < 0) {
        fprintf(stderr, "baton generate: %s\n", baton_last_error());
        return 2;
    }
    baton_gpt_config c;
    const char *kind = baton_st_meta(f, "model");
    int ok = kind && !strcmp(kind, "gpt");
    if (!ok) fprintf(stderr, "baton generate: %s: not a GPT (metadata model is %s; train one with --model gpt --save)\n",
                     model, kind ? kind : "missing");
    ok = ok && !meta_int(f, model, "vocab", BATON_TEXT_VOCAB, BATON_TEXT_VOCAB, &c.vocab) &&
         !meta_int(f, model, "context", 1, 4096, &c.context) && !meta_int(f, model, "layers", 1, 64, &c.layers) &&
         !meta_int(f, model, "heads", 1, 256, &c.heads) && !meta_int(f, model, "dim", 1, 16384, &c.dim);
    baton_st_close(f);
    if (!ok) return 2;
    baton_gpt *g;
    if (baton_gpt_new(&g, &c, 0) < 0 || baton_st_load_params(model, baton_gpt_params(g)) < 0) {
        fprintf(stderr, "baton generate: %s: %s\n", model, baton_last_error());
        return 2;
    }
    int32_t *buf = malloc((np + (size_t)tokens) * sizeof *buf);
    baton_tape *t = baton_tape_new(baton_gpt_params(g), 1);
    if (!buf || !t) {
        fprintf(stderr, "baton generate: out of memory\n");
        free(buf);
        baton_tape_free(t);
        baton_gpt_free(g);
        return 1;
    }
    for (size_t i = 0; i < np; i++) buf[i] = (unsigned char)prompt[i];
    baton_rng rng;
    baton_rng_seed(&rng, seed);
    baton_gpt_generate(g, t, buf, (int)np, (int)tokens, (float)temp, (int)top_k, &rng);
    for (size_t i = 0; i < np + (size_t)tokens; i++) putchar(buf[i]);
    putchar('\n');
    free(buf);
    baton_tape_free(t);
    baton_gpt_free(g);
    return 0;
}
