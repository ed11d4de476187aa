//! The `rccl-telemetry` command line.

use clap::{Parser, Subcommand, ValueEnum};
use rccl_telemetry_tool::{
    check, export, generate, layout, links, load, outliers, promgc, report, stalls, summary,
};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

/// Analyse the per-rank rccl_telemetry_*.json files of a run.
///
/// INPUTS are files, directories (their rccl_telemetry_*.json files) or glob patterns
/// (quote them). Unusable files are reported in one line each on stderr and skipped.
#[derive(Parser)]
#[command(name = "rccl-telemetry", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// The run at a glance: totals, latency, and one row per rank and device (up to 32 rows;
    /// beyond, distributions across the rows and hosts and the rows that stand out).
    Summary {
        /// Print JSON for scripts instead of tables (always every row).
        #[arg(long)]
        json: bool,
        /// One table row per rank and device however many there are.
        #[arg(long)]
        all: bool,
        /// Latency from the linear histogram too (default: the log-scale one when the files
        /// have it, the linear one when that is all they have).
        #[arg(long)]
        linear: bool,
        /// Also list the registered devices a rank never drove.
        #[arg(long)]
        all_devices: bool,
        /// Every column, nothing wrapped (the default fits the terminal, COLUMNS, or 100).
        #[arg(long)]
        wide: bool,
        #[arg(required = true)]
        inputs: Vec<PathBuf>,
    },
    /// Validate every file against the committed JSON Schema and the format's invariants.
    /// Prints one line per violation (file: JSON pointer: kind: message), grouped by kind beyond
    /// 32; exit 1 if any.
    Check {
        /// Print the violations as one JSON object instead of lines.
        #[arg(long)]
        json: bool,
        /// One line per violation however many (beyond 32 they are grouped by kind).
        #[arg(long)]
        all: bool,
        /// Lines not cut to the terminal's width (the grouped view).
        #[arg(long)]
        wide: bool,
        #[arg(required = true)]
        inputs: Vec<PathBuf>,
    },
    /// Rank what stands out across the ranks and devices (median and MAD); exit 1 if anything does.
    Outliers {
        #[arg(long)]
        json: bool,
        /// Robust z-score a value must reach.
        #[arg(long, default_value_t = 3.5)]
        threshold: f64,
        /// Byte skew: least relative distance from the median.
        #[arg(long, default_value_t = 0.10)]
        min_skew: f64,
        /// Counters and latency: least ratio to the median.
        #[arg(long, default_value_t = 2.0)]
        min_ratio: f64,
        /// Show at most this many rows (0 = all) [default: 20 two-line rows beyond 32 devices,
        /// else 50 table rows; --json always has every finding].
        #[arg(long)]
        top: Option<usize>,
        /// Every row, in the table with its whole evidence, however large the run.
        #[arg(long)]
        all: bool,
        /// Every column, nothing wrapped (the default fits the terminal, COLUMNS, or 100).
        #[arg(long)]
        wide: bool,
        #[arg(required = true)]
        inputs: Vec<PathBuf>,
    },
    /// Join every QP to its peer's QP in the other files (by GID and QPN, LID without a GID)
    /// and print one row per link (ordered NIC pair): QPs, WRs each way, the sending side's
    /// completion latency, stalls; then the QPs whose peer is in no file, and the ambiguous ones.
    Links {
        /// One JSON object: every link (both ends by host, pids, device, GID), unmatched, ambiguous.
        #[arg(long)]
        json: bool,
        /// Links shown in the table, slowest p99 first (0 = all); beyond it, per host pair.
        #[arg(long, default_value_t = 30)]
        top: usize,
        #[arg(long)]
        wide: bool,
        #[arg(required = true)]
        inputs: Vec<PathBuf>,
    },
    /// What is stuck: every stalled QP (snapshot files of a hang, final files, live *.prom
    /// textfiles), grouped by link, longest first, with the ranks waiting on them; and the
    /// longest stall of every rank. Exit 1 when a QP is stalled now.
    Stalls {
        #[arg(long)]
        json: bool,
        /// Links and ranks shown (0 = all).
        #[arg(long, default_value_t = 30)]
        top: usize,
        #[arg(long)]
        wide: bool,
        /// Files and directories: rccl_telemetry_*.json and *.prom.
        #[arg(required = true)]
        inputs: Vec<PathBuf>,
    },
    /// Export as Prometheus text, as long tidy CSV / NDJSON, or as Parquet tables (-o DIR).
    Export {
        #[arg(long, value_enum)]
        format: Format,
        /// How deep the series or rows go [default: channel for prometheus (as the library's
        /// live textfile), qp for csv and ndjson].
        #[arg(long, value_enum)]
        level: Option<export::Level>,
        /// Write here instead of stdout (parquet: the directory the tables go to, required).
        #[arg(short, long)]
        output: Option<PathBuf>,
        /// Parquet: split each table into hive directories by these keys (job, host; comma
        /// separated, in directory order): DIR/<table>/job=J/host=H/<table>.parquet.
        #[arg(long, value_delimiter = ',')]
        partition: Vec<String>,
        /// Parquet: the job id of every input file [default: the name of each file's directory].
        #[arg(long)]
        job: Option<String>,
        /// Export the links (joined QPs, as `links --json` has them) instead of the files: one
        /// row per link (CSV, NDJSON), or rccl_telemetry_link_* series with src_host,
        /// src_device, dst_host, dst_device labels (Prometheus; one series per link and family).
        #[arg(long)]
        links: bool,
        #[arg(required = true)]
        inputs: Vec<PathBuf>,
    },
    /// Remove the live Prometheus textfiles no running rank owns (left by SIGKILL): those not
    /// rewritten for --max-age seconds, and those of this host whose pid is not running.
    /// Prints one line per file removed. For cron, or before node_exporter starts.
    PromGc {
        /// Seconds without a rewrite after which a file is stale (a few times
        /// RCCL_TELEMETRY_PROMETHEUS_INTERVAL_S).
        #[arg(long, default_value_t = 300)]
        max_age: u64,
        /// Say what would go, remove nothing.
        #[arg(long)]
        dry_run: bool,
        /// The directory given to RCCL_TELEMETRY_PROMETHEUS_DIR (node_exporter's
        /// --collector.textfile.directory).
        dir: PathBuf,
    },
    /// Write one self-contained HTML page: summary, outliers and charts.
    Report {
        /// The HTML file to write.
        #[arg(short, long, default_value = "rccl_telemetry_report.html")]
        output: PathBuf,
        /// Most devices drawn in the per-device charts.
        #[arg(long, default_value_t = 512)]
        max_devices: usize,
        #[arg(required = true)]
        inputs: Vec<PathBuf>,
    },
    /// Write a synthetic run (for tests, demos and benchmarks), optionally with planted anomalies.
    Generate {
        #[arg(long, default_value_t = 16)]
        ranks: usize,
        #[arg(long, default_value_t = 8)]
        ranks_per_host: usize,
        #[arg(long, default_value_t = 8)]
        devices_per_rank: usize,
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Anomalies to plant, comma separated, or "all": cnp, tail, skew, cq_errors,
        /// unavailable, untracked, slot_miss, pfc, drops, retransmit, out_of_sequence,
        /// samples_dropped, snapshot.
        #[arg(long, value_delimiter = ',')]
        plant: Vec<String>,
        #[arg(long, default_value = "mlx5")]
        hw_type: String,
        /// RCCL_TELEMETRY_LATENCY_SAMPLE in effect (a power of two; 1 = every WQE).
        #[arg(long, default_value_t = 1)]
        latency_sample: u64,
        #[arg(long, default_value_t = 5)]
        buckets: usize,
        #[arg(long, default_value_t = 30_000)]
        interval_ns: u64,
        /// hw_samples per rank (0: the sampler did not run).
        #[arg(long, default_value_t = 0)]
        samples: usize,
        /// Format version 3 with peers: every rank has its own NIC and QPs to every rank of
        /// the other hosts, each QP naming its peer. Plants are then: slow_nic, slow_link,
        /// slow_host, missing_peer, ambiguous_peer, lid_only, stall, recovered_stall.
        #[arg(long)]
        peers: bool,
        /// With --peers: QPs per connected pair of ranks.
        #[arg(long, default_value_t = 2)]
        qps_per_peer: usize,
        dir: PathBuf,
    },
}

#[derive(Clone, Copy, ValueEnum)]
enum Format {
    Prometheus,
    Csv,
    Ndjson,
    Parquet,
}

fn fail(msg: impl std::fmt::Display) -> ExitCode {
    eprintln!("rccl-telemetry: {msg}");
    ExitCode::from(2)
}

/// Loads the inputs; None (after saying why) when nothing could be read.
fn load(inputs: &[PathBuf]) -> Option<load::Run> {
    let run = load::load_run(inputs);
    load::report_bad(&run.bad, run.found);
    if run.files.is_empty() {
        eprintln!("rccl-telemetry: no readable rccl_telemetry_*.json file in the inputs");
        return None;
    }
    Some(run)
}

fn print(s: &str) -> ExitCode {
    let mut out = std::io::stdout().lock();
    // A closed pipe (| head) is not an error worth a message.
    let _ = out.write_all(s.as_bytes()).and_then(|_| out.flush());
    ExitCode::SUCCESS
}

fn to_json<T: serde::Serialize>(v: &T) -> Result<String, ExitCode> {
    serde_json::to_string_pretty(v)
        .map(|mut s| {
            s.push('\n');
            s
        })
        .map_err(|e| fail(format!("cannot serialise: {e}")))
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.cmd {
        Cmd::Summary {
            json,
            all,
            linear,
            all_devices,
            wide,
            inputs,
        } => {
            let Some(run) = load(&inputs) else {
                return ExitCode::from(2);
            };
            let s = summary::summarize(&run, all_devices);
            if json {
                match to_json(&s) {
                    Ok(t) => print(&t),
                    Err(c) => c,
                }
            } else {
                let o = summary::TextOptions {
                    layout: layout::Layout::from_flag(wide),
                    all,
                    linear,
                };
                let mut text = summary::render_with(&s, &o);
                if let Some(line) = stalls::one_line(&stalls::find(&run, &[])) {
                    text.push_str(&line);
                    text.push('\n');
                }
                print(&text)
            }
        }
        Cmd::Check {
            json,
            all,
            wide,
            inputs,
        } => {
            let report = match check::check_inputs(&inputs) {
                Ok(r) => r,
                Err(e) => return fail(e),
            };
            if json {
                if let Err(c) = to_json(&report).map(|t| print(&t)) {
                    return c;
                }
            } else {
                print(&rccl_telemetry_tool::check_text::render(
                    &report,
                    all,
                    layout::Layout::from_flag(wide),
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
                "rccl-telemetry: checked {} files: {} valid, {} with violations, {} unreadable; {} violations",
                report.files,
                report.files_valid,
                report.files - report.files_valid - report.files_unreadable,
                report.files_unreadable,
                report.violations.len()
            );
            if report.files == 0 {
                eprintln!("rccl-telemetry: no rccl_telemetry_*.json file in the inputs");
                ExitCode::from(2)
            } else if report.violations.is_empty() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            }
        }
        Cmd::Outliers {
            json,
            threshold,
            min_skew,
            min_ratio,
            top,
            all,
            wide,
            inputs,
        } => {
            let Some(run) = load(&inputs) else {
                return ExitCode::from(2);
            };
            let opt = outliers::Options {
                threshold,
                min_skew,
                min_ratio,
                ..Default::default()
            };
            let r = outliers::find(&run, &opt);
            if json {
                if let Err(c) = to_json(&r).map(|t| print(&t)) {
                    return c;
                }
            } else {
                print(&outliers::render_with(
                    &r,
                    &outliers::OutlierText {
                        layout: layout::Layout::from_flag(wide),
                        top,
                        all,
                    },
                ));
            }
            if r.findings.is_empty() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            }
        }
        Cmd::Links {
            json,
            top,
            wide,
            inputs,
        } => {
            let Some(run) = load(&inputs) else {
                return ExitCode::from(2);
            };
            let r = links::join(&run);
            if json {
                match to_json(&r) {
                    Ok(t) => print(&t),
                    Err(c) => c,
                }
            } else {
                print(&links::render_text(
                    &r,
                    top,
                    layout::Layout::from_flag(wide),
                ))
            }
        }
        Cmd::Stalls {
            json,
            top,
            wide,
            inputs,
        } => {
            let proms = stalls::prom_inputs(&inputs);
            let run = if stalls::only_prom(&inputs) {
                load::Run::default()
            } else {
                match load(&inputs) {
                    Some(r) => r,
                    None if !proms.is_empty() => load::Run::default(),
                    None => return ExitCode::from(2),
                }
            };
            let r = stalls::find(&run, &proms);
            if json {
                match to_json(&r) {
                    Ok(t) => print(&t),
                    Err(c) => return c,
                };
            } else {
                print(&stalls::render_text(
                    &r,
                    top,
                    layout::Layout::from_flag(wide),
                ));
            }
            if r.stalled_qps > 0 {
                ExitCode::from(1)
            } else {
                ExitCode::SUCCESS
            }
        }
        Cmd::Export {
            format,
            level,
            output,
            partition,
            job,
            links,
            inputs,
        } => {
            if matches!(format, Format::Parquet) {
                let Some(dir) = output else {
                    return fail("--format parquet needs -o DIR (the directory the tables go to)");
                };
                let Some(run) = load(&inputs) else {
                    return ExitCode::from(2);
                };
                if links {
                    eprintln!("rccl-telemetry: --links is not needed for parquet (it always writes the links table)");
                }
                if level.is_some() {
                    eprintln!(
                        "rccl-telemetry: --level is ignored for parquet (every table is written)"
                    );
                }
                let o = rccl_telemetry_tool::parquet_export::Options {
                    dir,
                    job,
                    partition,
                };
                return match rccl_telemetry_tool::parquet_export::write(&run, &o) {
                    Ok(w) => {
                        let rows: Vec<String> =
                            w.rows.iter().map(|(t, n)| format!("{t} {n}")).collect();
                        eprintln!(
                            "rccl-telemetry: wrote {} Parquet files to {} (rows: {})",
                            w.files.len(),
                            o.dir.display(),
                            rows.join(", ")
                        );
                        ExitCode::SUCCESS
                    }
                    Err(e) => fail(format!("export failed: {e}")),
                };
            }
            if !partition.is_empty() || job.is_some() {
                return fail("--partition and --job apply to --format parquet only");
            }
            let Some(run) = load(&inputs) else {
                return ExitCode::from(2);
            };
            let mut sink: Box<dyn Write> = match &output {
                Some(p) => match std::fs::File::create(p) {
                    Ok(f) => Box::new(std::io::BufWriter::new(f)),
                    Err(e) => return fail(format!("cannot create {}: {e}", p.display())),
                },
                None => Box::new(std::io::BufWriter::new(std::io::stdout().lock())),
            };
            let r = match format {
                Format::Prometheus if links => sink
                    .write_all(export::prometheus_links(&run).as_bytes())
                    .map_err(|e| e.to_string()),
                Format::Csv if links => export::write_link_rows(&run, false, &mut sink),
                Format::Ndjson if links => export::write_link_rows(&run, true, &mut sink),
                Format::Prometheus => {
                    let (text, dups) =
                        export::prometheus_at(&run, level.unwrap_or(export::Level::Channel));
                    if dups > 0 {
                        eprintln!("rccl-telemetry: {dups} files repeat the host and pid of an earlier file; only the first of each is exported");
                    }
                    sink.write_all(text.as_bytes()).map_err(|e| e.to_string())
                }
                Format::Csv => {
                    export::write_tidy(&run, level.unwrap_or(export::Level::Qp), false, &mut sink)
                }
                Format::Ndjson => {
                    export::write_tidy(&run, level.unwrap_or(export::Level::Qp), true, &mut sink)
                }
                Format::Parquet => unreachable!("dispatched above"),
            };
            match r.and_then(|_| sink.flush().map_err(|e| e.to_string())) {
                Ok(()) => ExitCode::SUCCESS,
                // Writing to a closed pipe: stop quietly.
                Err(e) if output.is_none() && e.contains("Broken pipe") => ExitCode::SUCCESS,
                Err(e) => fail(format!("export failed: {e}")),
            }
        }
        Cmd::PromGc {
            max_age,
            dry_run,
            dir,
        } => {
            let stale = match promgc::find(
                &dir,
                std::time::Duration::from_secs(max_age),
                &promgc::this_host(),
                std::time::SystemTime::now(),
            ) {
                Ok(s) => s,
                Err(e) => return fail(e),
            };
            let mut failed = false;
            for s in &stale {
                if dry_run {
                    println!("would remove {} ({})", s.path.display(), s.why);
                } else {
                    match std::fs::remove_file(&s.path) {
                        Ok(()) => println!("removed {} ({})", s.path.display(), s.why),
                        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                        Err(e) => {
                            eprintln!("rccl-telemetry: cannot remove {}: {e}", s.path.display());
                            failed = true;
                        }
                    }
                }
            }
            if failed {
                ExitCode::from(1)
            } else {
                ExitCode::SUCCESS
            }
        }
        Cmd::Report {
            output,
            max_devices,
            inputs,
        } => {
            let Some(run) = load(&inputs) else {
                return ExitCode::from(2);
            };
            let s = summary::summarize(&run, false);
            let o = outliers::find(&run, &outliers::Options::default());
            let html = report::render(&run, &s, &o, max_devices.max(1));
            match std::fs::write(&output, html) {
                Ok(()) => {
                    eprintln!(
                        "rccl-telemetry: wrote {} ({} files, {} findings)",
                        output.display(),
                        s.files,
                        o.findings.len()
                    );
                    ExitCode::SUCCESS
                }
                Err(e) => fail(format!("cannot write {}: {e}", output.display())),
            }
        }
        Cmd::Generate {
            ranks,
            ranks_per_host,
            devices_per_rank,
            seed,
            plant,
            hw_type,
            latency_sample,
            buckets,
            interval_ns,
            samples,
            peers,
            qps_per_peer,
            dir,
        } => {
            let plants: Vec<String> = if peers && plant.iter().any(|p| p == "all") {
                // Every fabric plant but the ones that change what the others look like.
                [
                    "slow_nic",
                    "slow_link",
                    "slow_host",
                    "missing_peer",
                    "ambiguous_peer",
                    "lid_only",
                    "recovered_stall",
                ]
                .iter()
                .map(|p| p.to_string())
                .collect()
            } else if plant.iter().any(|p| p == "all") {
                generate::PLANTS
                    .iter()
                    .filter(|p| samples > 0 || **p != "samples_dropped")
                    .map(|p| p.to_string())
                    .collect()
            } else {
                plant.into_iter().filter(|p| !p.is_empty()).collect()
            };
            if !latency_sample.is_power_of_two() {
                return fail(format!(
                    "--latency-sample {latency_sample} is not a power of two"
                ));
            }
            let o = generate::GenOptions {
                ranks,
                ranks_per_host,
                seed,
                plants,
                hw_type,
                latency_sample,
                buckets,
                interval_ns,
                samples,
                devices_per_rank,
            };
            let r = if peers {
                generate::generate_fabric(&dir, &o, qps_per_peer.max(1))
            } else {
                generate::generate(&dir, &o)
            };
            match r {
                Ok(planted) => {
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
                        "rccl-telemetry: wrote {ranks} rank files and planted.json to {}",
                        dir.display()
                    );
                    ExitCode::SUCCESS
                }
                Err(e) => fail(e),
            }
        }
    }
}
