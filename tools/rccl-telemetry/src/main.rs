//! The `rccl-telemetry` command line.

mod cli;

use clap::Parser;
use cli::{Cli, Cmd, Format};
use rccl_telemetry_tool::{
    check, export, generate, layout, links, load, outliers, promgc, report, stalls, summary,
    waitfor,
};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

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
                print(&rccl_telemetry_tool::check::text::render(
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
            // The root of a hang, if any: the line `stalls` and `summary` share (waitfor).
            let hang = waitfor::analyse(&run);
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
                if let Some(l) = waitfor::one_line(&hang) {
                    print(&format!("{}\n", layout::Layout::from_flag(wide).wrap(&l)));
                }
            }
            if r.findings.is_empty() && hang.roots.is_empty() {
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
            if r.found() {
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
