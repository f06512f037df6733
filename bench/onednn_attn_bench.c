/* onednn_attn_bench.c: attention's five products per (sequence, head) as one *batched* oneDNN matmul over all
 * B x H = 96 pairs per causal block of 64 query rows (or key columns), f32 and bf16 sources, f32 destination,
 * strided 3-D memory descriptors on compact [B*H, T, D] and [B*H, T, T] buffers, against today's path (src/nn/
 * ops_attn.c: a single-threaded dnnl_sgemm per head, the heads dealt to the OpenMP threads). The GPT's shapes:
 * T = 256, D = 64, batch 16 x 6 heads. Three product kinds cover the five: S = Q K^T (also dP = dY V^T),
 * Y = P V (also dQ = dS K), dV = P^T dY (also dK = dS^T Q). Operands are ready in memory (no conversion is
 * timed). Prints wall ms per layer-pass of each kind, GFLOP/s by wall and by CPU time, and oneDNN's kernel.
 * docs/gpt.md quotes it (issue 13).
 *   cc -O2 -fopenmp bench/onednn_attn_bench.c -o /tmp/oab -ldnnl && OMP_WAIT_POLICY=PASSIVE /tmp/oab [THREADS] [SECONDS] */
#include <oneapi/dnnl/dnnl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <omp.h>
static double cpu(void){struct timespec t;clock_gettime(CLOCK_PROCESS_CPUTIME_ID,&t);return t.tv_sec+t.tv_nsec*1e-9;}
static double wall(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
#define CK(x) do { dnnl_status_t s_ = (x); if (s_ != dnnl_success) { fprintf(stderr, "%s:%d %s -> %d\n", __FILE__, __LINE__, #x, s_); exit(1); } } while (0)
static dnnl_engine_t eng; static dnnl_stream_t st;
enum { BH = 96, T = 256, D = 64, RB = 64 };
static void md3(dnnl_memory_desc_t *md, int r, int c, long bs, long rs, long cs, dnnl_data_type_t dt) {
  dnnl_dims_t d = {BH, r, c}, s = {bs, rs, cs}; CK(dnnl_memory_desc_init_by_strides(md, 3, d, dt, s)); }
static const char *impl(dnnl_primitive_desc_t pd){const char*s=NULL; dnnl_primitive_desc_query(pd,dnnl_query_impl_info_str,0,&s); return s;}
typedef struct { dnnl_primitive_t p; dnnl_memory_t a, b, c; } prim;
/* kind 0: S[r0:r1,:r1] = Q[r0:r1] K[:r1]^T ; kind 1: Y[r0:r1] = P[r0:r1,:r1] V[:r1]; kind 2: dV[j0:j1] = P[j0:, j0:j1]^T dY[j0:] */
static prim mk(int kind, int blk, dnnl_data_type_t dt, char *who) {
  dnnl_memory_desc_t a, b, c; int r0 = blk * RB, r1 = r0 + RB;
  if (kind == 0) { md3(&a, RB, D, (long)T*D, D, 1, dt); md3(&b, D, r1, (long)T*D, 1, D, dt); md3(&c, RB, r1, (long)T*T, T, 1, dnnl_f32); }
  else if (kind == 1) { md3(&a, RB, r1, (long)T*T, T, 1, dt); md3(&b, r1, D, (long)T*D, D, 1, dt); md3(&c, RB, D, (long)T*D, D, 1, dnnl_f32); }
  else { int kk = T - r0; md3(&a, RB, kk, (long)T*T, 1, T, dt); md3(&b, kk, D, (long)T*D, D, 1, dt); md3(&c, RB, D, (long)T*D, D, 1, dnnl_f32); }
  dnnl_matmul_desc_t desc; CK(dnnl_matmul_desc_init(&desc, &a, &b, NULL, &c));
  dnnl_primitive_desc_t pd; CK(dnnl_primitive_desc_create(&pd, &desc, NULL, eng, NULL)); strcpy(who, impl(pd));
  prim r; CK(dnnl_primitive_create(&r.p, pd)); dnnl_primitive_desc_destroy(pd);
  CK(dnnl_memory_create(&r.a, &a, eng, DNNL_MEMORY_NONE)); CK(dnnl_memory_create(&r.b, &b, eng, DNNL_MEMORY_NONE)); CK(dnnl_memory_create(&r.c, &c, eng, DNNL_MEMORY_NONE));
  return r;
}
static double flops(int kind) { double f = 0; for (int blk = 0; blk < T / RB; blk++) { int r0 = blk*RB, r1 = r0+RB; f += kind == 2 ? 2.0*RB*D*(T-r0) : kind == 0 ? 2.0*RB*r1*D : 2.0*RB*D*r1; } return f * BH; }
int main(int argc, char **argv) {
  int thr = argc > 1 ? atoi(argv[1]) : 2; double secs = argc > 2 ? atof(argv[2]) : 0.5;
  omp_set_num_threads(thr);
  CK(dnnl_engine_create(&eng, dnnl_cpu, 0)); CK(dnnl_stream_create(&st, eng, dnnl_stream_default_flags));
  size_t big = (size_t)BH * T * T;
  float *P = aligned_alloc(64, big * 4), *Q = aligned_alloc(64, (size_t)BH*T*D*4), *K = aligned_alloc(64, (size_t)BH*T*D*4), *O = aligned_alloc(64, big * 4);
  unsigned short *Pb = aligned_alloc(64, big * 2), *Qb = aligned_alloc(64, (size_t)BH*T*D*2), *Kb = aligned_alloc(64, (size_t)BH*T*D*2);
  for (size_t i = 0; i < big; i++) { P[i] = (i % 97) * 0.01f; Pb[i] = 0x3c00; O[i] = 0; }
  for (size_t i = 0; i < (size_t)BH*T*D; i++) { Q[i] = K[i] = (i % 89) * 0.01f; Qb[i] = Kb[i] = 0x3c00; }
  const char *names[3] = {"S=QK^T", "Y=PV", "dV=P^T dY"};
  for (int kind = 0; kind < 3; kind++) {
    for (int dtk = 0; dtk < 2; dtk++) {
      dnnl_data_type_t dt = dtk ? dnnl_bf16 : dnnl_f32; char who[4][256]; prim pr[4];
      for (int blk = 0; blk < 4; blk++) pr[blk] = mk(kind, blk, dt, who[blk]);
      void *A = kind == 0 ? (dtk ? (void*)Qb : (void*)Q) : (dtk ? (void*)Pb : (void*)P), *B = dtk ? (void*)Kb : (void*)K;
      int reps = 0; double c0 = cpu(), w0 = wall(), el;
      do { for (int blk = 0; blk < 4; blk++) { int r0 = blk*RB; size_t ao, co;
          if (kind == 0) { ao = (size_t)r0*D; co = (size_t)r0*T; } else if (kind == 1) { ao = (size_t)r0*T; co = (size_t)r0*D; } else { ao = (size_t)r0*T + r0; co = (size_t)r0*D; }
          size_t es = dtk ? 2 : 4; size_t bo = kind == 2 ? (size_t)r0 * D : 0;
          dnnl_memory_set_data_handle(pr[blk].a, (char*)A + ao*es); dnnl_memory_set_data_handle(pr[blk].b, (char*)B + bo*es); dnnl_memory_set_data_handle(pr[blk].c, O + co);
          dnnl_exec_arg_t args[3] = {{DNNL_ARG_SRC, pr[blk].a}, {DNNL_ARG_WEIGHTS, pr[blk].b}, {DNNL_ARG_DST, pr[blk].c}};
          CK(dnnl_primitive_execute(pr[blk].p, st, 3, args)); } reps++; } while ((el = wall() - w0) < secs);
      double c = cpu() - c0;
      printf("%-10s %s batched: wall %.2f ms  %.0f GFLOP/s wall, %.0f cpu  [%s | %s]\n", names[kind], dtk ? "bf16" : "f32 ", 1e3*el/reps, flops(kind)*reps/el*1e-9, flops(kind)*reps/c*1e-9, who[0], who[3]);
    }
    /* per-head sgemm, heads over threads (today's f32 path) */
    int reps = 0; double c0 = cpu(), w0 = wall(), el;
    do {
      #pragma omp parallel for schedule(static)
      for (int bh = 0; bh < BH; bh++) for (int blk = 0; blk < 4; blk++) { int r0 = blk*RB, r1 = r0+RB;
        const float *q = Q + (size_t)bh*T*D, *k = K + (size_t)bh*T*D, *p = P + (size_t)bh*T*T; float *o = O + (size_t)bh*T*T;
        if (kind == 0) dnnl_sgemm('N','T',RB,r1,D,1.0f,q+(size_t)r0*D,D,k,D,0.0f,o+(size_t)r0*T,T);
        else if (kind == 1) dnnl_sgemm('N','N',RB,D,r1,1.0f,p+(size_t)r0*T,T,k,D,0.0f,o+(size_t)r0*D,D);
        else dnnl_sgemm('T','N',RB,D,T-r0,1.0f,p+(size_t)r0*T+r0,T,k+(size_t)r0*D,D,0.0f,o+(size_t)r0*D,D); }
      reps++; } while ((el = wall() - w0) < secs);
    double c = cpu() - c0;
    printf("%-10s f32  per-head sgemm: wall %.2f ms  %.0f GFLOP/s wall, %.0f cpu\n", names[kind], 1e3*el/reps, flops(kind)*reps/el*1e-9, flops(kind)*reps/c*1e-9);
  }
  return 0;
}
