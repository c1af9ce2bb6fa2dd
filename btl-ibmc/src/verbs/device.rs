//! Finding, opening and describing an RDMA device and port, and the
//! protection domain the RC side of a transport is created in.

use std::ffi::CStr;
use std::net::Ipv4Addr;
use std::sync::Arc;

use rdma_sys::{
    ___ibv_query_port, ibv_context, ibv_device, ibv_device_attr, ibv_free_device_list, ibv_get_device_list,
    ibv_get_device_name, ibv_gid, ibv_mtu, ibv_open_device, ibv_port_attr, ibv_port_state, ibv_port_state_str,
    ibv_query_device, ibv_query_gid,
};

use super::config::VerbsConfig;
use super::context::{DeviceContext, ProtectionDomain};
use super::error::VerbsSetupError;
use super::gid::{GidEntry, choose_gid, gid_netdev, gid_text, gid_type};

const LINK_LAYER_INFINIBAND: u8 = 1;
const LINK_LAYER_ETHERNET: u8 = 2;

/// What [`probe`] found: enough to decide whether to build a communicator
/// on verbs, and to say why not.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceSummary {
    pub device: String,
    pub port: u8,
    /// "ACTIVE", "DOWN", ... as libibverbs spells it.
    pub port_state: String,
    /// "Ethernet" (RoCE) or "InfiniBand".
    pub link_layer: String,
    /// Active MTU of the port in bytes: the largest UD datagram.
    pub active_mtu: usize,
    pub lid: u16,
    pub gid_index: u32,
    pub gid: [u8; 16],
    /// "RoCE v2", "IB/RoCE v1", or "unknown".
    pub gid_type: String,
    /// The IPv4 address in an IPv4-mapped GID.
    pub ipv4: Option<Ipv4Addr>,
    /// The network device behind a RoCE GID.
    pub netdev: Option<String>,
}

impl std::fmt::Display for DeviceSummary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} port {} {} ({}, MTU {}), GID[{}] {} ({}",
            self.device,
            self.port,
            self.port_state,
            self.link_layer,
            self.active_mtu,
            self.gid_index,
            gid_text(&self.gid),
            self.gid_type
        )?;
        if let Some(netdev) = &self.netdev {
            write!(f, " on {netdev}")?;
        }
        write!(f, ")")
    }
}

/// Opens the configured device and port, checks that the port is active
/// and picks a GID, without creating anything a communicator needs.
pub fn probe(config: &VerbsConfig) -> Result<DeviceSummary, VerbsSetupError> {
    OpenDevice::open(config).map(|device| device.summary.clone())
}

/// An open device with its protection domain and the port facts setup needs.
pub(crate) struct OpenDevice {
    /// Holds the context open.
    pd: Arc<ProtectionDomain>,
    pub(crate) summary: DeviceSummary,
    /// The port's active MTU as the verbs enum, for QP path MTUs.
    pub(crate) active_mtu_code: u8,
    pub(crate) link_layer: u8,
    pub(crate) max_qp_wr: u32,
    pub(crate) max_cqe: u32,
    /// Soft-RoCE (the rxe driver) most likely takes a packet of a
    /// retransmitted multi-packet request twice (seen on a send,
    /// docs/testbed.md); on a write that fails the queue pair ("remote
    /// invalid request", seen on loaded hosts), so every RDMA write is
    /// kept to one packet. Reliable-channel sends are not cut (one receive
    /// buffer per message): they are one packet from a path MTU of 4096
    /// up, and below it a damaged one fails its CRC.
    pub(crate) single_packet_writes: bool,
}

/// The vendor id the rxe driver reports (Linux's RXE_VENDOR_ID); kernels
/// before 5.9 reported 0, so there the driver's device name tells.
const SOFT_ROCE_VENDOR_ID: u32 = 0x00FF_FFFF;

fn is_soft_roce(vendor_id: u32, device_name: &str) -> bool {
    vendor_id == SOFT_ROCE_VENDOR_ID || (vendor_id == 0 && device_name.starts_with("rxe"))
}

/// Says once per process that Soft-RoCE's writes are cut, however many
/// communicators open the device.
static SOFT_ROCE_REPORTED: std::sync::Once = std::sync::Once::new();

/// What the queries find out before the protection domain is allocated.
struct Querying {
    context: Arc<DeviceContext>,
    summary: DeviceSummary,
    active_mtu_code: u8,
    link_layer: u8,
    max_qp_wr: u32,
    max_cqe: u32,
    vendor_id: u32,
}

impl OpenDevice {
    pub(crate) fn open(config: &VerbsConfig) -> Result<OpenDevice, VerbsSetupError> {
        if config.port == 0 {
            return Err(VerbsSetupError::InvalidArguments("port numbers start at 1".into()));
        }
        let (context, name) = open_context(config.device.as_deref())?;
        let mut device = Querying {
            context,
            summary: DeviceSummary {
                device: name,
                port: config.port,
                port_state: String::new(),
                link_layer: String::new(),
                active_mtu: 0,
                lid: 0,
                gid_index: 0,
                gid: [0; 16],
                gid_type: String::new(),
                ipv4: None,
                netdev: None,
            },
            active_mtu_code: 0,
            link_layer: 0,
            max_qp_wr: 0,
            max_cqe: 0,
            vendor_id: 0,
        };
        device.query_device(config.port)?;
        device.query_port(config.port)?;
        device.choose_gid(config)?;

        let pd = ProtectionDomain::alloc(&device.context, &format!("on {}", device.summary.device))?;
        let Querying { summary, active_mtu_code, link_layer, max_qp_wr, max_cqe, vendor_id, .. } = device;
        let single_packet_writes = is_soft_roce(vendor_id, &summary.device);
        let device = OpenDevice { pd, summary, active_mtu_code, link_layer, max_qp_wr, max_cqe, single_packet_writes };
        tracing::debug!("verbs: opened {}", device.summary);
        if single_packet_writes {
            SOFT_ROCE_REPORTED.call_once(|| {
                tracing::info!(
                    "verbs: {} is Soft-RoCE (rxe): every RDMA write is cut to one path MTU, since rxe was seen to fail a queue pair after retransmitting a multi-packet request",
                    device.summary.device
                )
            });
        }
        Ok(device)
    }

    pub(crate) fn context(&self) -> &Arc<DeviceContext> {
        self.pd.context()
    }

    pub(crate) fn pd(&self) -> &Arc<ProtectionDomain> {
        &self.pd
    }

    pub(crate) fn is_ethernet(&self) -> bool {
        self.link_layer == LINK_LAYER_ETHERNET
    }
}

impl Querying {
    fn query_device(&mut self, port: u8) -> Result<(), VerbsSetupError> {
        // SAFETY: ibv_device_attr is plain data for which all-zero is valid.
        let mut attr: ibv_device_attr = unsafe { std::mem::zeroed() };
        // SAFETY: the context is open and `attr` is a valid out-pointer.
        let rc = unsafe { ibv_query_device(self.context.raw(), &mut attr) };
        if rc != 0 {
            return Err(VerbsSetupError::returned("ibv_query_device", rc, format!("on {}", self.summary.device)));
        }
        if port > attr.phys_port_cnt {
            return Err(VerbsSetupError::PortUnusable(format!(
                "{} has {} port(s), there is no port {port}",
                self.summary.device, attr.phys_port_cnt
            )));
        }
        self.max_qp_wr = u32::try_from(attr.max_qp_wr).unwrap_or(0);
        self.max_cqe = u32::try_from(attr.max_cqe).unwrap_or(0);
        self.vendor_id = attr.vendor_id;
        Ok(())
    }

    fn query_port(&mut self, port: u8) -> Result<(), VerbsSetupError> {
        // SAFETY: ibv_port_attr is plain data for which all-zero is valid.
        let mut attr: ibv_port_attr = unsafe { std::mem::zeroed() };
        // SAFETY: the context is open and `attr` is a valid out-pointer of
        // the size the call is told.
        let rc = unsafe { ___ibv_query_port(self.context.raw(), port, &mut attr) };
        if rc != 0 {
            return Err(VerbsSetupError::returned("ibv_query_port", rc, format!("on {} port {port}", self.summary.device)));
        }
        let summary = &mut self.summary;
        summary.port_state = port_state_text(attr.state);
        summary.link_layer = match attr.link_layer {
            LINK_LAYER_ETHERNET => "Ethernet".into(),
            LINK_LAYER_INFINIBAND => "InfiniBand".into(),
            other => format!("link layer {other}"),
        };
        summary.active_mtu = mtu_bytes(attr.active_mtu);
        summary.lid = attr.lid;
        self.active_mtu_code = u8::try_from(attr.active_mtu).unwrap_or(0);
        self.link_layer = attr.link_layer;
        if attr.state != ibv_port_state::IBV_PORT_ACTIVE {
            return Err(VerbsSetupError::PortUnusable(format!(
                "{} port {port} is {}",
                summary.device, summary.port_state
            )));
        }
        if summary.active_mtu == 0 {
            return Err(VerbsSetupError::PortUnusable(format!("{} port {port} reports no active MTU", summary.device)));
        }
        // Keep the GID table length for `choose_gid`.
        self.summary.gid_index = u32::try_from(attr.gid_tbl_len).unwrap_or(0);
        Ok(())
    }

    fn query_gid(&self, index: u32) -> Option<GidEntry> {
        let index_arg = i32::try_from(index).ok()?;
        // SAFETY: ibv_gid is a union of byte arrays; all-zero is valid.
        let mut gid: ibv_gid = unsafe { std::mem::zeroed() };
        // SAFETY: the context is open and `gid` is a valid out-pointer.
        let rc = unsafe { ibv_query_gid(self.context.raw(), self.summary.port, index_arg, &mut gid) };
        // SAFETY: every bit pattern is a valid byte array.
        let raw = unsafe { gid.raw };
        (rc == 0).then_some(GidEntry { index, raw })
    }

    fn choose_gid(&mut self, config: &VerbsConfig) -> Result<(), VerbsSetupError> {
        let table_len = self.summary.gid_index;
        let (device, port) = (self.summary.device.clone(), self.summary.port);
        let chosen = match config.gid_index {
            Some(index) => match self.query_gid(index).filter(|entry| index < table_len && !entry.is_zero()) {
                Some(entry) => entry,
                None => {
                    return Err(VerbsSetupError::PortUnusable(format!(
                        "{device} port {port} has no GID at index {index} (table length {table_len})"
                    )));
                }
            },
            None => {
                let entries: Vec<(GidEntry, Option<String>)> = (0..table_len)
                    .filter_map(|index| self.query_gid(index))
                    .filter(|entry| !entry.is_zero())
                    .map(|entry| (entry, gid_type(&device, port, entry.index)))
                    .collect();
                choose_gid(&entries).ok_or_else(|| {
                    VerbsSetupError::PortUnusable(format!("{device} port {port} has no GID (is an IP address configured on its netdev?)"))
                })?
            }
        };
        let summary = &mut self.summary;
        summary.gid_index = chosen.index;
        summary.gid = chosen.raw;
        summary.gid_type = gid_type(&device, port, chosen.index).unwrap_or_else(|| "unknown".into());
        summary.ipv4 = chosen.ipv4();
        summary.netdev = gid_netdev(&device, port, chosen.index);
        Ok(())
    }
}

/// Opens `wanted` (or the first device) and returns its context and name.
fn open_context(wanted: Option<&str>) -> Result<(Arc<DeviceContext>, String), VerbsSetupError> {
    let mut count: i32 = 0;
    // SAFETY: `count` is a valid out-pointer; the list is freed below.
    let list = unsafe { ibv_get_device_list(&mut count) };
    if list.is_null() {
        let why = std::io::Error::last_os_error();
        return Err(VerbsSetupError::NoDevice(format!("no RDMA device found (ibv_get_device_list: {why})")));
    }
    let count = usize::try_from(count).unwrap_or(0);
    // SAFETY: libibverbs returned an array of `count` valid device pointers.
    let devices: Vec<*mut ibv_device> = unsafe { std::slice::from_raw_parts(list, count) }.to_vec();
    let names: Vec<String> = devices.iter().map(|&device| device_name(device)).collect();

    let chosen = match wanted {
        None => devices.first().copied().zip(names.first().cloned()),
        Some(name) => names.iter().position(|candidate| candidate == name).map(|at| (devices[at], names[at].clone())),
    };
    let result = match chosen {
        None if names.is_empty() => Err(VerbsSetupError::NoDevice("no RDMA device found".into())),
        None => Err(VerbsSetupError::NoDevice(format!(
            "RDMA device {:?} not found (available: {})",
            wanted.unwrap_or_default(),
            names.join(", ")
        ))),
        Some((device, name)) => {
            // SAFETY: `device` comes from the list, which is still alive.
            let context = unsafe { ibv_open_device(device) };
            if context.is_null() {
                Err(VerbsSetupError::last_os("ibv_open_device", format!("on {name}")))
            } else {
                // SAFETY: just opened, and closed only by the handle.
                Ok((unsafe { DeviceContext::opened(context) }, name))
            }
        }
    };
    // SAFETY: the list came from ibv_get_device_list; opened contexts stay
    // valid after the list is freed.
    unsafe { ibv_free_device_list(list) };
    result
}

fn device_name(device: *mut ibv_device) -> String {
    // SAFETY: `device` is a live list entry; the name is a NUL-terminated
    // string owned by the device.
    let name = unsafe { ibv_get_device_name(device) };
    if name.is_null() {
        return "(unnamed)".into();
    }
    // SAFETY: checked non-null above; libibverbs NUL-terminates it.
    unsafe { CStr::from_ptr(name) }.to_string_lossy().into_owned()
}

fn port_state_text(state: ibv_port_state::Type) -> String {
    // SAFETY: ibv_port_state_str returns a static string for any value.
    let text = unsafe { ibv_port_state_str(state) };
    if text.is_null() {
        return format!("state {state}");
    }
    // SAFETY: checked non-null; the string is static and NUL-terminated.
    let text = unsafe { CStr::from_ptr(text) }.to_string_lossy();
    text.trim_start_matches("PORT_").to_owned()
}

/// Bytes of an `ibv_mtu` value; 0 for values the enum does not define.
pub(crate) fn mtu_bytes(mtu: ibv_mtu::Type) -> usize {
    match mtu {
        ibv_mtu::IBV_MTU_256 => 256,
        ibv_mtu::IBV_MTU_512 => 512,
        ibv_mtu::IBV_MTU_1024 => 1024,
        ibv_mtu::IBV_MTU_2048 => 2048,
        ibv_mtu::IBV_MTU_4096 => 4096,
        _ => 0,
    }
}

/// The device name of an open context.
///
/// # Safety
/// `context` must be a valid, open verbs context.
pub(crate) unsafe fn context_name(context: *mut ibv_context) -> String {
    // SAFETY: the caller guarantees the context is open; its device is valid.
    device_name(unsafe { (*context).device })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn soft_roce_is_told_by_its_vendor_id_or_on_old_kernels_by_its_name() {
        assert!(is_soft_roce(0x00FF_FFFF, "rxe0"));
        assert!(is_soft_roce(0x00FF_FFFF, "roce_on_eth0"), "a renamed rxe device keeps the vendor id");
        assert!(is_soft_roce(0, "rxe_eth0"), "before Linux 5.9 rxe reported vendor id 0");
        assert!(!is_soft_roce(0x02c9, "mlx5_0"));
        assert!(!is_soft_roce(0x02c9, "rxe_lookalike"), "a hardware vendor id wins over the name");
        assert!(!is_soft_roce(0, "siw0"));
    }
}
