//! Which driver family runs a RoCE device, and which port to read.

use super::vocab;
use crate::sysfs;
use std::path::Path;

/// The driver family of a RoCE device, reported as `hw_type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HwType {
    Mlx5,
    Thor2,
    Ainic,
    Rxe,
    Unsupported,
}

impl HwType {
    /// Its "hw_type" in the file (the format's `HW_TYPES`, by vocabulary column).
    pub fn as_str(self) -> &'static str {
        vocab::HW_TYPES[self.table_index().unwrap_or(vocab::NUM_DRIVERS)]
    }

    /// Column of the vocabulary tables; None for an unsupported device.
    pub fn table_index(self) -> Option<usize> {
        match self {
            HwType::Mlx5 => Some(vocab::MLX5),
            HwType::Thor2 => Some(vocab::THOR2),
            HwType::Ainic => Some(vocab::AINIC),
            HwType::Rxe => Some(vocab::RXE),
            HwType::Unsupported => None,
        }
    }

    /// Maps a kernel driver name (the basename of `device/driver`).
    pub fn from_driver_name(name: &str) -> HwType {
        match name {
            "mlx5_core" | "mlx5_ib" => HwType::Mlx5,
            "bnxt_en" | "bnxt_re" => HwType::Thor2,
            "ionic" | "ionic_rdma" => HwType::Ainic,
            "rdma_rxe" => HwType::Rxe,
            _ => HwType::Unsupported,
        }
    }
}

/// Detects the driver of `ibdev`; the second value says how (for RCCL_TELEMETRY_DEBUG).
///
/// Order matters:
/// 1. rdma_rxe registers a `parent` attribute (the netdev it is bound to) on its ib_device,
///    which no PCI RDMA driver has. It is checked first because older kernels parent an rxe
///    device to the netdev's PCI function, whose `device/driver` names the Ethernet driver
///    underneath (for instance mlx5_core) and would otherwise be taken for hardware RoCE.
/// 2. `device/driver`: the PCI (or auxiliary) driver of the function behind the device.
/// 3. No `device` link at all (recent rxe): a name starting with "rxe" is Soft-RoCE.
pub fn detect(root: &Path, ibdev: &str) -> (HwType, String) {
    let dir = sysfs::ib_dir(root, ibdev);
    if let Some(parent) = sysfs::read_text(&dir.join("parent"))
        .as_deref()
        .and_then(sysfs::clean_name)
    {
        return (
            HwType::Rxe,
            format!("'parent' attribute names netdev {parent} (rdma_rxe)"),
        );
    }
    if let Some(drv) = sysfs::link_basename(&dir.join("device").join("driver")) {
        let t = HwType::from_driver_name(&drv);
        return (t, format!("device/driver -> {drv}"));
    }
    if ibdev.starts_with("rxe") && !dir.join("device").exists() && dir.exists() {
        return (HwType::Rxe, "no device link and an rxe name".to_owned());
    }
    if !dir.exists() {
        return (
            HwType::Unsupported,
            format!("{} does not exist", dir.display()),
        );
    }
    (HwType::Unsupported, "no device/driver link".to_owned())
}

/// The port to read: the lowest-numbered port whose link layer is Ethernet, else the
/// lowest-numbered port, else 1.
pub fn pick_port(root: &Path, ibdev: &str) -> u32 {
    let ports_dir = sysfs::ib_dir(root, ibdev).join("ports");
    let ports = sysfs::numeric_entries(&ports_dir);
    for p in &ports {
        let ll = sysfs::read_text(&ports_dir.join(p.to_string()).join("link_layer"));
        if ll.as_deref().map(str::trim) == Some("Ethernet") {
            return *p;
        }
    }
    ports.first().copied().unwrap_or(1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn pci_dev(root: &Path, ibdev: &str, driver: &str) {
        let pci = root.join("devices/pci0000:00/0000:00:02.0");
        std::fs::create_dir_all(&pci).unwrap();
        let drv = root.join("bus/pci/drivers").join(driver);
        std::fs::create_dir_all(&drv).unwrap();
        let _ = symlink(&drv, pci.join("driver"));
        let ib = root.join("class/infiniband").join(ibdev);
        std::fs::create_dir_all(&ib).unwrap();
        symlink(&pci, ib.join("device")).unwrap();
    }

    #[test]
    fn driver_names_map_to_families() {
        assert_eq!(HwType::from_driver_name("mlx5_core"), HwType::Mlx5);
        assert_eq!(HwType::from_driver_name("bnxt_en"), HwType::Thor2);
        assert_eq!(HwType::from_driver_name("bnxt_re"), HwType::Thor2);
        assert_eq!(HwType::from_driver_name("ionic"), HwType::Ainic);
        assert_eq!(HwType::from_driver_name("rdma_rxe"), HwType::Rxe);
        assert_eq!(HwType::from_driver_name("irdma"), HwType::Unsupported);
        assert_eq!(HwType::from_driver_name(""), HwType::Unsupported);
    }

    #[test]
    fn detects_from_the_device_driver_link() {
        let d = tempfile::tempdir().unwrap();
        pci_dev(d.path(), "mlx5_0", "mlx5_core");
        assert_eq!(detect(d.path(), "mlx5_0").0, HwType::Mlx5);
        let d = tempfile::tempdir().unwrap();
        pci_dev(d.path(), "rocep1s0f0", "bnxt_en");
        assert_eq!(detect(d.path(), "rocep1s0f0").0, HwType::Thor2);
        let d = tempfile::tempdir().unwrap();
        pci_dev(d.path(), "ionic_0", "ionic");
        assert_eq!(detect(d.path(), "ionic_0").0, HwType::Ainic);
        let d = tempfile::tempdir().unwrap();
        pci_dev(d.path(), "irdma0", "irdma");
        assert_eq!(detect(d.path(), "irdma0").0, HwType::Unsupported);
    }

    #[test]
    fn rxe_without_device_link_is_detected_by_parent() {
        let d = tempfile::tempdir().unwrap();
        let ib = d.path().join("class/infiniband/myroce");
        std::fs::create_dir_all(&ib).unwrap();
        std::fs::write(ib.join("parent"), "eth0\n").unwrap();
        assert_eq!(detect(d.path(), "myroce").0, HwType::Rxe);
    }

    #[test]
    fn rxe_parented_to_an_mlx5_function_is_still_rxe() {
        let d = tempfile::tempdir().unwrap();
        pci_dev(d.path(), "rxe0", "mlx5_core");
        std::fs::write(d.path().join("class/infiniband/rxe0/parent"), "ens1f0np0\n").unwrap();
        assert_eq!(detect(d.path(), "rxe0").0, HwType::Rxe);
    }

    #[test]
    fn rxe_name_without_parent_or_device() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("class/infiniband/rxe3/ports/1")).unwrap();
        assert_eq!(detect(d.path(), "rxe3").0, HwType::Rxe);
        assert_eq!(
            detect(d.path(), "rxe9").0,
            HwType::Unsupported,
            "absent device"
        );
    }

    #[test]
    fn port_prefers_ethernet() {
        let d = tempfile::tempdir().unwrap();
        let ports = d.path().join("class/infiniband/x/ports");
        for (p, ll) in [(1, "InfiniBand"), (2, "Ethernet"), (10, "Ethernet")] {
            std::fs::create_dir_all(ports.join(p.to_string())).unwrap();
            std::fs::write(
                ports.join(p.to_string()).join("link_layer"),
                format!("{ll}\n"),
            )
            .unwrap();
        }
        assert_eq!(pick_port(d.path(), "x"), 2);
        assert_eq!(pick_port(d.path(), "absent"), 1);
    }
}
