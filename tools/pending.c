/* TEMPORARY during the first session's parallel work: weak fallbacks so the tree links while the
 * subcommands are being written. Deleted before the first commit that lands. */
#include <stdio.h>
#include "commands.h"
__attribute__((weak)) int baton_cmd_run(int argc, char **argv) { (void)argc; (void)argv; fprintf(stderr, "baton run: not built yet\n"); return 2; }
__attribute__((weak)) int baton_cmd_bench(int argc, char **argv) { (void)argc; (void)argv; fprintf(stderr, "baton bench: not built yet\n"); return 2; }
__attribute__((weak)) int baton_cmd_train(int argc, char **argv) { (void)argc; (void)argv; fprintf(stderr, "baton train: not built yet\n"); return 2; }
