//! The command line of `rccl-telemetry` (clap's derive types): every subcommand with its
//! options and their help text. A module of the binary, apart from `main.rs`, which runs the
//! commands, so the whole command line reads in one place.

use clap::{Args, Parser, Subcommand, ValueEnum};
use rccl_telemetry_tool::export;
use rccl_telemetry_tool::generate::PlantArg;
use std::path::PathBuf;

/// Analyse the per-rank rccl_telemetry_*.json files of a run.
///
/// INPUTS are files, directories (their rccl_telemetry_*.json files) or glob patterns
/// (quote them). Unusable files are reported in one line each on stderr and skipped; a
/// command that skipped any adds 4 to its exit status (0 -> 4, 1 -> 5).
#[derive(Parser)]
#[command(name = "rccl-telemetry", version, about, long_about = None, after_help = EXIT_STATUS)]
pub struct Cli {
    #[command(subcommand)]
    pub cmd: Cmd,
    /// Skip input files larger than this (bytes, or with K, M, G: 512M, 2G); the library's
    /// largest benchmark file is 192 MB. Files are also read only if regular (no FIFO or
    /// device) and at most 1 GiB of file text is held at once.
    #[arg(long, global = true, value_name = "SIZE", default_value = "512M")]
    pub max_file_size: Option<String>,
}

/// The exit statuses every command shares, printed under `--help`.
pub const EXIT_STATUS: &str = "Exit status: 0 nothing found; 1 something found (a finding, a \
violation, a stalled QP); 2 no usable input or a usage error; 4 and 5 are 0 and 1 with inputs \
skipped (unusable files, named on stderr: the answer lacks their data).";

#[derive(Subcommand)]
pub enum Cmd {
    /// The run at a glance: totals, latency, and one row per rank and device (up to 32 rows;
    /// beyond, distributions across the rows and hosts and the rows that stand out).
    Summary(SummaryArgs),
    /// Validate every file against the committed JSON Schema and the format's invariants.
    /// Prints one line per violation (file: JSON pointer: kind: message), grouped by kind beyond
    /// 32; exit 1 if any.
    Check(CheckArgs),
    /// What is wrong, one row per culprit (host:NIC), most severe first: a hang's root and its
    /// stalled QPs, CQ errors, a slow NIC, link (both ways or one), host or process (host-side
    /// delay), and what stands out across the devices (median and MAD); what the run is too
    /// small to tell is said in one line. Exit 1 if anything is found.
    Outliers(OutliersArgs),
    /// Join every QP to its peer's QP in the other files (by GID and QPN, LID without a GID)
    /// and print one row per link (ordered NIC pair): QPs, WRs each way, the sending side's
    /// completion latency, stalls; then the QPs whose peer is in no file, and the ambiguous ones.
    Links(LinksArgs),
    /// What is stuck: every stalled QP (snapshot files of a hang, final files, live *.prom
    /// textfiles), grouped by link, longest first, with the ranks waiting on them; and the
    /// longest stall of every rank. Exit 1 when a QP is stalled now.
    Stalls(StallsArgs),
    /// Export as Prometheus text, as long tidy CSV / NDJSON, or as Parquet tables (-o DIR).
    Export(ExportArgs),
    /// Remove the live Prometheus textfiles no running rank owns (left by SIGKILL): those not
    /// rewritten for --max-age seconds, and those of this host whose pid is not running.
    /// Prints one line per file removed. For cron, or before node_exporter starts.
    PromGc(PromGcArgs),
    /// Write one self-contained HTML page: the verdict first (critical findings, caveats), then
    /// summary, findings and charts. Exit 1 when a finding is critical.
    Report(ReportArgs),
    /// Write a synthetic run (for tests, demos and benchmarks), optionally with planted anomalies.
    Generate(GenerateArgs),
    /// Read NCCL/RCCL debug logs (NCCL_DEBUG=INFO) and write one rank file per process they
    /// name into -o DIR, which every other command then reads: the NICs, communicators, error
    /// completions and the WQE latency monitor's lines (no hardware counters, bytes or channel
    /// split). Prints what was read; lines of a known kind that do not read are counted and the
    /// first few named with their file and line.
    Import(ImportArgs),
}

#[derive(Clone, Copy, ValueEnum)]
pub enum Format {
    /// Prometheus text exposition, the families of the live textfile.
    Prometheus,
    /// Long tidy CSV: one row per file, level, object and value.
    Csv,
    /// The same rows as newline-delimited JSON.
    Ndjson,
    /// Typed Parquet tables, one file per table (and partition), into -o DIR.
    Parquet,
}

#[derive(Args)]
pub struct SummaryArgs {
    /// Print JSON for scripts instead of tables (always every row).
    #[arg(long)]
    pub json: bool,
    /// One table row per rank and device however many there are.
    #[arg(long)]
    pub all: bool,
    /// Latency from the linear histogram too (default: the log-scale one when the files
    /// have it, the linear one when that is all they have).
    #[arg(long)]
    pub linear: bool,
    /// Also list the registered devices a rank never drove.
    #[arg(long)]
    pub all_devices: bool,
    /// Every column, nothing wrapped (the default fits the terminal, COLUMNS, or 100).
    #[arg(long)]
    pub wide: bool,
    /// Files (read whatever their name), directories (their rccl_telemetry_*.json files) or
    /// quoted glob patterns ('runs/*/rccl_telemetry_*.json').
    #[arg(required = true)]
    pub inputs: Vec<PathBuf>,
}

#[derive(Args)]
pub struct CheckArgs {
    /// Print the violations as one JSON object instead of lines.
    #[arg(long)]
    pub json: bool,
    /// One line per violation however many (beyond 32 they are grouped by kind).
    #[arg(long)]
    pub all: bool,
    /// Lines not cut to the terminal's width (the grouped view).
    #[arg(long)]
    pub wide: bool,
    /// The inputs are knowingly part of a run: peers and ranks they name but do not hold are
    /// still listed, but do not make the exit status 1.
    #[arg(long)]
    pub partial: bool,
    /// Files (read whatever their name), directories (their rccl_telemetry_*.json files) or
    /// quoted glob patterns ('runs/*/rccl_telemetry_*.json').
    #[arg(required = true)]
    pub inputs: Vec<PathBuf>,
}

#[derive(Args)]
pub struct OutliersArgs {
    /// Print every finding as one JSON object for scripts (kind, rank, device, metric, value,
    /// median, MAD, z, score, evidence) instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Robust z-score a value must reach.
    #[arg(long, default_value_t = 3.5)]
    pub threshold: f64,
    /// Byte skew: least relative distance from the median.
    #[arg(long, default_value_t = 0.10)]
    pub min_skew: f64,
    /// Counters and latency: least ratio to the median.
    #[arg(long, default_value_t = 2.0)]
    pub min_ratio: f64,
    /// Counters: least excess over the median, in events (a median of 0 is not flagged for
    /// a stray event).
    #[arg(long, default_value_t = 10.0)]
    pub min_events: f64,
    /// Latency tail: least share of a device's completions beyond the run's median p99.
    #[arg(long, default_value_t = 0.10)]
    pub min_tail_share: f64,
    /// Show at most this many rows (0 = all) [default: 20 two-line rows beyond 32 devices,
    /// else 50 table rows; --json always has every finding].
    #[arg(long)]
    pub top: Option<usize>,
    /// Every row, in the table with its whole evidence, however large the run.
    #[arg(long)]
    pub all: bool,
    /// Every column, nothing wrapped (the default fits the terminal, COLUMNS, or 100).
    #[arg(long)]
    pub wide: bool,
    /// Files (read whatever their name), directories (their rccl_telemetry_*.json files) or
    /// quoted glob patterns ('runs/*/rccl_telemetry_*.json').
    #[arg(required = true)]
    pub inputs: Vec<PathBuf>,
}

#[derive(Args)]
pub struct LinksArgs {
    /// One JSON object: every link (both ends by host, pids, device, GID), unmatched, ambiguous.
    #[arg(long)]
    pub json: bool,
    /// Links shown in the table, slowest p99 first (0 = all); beyond it, per host pair.
    #[arg(long, default_value_t = 30)]
    pub top: usize,
    /// Every column (both ends' pids, GIDs, bytes, stalls), nothing wrapped (the default fits
    /// the terminal, COLUMNS, or 100).
    #[arg(long)]
    pub wide: bool,
    /// Files (read whatever their name), directories (their rccl_telemetry_*.json files) or
    /// quoted glob patterns ('runs/*/rccl_telemetry_*.json').
    #[arg(required = true)]
    pub inputs: Vec<PathBuf>,
}

#[derive(Args)]
pub struct StallsArgs {
    /// Print one JSON object for scripts: every stalled QP, the links and ranks, and the
    /// roots of the hang (`roots`), instead of the tables.
    #[arg(long)]
    pub json: bool,
    /// Links and ranks shown (0 = all).
    #[arg(long, default_value_t = 30)]
    pub top: usize,
    /// Every column (QP numbers, peers' GIDs, times), nothing wrapped (the default fits the
    /// terminal, COLUMNS, or 100).
    #[arg(long)]
    pub wide: bool,
    /// Files, directories or quoted glob patterns: rccl_telemetry_*.json files (final files
    /// or snapshots of a hang) and live *.prom textfiles (RCCL_TELEMETRY_PROMETHEUS_DIR).
    #[arg(required = true)]
    pub inputs: Vec<PathBuf>,
}

#[derive(Args)]
pub struct ExportArgs {
    /// prometheus: text exposition (the live textfile's families); csv, ndjson: one tidy row
    /// per value; parquet: typed tables into -o DIR.
    #[arg(long, value_enum)]
    pub format: Format,
    /// How deep the series or rows go [default: channel for prometheus (as the library's
    /// live textfile), qp for csv and ndjson].
    #[arg(long, value_enum)]
    pub level: Option<export::Level>,
    /// Write here instead of stdout (parquet: the directory the tables go to, required).
    #[arg(short, long)]
    pub output: Option<PathBuf>,
    /// Parquet: split each table into hive directories by these keys, comma separated, in
    /// directory order: `job` (DIR/<table>/job=J/<table>.parquet) or, for many jobs,
    /// `date,job` (date=YYYY-MM-DD, the day the job started, UTC). Host stays a column.
    #[arg(long, value_delimiter = ',')]
    pub partition: Vec<String>,
    /// Parquet: the job id of every input file [default: the name of each file's directory].
    #[arg(long)]
    pub job: Option<String>,
    /// Export the links (joined QPs, as `links --json` has them) instead of the files: one
    /// row per link (CSV, NDJSON), or rccl_telemetry_link_* series with src_host,
    /// src_device, dst_host, dst_device labels (Prometheus; one series per link and family).
    #[arg(long)]
    pub links: bool,
    /// Files (read whatever their name), directories (their rccl_telemetry_*.json files) or
    /// quoted glob patterns ('runs/*/rccl_telemetry_*.json').
    #[arg(required = true)]
    pub inputs: Vec<PathBuf>,
}

#[derive(Args)]
pub struct PromGcArgs {
    /// Seconds without a rewrite after which a file is stale (a few times
    /// RCCL_TELEMETRY_PROMETHEUS_INTERVAL_S).
    #[arg(long, default_value_t = 300)]
    pub max_age: u64,
    /// Say what would go, remove nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// The directory given to RCCL_TELEMETRY_PROMETHEUS_DIR (node_exporter's
    /// --collector.textfile.directory).
    pub dir: PathBuf,
}

#[derive(Args)]
pub struct ReportArgs {
    /// The HTML file to write.
    #[arg(short, long, default_value = "rccl_telemetry_report.html")]
    pub output: PathBuf,
    /// Most devices drawn in the per-device charts.
    #[arg(long, default_value_t = 512)]
    pub max_devices: usize,
    /// Files (read whatever their name), directories (their rccl_telemetry_*.json files) or
    /// quoted glob patterns ('runs/*/rccl_telemetry_*.json').
    #[arg(required = true)]
    pub inputs: Vec<PathBuf>,
}

#[derive(Args)]
pub struct GenerateArgs {
    /// Rank files to write (one process each).
    #[arg(long, default_value_t = 16)]
    pub ranks: usize,
    /// Ranks on one host (gpu_node_000, gpu_node_001, ...).
    #[arg(long, default_value_t = 8)]
    pub ranks_per_host: usize,
    /// Devices each rank registers (a rank drives one of them; with --peers, its own NIC).
    #[arg(long, default_value_t = 8)]
    pub devices_per_rank: usize,
    /// Seed of the pseudo-random figures and of where the plants go: the same seed and
    /// options give the same files.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Anomalies to plant, comma separated, or "all": without --peers, each on its own rank
    /// of a run of format version 1; with --peers, in a run of version 3 whose QPs know their
    /// peers, or one hang alone (version 4).
    #[arg(long, value_delimiter = ',')]
    pub plant: Vec<PlantArg>,
    /// The devices' driver family, which sets their names, channels and hardware counters:
    /// mlx5 (mlx5_N), thor2 (bnxt_reN), ainic (ionic_N), rxe (rxeN, Soft-RoCE).
    #[arg(long, default_value = "mlx5", value_parser = ["mlx5", "thor2", "ainic", "rxe"])]
    pub hw_type: String,
    /// RCCL_TELEMETRY_LATENCY_SAMPLE in effect (a power of two; 1 = every WQE).
    #[arg(long, default_value_t = 1)]
    pub latency_sample: u64,
    /// Buckets of the linear completion-latency histogram (RCCL_TELEMETRY_HISTOGRAM_BUCKETS).
    #[arg(long, default_value_t = 5)]
    pub buckets: usize,
    /// Width of a linear bucket in ns (RCCL_TELEMETRY_HISTOGRAM_INTERVAL_NS).
    #[arg(long, default_value_t = 30_000)]
    pub interval_ns: u64,
    /// hw_samples per rank (0: the sampler did not run).
    #[arg(long, default_value_t = 0)]
    pub samples: usize,
    /// Format version 3 with peers: every rank has its own NIC and QPs to each of its peers
    /// (--topology), each QP naming its peer; with a hang plant (--plant), format version 4,
    /// rail-shaped: a rank's peers are its NIC's peers on the hosts one and two away.
    #[arg(long)]
    pub peers: bool,
    /// With --peers: QPs per connected pair of ranks.
    #[arg(long, default_value_t = 2)]
    pub qps_per_peer: usize,
    /// With --peers: the noise of real hosts on a healthy run, comma separated: jitter
    /// (heavy-tailed per-process scheduling jitter, as on a shared host), deschedule (one rank
    /// descheduled for milliseconds, once), few (10 to 50 completions per QP). With
    /// --latency-sample N the histograms also keep one completion in N.
    #[arg(long, value_delimiter = ',')]
    pub noise: Vec<String>,
    /// With --peers: who each rank holds QPs to. rail: its ring and double-binary-tree
    /// neighbours on its rail (NIC l of the other hosts), up to 8 peers, as RCCL's
    /// rail-optimised rings and trees; ring: 2; tree: up to 6; alltoall: every rank of the other
    /// hosts (links grow with the square of the ranks). The hang plants keep their own shape.
    #[arg(long, default_value = "rail", value_parser = ["rail", "ring", "tree", "alltoall"])]
    pub topology: String,
    /// Write the NCCL/RCCL debug logs of the run instead of rank files (one per rank,
    /// nccl.<host>.<pid>.log, with the WQE latency monitor's lines), for `import`: rail-shaped
    /// (each rank's peers are the ranks of the other hosts on its NIC's rail), with
    /// --qps-per-peer send QPs to each; plants: slow_link, cq_errors.
    #[arg(long)]
    pub as_nccl_log: bool,
    /// With --as-nccl-log: noise lines `import` skips, per rank (to make big logs).
    #[arg(long, default_value_t = 0)]
    pub log_filler: usize,
    /// With --peers: every rank destroyed its communicator before exit (ncclCommDestroy), so
    /// its file has no channels: each device's QPs are summed in a finalized communicator's
    /// record (format version 4), per remote NIC, with the rows of its errored or stalled QPs.
    #[arg(long)]
    pub finalized: bool,
    /// The directory to write the rank files and planted.json (what was planted where) to;
    /// created if missing.
    pub dir: PathBuf,
}

#[derive(Args)]
pub struct ImportArgs {
    /// The directory to write the rank files to (created if missing).
    #[arg(short, long)]
    pub out: PathBuf,
    /// Print what was read as JSON (counts by kind, malformed lines, files written).
    #[arg(long)]
    pub json: bool,
    /// NCCL/RCCL debug logs (NCCL_DEBUG=INFO; NCCL_DEBUG_FILE=nccl.%h.%p or one log of many
    /// ranks), or directories of them.
    #[arg(required = true)]
    pub inputs: Vec<PathBuf>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    /// Every option and positional of every command says what it is in --help, and the
    /// value sets of the options that take one are listed.
    #[test]
    fn every_argument_has_help() {
        let cli = Cli::command();
        let mut missing = Vec::new();
        for cmd in cli.get_subcommands() {
            assert!(cmd.get_about().is_some(), "{} has no about", cmd.get_name());
            for a in cmd.get_arguments() {
                let id = a.get_id().as_str();
                if id == "help" || id == "version" {
                    continue;
                }
                if a.get_help().is_none() && a.get_long_help().is_none() {
                    missing.push(format!("{} {id}", cmd.get_name()));
                }
            }
        }
        assert!(missing.is_empty(), "arguments without help: {missing:?}");
        let generate = cli.find_subcommand("generate").unwrap();
        let hw = generate
            .get_arguments()
            .find(|a| a.get_id() == "hw_type")
            .unwrap();
        let values: Vec<String> = hw
            .get_possible_values()
            .iter()
            .map(|v| v.get_name().to_owned())
            .collect();
        assert_eq!(values, ["mlx5", "thor2", "ainic", "rxe"]);
    }
}
