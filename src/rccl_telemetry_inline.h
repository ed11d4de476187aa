/*
 * src/rccl_telemetry_inline.h: the header's inline hooks, as C source. `make header`
 * (examples/rccl_telemetry_header.rs) appends this file to the declarations cbindgen generates
 * from src/capi.rs, with two changes: the first marker line below becomes the C mirrors of
 * the library's layouts and the constants the hooks compute with, generated from the Rust
 * structs (src/inline_abi.rs), so no layout is written twice; the second becomes the entry
 * points of RCCL_TELEMETRY_STUBS and RCCL_TELEMETRY_DLOPEN, generated from cbindgen's
 * declarations and rcclTelemetryApi_t, so no signature is written twice. The installed include/rccl_telemetry.h
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
/* layout never changes), and the wrappers of Init, RegisterDevice and of every function */
/* that hands out a handle (ResolveQp, ResolveChannel, CommInit, CommResolveQp,            */
/* CommResolveChannel) below compare it with RCCL_TELEMETRY_INLINE_LAYOUT before calling  */
/* the library. On a mismatch (a header older or newer than the running library's        */
/* layout) they hand out nothing and telemetry stays off for the process, with one line  */
/* on stderr */
/* when it was asked for: never a link or load failure, never a miscount. The hooks        */
/* themselves check nothing: the negotiation costs the data path nothing.                  */
/* Define RCCL_TELEMETRY_NO_INLINE (RCCL_TELEMETRY_NO_INLINE_GUARDS means the same) to    */
/* call the exported functions instead: same counts, one call per hook. Taking a hook's   */
/* address, or writing (rcclTelemetryQpSendPosted)(qp, 0), always names the function.    */

/* ------------------------------------------------------------------------------------ */
/* Three ways to build against this header; define at most one of these before including */
/* it:                                                                                     */
/* - neither: the program links the library (-lrccl_telemetry) and calls it.              */
/* - RCCL_TELEMETRY_STUBS: every entry point is an empty static inline function that      */
/*   returns what it returns while telemetry is off (Init RCCL_TELEMETRY_INIT_OFF, Flush,  */
/*   On and the tokens 0, handles NULL, the other int results -1 with *numSlots 0,        */
/*   GetVersion 0, the clock readings 2): no library at link or run time, for a build     */
/*   without telemetry (a project's -DENABLE_RCCL_TELEMETRY=OFF).                         */
/* - RCCL_TELEMETRY_DLOPEN: the program does not link the library; rcclTelemetryInit      */
/*   loads it with dlopen and every call goes through the table of rcclTelemetryGetApi.  */
/*   Without the library Init returns RCCL_TELEMETRY_INIT_OFF after one line, and every   */
/*   call is a no-op as under RCCL_TELEMETRY_STUBS; before Init, too. A library whose      */
/*   table is older or newer than this header's: the entry points both know work, the      */
/*   rest are no-ops (one line). The inline hooks stay inline. Needs dlopen and           */
/*   pthread_once (-ldl -lpthread before glibc 2.34) and GCC or Clang.                    */
#if defined(RCCL_TELEMETRY_STUBS) && defined(RCCL_TELEMETRY_DLOPEN)
#error "rccl_telemetry.h: define RCCL_TELEMETRY_STUBS or RCCL_TELEMETRY_DLOPEN, not both"
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

#ifdef __cplusplus
#define RCCL_TELEMETRY_CPTR_(T, p) static_cast<T>(p)
#else
#define RCCL_TELEMETRY_CPTR_(T, p) ((T)(p))
#endif

/* A PostTs token as the library takes it (int64_t), from the integer the caller keeps it in */
/* (RCCL keeps it in a uint64_t): converted explicitly, so that a caller built with          */
/* -Wsign-conversion -Werror passes its own type unchanged. The functions that take tokens    */
/* are called through it (the macros below).                                                  */
#ifdef __cplusplus
template <typename T>
static inline int64_t rcclTelemetryToken_(T t) {
  return static_cast<int64_t>(t);
}
#define RCCL_TELEMETRY_TOKEN_(x) rcclTelemetryToken_(x)
#else
#define RCCL_TELEMETRY_TOKEN_(x) ((int64_t)(x))
#endif

#if defined(RCCL_TELEMETRY_NO_INLINE_GUARDS) && !defined(RCCL_TELEMETRY_NO_INLINE)
#define RCCL_TELEMETRY_NO_INLINE 1
#endif

/* The mirrors of the library's layouts, where its layouts are these (64-bit). */
#if !defined(RCCL_TELEMETRY_STUBS) && (defined(__x86_64__) || defined(__aarch64__))
#define RCCL_TELEMETRY_MIRRORS_ 1
#ifdef __cplusplus
extern "C" {
#endif
/* @inline_abi: the generated layouts (src/inline_abi.rs, make header) go here. */
#ifdef __cplusplus
}
#endif
#endif

#if defined(RCCL_TELEMETRY_MIRRORS_) && !defined(RCCL_TELEMETRY_NO_INLINE) && defined(__GNUC__) && \
    defined(__SIZEOF_INT128__)
/* Defined when the inline hooks below are in use. */
#define RCCL_TELEMETRY_INLINE_HOOKS 1
#endif

#if defined(RCCL_TELEMETRY_DLOPEN)
/* ------------------------------------------------------------------------------------ */
/* The loader (RCCL_TELEMETRY_DLOPEN). rcclTelemetryInit dlopens the library by its      */
/* SONAME (RTLD_NOW | RTLD_LOCAL; RCCL_TELEMETRY_DLOPEN_NAME, defined before including    */
/* this header, names another file) and copies the table rcclTelemetryGetApi hands out:  */
/* the entries this header and the library both know; the rest stay NULL, and a call     */
/* through a NULL entry is a no-op returning what it returns while telemetry is off. The  */
/* inline hooks read the library's hot block through a pointer, a zeroed block until the */
/* library is loaded. Its state is shared by every translation unit of a program or     */
/* shared object that includes this header (weak definitions) and private to it (hidden: */
/* each shared object loads for itself; the library is loaded once).                    */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifndef RCCL_TELEMETRY_DLOPEN_NAME
#define RCCL_TELEMETRY_DLOPEN_NAME "librccl_telemetry.so.0"
#endif
#define RCCL_TELEMETRY_DL_ __attribute__((weak, visibility("hidden")))
#ifdef __cplusplus
extern "C" {
#endif
extern rcclTelemetryApi_t rcclTelemetryDlOff_;
extern rcclTelemetryApi_t rcclTelemetryDlTable_;
extern rcclTelemetryApi_t *rcclTelemetryDlApiP_;
extern pthread_once_t rcclTelemetryDlOnce_;
extern rcclTelemetryLogger_t rcclTelemetryDlLogger_;
extern int rcclTelemetryDlEnable_;
extern int rcclTelemetryDlDebug_;
extern char rcclTelemetryDlLine_[512];
extern int rcclTelemetryDlLineWarn_;
extern int rcclTelemetryDlLineSaid_;
RCCL_TELEMETRY_DL_ rcclTelemetryApi_t rcclTelemetryDlOff_;
RCCL_TELEMETRY_DL_ rcclTelemetryApi_t rcclTelemetryDlTable_;
RCCL_TELEMETRY_DL_ rcclTelemetryApi_t *rcclTelemetryDlApiP_ = &rcclTelemetryDlOff_;
RCCL_TELEMETRY_DL_ pthread_once_t rcclTelemetryDlOnce_ = PTHREAD_ONCE_INIT;
RCCL_TELEMETRY_DL_ rcclTelemetryLogger_t rcclTelemetryDlLogger_;
/* RCCL_TELEMETRY_ENABLE and RCCL_TELEMETRY_DEBUG as given through rcclTelemetrySetParam    */
/* (-1: not given; else whether ENABLE is "1", whether DEBUG is not "0"), for the loader's  */
/* own line; the environment wins over them, as in the library.                            */
RCCL_TELEMETRY_DL_ int rcclTelemetryDlEnable_ = -1;
RCCL_TELEMETRY_DL_ int rcclTelemetryDlDebug_ = -1;
/* The loader's line about the library file (empty: none), kept until Init says it, once:   */
/* by then every parameter RCCL passes before Init has been given.                          */
RCCL_TELEMETRY_DL_ char rcclTelemetryDlLine_[512];
RCCL_TELEMETRY_DL_ int rcclTelemetryDlLineWarn_;
RCCL_TELEMETRY_DL_ int rcclTelemetryDlLineSaid_;
#ifdef RCCL_TELEMETRY_MIRRORS_
extern rcclTelemetryHot_ rcclTelemetryDlOffHot_;
extern const rcclTelemetryHot_ *rcclTelemetryDlHot_;
RCCL_TELEMETRY_DL_ rcclTelemetryHot_ rcclTelemetryDlOffHot_;
RCCL_TELEMETRY_DL_ const rcclTelemetryHot_ *rcclTelemetryDlHot_ = &rcclTelemetryDlOffHot_;
#endif
#ifdef __cplusplus
}
#endif

/* The loaded table, or the all-NULL one before (or without) the library. */
static inline const rcclTelemetryApi_t *rcclTelemetryDlApi_(void) {
  return __atomic_load_n(&rcclTelemetryDlApiP_, __ATOMIC_ACQUIRE);
}

/* Whether `v` is `want` once surrounding ASCII whitespace is dropped (how the library    */
/* reads a value: " 1" is "1").                                                           */
static inline int rcclTelemetryDlIs_(const char *v, const char *want) {
  size_t n;
  while (*v == ' ' || *v == '\t' || *v == '\n' || *v == '\f' || *v == '\r') v++;
  n = strlen(v);
  while (n > 0 && (v[n - 1] == ' ' || v[n - 1] == '\t' || v[n - 1] == '\n' || v[n - 1] == '\f' || v[n - 1] == '\r'))
    n--;
  return n == strlen(want) && strncmp(v, want, n) == 0;
}

/* Whether telemetry was asked for (RCCL_TELEMETRY_ENABLE=1) and whether RCCL_TELEMETRY_DEBUG */
/* is on: the environment's value, else the one given through rcclTelemetrySetParam.        */
static inline int rcclTelemetryDlAsked_(void) {
  const char *enable = getenv("RCCL_TELEMETRY_ENABLE");
  return enable ? rcclTelemetryDlIs_(enable, "1") : __atomic_load_n(&rcclTelemetryDlEnable_, __ATOMIC_ACQUIRE) == 1;
}
static inline int rcclTelemetryDlDebugOn_(void) {
  const char *debug = getenv("RCCL_TELEMETRY_DEBUG");
  return debug ? !rcclTelemetryDlIs_(debug, "0") : __atomic_load_n(&rcclTelemetryDlDebug_, __ATOMIC_ACQUIRE) == 1;
}

/* Says one line of the loader's as the library says its own: to the logger when one is set */
/* (a warning when telemetry was asked for and `warn`, else information), otherwise on       */
/* stderr when it is such a warning or RCCL_TELEMETRY_DEBUG is on.                            */
static inline void rcclTelemetryDlSay_(int warn, const char *msg) {
  int level = warn && rcclTelemetryDlAsked_() ? RCCL_TELEMETRY_LOG_WARN : RCCL_TELEMETRY_LOG_INFO;
  rcclTelemetryLogger_t logger = __atomic_load_n(&rcclTelemetryDlLogger_, __ATOMIC_ACQUIRE);
  if (logger)
    logger(level, RCCL_TELEMETRY_LOG_NET, __FILE__, __LINE__, "%s", msg);
  else if (level == RCCL_TELEMETRY_LOG_WARN || rcclTelemetryDlDebugOn_())
    fprintf(stderr, "%s\n", msg);
}

/* Opens the library and copies its table (once, by pthread_once: at the first             */
/* rcclTelemetrySetParam or Init); what it has to say waits for Init (rcclTelemetryDlLine_). */
static inline void rcclTelemetryDlLoad_(void) {
  void *lib = dlopen(RCCL_TELEMETRY_DLOPEN_NAME, RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char *why = dlerror();
    snprintf(rcclTelemetryDlLine_, sizeof rcclTelemetryDlLine_,
             "rccl-telemetry: %s could not be loaded (%s); telemetry is off", RCCL_TELEMETRY_DLOPEN_NAME,
             why ? why : "no reason given");
    rcclTelemetryDlLineWarn_ = 1;
    return;
  }
  void *sym = dlsym(lib, "rcclTelemetryGetApi");
  const rcclTelemetryApi_t *(*getApi)(int) = RCCL_TELEMETRY_NULL_;
  if (sym) memcpy(&getApi, &sym, sizeof getApi);
  const rcclTelemetryApi_t *t = getApi ? getApi(RCCL_TELEMETRY_API_VERSION) : RCCL_TELEMETRY_NULL_;
  if (!t) {
    snprintf(rcclTelemetryDlLine_, sizeof rcclTelemetryDlLine_,
             "rccl-telemetry: %s has no rcclTelemetryGetApi table of version %d (a library older than this "
             "header's loader); telemetry is off",
             RCCL_TELEMETRY_DLOPEN_NAME, RCCL_TELEMETRY_API_VERSION);
    rcclTelemetryDlLineWarn_ = 1;
    return;
  }
  size_t n = t->size > 0 ? RCCL_TELEMETRY_AS_(size_t, t->size) : 0u;
  if (n > sizeof rcclTelemetryDlTable_) n = sizeof rcclTelemetryDlTable_;
  n -= n % sizeof(void *);
  memcpy(&rcclTelemetryDlTable_, t, n);
  rcclTelemetryDlTable_.size = RCCL_TELEMETRY_AS_(int, n);
  if (t->version != RCCL_TELEMETRY_API_VERSION) {
    size_t off = (sizeof rcclTelemetryDlTable_ - n) / sizeof(void *);
    if (off)
      snprintf(rcclTelemetryDlLine_, sizeof rcclTelemetryDlLine_,
               "rccl-telemetry: %s provides table version %d, this program's header version %d: the entry "
               "points both know work, the %d this library lacks are off",
               RCCL_TELEMETRY_DLOPEN_NAME, t->version, RCCL_TELEMETRY_API_VERSION, RCCL_TELEMETRY_AS_(int, off));
    else
      snprintf(rcclTelemetryDlLine_, sizeof rcclTelemetryDlLine_,
               "rccl-telemetry: %s provides table version %d, this program's header version %d: every entry "
               "point the header knows works",
               RCCL_TELEMETRY_DLOPEN_NAME, t->version, RCCL_TELEMETRY_API_VERSION);
    rcclTelemetryDlLineWarn_ = off != 0;
  }
#ifdef RCCL_TELEMETRY_MIRRORS_
  if (rcclTelemetryDlTable_.hot)
    __atomic_store_n(&rcclTelemetryDlHot_, RCCL_TELEMETRY_CPTR_(const rcclTelemetryHot_ *, rcclTelemetryDlTable_.hot),
                     __ATOMIC_RELEASE);
#endif
  __atomic_store_n(&rcclTelemetryDlApiP_, &rcclTelemetryDlTable_, __ATOMIC_RELEASE);
  rcclTelemetryLogger_t logger = __atomic_load_n(&rcclTelemetryDlLogger_, __ATOMIC_ACQUIRE);
  if (logger && rcclTelemetryDlTable_.setLogger) rcclTelemetryDlTable_.setLogger(logger);
}

/* Loads the library on the first call; whether it is there (its Init is). */
static inline int rcclTelemetryDlLoaded_(void) {
  (void)pthread_once(&rcclTelemetryDlOnce_, rcclTelemetryDlLoad_);
  return rcclTelemetryDlApi_()->init ? 1 : 0;
}

/* Loads the library and says the loader's line, the first time (Init's); whether it is  */
/* there.                                                                                */
static inline int rcclTelemetryDlInitLoad_(void) {
  int loaded = rcclTelemetryDlLoaded_();
  if (rcclTelemetryDlLine_[0] && !__atomic_exchange_n(&rcclTelemetryDlLineSaid_, 1, __ATOMIC_ACQ_REL))
    rcclTelemetryDlSay_(rcclTelemetryDlLineWarn_, rcclTelemetryDlLine_);
  return loaded;
}

/* rcclTelemetryInit loads the library, then starts it; OFF without it. */
static inline int rcclTelemetryInit(void) {
  if (!rcclTelemetryDlInitLoad_()) return RCCL_TELEMETRY_INIT_OFF;
  return rcclTelemetryDlApi_()->init();
}

/* rcclTelemetrySetParam loads the library (parameters come before Init) and passes the  */
/* parameter on; 0 and nothing done without the library or with a table that lacks it.    */
/* RCCL_TELEMETRY_ENABLE and RCCL_TELEMETRY_DEBUG are also kept for the loader's own line, */
/* so that telemetry asked for through a parameter is as asked for through the            */
/* environment (a missing library is then a warning).                                     */
static inline int rcclTelemetrySetParam(const char *name, const char *value) {
  if (name && strcmp(name, "RCCL_TELEMETRY_ENABLE") == 0)
    __atomic_store_n(&rcclTelemetryDlEnable_, value ? rcclTelemetryDlIs_(value, "1") : -1, __ATOMIC_RELEASE);
  else if (name && strcmp(name, "RCCL_TELEMETRY_DEBUG") == 0)
    __atomic_store_n(&rcclTelemetryDlDebug_, value ? !rcclTelemetryDlIs_(value, "0") : -1, __ATOMIC_RELEASE);
  if (!rcclTelemetryDlLoaded_()) return 0;
  const rcclTelemetryApi_t *a_ = rcclTelemetryDlApi_();
  return a_->setParam ? a_->setParam(name, value) : 0;
}

/* rcclTelemetrySetLogger: kept for the loader's own lines, and passed on to the library. */
static inline void rcclTelemetrySetLogger(rcclTelemetryLogger_t logger) {
  __atomic_store_n(&rcclTelemetryDlLogger_, logger, __ATOMIC_RELEASE);
  const rcclTelemetryApi_t *a_ = rcclTelemetryDlApi_();
  if (a_->setLogger) a_->setLogger(logger);
}

static inline int rcclTelemetryDlInlineMismatch_(int headerLayout) {
  const rcclTelemetryApi_t *a_ = rcclTelemetryDlApi_();
  return a_->inlineMismatch_ ? a_->inlineMismatch_(headerLayout) : -1;
}
#endif /* RCCL_TELEMETRY_DLOPEN */

/* @modes: the generated stubs and the loader's calls (examples/rccl_telemetry_header.rs) go here. */

#ifdef RCCL_TELEMETRY_INLINE_HOOKS
#if defined(RCCL_TELEMETRY_DLOPEN)
static inline void rcclTelemetryLogAdd_(rcclTelemetryLog_ *h, uint64_t i) {
  const rcclTelemetryApi_t *a_ = rcclTelemetryDlApi_();
  if (a_->logAdd_) a_->logAdd_(h, i);
}
/* The library's hot block, through the loader's pointer. */
#define RCCL_TELEMETRY_HOT_ (*__atomic_load_n(&rcclTelemetryDlHot_, __ATOMIC_RELAXED))
#else
#ifdef __cplusplus
extern "C" {
#endif
extern void rcclTelemetryLogAdd_(rcclTelemetryLog_ *h, uint64_t i);
extern rcclTelemetryHot_ rcclTelemetryHotV3;
/* Says the layouts differ and keeps telemetry off (weak: a library older than the          */
/* negotiation lacks it, and then the wrappers only refuse).                                */
extern int rcclTelemetryInlineMismatch_(int headerLayout) __attribute__((weak));
#ifdef __cplusplus
}
#endif
#define RCCL_TELEMETRY_HOT_ rcclTelemetryHotV3
#endif

static inline int64_t rcclTelemetryNow_(void) {
#if defined(__x86_64__)
  if (RCCL_TELEMETRY_LD_(RCCL_TELEMETRY_HOT_.use_tsc)) {
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
  rcclTelemetryStripe_ *s = __atomic_load_n(&RCCL_TELEMETRY_HOT_.stripes[devIdx], __ATOMIC_ACQUIRE);
  return s ? s + (((tp >> RCCL_TELEMETRY_STRIPE_PAGE_SHIFT_) * RCCL_TELEMETRY_STRIPE_MIX_) >> RCCL_TELEMETRY_STRIPE_SHIFT_) : s;
}

/* rcclTelemetryOn: the word the library sets at Init and clears when the final file is claimed
 * (or in a forked child), so RCCL's `if (rcclTelemetryOn())` guards cost one load, no call. */
static inline int rcclTelemetryOn_inline_(void) {
  return RCCL_TELEMETRY_LD_(RCCL_TELEMETRY_HOT_.enabled) != 0;
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
/* The WQE latency monitor's share of a measured completion (RCCL_TELEMETRY_SLOW_NS or      */
/* NCCL_IB_WQE_LATENCY_THRESHOLD_NS set, thr its value): the sum and the 128-bit sum of      */
/* squares (the exact mean and stddev), the QP's own log-scale count (its quantiles), and,   */
/* above the threshold, the slow count and the latest slow latency and token, which the     */
/* library's background thread reads for its "WQE slow" line: no call, no clock read.       */
static inline void rcclTelemetryMonitor_(rcclTelemetryQp_ *q, uint64_t ns, uint64_t ts, uint64_t thr) {
  __extension__ typedef unsigned __int128 u128_;
  RCCL_TELEMETRY_ADD_(q->mon_sum, ns);
  /* The square's high word is 0 below 2^32 ns, and the low word's sum carries rarely: the */
  /* high word is touched only then.                                                         */
  u128_ sq = RCCL_TELEMETRY_AS_(u128_, ns) * ns;
  uint64_t lo = RCCL_TELEMETRY_LD_(q->mon_sq_lo) + RCCL_TELEMETRY_AS_(uint64_t, sq);
  uint64_t hi = RCCL_TELEMETRY_AS_(uint64_t, sq >> 64) + (lo < RCCL_TELEMETRY_AS_(uint64_t, sq) ? 1u : 0u);
  __atomic_store_n(&q->mon_sq_lo, lo, __ATOMIC_RELAXED);
  if (__builtin_expect(hi != 0, 0)) RCCL_TELEMETRY_ADD_(q->mon_sq_hi, hi);
  uint64_t ha = RCCL_TELEMETRY_LD_(q->mon_hist);
  if (__builtin_expect(ha != 0, 1)) RCCL_TELEMETRY_INC_(RCCL_TELEMETRY_INT_PTR_(uint64_t *, ha)[rcclTelemetryLogIndex_(ns)]);
  if (ns > thr) {
    RCCL_TELEMETRY_INC_(q->slow);
    __atomic_store_n(&q->slow_ns, ns, __ATOMIC_RELAXED);
    __atomic_store_n(&q->slow_post, ts, __ATOMIC_RELAXED);
  }
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
  uint64_t mult = RCCL_TELEMETRY_LD_(RCCL_TELEMETRY_HOT_.ns_mult), ns;
  uint64_t la = RCCL_TELEMETRY_LD_(q->log_hist);
  if (__builtin_expect((dt >> 32) == 0 && mult <= (RCCL_TELEMETRY_AS_(uint64_t, 1) << 32), 1)) {
    ns = (dt * mult) >> 32;
    if (__builtin_expect(la != 0, 1)) rcclTelemetryLogRecord_(la, rcclTelemetryLogIndexRaw_(ns));
  } else {
    u128_ p = RCCL_TELEMETRY_AS_(u128_, dt) * mult;
    ns = (p >> 96) ? UINT64_MAX : RCCL_TELEMETRY_AS_(uint64_t, p >> 32);
    if (la) rcclTelemetryLogRecord_(la, rcclTelemetryLogIndex_(ns));
  }
  uint64_t shift = RCCL_TELEMETRY_LD_(RCCL_TELEMETRY_HOT_.div_shift), b = ns;
  if (shift) {
    uint64_t t = RCCL_TELEMETRY_AS_(uint64_t, (RCCL_TELEMETRY_AS_(u128_, RCCL_TELEMETRY_LD_(RCCL_TELEMETRY_HOT_.div_mul)) * ns) >> 64);
    b = (t + ((ns - t) >> 1)) >> (shift - 1);
  }
  uint64_t last = RCCL_TELEMETRY_LD_(RCCL_TELEMETRY_HOT_.last_bucket);
  RCCL_TELEMETRY_ADD_(q->hist[(b < last ? b : last) & (RCCL_TELEMETRY_HIST_ - 1u)], 1);
  if (~ns > RCCL_TELEMETRY_LD_(q->lat_min_inv)) __atomic_store_n(&q->lat_min_inv, ~ns, __ATOMIC_RELAXED);
  if (ns > RCCL_TELEMETRY_LD_(q->lat_max)) __atomic_store_n(&q->lat_max, ns, __ATOMIC_RELAXED);
  uint64_t thr = RCCL_TELEMETRY_LD_(q->mon_thr);
  if (thr) rcclTelemetryMonitor_(q, ns, ts, thr);
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
  return RCCL_TELEMETRY_LD_(RCCL_TELEMETRY_HOT_.layout) == RCCL_TELEMETRY_AS_(uint64_t, RCCL_TELEMETRY_INLINE_LAYOUT);
}
static inline int rcclTelemetryRefuse_(void) {
#if defined(RCCL_TELEMETRY_DLOPEN)
  return rcclTelemetryDlInlineMismatch_(RCCL_TELEMETRY_INLINE_LAYOUT);
#else
  return rcclTelemetryInlineMismatch_ ? rcclTelemetryInlineMismatch_(RCCL_TELEMETRY_INLINE_LAYOUT) : -1;
#endif
}
static inline int rcclTelemetryInit_inline_(void) {
#if defined(RCCL_TELEMETRY_DLOPEN)
  if (!rcclTelemetryDlInitLoad_()) return RCCL_TELEMETRY_INIT_OFF; /* no library: said once */
#endif
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
static inline rcclTelemetryComm_t *rcclTelemetryCommInit_inline_(uint64_t commHash, int rank, int nRanks) {
  if (rcclTelemetryLayoutOk_()) return (rcclTelemetryCommInit)(commHash, rank, nRanks);
  (void)rcclTelemetryRefuse_();
  return RCCL_TELEMETRY_NULL_;
}
static inline RcclQpStats *rcclTelemetryCommResolveQp_inline_(rcclTelemetryComm_t *comm, int devIdx, int chIdx, int qpIdx) {
  if (rcclTelemetryLayoutOk_()) return (rcclTelemetryCommResolveQp)(comm, devIdx, chIdx, qpIdx);
  (void)rcclTelemetryRefuse_();
  return RCCL_TELEMETRY_NULL_;
}
static inline RcclChannelStats *rcclTelemetryCommResolveChannel_inline_(rcclTelemetryComm_t *comm, int devIdx, int chIdx) {
  if (rcclTelemetryLayoutOk_()) return (rcclTelemetryCommResolveChannel)(comm, devIdx, chIdx);
  (void)rcclTelemetryRefuse_();
  return RCCL_TELEMETRY_NULL_;
}

/* A function that hands out a handle (or starts telemetry) has a wrapper above and one     */
/* line here.                                                                               */
#define rcclTelemetryInit() rcclTelemetryInit_inline_()
#define rcclTelemetryRegisterDevice(deviceId, roceDevice, transport) \
  rcclTelemetryRegisterDevice_inline_((deviceId), (roceDevice), (transport))
#define rcclTelemetryResolveQp(devIdx, chIdx, qpIdx) rcclTelemetryResolveQp_inline_((devIdx), (chIdx), (qpIdx))
#define rcclTelemetryResolveChannel(devIdx, chIdx) rcclTelemetryResolveChannel_inline_((devIdx), (chIdx))
#define rcclTelemetryCommInit(commHash, rank, nRanks) rcclTelemetryCommInit_inline_((commHash), (rank), (nRanks))
#define rcclTelemetryCommResolveQp(comm, devIdx, chIdx, qpIdx) \
  rcclTelemetryCommResolveQp_inline_((comm), (devIdx), (chIdx), (qpIdx))
#define rcclTelemetryCommResolveChannel(comm, devIdx, chIdx) \
  rcclTelemetryCommResolveChannel_inline_((comm), (devIdx), (chIdx))
#define rcclTelemetryOn() rcclTelemetryOn_inline_()
#define rcclTelemetryPostTs(qp) rcclTelemetryPostTs_inline_(qp)
#define rcclTelemetryQpSendPosted(qp, withImm) rcclTelemetryQpSendPosted_inline_((qp), (withImm))
#define rcclTelemetryQpRecvPosted(qp) rcclTelemetryQpRecvPosted_inline_(qp)
#define rcclTelemetryQpCtsSent(qp, signalled) rcclTelemetryQpCtsSent_inline_((qp), (signalled))
#define rcclTelemetryQpSlotMiss(qp) rcclTelemetryQpSlotMiss_inline_(qp)
#define rcclTelemetryQpWqeComplete(qp, postTs) rcclTelemetryQpWqeComplete_inline_((qp), RCCL_TELEMETRY_TOKEN_(postTs))
#define rcclTelemetryQpWqeCompleteAt(qp, postTs, nowTs) \
  rcclTelemetryQpWqeCompleteAt_inline_((qp), RCCL_TELEMETRY_TOKEN_(postTs), RCCL_TELEMETRY_TOKEN_(nowTs))
#define rcclTelemetryPollTs() rcclTelemetryNow_()
#define rcclTelemetryChRequestCompleted(ch) rcclTelemetryChRequestCompleted_inline_(ch)
#define rcclTelemetryBytes(devIdx, isSend, bytes) rcclTelemetryBytes_inline_((devIdx), (isSend), (bytes))
#define rcclTelemetryCqError(devIdx) rcclTelemetryCqError_inline_(devIdx)
#define rcclTelemetryAddCqPolls(devIdx, polls) rcclTelemetryAddCqPolls_inline_((devIdx), (polls))
#define rcclTelemetryWqeSize(devIdx, bytes) rcclTelemetryWqeSize_inline_((devIdx), (bytes))
#else
/* The functions that take tokens, called with the token converted explicitly (as above). */
#define rcclTelemetryQpWqeComplete(qp, postTs) (rcclTelemetryQpWqeComplete)((qp), RCCL_TELEMETRY_TOKEN_(postTs))
#define rcclTelemetryQpWqeCompleteAt(qp, postTs, nowTs) \
  (rcclTelemetryQpWqeCompleteAt)((qp), RCCL_TELEMETRY_TOKEN_(postTs), RCCL_TELEMETRY_TOKEN_(nowTs))
#endif /* inline hooks */
#define rcclTelemetryWqeComplete(devIdx, chIdx, qpIdx, postTs) \
  (rcclTelemetryWqeComplete)((devIdx), (chIdx), (qpIdx), RCCL_TELEMETRY_TOKEN_(postTs))
#endif /* RCCL_TELEMETRY_INLINE_H */
