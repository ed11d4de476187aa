/*
 * c_tests/preload/verbs_app.h: what the parts of verbs_app share: the verbs entry points it
 * calls through (V: linked, or taken NCCL-style with dlopen + dlvsym; verbs_app.c), the
 * helpers every scenario uses (verbs_app_util.c) and the scenarios, one file a kind:
 * verbs_app_datapath.c (posts, completions, ibv_qp_ex/ibv_cq_ex, threads, SRQs, a full
 * record), verbs_app_lifecycle.c (fork, QP and record reuse, device close and reopen, telemetry
 * off, dlsym), verbs_app_peers.c (ibv_modify_qp and the peers it names), verbs_app_stall.c
 * (outstanding WRs for the stall detector).
 */
#ifndef VERBS_APP_H
#define VERBS_APP_H
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fake_verbs.h"

struct verbs_table {
  struct ibv_device **(*get_device_list)(int *);
  void (*free_device_list)(struct ibv_device **);
  struct ibv_context *(*open_device)(struct ibv_device *);
  int (*close_device)(struct ibv_context *);
  struct ibv_pd *(*alloc_pd)(struct ibv_context *);
  int (*dealloc_pd)(struct ibv_pd *);
  struct ibv_cq *(*create_cq)(struct ibv_context *, int, void *, struct ibv_comp_channel *, int);
  int (*destroy_cq)(struct ibv_cq *);
  struct ibv_qp *(*create_qp)(struct ibv_pd *, struct ibv_qp_init_attr *);
  int (*destroy_qp)(struct ibv_qp *);
  struct ibv_srq *(*create_srq)(struct ibv_pd *, struct ibv_srq_init_attr *);
  int (*destroy_srq)(struct ibv_srq *);
  struct ibv_qp_ex *(*qp_to_qp_ex)(struct ibv_qp *);
  int (*fork_init)(void);
  void (*connect)(struct ibv_qp *, struct ibv_qp *);
  void (*fail_next)(struct ibv_qp *);
  void (*fail_next_status)(struct ibv_qp *, int, uint32_t);
  void (*inject)(struct ibv_cq *, uint32_t);
  int (*pristine)(struct ibv_context *);
  int (*cq_pristine)(struct ibv_cq_ex *);
  int (*qpx_pristine)(struct ibv_qp_ex *);
  int (*modify_qp)(struct ibv_qp *, struct ibv_qp_attr *, int);
  void (*fail_modify)(struct ibv_qp *, int);
  int (*set_gid)(struct ibv_context *, uint8_t, int, const void *);
  int (*set_lid)(struct ibv_context *, uint8_t, uint16_t);
  unsigned long (*queries)(void);
  void (*hold)(int);
  int (*wait_held)(int, int);
  void (*release)(int);
  void (*recycle_qps)(int);
};
extern struct verbs_table V;

#define FAIL(...)                                                                        \
  do {                                                                                   \
    printf("FAIL: " __VA_ARGS__);                                                        \
    printf("\n");                                                                        \
    exit(1);                                                                             \
  } while (0)

/* verbs_app_util.c */
extern unsigned long g_polls[2];
extern char g_buf[1 << 16];
struct ibv_context *open_dev(int idx);
int dev_of(struct ibv_context *c);
struct ibv_qp *mk_qp_depth(struct ibv_pd *pd, struct ibv_cq *scq, struct ibv_cq *rcq, struct ibv_srq *srq, int sig_all,
                           uint32_t depth);
struct ibv_qp *mk_qp(struct ibv_pd *pd, struct ibv_cq *scq, struct ibv_cq *rcq, struct ibv_srq *srq, int sig_all);
void set_wr(struct ibv_send_wr *w, struct ibv_sge *s, enum ibv_wr_opcode op, uint32_t len, int sig, uint64_t wr_id);
void post_recvs(struct ibv_qp *qp, int n, uint64_t wr_id);
int drain(struct ibv_cq *cq, int n, int want_status);
void poll_empty(struct ibv_cq *cq);
void report(const char *extra);
struct pair {
  struct ibv_context *c;
  struct ibv_pd *pd;
  struct ibv_cq *cqa, *cqb;
  struct ibv_qp *a, *b;
};
void mk_pair(struct pair *p, int dev);
/* The same with a's send queue depth-deep. */
void mk_pair_depth(struct pair *p, int dev, uint32_t depth);
void free_pair(struct pair *p);

/* One round of sc_chain, on pair p (verbs_app_datapath.c; sc_fork's child runs one too). */
void chain_round(struct pair *p);

/* The scenarios (main's argv[1]). */
void sc_chain(int iters);
void sc_errors(void);
void sc_ex(int iters);
void sc_threads(int threads, int iters);
void sc_srq(int n);
void sc_srq_shared(int n);
void sc_full(void);
void sc_fork(int with_fork_init);
void sc_fork_locked(void);
void sc_reuse(int n);
void sc_reopen(void);
void sc_reopen_race(void);
void sc_destroy_race(void);
void sc_churn(int n);
void sc_qploop(int n);
void sc_disabled(void);
void sc_dlnext(void);
void sc_peers(void);
void sc_peers_wide(int n);
void sc_stall(int pause_ms);
void sc_stall_deep(int pause_ms);
void sc_errors_all(void);
#endif
