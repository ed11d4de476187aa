/*
 * c_tests/preload/verbs_app.c (with verbs_app_*.c): an ibverbs program that knows nothing of telemetry, run
 * under librccl_telemetry_preload.so over the fake libibverbs (fake_verbs.c) by
 * preload/tests/interposer/. Built twice: linked against libibverbs (verbs_app), and
 * with -DLOAD_LIKE_NCCL (verbs_app_nccl), which links no libibverbs and takes every entry
 * point the way NCCL's and RCCL's ibvwrap do: dlopen("libibverbs.so.1") after start, then
 * dlvsym(handle, name, "IBVERBS_1.1") / dlsym. Both run the same scenarios through the same
 * function table, so their files must agree.
 *
 *   verbs_app SCENARIO [ARGS]   prints one JSON line of what it did (poll calls per device,
 *                               pids, memory), exits 0, or prints "FAIL: ..." and exits 1.
 *
 * This file: how the entry points are reached (load), and main, which runs the scenario
 * named. The scenarios are in verbs_app_*.c (verbs_app.h lists them).
 */
#include "verbs_app.h"

struct verbs_table V;

#ifdef LOAD_LIKE_NCCL
static void *sym(void *h, const char *name, const char *ver) {
  void *p = ver ? dlvsym(h, name, ver) : dlsym(h, name);
  if (!p) FAIL("%s not found: %s", name, dlerror());
  return p;
}
static void load(void) {
  if (dlopen("libibverbs.so.1", RTLD_NOW | RTLD_NOLOAD)) FAIL("libibverbs is loaded before dlopen");
  void *h = dlopen("libibverbs.so.1", RTLD_NOW);
  if (!h) FAIL("dlopen libibverbs.so.1: %s", dlerror());
#define S(field, name, ver) *(void **)&V.field = sym(h, name, ver)
  S(get_device_list, "ibv_get_device_list", "IBVERBS_1.1");
  S(free_device_list, "ibv_free_device_list", "IBVERBS_1.1");
  S(open_device, "ibv_open_device", "IBVERBS_1.1");
  S(close_device, "ibv_close_device", "IBVERBS_1.1");
  S(alloc_pd, "ibv_alloc_pd", "IBVERBS_1.1");
  S(dealloc_pd, "ibv_dealloc_pd", "IBVERBS_1.1");
  S(create_cq, "ibv_create_cq", "IBVERBS_1.1");
  S(destroy_cq, "ibv_destroy_cq", "IBVERBS_1.1");
  S(create_qp, "ibv_create_qp", "IBVERBS_1.1");
  S(destroy_qp, "ibv_destroy_qp", "IBVERBS_1.1");
  S(create_srq, "ibv_create_srq", "IBVERBS_1.1");
  S(destroy_srq, "ibv_destroy_srq", "IBVERBS_1.1");
  S(qp_to_qp_ex, "ibv_qp_to_qp_ex", NULL);
  S(fork_init, "ibv_fork_init", "IBVERBS_1.0");
  S(connect, "fakeverbs_connect", NULL);
  S(fail_next, "fakeverbs_fail_next", NULL);
  S(fail_next_status, "fakeverbs_fail_next_status", NULL);
  S(inject, "fakeverbs_inject", NULL);
  S(pristine, "fakeverbs_pristine", NULL);
  S(cq_pristine, "fakeverbs_cq_pristine", NULL);
  S(qpx_pristine, "fakeverbs_qpx_pristine", NULL);
  S(modify_qp, "ibv_modify_qp", "IBVERBS_1.1");
  S(fail_modify, "fakeverbs_fail_modify", NULL);
  S(set_gid, "fakeverbs_set_gid", NULL);
  S(set_lid, "fakeverbs_set_lid", NULL);
  S(queries, "fakeverbs_queries", NULL);
  S(hold, "fakeverbs_hold", NULL);
  S(wait_held, "fakeverbs_wait_held", NULL);
  S(release, "fakeverbs_release", NULL);
  S(recycle_qps, "fakeverbs_recycle_qps", NULL);
#undef S
}
#else
static void load(void) {
  V.get_device_list = ibv_get_device_list;
  V.free_device_list = ibv_free_device_list;
  V.open_device = ibv_open_device;
  V.close_device = ibv_close_device;
  V.alloc_pd = ibv_alloc_pd;
  V.dealloc_pd = ibv_dealloc_pd;
  V.create_cq = ibv_create_cq;
  V.destroy_cq = ibv_destroy_cq;
  V.create_qp = ibv_create_qp;
  V.destroy_qp = ibv_destroy_qp;
  V.create_srq = ibv_create_srq;
  V.destroy_srq = ibv_destroy_srq;
  V.qp_to_qp_ex = ibv_qp_to_qp_ex;
  V.fork_init = ibv_fork_init;
  V.connect = fakeverbs_connect;
  V.fail_next = fakeverbs_fail_next;
  V.fail_next_status = fakeverbs_fail_next_status;
  V.inject = fakeverbs_inject;
  V.pristine = fakeverbs_pristine;
  V.cq_pristine = fakeverbs_cq_pristine;
  V.qpx_pristine = fakeverbs_qpx_pristine;
  V.modify_qp = ibv_modify_qp;
  V.fail_modify = fakeverbs_fail_modify;
  V.set_gid = fakeverbs_set_gid;
  V.set_lid = fakeverbs_set_lid;
  V.queries = fakeverbs_queries;
  V.hold = fakeverbs_hold;
  V.wait_held = fakeverbs_wait_held;
  V.release = fakeverbs_release;
  V.recycle_qps = fakeverbs_recycle_qps;
}
#endif

int main(int argc, char **argv) {
  if (argc < 2) FAIL("usage: verbs_app chain|errors|errors-all|ex|threads|fork|fork-locked|reuse|reopen|reopen-race|churn|qploop|srq|srq-shared|full|disabled|dlnext|peers|peers-wide|stall [N]");
  load();
  const char *s = argv[1];
  int n = argc > 2 ? atoi(argv[2]) : 100;
  if (!strcmp(s, "chain")) sc_chain(n);
  else if (!strcmp(s, "errors")) sc_errors();
  else if (!strcmp(s, "errors-all")) sc_errors_all();
  else if (!strcmp(s, "ex")) sc_ex(n);
  else if (!strcmp(s, "threads")) sc_threads(argc > 3 ? atoi(argv[3]) : 4, n);
  else if (!strcmp(s, "fork")) sc_fork(n);
  else if (!strcmp(s, "fork-locked")) sc_fork_locked();
  else if (!strcmp(s, "reuse")) sc_reuse(argc > 2 ? n : 10);
  else if (!strcmp(s, "reopen")) sc_reopen();
  else if (!strcmp(s, "churn")) sc_churn(n);
  else if (!strcmp(s, "reopen-race")) sc_reopen_race();
  else if (!strcmp(s, "destroy-race")) sc_destroy_race();
  else if (!strcmp(s, "qploop")) sc_qploop(n);
  else if (!strcmp(s, "srq")) sc_srq(n);
  else if (!strcmp(s, "srq-shared")) sc_srq_shared(n);
  else if (!strcmp(s, "full")) sc_full();
  else if (!strcmp(s, "disabled")) sc_disabled();
  else if (!strcmp(s, "dlnext")) sc_dlnext();
  else if (!strcmp(s, "peers")) sc_peers();
  else if (!strcmp(s, "peers-wide")) sc_peers_wide(argc > 2 ? atoi(argv[2]) : 12);
  else if (!strcmp(s, "stall")) sc_stall(n);
  else if (!strcmp(s, "stall-deep")) sc_stall_deep(n);
  else FAIL("unknown scenario %s", s);
  return 0;
}
