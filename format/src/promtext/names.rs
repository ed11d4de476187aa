//! Metric names: the Prometheus alphabet, and a hardware counter's family name in base units
//! (seconds, bytes). Separate because it is the one rule for names the NIC chooses, which
//! the tests of units exercise on their own.

use super::families::{hw_help, PREFIX};

/// Sanitises a name into the Prometheus metric-name alphabet [a-z0-9_].
pub fn prom_name(s: &str) -> String {
    let mut out: String = s
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c.to_ascii_lowercase()
            } else {
                '_'
            }
        })
        .collect();
    if out.starts_with(|c: char| c.is_ascii_digit()) {
        out.insert(0, '_');
    }
    out
}

/// Rewrites a counter name into Prometheus base units, by its unit token (not a fixed list of
/// names): microseconds, milliseconds and nanoseconds become seconds, bits become bytes.
/// Returns the new name, the factor to multiply values by, and the unit when one was converted.
pub fn base_unit(name: &str) -> (String, f64, Option<&'static str>) {
    let mut scale = 1.0;
    let mut unit = None;
    let tokens: Vec<&str> = name
        .split('_')
        .map(|t| match t {
            "us" | "usec" | "usecs" | "microseconds" => {
                scale = 1e-6;
                unit = Some("seconds");
                "seconds"
            }
            "ms" | "msec" | "msecs" | "milliseconds" => {
                scale = 1e-3;
                unit = Some("seconds");
                "seconds"
            }
            "ns" | "nsec" | "nsecs" | "nanoseconds" => {
                scale = 1e-9;
                unit = Some("seconds");
                "seconds"
            }
            "bits" => {
                scale = 0.125;
                unit = Some("bytes");
                "bytes"
            }
            other => other,
        })
        .collect();
    (tokens.join("_"), scale, unit)
}

/// A hardware counter's family: (metric name, help, factor to its base unit).
pub fn hw_metric(counter: &str) -> (String, String, f64) {
    let (base, scale, unit) = base_unit(&prom_name(
        counter.strip_prefix("delta_").unwrap_or(counter),
    ));
    (
        format!("{PREFIX}hw_{base}_total"),
        hw_help(counter, unit),
        scale,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_become_base_units() {
        assert_eq!(
            base_unit("pfc_rx_pause_duration_us"),
            (
                "pfc_rx_pause_duration_seconds".into(),
                1e-6,
                Some("seconds")
            )
        );
        assert_eq!(
            base_unit("fec_corrected_bits"),
            ("fec_corrected_bytes".into(), 0.125, Some("bytes"))
        );
        assert_eq!(base_unit("cnp_sent"), ("cnp_sent".into(), 1.0, None));
        assert_eq!(base_unit("link_status_msgs").0, "link_status_msgs");
    }
}
