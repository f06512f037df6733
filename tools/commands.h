/* commands.h: the `baton` subcommands. Each returns the process exit code; only main() exits. */
#ifndef BATON_COMMANDS_H
#define BATON_COMMANDS_H

int baton_cmd_run(int argc, char **argv);    /* tools/run.c: the launcher */
int baton_cmd_bench(int argc, char **argv);  /* tools/bench.c: nccl-tests-style benchmark */
int baton_cmd_train(int argc, char **argv);
int baton_cmd_generate(int argc, char **argv); /* tools/generate.c: sample text from a saved GPT */  /* tools/train.c: the training job */
int baton_cmd_doctor(int argc, char **argv); /* tools/doctor.c: reads flight-recorder dumps */
int baton_cmd_ckpt(int argc, char **argv);   /* tools/ckpt.c: checkpoint utilities (consolidate) */
int baton_cmd_plan(int argc, char **argv);   /* tools/plan.c: the cost model, calibrated on this machine */
int baton_cmd_report(int argc, char **argv); /* tools/report.c: a run's metrics as one HTML page */

#endif
