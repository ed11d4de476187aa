/*
 * src/rccl_telemetry_inline.h: the header's inline hooks, as C source. `make header`
 * (examples/rccl_telemetry_header.rs) appends this file to the declarations cbindgen generates
 * from src/capi.rs, with one change: the marker line below becomes the C mirrors of the
 * library's layouts and the constants the hooks compute with, generated from the Rust structs
 * (src/inline_abi.rs), so no layout is written twice. The installed include/rccl_telemetry.h
 * stays one self-contained file; this fragment is not installed and is not meant to be
 * included on its own (it uses the types declared above it and the generated ones).
 */
#ifndef RCCL_TELEMETRY_INLINE_H
#define RCCL_TELEMETRY_INLINE_H
/* ------------------------------------------------------------------------------------ */
/* Inline hooks. The data-path hooks above are also defined here as inline code that     */
/* counts in the caller, so a counted WQE costs a few loads and stores instead of calls: */
/* a NULL handle or an unregistered device costs one test; the handle forms bump the     */
/* slot's counters with a relaxed load and store (one thread per handle, the contract);  */
/* PostTs reads the TSC inline; the device forms count into the calling thread's stripe  */
/* when it owns it and call the library otherwise (first use, or a shared stripe).       */
/* The names with a trailing underscore are the library's internals. Their layout is       */
/* negotiated, never assumed: the library publishes its layout number in                  */
/* rcclTelemetryHotV3.layout (a block every library of this SONAME exports, whose own      */
/* layout never changes), and the wrappers of Init, RegisterDevice, ResolveQp and          */
/* ResolveChannel below compare it with RCCL_TELEMETRY_INLINE_LAYOUT before calling the    */
/* library. On a mismatch (a header older or newer than the running library's layout)     */
/* they hand out nothing and telemetry stays off for the process, with one line on stderr */
/* when it was asked for: never a link or load failure, never a miscount. The hooks        */
/* themselves check nothing: the negotiation costs the data path nothing.                  */
/* Define RCCL_TELEMETRY_NO_INLINE (or the older RCCL_TELEMETRY_NO_INLINE_GUARDS) to      */
/* call the exported functions instead: same counts, one call per hook. Taking a hook's   */
/* address, or writing (rcclTelemetryQpSendPosted)(qp, 0), always names the function.    */

#if defined(RCCL_TELEMETRY_NO_INLINE_GUARDS) && !defined(RCCL_TELEMETRY_NO_INLINE)
#define RCCL_TELEMETRY_NO_INLINE 1
#endif

#if !defined(RCCL_TELEMETRY_NO_INLINE) && defined(__GNUC__) && defined(__SIZEOF_INT128__) && \
    (defined(__x86_64__) || defined(__aarch64__))
/* Defined when the hooks below are in use. */
#define RCCL_TELEMETRY_INLINE_HOOKS 1

#ifdef __cplusplus
extern "C" {
#endif
/* @inline_abi: the generated layouts (src/inline_abi.rs, make header) go here. */
extern void rcclTelemetryLogAdd_(rcclTelemetryLog_ *h, uint64_t i);
extern rcclTelemetryHot_ rcclTelemetryHotV3;
/* Says the layouts differ and keeps telemetry off (weak: a library older than the          */
/* negotiation lacks it, and then the wrappers only refuse).                                */
extern int rcclTelemetryInlineMismatch_(int headerLayout) __attribute__((weak));
#ifdef __cplusplus
}
#endif

/* Casts that C and C++ (-Wold-style-cast, -Wzero-as-null-pointer-constant) both accept. */
#ifdef __cplusplus
#define RCCL_TELEMETRY_PTR_(T, p) static_cast<T>(static_cast<void *>(p))
#define RCCL_TELEMETRY_AS_(T, x) static_cast<T>(x)
#define RCCL_TELEMETRY_NULL_ nullptr
#else
#define RCCL_TELEMETRY_PTR_(T, p) ((T)(void *)(p))
#define RCCL_TELEMETRY_AS_(T, x) ((T)(x))
#define RCCL_TELEMETRY_NULL_ ((void *)0)
#endif
#ifdef __cplusplus
#define RCCL_TELEMETRY_INT_PTR_(T, x) reinterpret_cast<T>(x)
#else
#define RCCL_TELEMETRY_INT_PTR_(T, x) ((T)(x))
#endif
#define RCCL_TELEMETRY_LD_(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)
#define RCCL_TELEMETRY_ADD_(x, v) __atomic_store_n(&(x), RCCL_TELEMETRY_LD_(x) + (v), __ATOMIC_RELAXED)

static inline int64_t rcclTelemetryNow_(void) {
#if defined(__x86_64__)
  if (RCCL_TELEMETRY_LD_(rcclTelemetryHotV3.use_tsc)) {
    uint64_t t = RCCL_TELEMETRY_AS_(uint64_t, __builtin_ia32_rdtsc()) & RCCL_TELEMETRY_AS_(uint64_t, INT64_MAX);
    return t < 2 ? 2 : RCCL_TELEMETRY_AS_(int64_t, t);
  }
#endif
  return rcclTelemetryNowToken();
}

static inline uintptr_t rcclTelemetryThreadPointer_(void) {
  uintptr_t tp;
#if defined(__x86_64__)
  __asm__("movq %%fs:0, %0" : "=r"(tp));
#else
  __asm__("mrs %0, tpidr_el0" : "=r"(tp));
#endif
  return tp;
}

/* The calling thread's stripe of device devIdx, or NULL when the device is not counting. */
static inline rcclTelemetryStripe_ *rcclTelemetryStripe_of_(int devIdx, uintptr_t tp) {
  if (RCCL_TELEMETRY_AS_(unsigned, devIdx) >= RCCL_TELEMETRY_MAX_DEVS_) return RCCL_TELEMETRY_NULL_;
  rcclTelemetryStripe_ *s = __atomic_load_n(&rcclTelemetryHotV3.stripes[devIdx], __ATOMIC_ACQUIRE);
  return s ? s + (((tp >> RCCL_TELEMETRY_STRIPE_PAGE_SHIFT_) * RCCL_TELEMETRY_STRIPE_MIX_) >> RCCL_TELEMETRY_STRIPE_SHIFT_) : s;
}

/* rcclTelemetryOn: the word the library sets at Init and clears when the final file is claimed
 * (or in a forked child), so RCCL's `if (rcclTelemetryOn())` guards cost one load, no call. */
static inline int rcclTelemetryOn_inline_(void) {
  return RCCL_TELEMETRY_LD_(rcclTelemetryHotV3.enabled) != 0;
}
static inline int64_t rcclTelemetryPostTs_inline_(RcclQpStats *qp) {
  rcclTelemetryQp_ *q = RCCL_TELEMETRY_PTR_(rcclTelemetryQp_ *, qp);
  if (!q) return 0;
  uint64_t mask = RCCL_TELEMETRY_LD_(q->sample_mask);
  if (mask) {
    uint64_t seq = RCCL_TELEMETRY_LD_(q->post_seq);
    __atomic_store_n(&q->post_seq, seq + 1, __ATOMIC_RELAXED);
    if (seq & mask) return RCCL_TELEMETRY_TS_UNSAMPLED;
  }
  return rcclTelemetryNow_();
}
static inline void rcclTelemetryQpSendPosted_inline_(RcclQpStats *qp, int withImm) {
  rcclTelemetryQp_ *q = RCCL_TELEMETRY_PTR_(rcclTelemetryQp_ *, qp);
  if (!q) return;
  if (withImm) RCCL_TELEMETRY_ADD_(q->sent_imm, 1);
  else RCCL_TELEMETRY_ADD_(q->sent_write, 1);
}
static inline void rcclTelemetryQpRecvPosted_inline_(RcclQpStats *qp) {
  rcclTelemetryQp_ *q = RCCL_TELEMETRY_PTR_(rcclTelemetryQp_ *, qp);
  if (q) RCCL_TELEMETRY_ADD_(q->recv_wqe, 1);
}
static inline void rcclTelemetryQpCtsSent_inline_(RcclQpStats *qp, int signalled) {
  rcclTelemetryQp_ *q = RCCL_TELEMETRY_PTR_(rcclTelemetryQp_ *, qp);
  if (!q) return;
  if (signalled) RCCL_TELEMETRY_ADD_(q->cts_signalled, 1);
  else RCCL_TELEMETRY_ADD_(q->cts_unsignalled, 1);
}
static inline void rcclTelemetryQpSlotMiss_inline_(RcclQpStats *qp) {
  rcclTelemetryQp_ *q = RCCL_TELEMETRY_PTR_(rcclTelemetryQp_ *, qp);
  if (q) RCCL_TELEMETRY_ADD_(q->slot_miss, 1);
}
/* The log-scale bucket of a latency in ns below 2^61 (unclamped, up to 471): for ns >= 16, */
/* h = the highest set bit and the index is 8 * (h - 3) + (ns >> (h - 3)), so every bucket  */
/* is at most 1/8 of its lower bound wide; below 16 the index is ns itself. Computed as      */
/* 8 * h + ((ns << 3) >> h) - 24: a bsr/clz, a shift and two adds, no division.             */
static inline uint64_t rcclTelemetryLogIndexRaw_(uint64_t ns) {
  uint64_t h;
#if defined(__x86_64__)
  __asm__("bsrq %1, %0" : "=r"(h) : "r"(ns | 15u) : "cc"); /* 63 - clz without a zero-extension */
#else
  h = 63u - RCCL_TELEMETRY_AS_(uint64_t, RCCL_TELEMETRY_AS_(unsigned, __builtin_clzll(ns | 15u)));
#endif
  return h * 8u + ((ns << 3) >> h) - 24u;
}
/* The stored bucket of any latency in ns: the last one, from RCCL_TELEMETRY_LOG_LAST_NS_,    */
/* also holds everything longer.                                                              */
static inline unsigned rcclTelemetryLogIndex_(uint64_t ns) {
  return RCCL_TELEMETRY_AS_(unsigned, rcclTelemetryLogIndexRaw_(ns < RCCL_TELEMETRY_LOG_LAST_NS_ ? ns : RCCL_TELEMETRY_LOG_LAST_NS_));
}
/* Adds 1 to a counter only the calling thread writes: one add to memory on x86-64 (a single */
/* aligned 8-byte store, as atomic to readers as the relaxed store it replaces).              */
#if defined(__x86_64__)
#define RCCL_TELEMETRY_INC_(x) __asm__ __volatile__("addq $1, %0" : "+m"(x))
#else
#define RCCL_TELEMETRY_INC_(x) RCCL_TELEMETRY_ADD_(x, 1)
#endif
/* Whether the calling thread owns the histogram: its owner word against the thread pointer, */
/* compared straight from %fs:0 on x86-64 (one load and one compare).                       */
static inline int rcclTelemetryOwnsLog_(const rcclTelemetryLog_ *lh) {
#if defined(__x86_64__) && defined(__GCC_ASM_FLAG_OUTPUTS__)
  int eq;
  __asm__("cmpq %%fs:0, %1" : "=@ccz"(eq) : "r"(RCCL_TELEMETRY_LD_(lh->owner)));
  return eq;
#else
  return RCCL_TELEMETRY_LD_(lh->owner) == rcclTelemetryThreadPointer_();
#endif
}
/* Counts bucket li of the channel histogram at address la (a slot's non-zero log_hist word): */
/* inline when the calling thread owns it, else through the library.                         */
static inline void rcclTelemetryLogRecord_(uint64_t la, uint64_t li) {
  rcclTelemetryLog_ *lh = RCCL_TELEMETRY_INT_PTR_(rcclTelemetryLog_ *, la);
  if (__builtin_expect(rcclTelemetryOwnsLog_(lh), 1)) RCCL_TELEMETRY_INC_(lh->counts[li]);
  else rcclTelemetryLogAdd_(lh, li);
}
/* The latency of a sampled completion: ns since the token, its bucket in the channel's    */
/* log-scale histogram (when it records one) and in the linear histogram, min and max.     */
/* nowTs is the clock reading the completion's time is measured to (its poll's, or now). */
static inline void rcclTelemetrySampled_(rcclTelemetryQp_ *q, int64_t postTs, int64_t nowTs) {
  __extension__ typedef unsigned __int128 u128_;
  uint64_t now = RCCL_TELEMETRY_AS_(uint64_t, nowTs), ts = RCCL_TELEMETRY_AS_(uint64_t, postTs);
  uint64_t dt = now > ts ? now - ts : 0;
  /* ns = (dt * ns_mult) >> 32, saturated; one 64-bit multiply when it cannot overflow
   * (dt below 2^32 ticks, a clock of at least 1 tick per ns: every TSC, and ns tokens).
   * There ns is below 2^32, so its log-scale bucket (<= 239) needs no clamp. */
  uint64_t mult = RCCL_TELEMETRY_LD_(rcclTelemetryHotV3.ns_mult), ns;
  uint64_t la = RCCL_TELEMETRY_LD_(q->log_hist);
  if (__builtin_expect((dt >> 32) == 0 && mult <= (RCCL_TELEMETRY_AS_(uint64_t, 1) << 32), 1)) {
    ns = (dt * mult) >> 32;
    if (__builtin_expect(la != 0, 1)) rcclTelemetryLogRecord_(la, rcclTelemetryLogIndexRaw_(ns));
  } else {
    u128_ p = RCCL_TELEMETRY_AS_(u128_, dt) * mult;
    ns = (p >> 96) ? UINT64_MAX : RCCL_TELEMETRY_AS_(uint64_t, p >> 32);
    if (la) rcclTelemetryLogRecord_(la, rcclTelemetryLogIndex_(ns));
  }
  uint64_t shift = RCCL_TELEMETRY_LD_(rcclTelemetryHotV3.div_shift), b = ns;
  if (shift) {
    uint64_t t = RCCL_TELEMETRY_AS_(uint64_t, (RCCL_TELEMETRY_AS_(u128_, RCCL_TELEMETRY_LD_(rcclTelemetryHotV3.div_mul)) * ns) >> 64);
    b = (t + ((ns - t) >> 1)) >> (shift - 1);
  }
  uint64_t last = RCCL_TELEMETRY_LD_(rcclTelemetryHotV3.last_bucket);
  RCCL_TELEMETRY_ADD_(q->hist[(b < last ? b : last) & (RCCL_TELEMETRY_HIST_ - 1u)], 1);
  if (~ns > RCCL_TELEMETRY_LD_(q->lat_min_inv)) __atomic_store_n(&q->lat_min_inv, ~ns, __ATOMIC_RELAXED);
  if (ns > RCCL_TELEMETRY_LD_(q->lat_max)) __atomic_store_n(&q->lat_max, ns, __ATOMIC_RELAXED);
}
/* One clock read per poll: nowTs from rcclTelemetryPollTs() after the poll (<= 1: read now). */
static inline void rcclTelemetryQpWqeCompleteAt_inline_(RcclQpStats *qp, int64_t postTs, int64_t nowTs) {
  rcclTelemetryQp_ *q = RCCL_TELEMETRY_PTR_(rcclTelemetryQp_ *, qp);
  if (!q) return;
  RCCL_TELEMETRY_ADD_(q->wqe_rcvd, 1);
  if (postTs > RCCL_TELEMETRY_TS_UNSAMPLED)
    rcclTelemetrySampled_(q, postTs, nowTs > RCCL_TELEMETRY_TS_UNSAMPLED ? nowTs : rcclTelemetryNow_());
  else if (postTs == 0) RCCL_TELEMETRY_ADD_(q->untracked, 1);
}
static inline void rcclTelemetryQpWqeComplete_inline_(RcclQpStats *qp, int64_t postTs) {
  rcclTelemetryQpWqeCompleteAt_inline_(qp, postTs, 0); /* 0: read the clock now (folds away) */
}
static inline void rcclTelemetryChRequestCompleted_inline_(RcclChannelStats *ch) {
  rcclTelemetryCh_ *c = RCCL_TELEMETRY_PTR_(rcclTelemetryCh_ *, ch);
  if (c) RCCL_TELEMETRY_ADD_(c->req_completed, 1);
}

/* Device forms: count into the thread's own stripe, or let the library sort it out. */
#define RCCL_TELEMETRY_DEV_OP_(devIdx, field, v, call)                                   \
  do {                                                                                    \
    uintptr_t tp_ = rcclTelemetryThreadPointer_();                                        \
    rcclTelemetryStripe_ *s_ = rcclTelemetryStripe_of_((devIdx), tp_);                    \
    if (!s_) break;                                                                       \
    if (__atomic_load_n(&s_->owner, __ATOMIC_RELAXED) == tp_) RCCL_TELEMETRY_ADD_(s_->own.field, (v)); \
    else call;                                                                            \
  } while (0)

static inline void rcclTelemetryBytes_inline_(int devIdx, int isSend, uint64_t bytes) {
  if (isSend) RCCL_TELEMETRY_DEV_OP_(devIdx, tx_bytes, bytes, (rcclTelemetryBytes)(devIdx, isSend, bytes));
  else RCCL_TELEMETRY_DEV_OP_(devIdx, rx_bytes, bytes, (rcclTelemetryBytes)(devIdx, isSend, bytes));
}
static inline void rcclTelemetryCqError_inline_(int devIdx) {
  RCCL_TELEMETRY_DEV_OP_(devIdx, cq_errors, 1, (rcclTelemetryCqError)(devIdx));
}
static inline void rcclTelemetryAddCqPolls_inline_(int devIdx, uint64_t polls) {
  RCCL_TELEMETRY_DEV_OP_(devIdx, cq_polls, polls, (rcclTelemetryAddCqPolls)(devIdx, polls));
}
/* The WQE-size bucket: 0 for 0 bytes, else 1 + ceil(log2(bytes)). */
static inline unsigned rcclTelemetrySizeBucket_(uint64_t bytes) {
  return bytes <= 1 ? RCCL_TELEMETRY_AS_(unsigned, bytes) : 65u - RCCL_TELEMETRY_AS_(unsigned, __builtin_clzll(bytes - 1));
}
static inline void rcclTelemetryWqeSize_inline_(int devIdx, uint64_t bytes) {
  RCCL_TELEMETRY_DEV_OP_(devIdx, sizes[rcclTelemetrySizeBucket_(bytes)], 1, (rcclTelemetryWqeSize)(devIdx, bytes));
}

/* The negotiation: the calls that start telemetry or hand out what the hooks dereference   */
/* go through the library only when its layout is this header's.                          */
static inline int rcclTelemetryLayoutOk_(void) {
  return RCCL_TELEMETRY_LD_(rcclTelemetryHotV3.layout) == RCCL_TELEMETRY_AS_(uint64_t, RCCL_TELEMETRY_INLINE_LAYOUT);
}
static inline int rcclTelemetryRefuse_(void) {
  return rcclTelemetryInlineMismatch_ ? rcclTelemetryInlineMismatch_(RCCL_TELEMETRY_INLINE_LAYOUT) : -1;
}
static inline int rcclTelemetryInit_inline_(void) {
  return rcclTelemetryLayoutOk_() ? (rcclTelemetryInit)() : rcclTelemetryRefuse_();
}
static inline int rcclTelemetryRegisterDevice_inline_(int deviceId, const char *roceDevice, const char *transport) {
  if (rcclTelemetryLayoutOk_()) return (rcclTelemetryRegisterDevice)(deviceId, roceDevice, transport);
  (void)rcclTelemetryRefuse_();
  return -1;
}
static inline RcclQpStats *rcclTelemetryResolveQp_inline_(int devIdx, int chIdx, int qpIdx) {
  if (rcclTelemetryLayoutOk_()) return (rcclTelemetryResolveQp)(devIdx, chIdx, qpIdx);
  (void)rcclTelemetryRefuse_();
  return RCCL_TELEMETRY_NULL_;
}
static inline RcclChannelStats *rcclTelemetryResolveChannel_inline_(int devIdx, int chIdx) {
  if (rcclTelemetryLayoutOk_()) return (rcclTelemetryResolveChannel)(devIdx, chIdx);
  (void)rcclTelemetryRefuse_();
  return RCCL_TELEMETRY_NULL_;
}

/* A function that hands out a handle (or starts telemetry) gets a wrapper above and one     */
/* line here.                                                                               */
#define rcclTelemetryInit() rcclTelemetryInit_inline_()
#define rcclTelemetryRegisterDevice(deviceId, roceDevice, transport) \
  rcclTelemetryRegisterDevice_inline_((deviceId), (roceDevice), (transport))
#define rcclTelemetryResolveQp(devIdx, chIdx, qpIdx) rcclTelemetryResolveQp_inline_((devIdx), (chIdx), (qpIdx))
#define rcclTelemetryResolveChannel(devIdx, chIdx) rcclTelemetryResolveChannel_inline_((devIdx), (chIdx))
#define rcclTelemetryOn() rcclTelemetryOn_inline_()
#define rcclTelemetryPostTs(qp) rcclTelemetryPostTs_inline_(qp)
#define rcclTelemetryQpSendPosted(qp, withImm) rcclTelemetryQpSendPosted_inline_((qp), (withImm))
#define rcclTelemetryQpRecvPosted(qp) rcclTelemetryQpRecvPosted_inline_(qp)
#define rcclTelemetryQpCtsSent(qp, signalled) rcclTelemetryQpCtsSent_inline_((qp), (signalled))
#define rcclTelemetryQpSlotMiss(qp) rcclTelemetryQpSlotMiss_inline_(qp)
#define rcclTelemetryQpWqeComplete(qp, postTs) rcclTelemetryQpWqeComplete_inline_((qp), (postTs))
#define rcclTelemetryQpWqeCompleteAt(qp, postTs, nowTs) rcclTelemetryQpWqeCompleteAt_inline_((qp), (postTs), (nowTs))
#define rcclTelemetryPollTs() rcclTelemetryNow_()
#define rcclTelemetryChRequestCompleted(ch) rcclTelemetryChRequestCompleted_inline_(ch)
#define rcclTelemetryBytes(devIdx, isSend, bytes) rcclTelemetryBytes_inline_((devIdx), (isSend), (bytes))
#define rcclTelemetryCqError(devIdx) rcclTelemetryCqError_inline_(devIdx)
#define rcclTelemetryAddCqPolls(devIdx, polls) rcclTelemetryAddCqPolls_inline_((devIdx), (polls))
#define rcclTelemetryWqeSize(devIdx, bytes) rcclTelemetryWqeSize_inline_((devIdx), (bytes))
#endif /* inline hooks */
#endif /* RCCL_TELEMETRY_INLINE_H */
