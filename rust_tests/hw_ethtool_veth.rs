//! The real SIOCETHTOOL path (GSSET_INFO, GSTRINGS, GSTATS) on a veth pair. Creating the
//! pair needs CAP_NET_ADMIN; where the machine does not permit it the test records a visible
//! skip, required (so `make test` fails) when running as root with `ip` installed.

#[path = "skip.rs"]
mod skip;

use rccl_telemetry::hw;
use std::process::Command;

struct Veth {
    a: String,
}

impl Drop for Veth {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["link", "del", &self.a]).status();
    }
}

fn make_pair(a: &str, b: &str) -> Result<Veth, String> {
    let out = Command::new("ip")
        .args(["link", "add", a, "type", "veth", "peer", "name", b])
        .output()
        .map_err(|e| format!("cannot run ip: {e}"))?;
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).trim().to_owned());
    }
    Ok(Veth { a: a.to_owned() })
}

#[test]
fn ethtool_ioctl_on_a_veth_pair() {
    let id = std::process::id() % 100_000;
    let (a, b) = (format!("rtva{id}"), format!("rtvb{id}"));
    let _guard = match make_pair(&a, &b) {
        Ok(g) => g,
        Err(e) => {
            let capable = skip::is_root() && skip::on_path("ip");
            skip::skip(
                "hw_ethtool_veth::ethtool_ioctl_on_a_veth_pair",
                &format!("cannot create a veth pair here ({e})"),
                capable,
                true,
            );
            return;
        }
    };
    let stats = hw::testing::ethtool_stats(&a).expect("ETHTOOL_GSTATS on veth");
    // veth reports its peer's ifindex as a statistic: an exact, independent check that
    // names and values were paired correctly.
    let peer_ifindex: u64 = std::fs::read_to_string(format!("/sys/class/net/{b}/ifindex"))
        .expect("peer ifindex")
        .trim()
        .parse()
        .unwrap();
    assert_eq!(
        stats.get("peer_ifindex"),
        Some(&peer_ifindex),
        "stats: {stats:?}"
    );
    assert!(
        stats.len() > 1,
        "veth exposes per-queue statistics too: {stats:?}"
    );
    assert!(stats.keys().all(|k| !k.is_empty() && k.trim() == k));

    // When the ethtool binary exists, its -S output must name the same counters.
    if let Ok(out) = Command::new("ethtool").args(["-S", &a]).output() {
        if out.status.success() {
            let text = String::from_utf8_lossy(&out.stdout);
            for line in text.lines().skip(1) {
                if let Some((name, value)) = line.trim().rsplit_once(": ") {
                    let v: u64 = value.trim().parse().unwrap();
                    if name.trim() == "peer_ifindex" {
                        assert_eq!(stats.get("peer_ifindex"), Some(&v));
                    } else {
                        assert!(
                            stats.contains_key(name.trim()),
                            "ethtool -S lists {name} but the ioctl did not"
                        );
                    }
                }
            }
        }
    }

    // Through the public device API: a fixture RoCE device whose netdev is the veth.
    let t = tempfile::tempdir().unwrap();
    let ib = t.path().join("class/infiniband/rxe9");
    std::fs::create_dir_all(ib.join("ports/1/hw_counters")).unwrap();
    std::fs::write(ib.join("parent"), format!("{a}\n")).unwrap();
    let s = hw::HwSettings {
        sysfs_root: t.path().to_path_buf(),
        ..Default::default()
    };
    let dev: &'static hw::HwDevice = Box::leak(Box::new(hw::HwDevice::probe(0, "rxe9", &s)));
    assert_eq!(dev.eth_device(), a);

    // A veth has no DCB (no dcbnl_ops): the kernel answers EOPNOTSUPP, and the device's PFC
    // and DSCP keys are absent, not empty.
    let e = hw::testing::dcb_query(&a).unwrap_err();
    assert!(e.contains("Unsupported"), "{e}");
    dev.take_baseline();
    let q = dev.port_qos();
    assert_eq!((q.pfc_enabled, q.dscp_priority), (None, None));
}

#[test]
fn ethtool_on_missing_interface_is_an_error_not_a_crash() {
    let e = hw::testing::ethtool_stats("nosuchif0").unwrap_err();
    assert!(!e.is_empty());
    let e = hw::testing::ethtool_stats("much_too_long_interface_name").unwrap_err();
    assert!(e.contains("not a valid interface name"), "{e}");
}
