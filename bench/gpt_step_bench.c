/* bench/gpt_step_bench.c: CPU and wall time of one forward + backward of the 6 x 384, 6-head, context-256 GPT
 * (no optimizer step), f32 (oneDNN) or bf16, after 2 untimed steps; a cheap A/B of the bf16 against the f32
 * step between builds (the floor itself is bench/gpt_vs_torch.sh's, on the trainer).
 *   cc -std=c11 -O2 -D_GNU_SOURCE -pthread -Iinclude -Isrc bench/gpt_step_bench.c build/libbaton.a \
 *      -lsodium -lcjson -lz -lm -lrt -pthread -o gpt_step_bench
 *   OMP_WAIT_POLICY=PASSIVE ./gpt_step_bench BF16(0|1) THREADS BATCH STEPS */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "baton/gpt.h"
#include "baton/nn.h"
#include "baton/status.h"
static double now(clockid_t c) { struct timespec ts; clock_gettime(c, &ts); return ts.tv_sec + ts.tv_nsec * 1e-9; }
int main(int argc, char **argv) {
    if (argc != 5 || atoi(argv[2]) < 1 || atoi(argv[3]) < 1 || atoi(argv[4]) < 1) {
        fprintf(stderr, "usage: gpt_step_bench BF16(0|1) THREADS BATCH STEPS\n");
        return 2;
    }
    int bf = atoi(argv[1]), thr = atoi(argv[2]), b = atoi(argv[3]), n = atoi(argv[4]);
    baton_set_threads(thr);
    baton_gpt *g;
    baton_gpt_config c = {.vocab = 256, .context = 256, .layers = 6, .heads = 6, .dim = 384};
    if (baton_gpt_new(&g, &c, 1)) return 1;   /* random init; the same for both precisions */
    baton_tape *t = baton_tape_new(baton_gpt_params(g), 1);
    if (baton_tape_set_gemm(t, bf ? BATON_GEMM_ONEDNN_BF16 : BATON_GEMM_ONEDNN)) {
        fprintf(stderr, "gpt_step_bench: %s\n", baton_last_error());
        return 1;
    }
    int32_t *w = malloc(sizeof *w * b * 257);
    for (int i = 0; i < b * 257; i++) w[i] = (i * 7919 + i / 3) & 127;
    double cpu = 0, wall = 0;
    for (int s = 0; s < n + 2; s++) {
        double c0 = now(CLOCK_PROCESS_CPUTIME_ID), w0 = now(CLOCK_MONOTONIC);
        baton_tape_reset(t, 1);
        baton_tensor *loss = baton_gpt_loss(g, t, w, b, 256);
        baton_params_zero_grad(baton_gpt_params(g));
        baton_tape_backward(t, loss, 1.0f);
        if (s >= 2) { cpu += now(CLOCK_PROCESS_CPUTIME_ID) - c0; wall += now(CLOCK_MONOTONIC) - w0; }
    }
    printf("%s thr %d b %d: cpu %.0f ms wall %.0f ms per step\n", bf ? "bf16" : "f32", thr, b, 1e3 * cpu / n, 1e3 * wall / n);
    return 0;
}
