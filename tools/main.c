/* main.c: `baton COMMAND [ARGS...]`. */
#include <stdio.h>
#include <string.h>

#include "commands.h"

#ifndef BATON_VERSION_STRING   /* the Makefile passes BATON_VERSION */
#error "build with -DBATON_VERSION_STRING='\"x.y.z\"' (the Makefile does)"
#endif

static const struct {
    const char *name;
    int (*fn)(int, char **);
    const char *help;
} commands[] = {
    {"run", baton_cmd_run, "launch N workers (torchrun-style): baton run -n N [--] PROGRAM [ARGS...]"},
    {"train", baton_cmd_train, "train a model, alone or under `baton run`"},
    {"generate", baton_cmd_generate, "sample text from a GPT saved by `baton train --model gpt --save`"},
    {"bench", baton_cmd_bench, "benchmark a collective (nccl-tests style), under `baton run`"},
    {"ckpt", baton_cmd_ckpt, "checkpoint utilities: baton ckpt consolidate DIR -o model.safetensors"},
    {"plan", baton_cmd_plan, "predict a job before launching it: all-reduce time, efficiency, wall-clock, memory"},
    {"report", baton_cmd_report, "draw a training run's metrics as one HTML page: baton report RUN_DIR -o report.html"},
    {"doctor", baton_cmd_doctor, "read the ranks' flight-recorder dumps: where they diverged, who lagged"},
};

static void usage(FILE *f) {
    fprintf(f, "usage: baton COMMAND [ARGS...]\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-6s %s\n", commands[i].name, commands[i].help);
    fprintf(f, "\n`baton COMMAND --help` describes each; `baton --version` prints the version.\n");
}

int main(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "-V") || !strcmp(argv[1], "version")) {
        printf("baton %s\n", BATON_VERSION_STRING);
        return 0;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[1], commands[i].name)) return commands[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "baton: unknown command '%s' (try: baton --help)\n", argv[1]);
    return 2;
}
