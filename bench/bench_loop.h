/*
 * bench_loop.h -- the stand-in transport loop, instantiated once per hook family.
 *
 * Included by bench_loops.c with LOOP_NAME (the function to generate) and FAM_LAT, FAM_SEND,
 * FAM_SIZE, FAM_REQ, FAM_GUARD each set to a hook-set prefix (N = no hook, L = library,
 * LA = library with one clock read per poll, R = reference) that picks, per hook family,
 * these hooks (c is the Ctx*, j a QP index 0..3):
 *   H_ON(c)                   RCCL's `if (rcclTelemetryOn())` guard (N: constant 1)
 *   H_POLLED(c)               what that guard protects after every poll call, empty ones too:
 *                             RCCL's `comm->telCqPollCount++` (a caller-side counter)
 *   H_POSTTS(c, j)            token to store with the posted WQE (int64_t)
 *   H_POLLTS(c)               clock reading taken once after a poll that returned completions
 *                             (only the LA set reads it; everything else: constant 0)
 *   H_SEND(c, j, imm)         one send WQE posted (opcode = write / write-with-imm)
 *   H_SIZE(c, bytes)          payload size of that WQE (device form)
 *   H_COMPLETE(c, j, ts, now) completion drained for the WQE, with its stored token and the
 *                             poll's clock reading
 *   H_CTS(c, signalled)       one CTS posted for the request
 *   H_BYTES(c, bytes)         request bytes sent (device form)
 *   H_REQDONE(c)              request completed on the channel
 *
 * Shaped like RCCL's IB transport progress: each step first drains up to one request's
 * worth of completions from the CQ (fake_poll_cq, an opaque call like ibv_poll_cq),
 * maps each wr_id back to its request slot and hands the stored PostTs token to the
 * completion hook; a request completes when its last WQE has. Then it posts a new
 * request striped over BENCH_QPS data QPs, one WQE per QP through fake_post_send (an
 * opaque call like ibv_post_send), keeping each WQE's PostTs token in the request
 * slot. The guards sit where RCCL's IB-CAST transport has them: one per request in front of
 * its PostTs calls, one per completion drained, one after every poll call. Everything lives in the Ctx and the provider's rings, so nothing can be
 * deleted by the compiler.
 */
#define BL_CAT_(a, b) a##b
#define BL_CAT(a, b) BL_CAT_(a, b)
#define H_ON BL_CAT(FAM_GUARD, _ON)
#define H_POLLED BL_CAT(FAM_GUARD, _POLLED)
#define H_POSTTS BL_CAT(FAM_LAT, _POSTTS)
#define H_POLLTS BL_CAT(FAM_LAT, _POLLTS)
#define H_COMPLETE BL_CAT(FAM_LAT, _COMPLETE)
#define H_SEND BL_CAT(FAM_SEND, _SEND)
#define H_SIZE BL_CAT(FAM_SIZE, _SIZE)
#define H_CTS BL_CAT(FAM_REQ, _CTS)
#define H_BYTES BL_CAT(FAM_REQ, _BYTES)
#define H_REQDONE BL_CAT(FAM_REQ, _REQDONE)

__attribute__((noinline)) void LOOP_NAME(Ctx* c, int nreq) {
  for (int r = 0; r < nreq; r++) {
    uint64_t seq = c->seq++;
    FakeWc wc[BENCH_QPS];
    int n = fake_poll_cq(&c->cq, BENCH_QPS, wc);
    int64_t now = 0; /* one guard per poll call: count it, and read the clock once if it returned any */
    if (H_ON(c)) {
      H_POLLED(c);
      if (n > 0) now = H_POLLTS(c);
    }
    (void)now;
    for (int k = 0; k < n; k++) {
      uint64_t id = wc[k].wr_id;
      int j = (int)(id & (BENCH_QPS - 1));
      Req* d = &c->reqs[(id / BENCH_QPS) & (BENCH_INFLIGHT - 1)];
      if (wc[k].status != 0) c->errors++;
      c->sink += wc[k].byte_len;
      if (H_ON(c)) H_COMPLETE(c, j, d->ts[j], now);
      if (--d->pending == 0) H_REQDONE(c);
    }
    Req* q = &c->reqs[seq & (BENCH_INFLIGHT - 1)];
    uint32_t bytes = c->sizes[seq & (BENCH_NSIZES - 1)];
    uint32_t chunk = bytes / BENCH_QPS;
    q->pending = BENCH_QPS;
    int on = H_ON(c);
    for (int j = 0; j < BENCH_QPS; j++) {
      int imm = (j == BENCH_QPS - 1);
      FakeWr wr;
      wr.wr_id = seq * BENCH_QPS + (uint64_t)j;
      wr.remote_addr = c->remote_base + (uint64_t)j * chunk;
      wr.local_addr = c->local_base + (uint64_t)j * chunk;
      wr.length = chunk;
      wr.lkey = c->lkey;
      wr.rkey = c->rkey;
      wr.opcode = imm ? 9 : 8;
      wr.send_flags = imm ? 2 : 0;
      wr.imm = (uint32_t)seq;
      q->ts[j] = on ? H_POSTTS(c, j) : 0;
      if (fake_post_send(&c->qp[j], &wr) != 0) c->errors++;
      H_SEND(c, j, imm);
      H_SIZE(c, chunk);
    }
    H_CTS(c, (seq & 7) == 0);
    H_BYTES(c, bytes);
  }
}
#undef LOOP_NAME
#undef FAM_LAT
#undef FAM_SEND
#undef FAM_SIZE
#undef FAM_REQ
#undef FAM_GUARD
#undef H_ON
#undef H_POLLED
#undef H_POLLTS
#undef H_POSTTS
#undef H_SEND
#undef H_SIZE
#undef H_COMPLETE
#undef H_CTS
#undef H_BYTES
#undef H_REQDONE
