/* onednn_matmul_bench.c: oneDNN's matmul primitive alone (no baton code, no conversions, operands ready in memory)
 * on the 6 x 384 GPT's shapes at batch 16 x context 256, in CPU GFLOP/s (CLOCK_PROCESS_CPUTIME_ID, so a loaded
 * machine distorts it less than wall time): f32 and bf16 sources, weights in the given plain layout or in the
 * layout the primitive picks (format_tag any, packed once outside the timing), f32 or bf16 destination.
 * "TT" is the transposes of the source and the weights; dW' is a weight gradient with its first operand
 * already transposed. This is what docs/gpt.md's bf16 section quotes; it separates the library's speed from
 * what baton adds around it (bench/gemm_bench.c measures baton_gemm, conversions included).
 * The scratchpad is user-managed, allocated once per primitive, as src/nn/gemm.c passes it (oneDNN's default
 * allocates and frees it at every execution, which this bench timed until 2026-11-27).
 *   cc -O2 -fopenmp bench/onednn_matmul_bench.c -o /tmp/omb -ldnnl && /tmp/omb [SECONDS_PER_CASE] [THREADS] */
#include <oneapi/dnnl/dnnl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <omp.h>
static double cpu(void){struct timespec t;clock_gettime(CLOCK_PROCESS_CPUTIME_ID,&t);return t.tv_sec+t.tv_nsec*1e-9;}
#define CK(x) do { dnnl_status_t s_ = (x); if (s_ != dnnl_success) { fprintf(stderr, "%s:%d %s -> %d\n", __FILE__, __LINE__, #x, s_); exit(1); } } while (0)
static dnnl_engine_t eng; static dnnl_stream_t st;
static void mdp(dnnl_memory_desc_t *md,int r,int c,int trans,dnnl_data_type_t dt){ // plain, compact
  dnnl_dims_t d={r,c}, s={trans?1:c, trans?r:1}; CK(dnnl_memory_desc_init_by_strides(md,2,d,dt,s)); }
static const char *impl(dnnl_primitive_desc_t pd){const char*s=NULL; dnnl_primitive_desc_query(pd,dnnl_query_impl_info_str,0,&s); return s;}
// variant: wany = weights format any (prepacked once), ta/tb plain transposes, dst dt
static double run(int ta,int tb,int m,int n,int k,dnnl_data_type_t sdt,dnnl_data_type_t ddt,int wany,double secs,char *who){
  dnnl_memory_desc_t a,b,c,bu; mdp(&a,m,k,ta,sdt); mdp(&c,m,n,0,ddt); mdp(&bu,k,n,tb,sdt);
  if(wany){ dnnl_dims_t d={k,n}; CK(dnnl_memory_desc_init_by_tag(&b,2,d,sdt,dnnl_format_tag_any)); } else b=bu;
  dnnl_matmul_desc_t desc; CK(dnnl_matmul_desc_init(&desc,&a,&b,NULL,&c));
  dnnl_primitive_attr_t at; CK(dnnl_primitive_attr_create(&at)); CK(dnnl_primitive_attr_set_scratchpad_mode(at,dnnl_scratchpad_mode_user));
  dnnl_primitive_desc_t pd; CK(dnnl_primitive_desc_create(&pd,&desc,at,eng,NULL)); dnnl_primitive_attr_destroy(at);
  dnnl_memory_t ms; CK(dnnl_memory_create(&ms,dnnl_primitive_desc_query_md(pd,dnnl_query_scratchpad_md,0),eng,DNNL_MEMORY_ALLOCATE));
  strcpy(who, impl(pd));
  const dnnl_memory_desc_t *bw=dnnl_primitive_desc_query_md(pd,dnnl_query_weights_md,0);
  dnnl_primitive_t p; CK(dnnl_primitive_create(&p,pd));
  dnnl_memory_t ma,mb,mc; CK(dnnl_memory_create(&ma,&a,eng,DNNL_MEMORY_ALLOCATE)); CK(dnnl_memory_create(&mb,bw,eng,DNNL_MEMORY_ALLOCATE)); CK(dnnl_memory_create(&mc,&c,eng,DNNL_MEMORY_ALLOCATE));
  void *h; size_t es = sdt==dnnl_f32?4:2; dnnl_memory_get_data_handle(ma,&h); memset(h,0x3c,(size_t)m*k*es);
  dnnl_memory_get_data_handle(mb,&h); memset(h,0x3c,dnnl_memory_desc_get_size(bw));
  dnnl_exec_arg_t args[4]={{DNNL_ARG_SRC,ma},{DNNL_ARG_WEIGHTS,mb},{DNNL_ARG_DST,mc},{DNNL_ARG_SCRATCHPAD,ms}};
  CK(dnnl_primitive_execute(p,st,4,args)); dnnl_stream_wait(st);
  int reps=0; double t0=cpu(),el;
  do{ CK(dnnl_primitive_execute(p,st,4,args)); reps++; }while((el=cpu()-t0)<secs);
  dnnl_primitive_destroy(p); dnnl_primitive_desc_destroy(pd); dnnl_memory_destroy(ma);dnnl_memory_destroy(mb);dnnl_memory_destroy(mc);dnnl_memory_destroy(ms);
  return 2.0*m*n*k*reps/el*1e-9;
}
int main(int argc,char**argv){
  double secs = argc>1?atof(argv[1]):0.3; int thr = argc>2?atoi(argv[2]):1;
  omp_set_num_threads(thr);
  CK(dnnl_engine_create(&eng,dnnl_cpu,0)); CK(dnnl_stream_create(&st,eng,dnnl_stream_default_flags));
  int R=4096,C=384;
  struct {const char*w;int ta,tb,m,n,k;} sh[]={
   {"qkv fwd",0,1,R,3*C,C},{"qkv dX",0,0,R,C,3*C},{"qkv dW",1,0,3*C,C,R},{"qkv dW'",0,0,3*C,C,R},
   {"proj fwd",0,1,R,C,C},{"proj dX",0,0,R,C,C},{"proj dW'",0,0,C,C,R},
   {"fc fwd",0,1,R,4*C,C},{"fc dX",0,0,R,C,4*C},{"fc dW'",0,0,4*C,C,R},
   {"fc2 fwd",0,1,R,C,4*C},{"fc2 dX",0,0,R,4*C,C},{"fc2 dW'",0,0,C,4*C,R},
   {"head fwd",0,1,R,256,C},{"head dX",0,0,R,C,256},{"head dW'",0,0,256,C,R},
   {"att QK",0,1,256,256,64},{"att PV",0,0,256,64,256},
   {"sq1536",0,0,1536,1536,1536},
  };
  char who[6][128];
  printf("%-9s %5s %5s %5s %s | %8s %8s %8s %8s %8s %8s\n","shape","M","N","K","TT","f32","f32any","bf16","bf16any","bf->bf","bfbfany");
  for(unsigned i=0;i<sizeof sh/sizeof sh[0];i++){
    double r[6];
    r[0]=run(sh[i].ta,sh[i].tb,sh[i].m,sh[i].n,sh[i].k,dnnl_f32,dnnl_f32,0,secs,who[0]);
    r[1]=run(sh[i].ta,sh[i].tb,sh[i].m,sh[i].n,sh[i].k,dnnl_f32,dnnl_f32,1,secs,who[1]);
    r[2]=run(sh[i].ta,sh[i].tb,sh[i].m,sh[i].n,sh[i].k,dnnl_bf16,dnnl_f32,0,secs,who[2]);
    r[3]=run(sh[i].ta,sh[i].tb,sh[i].m,sh[i].n,sh[i].k,dnnl_bf16,dnnl_f32,1,secs,who[3]);
    r[4]=run(sh[i].ta,sh[i].tb,sh[i].m,sh[i].n,sh[i].k,dnnl_bf16,dnnl_bf16,0,secs,who[4]);
    r[5]=run(sh[i].ta,sh[i].tb,sh[i].m,sh[i].n,sh[i].k,dnnl_bf16,dnnl_bf16,1,secs,who[5]);
    printf("%-9s %5d %5d %5d %d%d | %8.1f %8.1f %8.1f %8.1f %8.1f %8.1f   %s/%s/%s/%s\n",sh[i].w,sh[i].m,sh[i].n,sh[i].k,sh[i].ta,sh[i].tb,r[0],r[1],r[2],r[3],r[4],r[5],who[0],who[1],who[2],who[3]);
    fflush(stdout);
  }
  return 0;
}
