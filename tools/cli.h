/* cli.h: small helpers every `baton` subcommand shares for what a person reads and types.
 *
 *   fprintf(stderr, "%ld %s\n", n, cli_plural(n, "rank", "ranks"));      // "1 rank", "2 ranks"
 *   if (!val) return bad(flag, cli_flag_listed(usage_text, flag) ? "needs a value" : "unknown option");
 *   long cores = cli_cores();                                            // usable by this process */
#ifndef BATON_TOOLS_CLI_H
#define BATON_TOOLS_CLI_H

/* one when n == 1, else many */
const char *cli_plural(long n, const char *one, const char *many);
/* 1 when the --help text lists flag ("--batch") as a word of its own (so an option without its value can
 * be told apart from an unknown one, and the help text stays the one list of options). */
int cli_flag_listed(const char *usage, const char *flag);
/* The cores this process may run on (its CPU affinity mask; the online count if that is unknown), >= 1. */
long cli_cores(void);
/* "1:02:03" / "2:03" for a number of seconds (negative or non-finite: "?"); out needs 16 bytes. */
void cli_format_duration(double seconds, char *out, int cap);

#endif
