/* cli.h: small helpers every `baton` subcommand shares for what a person reads and types.
 *
 *   fprintf(stderr, "%ld %s\n", n, cli_plural(n, "rank", "ranks"));      // "1 rank", "2 ranks"
 *   if (!val) return bad(flag, cli_flag_listed(usage_text, flag) ? "needs a value" : "unknown option");
 *   long cores = cli_cores();                                            // usable by this process */
#ifndef BATON_TOOLS_CLI_H
#define BATON_TOOLS_CLI_H

#include <stdint.h>

/* one when n == 1, else many */
const char *cli_plural(long n, const char *one, const char *many);
/* 1 when the --help text lists flag ("--batch") as a word of its own (so an option without its value can
 * be told apart from an unknown one, and the help text stays the one list of options). */
int cli_flag_listed(const char *usage, const char *flag);
/* Walks a subcommand's options one at a time, "--flag value" or "--flag=value"; the flags in `switches`
 * (NULL-terminated; "--help" always counts as one) take no value:
 *
 *   cli_opts it = {.argc = argc, .argv = argv, .usage = usage_text, .switches = (const char *[]){"--json", NULL}};
 *   int rc;
 *   while ((rc = cli_opts_next(&it)) > 0) {
 *       if (cli_long(&it, "--steps", 1, 1000000, &o->steps) || cli_double(&it, "--lr", 1e-12, 100, &o->lr)) {
 *           if (it.why) return bad(it.flag, it.why);   // the value did not parse: the reason
 *           continue;
 *       }
 *       if (!strcmp(it.flag, "--json")) ...           // it.val: NULL for a switch
 *   }
 *   if (rc < 0) return bad(it.flag, it.why);           // "unexpected argument", "unknown option", "needs a value"
 *
 * With .positional set, an argument that does not start with "--" comes back as 2, in it.val (it.flag "").
 * A flag that needs a value and is the last argument is "needs a value" when the usage text lists it, else
 * "unknown option". it.why points at a static string or at baton_last_error()'s buffer. */
typedef struct {
    int argc;
    char **argv;
    const char *usage;
    const char *const *switches;
    int positional;               /* 1: arguments without "--" are returned (2), not refused */
    int i;                        /* the last argument taken (0 before the first) */
    char flag[64];                /* the current flag, without "=value" */
    const char *val;              /* its value, or NULL for a switch */
    const char *why;              /* set when something did not parse */
} cli_opts;
/* 1 with the next option in it->flag / it->val, 2 with a positional argument in it->val, 0 at the end, -1 with it->why (and it->flag) on bad input. */
int cli_opts_next(cli_opts *it);
/* 1 when it->flag is name: its value parsed into *out, or left alone with it->why set when it is not a
 * number in [lo, hi]; 0 (nothing touched) for another flag. */
int cli_long(cli_opts *it, const char *name, long lo, long hi, long *out);
int cli_int(cli_opts *it, const char *name, int lo, int hi, int *out);
int cli_double(cli_opts *it, const char *name, double lo, double hi, double *out);
/* The same for a seed: a non-negative integer up to 2^64-1, no size suffixes. */
int cli_seed(cli_opts *it, const char *name, uint64_t *out);
/* The cores this process may run on (its CPU affinity mask; the online count if that is unknown), >= 1. */
long cli_cores(void);
/* "1:02:03" / "2:03" for a number of seconds (negative or non-finite: "?"); out needs 16 bytes. */
void cli_format_duration(double seconds, char *out, int cap);

#endif
