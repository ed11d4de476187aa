//! The Ethernet netdev behind a RoCE device.

use super::driver::HwType;
use crate::sysfs;
use std::path::Path;

/// Linux netdev names are at most 15 bytes (IFNAMSIZ - 1).
pub const MAX_IFNAME: usize = 15;

pub fn valid_ifname(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_IFNAME
        && sysfs::is_safe_component(name)
        && !name.bytes().any(|b| b.is_ascii_whitespace() || b == b':')
}

/// Finds the netdev of `ibdev` port `port`:
/// 1. `ports/<p>/gid_attrs/ndevs/<i>`, lowest index first, first readable non-empty entry
///    (exact for RoCE; right for bonds, VLAN-less representors and rxe; empty GID entries
///    fail to read with EINVAL and are skipped);
/// 2. for rxe, its `parent` attribute;
/// 3. `device/net/*`, first name in sorted order;
/// 4. "" when there is none.
pub fn find(root: &Path, ibdev: &str, port: u32, hw: HwType) -> (String, &'static str) {
    let ib = sysfs::ib_dir(root, ibdev);
    let ndevs = ib
        .join("ports")
        .join(port.to_string())
        .join("gid_attrs")
        .join("ndevs");
    for i in sysfs::numeric_entries(&ndevs) {
        if let Some(n) = sysfs::read_text(&ndevs.join(i.to_string()))
            .as_deref()
            .and_then(sysfs::clean_name)
        {
            if valid_ifname(&n) {
                return (n, "gid_attrs/ndevs");
            }
        }
    }
    if hw == HwType::Rxe {
        if let Some(n) = sysfs::read_text(&ib.join("parent"))
            .as_deref()
            .and_then(sysfs::clean_name)
        {
            if valid_ifname(&n) {
                return (n, "parent");
            }
        }
    }
    for n in sysfs::sorted_entries(&ib.join("device").join("net")) {
        if valid_ifname(&n) {
            return (n, "device/net");
        }
    }
    (String::new(), "none")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gid_ndevs_win_over_device_net() {
        let d = tempfile::tempdir().unwrap();
        let ib = d.path().join("class/infiniband/mlx5_bond_0");
        let nd = ib.join("ports/1/gid_attrs/ndevs");
        std::fs::create_dir_all(&nd).unwrap();
        std::fs::create_dir_all(ib.join("device/net/ens1f0np0")).unwrap();
        // Index 0 unreadable as a file (stands in for EINVAL), index 2 holds the bond.
        std::fs::create_dir_all(nd.join("0")).unwrap();
        std::fs::write(nd.join("1"), "\n").unwrap();
        std::fs::write(nd.join("2"), "bond0\n").unwrap();
        std::fs::write(nd.join("10"), "bond0.100\n").unwrap();
        assert_eq!(find(d.path(), "mlx5_bond_0", 1, HwType::Mlx5).0, "bond0");
    }

    #[test]
    fn device_net_is_the_fallback() {
        let d = tempfile::tempdir().unwrap();
        let ib = d.path().join("class/infiniband/bnxt_re0");
        std::fs::create_dir_all(ib.join("device/net/ens2np1")).unwrap();
        std::fs::create_dir_all(ib.join("device/net/ens2np0")).unwrap();
        assert_eq!(find(d.path(), "bnxt_re0", 1, HwType::Thor2).0, "ens2np0");
    }

    #[test]
    fn rxe_parent_and_none() {
        let d = tempfile::tempdir().unwrap();
        let ib = d.path().join("class/infiniband/rxe0");
        std::fs::create_dir_all(&ib).unwrap();
        assert_eq!(find(d.path(), "rxe0", 1, HwType::Rxe).0, "");
        std::fs::write(ib.join("parent"), "eth0\n").unwrap();
        assert_eq!(find(d.path(), "rxe0", 1, HwType::Rxe).0, "eth0");
    }

    #[test]
    fn bogus_names_are_rejected() {
        assert!(valid_ifname("eth0"));
        assert!(!valid_ifname("a_name_longer_than_15"));
        assert!(!valid_ifname("../x"));
        assert!(!valid_ifname("with space"));
        assert!(!valid_ifname(""));
    }
}
