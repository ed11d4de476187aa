//! The `rccl-telemetry` command line: `main` parses it and turns what `run` returns into the
//! exit code (the one place that decides it); `run` hands each subcommand to its function,
//! which reads the inputs, calls the library's module and prints.

mod cli;

use clap::Parser;
use cli::{
    CheckArgs, Cli, Cmd, ExportArgs, Format, GenerateArgs, ImportArgs, LinksArgs, OutliersArgs,
    PromGcArgs, ReportArgs, StallsArgs, SummaryArgs,
};
use rccl_telemetry_tool::context::RunContext;
use rccl_telemetry_tool::{
    check, export, generate, import, jobs, layout, links, load, outliers, promgc, report, stalls,
    summary,
};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

/// How a command that ran ended.
enum Done {
    /// Exit 0: nothing to report, or the work is done.
    Clean,
    /// Exit 1: the command found what it looks for (violations, outliers, stalled QPs), or
    /// could not remove a file.
    Found,
}

/// Why a command could not run (exit 2): the message to print, or None when it is said.
struct Failed(Option<String>);

type Outcome = Result<Done, Failed>;

fn fail(msg: impl std::fmt::Display) -> Failed {
    Failed(Some(msg.to_string()))
}

/// `Found` when `found`, else `Clean`.
fn found_if(found: bool) -> Done {
    if found {
        Done::Found
    } else {
        Done::Clean
    }
}

/// Set when an input was skipped (its data is missing from the answer): main then adds
/// `load::SKIPPED_EXIT_BIT` to a command's 0 or 1.
static SKIPPED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Some(size) = &cli.max_file_size {
        match load::parse_size(size) {
            Ok(n) => load::set_max_file_bytes(n),
            Err(e) => {
                eprintln!("rccl-telemetry: --max-file-size {e}");
                return ExitCode::from(2);
            }
        }
    }
    let skipped = || {
        if SKIPPED.load(std::sync::atomic::Ordering::Relaxed) {
            load::SKIPPED_EXIT_BIT
        } else {
            0
        }
    };
    match run(cli) {
        Ok(Done::Clean) => ExitCode::from(skipped()),
        Ok(Done::Found) => ExitCode::from(1 | skipped()),
        Err(Failed(msg)) => {
            if let Some(msg) = msg {
                eprintln!("rccl-telemetry: {msg}");
            }
            ExitCode::from(2)
        }
    }
}

fn run(cli: Cli) -> Outcome {
    match cli.cmd {
        Cmd::Summary(a) => summary(a),
        Cmd::Check(a) => check(a),
        Cmd::Outliers(a) => outliers(a),
        Cmd::Links(a) => links(a),
        Cmd::Stalls(a) => stalls(a),
        Cmd::Export(a) => export(a),
        Cmd::PromGc(a) => prom_gc(a),
        Cmd::Report(a) => report(a),
        Cmd::Generate(a) => generate(a),
        Cmd::Import(a) => import_logs(a),
    }
}

/// Loads the inputs; fails (after saying why) when nothing could be read.
fn load(inputs: &[PathBuf]) -> Result<load::Run, Failed> {
    load_keeping(inputs, load::Keep::All)
}

/// Loads the inputs keeping only the QPs `keep` asks for (see `load::prune`).
fn load_keeping(inputs: &[PathBuf], keep: load::Keep) -> Result<load::Run, Failed> {
    let run = load::load_run_keeping(inputs, keep);
    load::report_bad(&run.bad, run.found);
    if load::lost_inputs(&run.bad) {
        SKIPPED.store(true, std::sync::atomic::Ordering::Relaxed);
    }
    if run.files.is_empty() {
        eprintln!("rccl-telemetry: no readable rccl_telemetry_*.json file in the inputs");
        return Err(Failed(None));
    }
    if import::is_imported(&run) {
        eprintln!("rccl-telemetry: note: {}", import::CAVEAT);
    }
    Ok(run)
}

fn print(s: &str) {
    let mut out = std::io::stdout().lock();
    // A closed pipe (| head) is not an error worth a message.
    let _ = out.write_all(s.as_bytes()).and_then(|_| out.flush());
}

fn print_json<T: serde::Serialize>(v: &T) -> Result<(), Failed> {
    let mut s =
        serde_json::to_string_pretty(v).map_err(|e| fail(format!("cannot serialise: {e}")))?;
    s.push('\n');
    print(&s);
    Ok(())
}

fn summary(a: SummaryArgs) -> Outcome {
    // Devices and channels; of the QPs, only what the stall line under the text reads.
    let keep = if a.json {
        load::Keep::Nothing
    } else {
        load::Keep::Hang
    };
    let run = load_keeping(&a.inputs, keep)?;
    let cx = RunContext::new(&run);
    let s = summary::summarize(&run, a.all_devices);
    if a.json {
        print_json(&s)?;
        return Ok(Done::Clean);
    }
    let o = summary::TextOptions {
        layout: layout::Layout::from_flag(a.wide),
        all: a.all,
        linear: a.linear,
    };
    let mut text = summary::render_with(&s, &o);
    if let Some(line) = stalls::one_line(&stalls::find_in(&cx, &[])) {
        text.push_str(&line);
        text.push('\n');
    }
    print(&text);
    Ok(Done::Clean)
}

fn check(a: CheckArgs) -> Outcome {
    let report = check::check_inputs(&a.inputs).map_err(fail)?;
    if a.json {
        print_json(&report)?;
    } else {
        print(&check::text::render(
            &report,
            a.all,
            layout::Layout::from_flag(a.wide),
        ));
    }
    if !report.intree_format_limitations.is_empty() {
        eprintln!(
            "rccl-telemetry: {} in-tree (intree-1.0) files were checked against that format's own rules; what it cannot express:",
            report.files_intree
        );
        for l in &report.intree_format_limitations {
            eprintln!("  - {l}");
        }
    }
    eprintln!(
        "rccl-telemetry: checked {} files: {} valid, {} with violations, {} unreadable; {} violations{}",
        report.files,
        report.files_valid,
        report.files - report.files_valid - report.files_unreadable,
        report.files_unreadable,
        report.violations.len(),
        report
            .incomplete
            .as_ref()
            .map_or(String::new(), check::short_of_ranks)
    );
    if report.files == 0 {
        return Err(fail("no rccl_telemetry_*.json file in the inputs"));
    }
    // Files whose peers or ranks have no file are a run short of ranks: exit 1, as for a file
    // that cannot be read, unless the inputs are knowingly a part (--partial, or one file).
    let short = report.incomplete.is_some() && !a.partial && report.files > 1;
    Ok(found_if(!report.violations.is_empty() || short))
}

fn outliers(a: OutliersArgs) -> Outcome {
    // Of the QPs, those the links and the hang analysis read.
    let run = load_keeping(&a.inputs, load::Keep::Links)?;
    let opt = outliers::Options {
        threshold: a.threshold,
        min_skew: a.min_skew,
        min_ratio: a.min_ratio,
        min_events: a.min_events,
        min_tail_share: a.min_tail_share,
        ..Default::default()
    };
    // The hang's root and its stalled QPs are findings (critical, first); a hang whose root
    // cannot be named is a caveat line. Files of several jobs are analysed job by job.
    let (_, several, reports) = jobs::find_outliers(run, &opt);
    let text = outliers::OutlierText {
        layout: layout::Layout::from_flag(a.wide),
        top: a.top,
        all: a.all,
    };
    match (&several, a.json) {
        (Some(j), true) => print_json(&jobs::PerJob {
            jobs: j,
            reports: &reports,
        })?,
        (Some(j), false) => print(&jobs::render_per_job(j, &reports, &text)),
        (None, true) => print_json(&reports[0])?,
        (None, false) => print(&outliers::render_with(&reports[0], &text)),
    }
    Ok(found_if(reports.iter().any(|r| !r.findings.is_empty())))
}

fn links(a: LinksArgs) -> Outcome {
    let run = load(&a.inputs)?;
    let cx = RunContext::new(&run);
    let r = cx.links();
    if a.json {
        print_json(r)?;
    } else {
        print(&links::render_text(
            r,
            a.top,
            layout::Layout::from_flag(a.wide),
        ));
    }
    Ok(Done::Clean)
}

fn stalls(a: StallsArgs) -> Outcome {
    let proms = stalls::prom_inputs(&a.inputs);
    let run = if stalls::only_prom(&a.inputs) {
        load::Run::default()
    } else {
        // Of the QPs, the stalled and errored ones and the index of all to name their peers.
        match load_keeping(&a.inputs, load::Keep::Hang) {
            Ok(r) => r,
            Err(_) if !proms.is_empty() => load::Run::default(),
            Err(e) => return Err(e),
        }
    };
    let r = stalls::find_in(&RunContext::new(&run), &proms);
    if a.json {
        print_json(&r)?;
    } else {
        print(&stalls::render_text(
            &r,
            a.top,
            layout::Layout::from_flag(a.wide),
        ));
    }
    Ok(found_if(r.found()))
}

fn export(a: ExportArgs) -> Outcome {
    if matches!(a.format, Format::Parquet) {
        return export_parquet(a);
    }
    if !a.partition.is_empty() || a.job.is_some() {
        return Err(fail("--partition and --job apply to --format parquet only"));
    }
    let run = load(&a.inputs)?;
    let cx = RunContext::new(&run);
    let mut sink: Box<dyn Write> = match &a.output {
        Some(p) => match std::fs::File::create(p) {
            Ok(f) => Box::new(std::io::BufWriter::new(f)),
            Err(e) => return Err(fail(format!("cannot create {}: {e}", p.display()))),
        },
        None => Box::new(std::io::BufWriter::new(std::io::stdout().lock())),
    };
    let r = match a.format {
        Format::Prometheus if a.links => sink
            .write_all(export::prometheus_links(cx.links()).as_bytes())
            .map_err(|e| e.to_string()),
        Format::Csv if a.links => export::write_link_rows(cx.links(), false, &mut sink),
        Format::Ndjson if a.links => export::write_link_rows(cx.links(), true, &mut sink),
        Format::Prometheus => {
            let (text, dups) =
                export::prometheus_at(&run, a.level.unwrap_or(export::Level::Channel));
            if dups > 0 {
                eprintln!("rccl-telemetry: {dups} files repeat the host and pid of an earlier file; only the first of each is exported");
            }
            sink.write_all(text.as_bytes()).map_err(|e| e.to_string())
        }
        Format::Csv => {
            export::write_tidy(&run, a.level.unwrap_or(export::Level::Qp), false, &mut sink)
        }
        Format::Ndjson => {
            export::write_tidy(&run, a.level.unwrap_or(export::Level::Qp), true, &mut sink)
        }
        Format::Parquet => unreachable!("dispatched above"),
    };
    match r.and_then(|_| sink.flush().map_err(|e| e.to_string())) {
        Ok(()) => Ok(Done::Clean),
        // Writing to a closed pipe: stop quietly.
        Err(e) if a.output.is_none() && e.contains("Broken pipe") => Ok(Done::Clean),
        Err(e) => Err(fail(format!("export failed: {e}"))),
    }
}

fn export_parquet(a: ExportArgs) -> Outcome {
    let Some(dir) = a.output else {
        return Err(fail(
            "--format parquet needs -o DIR (the directory the tables go to)",
        ));
    };
    let run = load(&a.inputs)?;
    if a.links {
        eprintln!(
            "rccl-telemetry: --links is not needed for parquet (it always writes the links table)"
        );
    }
    if a.level.is_some() {
        eprintln!("rccl-telemetry: --level is ignored for parquet (every table is written)");
    }
    let o = export::parquet::Options {
        dir,
        job: a.job,
        partition: a.partition,
    };
    let w = export::parquet::write(&run, &o).map_err(|e| fail(format!("export failed: {e}")))?;
    let rows: Vec<String> = w.rows.iter().map(|(t, n)| format!("{t} {n}")).collect();
    eprintln!(
        "rccl-telemetry: wrote {} Parquet files to {} (rows: {})",
        w.files.len(),
        o.dir.display(),
        rows.join(", ")
    );
    Ok(Done::Clean)
}

fn prom_gc(a: PromGcArgs) -> Outcome {
    let stale = promgc::find(
        &a.dir,
        std::time::Duration::from_secs(a.max_age),
        &promgc::this_host(),
        std::time::SystemTime::now(),
    )
    .map_err(fail)?;
    let mut failed = false;
    for s in &stale {
        if a.dry_run {
            println!("would remove {} ({})", s.path.display(), s.why);
            continue;
        }
        match std::fs::remove_file(&s.path) {
            Ok(()) => println!("removed {} ({})", s.path.display(), s.why),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                eprintln!("rccl-telemetry: cannot remove {}: {e}", s.path.display());
                failed = true;
            }
        }
    }
    Ok(found_if(failed))
}

fn report(a: ReportArgs) -> Outcome {
    // The summary and the outliers of one run: what `outliers` keeps serves both.
    let run = load_keeping(&a.inputs, load::Keep::Links)?;
    let s = summary::summarize(&run, false);
    let (run, several, mut reports) = jobs::find_outliers(run, &outliers::Options::default());
    let o = match several {
        Some(j) => jobs::merge(&j, reports),
        None => reports.remove(0),
    };
    let html = report::render(RunContext::new(&run), &s, &o, a.max_devices.max(1));
    std::fs::write(&a.output, html)
        .map_err(|e| fail(format!("cannot write {}: {e}", a.output.display())))?;
    eprintln!(
        "rccl-telemetry: wrote {} ({} files, {} findings in {} rows: {} critical, {} warning, {} info)",
        a.output.display(),
        s.files,
        o.findings.len(),
        o.rows.len(),
        o.critical,
        o.warning,
        o.info
    );
    // A critical finding (a hang, stalled QPs, CQ errors) never ends in a silent exit 0.
    Ok(found_if(o.critical > 0))
}

fn generate(a: GenerateArgs) -> Outcome {
    if a.as_nccl_log {
        return generate_logs(a);
    }
    let plants = generate::PlantArg::plants(&a.plant, a.peers, a.samples);
    if !a.latency_sample.is_power_of_two() {
        return Err(fail(format!(
            "--latency-sample {} is not a power of two",
            a.latency_sample
        )));
    }
    let o = generate::GenOptions {
        ranks: a.ranks,
        ranks_per_host: a.ranks_per_host,
        seed: a.seed,
        plants,
        hw_type: a.hw_type,
        latency_sample: a.latency_sample,
        buckets: a.buckets,
        interval_ns: a.interval_ns,
        samples: a.samples,
        devices_per_rank: a.devices_per_rank,
        noise: a.noise.iter().filter(|n| !n.is_empty()).cloned().collect(),
        topology: generate::Topology::from_name(&a.topology).unwrap_or_default(),
    };
    if a.finalized && !a.peers {
        return Err(fail("--finalized needs --peers".to_string()));
    }
    let planted = if a.peers {
        generate::generate_fabric(&a.dir, &o, a.qps_per_peer.max(1))
    } else {
        generate::generate(&a.dir, &o)
    }
    .map_err(fail)?;
    if a.finalized {
        generate::finalize_dir(&a.dir).map_err(fail)?;
    }
    for p in &planted {
        eprintln!(
            "planted {:<16} {}:{} dev {}{}{}",
            p.kind,
            p.host,
            p.pid,
            p.device_id,
            p.peer
                .as_ref()
                .map_or(String::new(), |c| format!(" <-> {c}")),
            p.counter
                .as_ref()
                .map_or(String::new(), |c| format!(" ({c})"))
        );
    }
    eprintln!(
        "rccl-telemetry: wrote {} rank files and planted.json to {}",
        a.ranks,
        a.dir.display()
    );
    Ok(Done::Clean)
}

fn generate_logs(a: GenerateArgs) -> Outcome {
    let o = generate::LogOptions {
        ranks: a.ranks,
        ranks_per_host: a.ranks_per_host,
        seed: a.seed,
        qps_per_peer: a.qps_per_peer,
        plants: if a.plant.contains(&generate::PlantArg::All) {
            generate::LOG_PLANTS.to_vec()
        } else {
            generate::PlantArg::plants(&a.plant, true, 0)
        },
        filler: a.log_filler,
    };
    let planted = generate::generate_logs(&a.dir, &o).map_err(fail)?;
    for p in &planted {
        eprintln!(
            "planted {:<16} {}:{} dev {}{}",
            p.kind,
            p.host,
            p.pid,
            p.device_id,
            p.peer
                .as_ref()
                .map_or(String::new(), |c| format!(" <-> {c}"))
        );
    }
    eprintln!(
        "rccl-telemetry: wrote {} NCCL debug logs and planted.json to {}",
        a.ranks,
        a.dir.display()
    );
    Ok(Done::Clean)
}

fn import_logs(a: ImportArgs) -> Outcome {
    let r = import::import(&a.inputs, &a.out).map_err(fail)?;
    if a.json {
        print_json(&r)?;
    } else {
        print(&import::render(&r));
    }
    if r.written.is_empty() {
        return Err(fail(
            "no NCCL debug line with a host:pid prefix in the inputs",
        ));
    }
    Ok(Done::Clean)
}
