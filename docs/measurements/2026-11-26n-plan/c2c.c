#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
/* one-way cache-line handoff latency between CPU 0 and CPU 1, and a cross-core copy bandwidth */
static _Alignas(64) _Atomic long flag;
static int N = 200000;
static void pin(int c){cpu_set_t s;CPU_ZERO(&s);CPU_SET(c,&s);pthread_setaffinity_np(pthread_self(),sizeof s,&s);}
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
static char *buf; static size_t B; static _Atomic int phase;
static void *peer(void *a){(void)a;pin(1);
  for(long i=0;i<N;i++){while(atomic_load_explicit(&flag,memory_order_acquire)!=2*i+1);atomic_store_explicit(&flag,2*i+2,memory_order_release);}
  /* write buffer, hand over */
  for(int r=0;r<20;r++){while(atomic_load(&phase)!=2*r+1);memset(buf,r,B);atomic_store(&phase,2*r+2);}
  return 0;}
int main(int argc,char**argv){B=(argc>1?atol(argv[1]):512)<<10; buf=aligned_alloc(4096,B); char*dst=aligned_alloc(4096,B);memset(buf,1,B);memset(dst,1,B);
  pthread_t t;pthread_create(&t,0,peer,0);pin(0);
  double lat=1e9;
  for(long j=0;j<N;j+=1000){double t0=now();
  for(long i=j;i<j+1000;i++){atomic_store_explicit(&flag,2*i+1,memory_order_release);while(atomic_load_explicit(&flag,memory_order_acquire)!=2*i+2);}
  double l=(now()-t0)/1000/2*1e9; if(l<lat)lat=l;}
  double best=1e9;
  for(int r=0;r<20;r++){atomic_store(&phase,2*r+1);while(atomic_load(&phase)!=2*r+2);double a=now();memcpy(dst,buf,B);double d=now()-a;if(d<best)best=d;}
  /* local copy for reference */
  double lbest=1e9; for(int r=0;r<20;r++){memset(buf,r,B);double a=now();memcpy(dst,buf,B);double d=now()-a;if(d<lbest)lbest=d;}
  pthread_join(t,0);
  printf("c2c_ns %.1f  xcopy_GBps %.2f  localcopy_GBps %.2f  (%zu KiB)\n",lat,B/best/1e9,B/lbest/1e9,B>>10);return 0;}
