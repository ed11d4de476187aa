//! Prints the C header this build generates: `make header` writes it to
//! include/rccl_telemetry.h, `make header-check` compares. The declarations are cbindgen's
//! (build.rs writes them into OUT_DIR); the inline hooks' C source follows
//! (src/rccl_telemetry_inline.h), with the C mirrors of the library's layouts in place of its
//! marker line: generated here from the Rust structs as src/inline_abi.rs lists them
//! (`MIRRORS`), and from the library's constants; and the entry points of the header's two
//! other modes in place of its modes marker line, generated from cbindgen's declarations and
//! the loader's table (`rcclTelemetryApi_t`): RCCL_TELEMETRY_STUBS' empty functions and
//! RCCL_TELEMETRY_DLOPEN's calls through the table, each returning its off result (`OFF`).
//! cbindgen's declarations are kept out of those two modes. The generator fails on a
//! function without its table entry or off result. It lives here, not in the library, so
//! that none of it is in the library's code or data.

use std::fmt::Write as _;

use rccl_telemetry::counters::HIST;
use rccl_telemetry::hot::{MAX_DEVS, STRIPE_MIX, STRIPE_PAGE_SHIFT};
use rccl_telemetry::inline_abi::{MirrorLayout, MARKER, MIRRORS};
use rccl_telemetry::loghist::{bucket_bounds, LOG_BUCKETS};
use rccl_telemetry::registry::STRIPES;

/// A C comment of doc lines (each with rustdoc's leading space).
fn c_comment(out: &mut String, doc: &[&str]) {
    for (i, l) in doc.iter().enumerate() {
        let open = if i == 0 { "/*" } else { " *" };
        let close = if i + 1 == doc.len() { " */" } else { "" };
        let _ = writeln!(out, "{open}{}{close}", l.trim_end());
    }
}

/// The constants the hooks compute with, as C macros.
fn constants(out: &mut String) {
    let log_last = bucket_bounds(LOG_BUCKETS - 1).0;
    let tz = log_last.trailing_zeros();
    let _ = write!(
        out,
        "/* The library's own layouts and the constants the inline hooks compute with.         */\n\
         /* Device slots (RCCL_TELEMETRY_MAX_DEVS). */\n\
         #define RCCL_TELEMETRY_MAX_DEVS_ {MAX_DEVS}u\n\
         /* A thread's stripe (of a device's {STRIPES}): the top bits of its mixed page number,\n \
         * ((tp >> RCCL_TELEMETRY_STRIPE_PAGE_SHIFT_) * RCCL_TELEMETRY_STRIPE_MIX_) >>\n \
         * RCCL_TELEMETRY_STRIPE_SHIFT_ (registry::stripe). */\n\
         #define RCCL_TELEMETRY_STRIPE_PAGE_SHIFT_ {STRIPE_PAGE_SHIFT}\n\
         #define RCCL_TELEMETRY_STRIPE_MIX_ 0x{STRIPE_MIX:X}ull\n\
         #define RCCL_TELEMETRY_STRIPE_SHIFT_ {}\n\
         /* The QP slot's linear histogram buckets (a power of two). */\n\
         #define RCCL_TELEMETRY_HIST_ {HIST}u\n\
         /* Where the last stored log-scale bucket, bucket {}, starts: {:.1} s. */\n\
         #define RCCL_TELEMETRY_LOG_LAST_NS_ (RCCL_TELEMETRY_AS_(uint64_t, {}) << {tz})\n",
        64 - STRIPES.trailing_zeros(),
        LOG_BUCKETS - 1,
        log_last as f64 / 1e9,
        log_last >> tz,
    );
}

/// One typedef: the fields at their Rust offsets, every other byte `library_only_` (then
/// `library_only1_`, ...), up to the Rust size.
fn typedef(out: &mut String, l: &MirrorLayout) {
    c_comment(out, l.doc);
    let _ = writeln!(out, "typedef struct {} {{", l.c_name);
    let mut gaps = 0;
    let mut pad = |out: &mut String, from: usize, to: usize| {
        if to > from {
            assert!(
                from % 8 == 0 && to % 8 == 0,
                "{}: a gap of other than 8-byte words",
                l.c_name
            );
            let name = if gaps == 0 {
                "library_only_".to_owned()
            } else {
                format!("library_only{gaps}_")
            };
            let _ = writeln!(out, "  uint64_t {name}[{}];", (to - from) / 8);
            gaps += 1;
        }
    };
    let mut at = 0;
    for f in l.fields {
        assert!(
            f.offset >= at,
            "{}.{}: fields out of order or overlapping",
            l.c_name,
            f.name
        );
        pad(out, at, f.offset);
        let ptr = if f.pointer { "*" } else { "" };
        let len = if f.len > 0 {
            format!("[{}]", f.len)
        } else {
            String::new()
        };
        let _ = writeln!(out, "  {} {ptr}{}{len};", f.c_type, f.name);
        at = f.offset + f.size;
    }
    assert!(l.size >= at, "{}: fields beyond the size", l.c_name);
    pad(out, at, l.size);
    let _ = writeln!(out, "}} {};", l.c_name);
}

/// The header's C mirrors of the library's layouts and the constants the hooks compute with:
/// what replaces the marker line of src/rccl_telemetry_inline.h.
fn c_mirrors() -> String {
    let mut out = String::new();
    constants(&mut out);
    for l in MIRRORS {
        typedef(&mut out, l);
    }
    out.push_str(
        "/* The C compiler's layout is the library's. */\n\
         #if defined(__cplusplus) || (defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L)\n\
         #ifdef __cplusplus\n\
         #define RCCL_TELEMETRY_ASSERT_(c, m) static_assert(c, m)\n\
         #else\n\
         #define RCCL_TELEMETRY_ASSERT_(c, m) _Static_assert(c, m)\n\
         #endif\n\
         #define RCCL_TELEMETRY_SIZE_(T, n) RCCL_TELEMETRY_ASSERT_(sizeof(T) == (n), #T \" is not the library's size\")\n\
         #define RCCL_TELEMETRY_AT_(T, f, o) \\\n  \
         RCCL_TELEMETRY_ASSERT_(__builtin_offsetof(T, f) == (o), #T \".\" #f \" is not at the library's offset\")\n",
    );
    for l in MIRRORS {
        let c = l.c_name;
        let _ = writeln!(
            out,
            "RCCL_TELEMETRY_SIZE_({c}, {}); /* {} */",
            l.size, l.rust_name
        );
        for f in l.fields {
            let _ = writeln!(out, "RCCL_TELEMETRY_AT_({c}, {}, {});", f.name, f.offset);
        }
    }
    out.push_str("#endif\n");
    out
}

/// The line of src/rccl_telemetry_inline.h that the generated stubs and loader calls replace.
const MODES_MARKER: &str = "/* @modes: the generated stubs and the loader's calls (examples/rccl_telemetry_header.rs) go here. */";

/// What a function returns while telemetry is off (a stub, or a call through an absent entry
/// of the loader's table), for every function that returns a number: handles are NULL.
const OFF: &[(&str, &str)] = &[
    ("rcclTelemetryInit", "RCCL_TELEMETRY_INIT_OFF"),
    ("rcclTelemetryOn", "0"),
    ("rcclTelemetryFlush", "0"),
    ("rcclTelemetryRegisterDevice", "-1"),
    ("rcclTelemetrySetupChannel", "-1"),
    ("rcclTelemetryPostTs", "0"),
    ("rcclTelemetryPollTs", "RCCL_TELEMETRY_TS_UNSAMPLED + 1"),
    ("rcclTelemetryPostTsIdx", "0"),
    ("rcclTelemetryNowToken", "RCCL_TELEMETRY_TS_UNSAMPLED + 1"),
    ("rcclTelemetrySwCapture", "-1"),
    ("rcclTelemetryCommSetupChannel", "-1"),
    ("rcclTelemetryGetVersion", "0"),
    ("rcclTelemetrySetParam", "0"),
    ("rcclTelemetryQpSetAttrs", "0"),
];

/// The functions the loader defines by hand (src/rccl_telemetry_inline.h): Init and SetParam
/// load the library (a parameter is set before Init), SetLogger keeps the logger for the
/// loader's own lines; GetApi is what it loads.
const LOADER_OWN: &[&str] = &[
    "rcclTelemetryInit",
    "rcclTelemetrySetParam",
    "rcclTelemetrySetLogger",
    "rcclTelemetryGetApi",
];

/// The table's entries that are no exported function of the header: its header fields and
/// the inline hooks' internals.
const TABLE_OWN: &[&str] = &["version", "size", "hot", "logAdd_", "inlineMismatch_"];

/// One function declaration of cbindgen's: `RET NAME(PARAMS);`.
struct Decl {
    ret: String,
    name: String,
    /// (declaration, name) of each parameter; empty for `(void)`.
    params: Vec<(String, String)>,
}

impl Decl {
    fn parse(line: &str) -> Decl {
        let open = line.find('(').expect("a declaration has parameters");
        let head = &line[..open];
        let at = head
            .rfind([' ', '*'])
            .expect("a declaration has a return type")
            + 1;
        let params = line[open + 1..line.rfind(')').expect("closed parameters")].trim();
        let params = if params == "void" {
            Vec::new()
        } else {
            params
                .split(", ")
                .map(|p| {
                    let at = p.rfind([' ', '*']).expect("a parameter has a name") + 1;
                    (p.to_owned(), p[at..].to_owned())
                })
                .collect()
        };
        Decl {
            ret: head[..at].trim_end().to_owned(),
            name: head[at..].to_owned(),
            params,
        }
    }

    /// The table entry of rcclTelemetryFooBar: fooBar.
    fn field(&self) -> String {
        let rest = self
            .name
            .strip_prefix("rcclTelemetry")
            .expect("rcclTelemetry names");
        let mut c = rest.chars();
        let first = c
            .next()
            .expect("a name after the prefix")
            .to_ascii_lowercase();
        format!("{first}{}", c.as_str())
    }

    fn signature(&self) -> String {
        let params = if self.params.is_empty() {
            "void".to_owned()
        } else {
            self.params
                .iter()
                .map(|p| p.0.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        };
        format!(
            "static inline {}{}{}({params})",
            self.ret,
            if self.ret.ends_with('*') { "" } else { " " },
            self.name
        )
    }

    fn args(&self) -> String {
        self.params
            .iter()
            .map(|p| p.1.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The off path: `*numSlots = 0` where there is one, then the off result.
    fn off(&self) -> String {
        let mut out = String::new();
        if self.params.iter().any(|p| p.1 == "numSlots") {
            out.push_str("  if (numSlots) *numSlots = 0;\n");
        }
        if self.ret == "void" {
            return out;
        }
        let v = if self.ret.ends_with('*') {
            "RCCL_TELEMETRY_NULL_"
        } else {
            OFF.iter()
                .find(|(n, _)| *n == self.name)
                .unwrap_or_else(|| {
                    panic!(
                        "{} returns a number: say what it returns while off (OFF)",
                        self.name
                    )
                })
                .1
        };
        let _ = writeln!(out, "  return {v};");
        out
    }
}

/// The function declarations of cbindgen's output, and the output with them kept out of
/// RCCL_TELEMETRY_STUBS and RCCL_TELEMETRY_DLOPEN builds (those define the names themselves).
fn split_decls(decls: &str) -> (String, Vec<Decl>) {
    let open = "#ifdef __cplusplus\nextern \"C\" {\n#endif // __cplusplus\n";
    let close = "#ifdef __cplusplus\n}  // extern \"C\"\n#endif  // __cplusplus\n";
    let a = decls.find(open).expect("cbindgen's extern \"C\" block");
    let b = decls
        .find(close)
        .expect("cbindgen's extern \"C\" block's end")
        + close.len();
    let guard = "#if !defined(RCCL_TELEMETRY_STUBS) && !defined(RCCL_TELEMETRY_DLOPEN)\n";
    let out = format!(
        "{}{guard}{}#endif\n{}",
        &decls[..a],
        &decls[a..b],
        &decls[b..]
    );
    let fns = decls[a..b]
        .lines()
        .filter(|l| {
            l.starts_with(|c: char| c.is_ascii_alphabetic())
                && l.ends_with(");")
                && l.contains("rcclTelemetry")
        })
        .map(Decl::parse)
        .collect();
    (out, fns)
}

/// The entries of rcclTelemetryApi_t, in order.
fn table_fields(decls: &str) -> Vec<String> {
    let a = decls
        .find("typedef struct rcclTelemetryApi {")
        .expect("cbindgen's rcclTelemetryApi");
    let b = a + decls[a..].find("} rcclTelemetryApi;").expect("its end");
    decls[a..b]
        .lines()
        .skip(1)
        .filter(|l| !l.trim_start().starts_with("//"))
        .filter_map(|l| {
            let l = l.trim();
            if let Some(i) = l.find("(*") {
                Some(l[i + 2..i + l[i..].find(')')?].to_owned())
            } else {
                let d = l.strip_suffix(';')?;
                Some(d[d.rfind([' ', '*'])? + 1..].to_owned())
            }
        })
        .collect()
}

/// The stubs (RCCL_TELEMETRY_STUBS) and the loader's calls through its table
/// (RCCL_TELEMETRY_DLOPEN): what replaces the modes marker.
fn c_modes(fns: &[Decl], fields: &[String]) -> String {
    for f in fns.iter().filter(|f| f.name != "rcclTelemetryGetApi") {
        assert!(
            fields.contains(&f.field()),
            "{} has no entry {} in rcclTelemetryApi_t (src/capi.rs)",
            f.name,
            f.field()
        );
    }
    for e in fields.iter().filter(|e| !TABLE_OWN.contains(&e.as_str())) {
        assert!(
            fns.iter().any(|f| f.field() == *e),
            "rcclTelemetryApi_t.{e} names no function of the header"
        );
    }
    for (n, _) in OFF {
        assert!(
            fns.iter().any(|f| f.name == *n),
            "OFF names {n}, which the header does not declare"
        );
    }
    let mut out = String::from(
        "/* The entry points of RCCL_TELEMETRY_STUBS (each returns what it returns while\n \
         * telemetry is off) and of RCCL_TELEMETRY_DLOPEN (each calls through the loaded table). */\n\
         #if defined(RCCL_TELEMETRY_STUBS)\n",
    );
    for f in fns {
        let _ = writeln!(out, "{} {{", f.signature());
        let unused: Vec<String> = f
            .params
            .iter()
            .filter(|p| p.1 != "numSlots")
            .map(|p| format!("(void){};", p.1))
            .collect();
        if !unused.is_empty() {
            let _ = writeln!(out, "  {}", unused.join(" "));
        }
        out.push_str(&f.off());
        out.push_str("}\n");
    }
    out.push_str("#elif defined(RCCL_TELEMETRY_DLOPEN)\n");
    for f in fns
        .iter()
        .filter(|f| !LOADER_OWN.contains(&f.name.as_str()))
    {
        let (e, args) = (f.field(), f.args());
        let _ = writeln!(out, "{} {{", f.signature());
        out.push_str("  const rcclTelemetryApi_t *a_ = rcclTelemetryDlApi_();\n");
        if f.ret == "void" {
            let _ = writeln!(out, "  if (a_->{e}) a_->{e}({args});");
        } else {
            let _ = writeln!(out, "  if (a_->{e}) return a_->{e}({args});");
        }
        out.push_str(&f.off());
        out.push_str("}\n");
    }
    out.push_str("#endif\n");
    out
}

fn main() {
    let decls = include_str!(concat!(env!("OUT_DIR"), "/rccl_telemetry_decls.h"));
    let hooks = include_str!("../src/rccl_telemetry_inline.h");
    // The fragment's own opening comment is about its build, not for the header's reader.
    let body = &hooks[hooks
        .find("#ifndef RCCL_TELEMETRY_INLINE_H")
        .expect("src/rccl_telemetry_inline.h has its include guard")..];
    let lines: Vec<&str> = body.lines().collect();
    for m in [MARKER, MODES_MARKER] {
        assert_eq!(
            lines.iter().filter(|l| **l == m).count(),
            1,
            "src/rccl_telemetry_inline.h has its marker line {m:?} once"
        );
    }
    let (decls_out, fns) = split_decls(decls);
    let modes = c_modes(&fns, &table_fields(decls));
    let mut out = decls_out;
    out.push('\n');
    for l in lines {
        if l == MARKER {
            out.push_str(&c_mirrors());
        } else if l == MODES_MARKER {
            out.push_str(&modes);
        } else {
            out.push_str(l);
            out.push('\n');
        }
    }
    print!("{out}");
}
