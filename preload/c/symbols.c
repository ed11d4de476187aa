/*
 * preload/c/symbols.c: finding what the interposer stands in front of. The real dlsym and
 * dlvsym, read out of libc's own ELF dynamic symbol table (this object defines dlsym and
 * dlvsym, so the dynamic linker cannot name glibc's), the real libibverbs entry points
 * (real_NAME() in preload.h), and the interposed dlsym/dlvsym that hand a program loading
 * libibverbs with dlopen + dlsym (NCCL's and RCCL's ibvwrap) the wrappers of the exported
 * entry points instead. Separate because it is the one part that deals with symbols.
 */
#include "preload.h"

/* ------------------------------------------------------------------------------------ */
/* The real dlsym and dlvsym, from libc's own dynamic symbol table.                       */
/*
 * This file defines dlsym and dlvsym, so neither dlsym(RTLD_NEXT, "dlsym") nor any other
 * call through the dynamic linker can name glibc's: it would find this file's again and
 * recurse. glibc 2.34+ keeps dlsym/dlvsym in libc.so.6 (before, libdl.so.2), so the loaded
 * libc's PT_DYNAMIC is read directly: DT_GNU_HASH (or DT_HASH), DT_SYMTAB, DT_STRTAB and
 * DT_VERSYM locate the default (non-hidden) version of each name, without any call into the
 * dynamic linker but dl_iterate_phdr.
 */
void *(*real_dlsym)(void *, const char *);
void *(*real_dlvsym)(void *, const char *, const char *);

struct findsym {
  const char *lib;
  const char *names[2];
  void *found[2];
};

static uint32_t gnu_hash(const char *s) {
  uint32_t h = 5381;
  for (; *s; s++) h = h * 33 + (unsigned char)*s;
  return h;
}

static int find_in_object(struct dl_phdr_info *info, size_t size, void *arg) {
  (void)size;
  struct findsym *f = arg;
  const char *base = strrchr(info->dlpi_name, '/');
  base = base ? base + 1 : info->dlpi_name;
  if (strncmp(base, f->lib, strlen(f->lib)) != 0) return 0;
  const ElfW(Dyn) *dyn = NULL;
  for (int i = 0; i < info->dlpi_phnum; i++)
    if (info->dlpi_phdr[i].p_type == PT_DYNAMIC) dyn = (const void *)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
  if (!dyn) return 0;
  const ElfW(Sym) *symtab = NULL;
  const char *strtab = NULL;
  const uint32_t *gnuhash = NULL, *hash = NULL;
  const ElfW(Half) *versym = NULL;
  for (const ElfW(Dyn) *d = dyn; d->d_tag != DT_NULL; d++) {
    /* glibc relocates these entries of a loaded object to addresses; the vDSO does not. */
    uintptr_t p = d->d_un.d_ptr;
    if (p < info->dlpi_addr) p += info->dlpi_addr;
    switch (d->d_tag) {
    case DT_SYMTAB: symtab = (const void *)p; break;
    case DT_STRTAB: strtab = (const void *)p; break;
    case DT_GNU_HASH: gnuhash = (const void *)p; break;
    case DT_HASH: hash = (const void *)p; break;
    case DT_VERSYM: versym = (const void *)p; break;
    }
  }
  if (!symtab || !strtab || (!gnuhash && !hash)) return 0;
  for (int k = 0; k < 2; k++) {
    const char *name = f->names[k];
    if (!name || f->found[k]) continue;
    /* Every symbol with this name, keeping the default version (or the only one). */
    uint32_t idx[64];
    int n = 0;
    if (gnuhash) {
      uint32_t nbuckets = gnuhash[0], symoffset = gnuhash[1], bloom_size = gnuhash[2];
      const ElfW(Addr) *bloom = (const void *)&gnuhash[4];
      const uint32_t *buckets = (const void *)&bloom[bloom_size];
      const uint32_t *chain = &buckets[nbuckets];
      uint32_t h = gnu_hash(name);
      uint32_t i = buckets[h % nbuckets];
      if (i >= symoffset)
        for (;; i++) {
          uint32_t ch = chain[i - symoffset];
          if ((ch | 1) == (h | 1) && strcmp(strtab + symtab[i].st_name, name) == 0 && n < 64) idx[n++] = i;
          if (ch & 1) break;
        }
    } else {
      uint32_t nchain = hash[1];
      for (uint32_t i = 0; i < nchain && n < 64; i++)
        if (strcmp(strtab + symtab[i].st_name, name) == 0) idx[n++] = i;
    }
    for (int j = 0; j < n; j++) {
      const ElfW(Sym) *s = &symtab[idx[j]];
      if (s->st_shndx == SHN_UNDEF || ELF64_ST_TYPE(s->st_info) != STT_FUNC) continue;
      if (versym && (versym[idx[j]] & 0x8000)) continue; /* hidden: a compat version */
      f->found[k] = (void *)(info->dlpi_addr + s->st_value);
    }
  }
  return f->found[0] != NULL;
}

void find_real_dl(void) {
  if (real_dlsym && real_dlvsym) return;
  struct findsym f = {"libc.so.6", {"dlsym", "dlvsym"}, {NULL, NULL}};
  dl_iterate_phdr(find_in_object, &f);
  if (!f.found[0]) {
    f.lib = "libdl.so.2";
    dl_iterate_phdr(find_in_object, &f);
  }
  if (f.found[1]) __atomic_store_n(&real_dlvsym, (void *(*)(void *, const char *, const char *))f.found[1], __ATOMIC_RELEASE);
  if (f.found[0]) __atomic_store_n(&real_dlsym, (void *(*)(void *, const char *))f.found[0], __ATOMIC_RELEASE);
}

/* ------------------------------------------------------------------------------------ */
/* The real libibverbs entry points                                                      */

/* The libibverbs that is loaded (by the program, directly or with dlopen), or NULL. */
void *verbs_handle(void) {
  static void *h;
  void *v = __atomic_load_n(&h, __ATOMIC_ACQUIRE);
  if (!v) {
    v = dlopen("libibverbs.so.1", RTLD_LAZY | RTLD_NOLOAD);
    if (v) __atomic_store_n(&h, v, __ATOMIC_RELEASE);
  }
  return v;
}

void *real_fn(void **cache, const char *name) {
  void *f = __atomic_load_n(cache, __ATOMIC_ACQUIRE);
  if (LIKELY(f)) return f;
  find_real_dl();
  void *h = verbs_handle();
  if (h && real_dlsym) f = real_dlsym(h, name);
  if (f) __atomic_store_n(cache, f, __ATOMIC_RELEASE);
  return f;
}
#define REAL_DEF(name) void *real_##name##_p;
RTP_REAL_FNS(REAL_DEF)
#undef REAL_DEF

#ifdef RTP_TEST_HOOKS
/* The test hooks' cue (preload.h: TEST_HOOK), the fake provider's fakeverbs_cue. */
void test_hook(int point) {
  static void (*cue)(int);
  if (!cue && real_dlsym && verbs_handle()) cue = (void (*)(int))real_dlsym(verbs_handle(), "fakeverbs_cue");
  if (cue) cue(point);
}
#endif

/* ------------------------------------------------------------------------------------ */
/* dlsym / dlvsym: libibverbs' own entry points become ours                               */

static const struct {
  const char *name;
  void *wrapper;
  void **real;
} g_wrapped[] = {
    {"ibv_open_device", (void *)ibv_open_device, &real_ibv_open_device_p},
    {"ibv_close_device", (void *)ibv_close_device, &real_ibv_close_device_p},
    {"ibv_create_qp", (void *)ibv_create_qp, &real_ibv_create_qp_p},
    {"ibv_destroy_qp", (void *)ibv_destroy_qp, &real_ibv_destroy_qp_p},
    {"ibv_destroy_cq", (void *)ibv_destroy_cq, &real_ibv_destroy_cq_p},
    {"ibv_qp_to_qp_ex", (void *)ibv_qp_to_qp_ex, &real_ibv_qp_to_qp_ex_p},
    {"ibv_modify_qp", (void *)ibv_modify_qp, &real_ibv_modify_qp_p},
};

/* sym: what the real lookup of name found in handle. Ours when it is libibverbs' default
 * version of an entry point this file wraps. */
static void *redirect(void *handle, const char *name, void *sym) {
  if (!sym || name[0] != 'i' || name[1] != 'b' || name[2] != 'v' || LD(g_state) < 0) return sym;
  for (size_t i = 0; i < sizeof g_wrapped / sizeof g_wrapped[0]; i++) {
    if (strcmp(name, g_wrapped[i].name) != 0) continue;
    if (sym == g_wrapped[i].wrapper) return sym;
    Dl_info di;
    if (!dladdr(sym, &di) || !di.dli_fname) return sym;
    const char *b = strrchr(di.dli_fname, '/');
    b = b ? b + 1 : di.dli_fname;
    if (strncmp(b, "libibverbs.so", 13) != 0) return sym;
    /* Only the default version: an older one (ibv_open_device@IBVERBS_1.0) has other
     * structure layouts, and the program gets it unchanged. */
    if (handle && real_dlsym(handle, name) != sym) return sym;
    void *expect = NULL;
    __atomic_compare_exchange_n(g_wrapped[i].real, &expect, sym, 0, __ATOMIC_RELEASE, __ATOMIC_RELAXED);
    return g_wrapped[i].wrapper;
  }
  return sym;
}

EXPORT void *dlsym(void *handle, const char *name) {
  if (UNLIKELY(!real_dlsym)) find_real_dl();
  /* RTLD_NEXT and RTLD_DEFAULT are relative to the caller: a sibling call keeps the
   * program's return address, which glibc reads to find the caller. */
  if (handle == RTLD_NEXT || handle == RTLD_DEFAULT || LD(g_state) < 0) return real_dlsym(handle, name);
  return redirect(handle, name, real_dlsym(handle, name));
}

EXPORT void *dlvsym(void *handle, const char *name, const char *version) {
  if (UNLIKELY(!real_dlvsym)) find_real_dl();
  if (handle == RTLD_NEXT || handle == RTLD_DEFAULT || LD(g_state) < 0) return real_dlvsym(handle, name, version);
  return redirect(handle, name, real_dlvsym(handle, name, version));
}
