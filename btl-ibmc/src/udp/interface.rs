//! Naming the interface to use: an IPv4 address as is, or an interface
//! name (`eth0`) resolved to its first IPv4 address, as users and
//! parameters say it; and the MTU of the interface an address is on, which
//! the default datagram size fits.

use std::ffi::CStr;
use std::net::{Ipv4Addr, UdpSocket};
use std::os::fd::AsRawFd;

/// The IPv4 address of `name_or_address`.
pub fn interface_address(name_or_address: &str) -> Result<Ipv4Addr, String> {
    let wanted = name_or_address.trim();
    if let Ok(address) = wanted.parse::<Ipv4Addr>() {
        return Ok(address);
    }
    ipv4_interfaces()?
        .into_iter()
        .find_map(|(name, address)| (name == wanted.as_bytes()).then_some(address))
        .ok_or_else(|| format!("no interface named {wanted:?} with an IPv4 address"))
}

/// The name and MTU of the interface that holds `address`, asked of the
/// kernel through `socket` (SIOCGIFMTU), so that the answer is that of the
/// socket's network namespace, which /sys/class/net need not show.
pub(crate) fn interface_mtu(address: Ipv4Addr, socket: &UdpSocket) -> Result<(String, usize), String> {
    let name = ipv4_interfaces()?
        .into_iter()
        .find_map(|(name, held)| (held == address).then_some(name))
        .ok_or_else(|| format!("no interface holds {address}"))?;
    let shown = String::from_utf8_lossy(&name).into_owned();
    // SAFETY: ifreq is plain old data; all zeroes is a valid value.
    let mut request: libc::ifreq = unsafe { std::mem::zeroed() };
    if name.len() >= request.ifr_name.len() {
        return Err(format!("the interface name {shown:?} is too long"));
    }
    for (slot, &byte) in request.ifr_name.iter_mut().zip(&name) {
        *slot = byte as libc::c_char;
    }
    // SAFETY: the descriptor is the open socket's, `request` a valid,
    // NUL-terminated ifreq the kernel fills in; nothing else is touched.
    if unsafe { libc::ioctl(socket.as_raw_fd(), libc::SIOCGIFMTU, &mut request) } != 0 {
        return Err(format!("asking the MTU of {shown}: {}", std::io::Error::last_os_error()));
    }
    // SAFETY: SIOCGIFMTU answers in the union's MTU member.
    let mtu = unsafe { request.ifr_ifru.ifru_mtu };
    usize::try_from(mtu).map(|mtu| (shown.clone(), mtu)).map_err(|_| format!("{shown} reports an MTU of {mtu}"))
}

/// Every (interface name, IPv4 address) pair of this host, in the
/// kernel's order.
fn ipv4_interfaces() -> Result<Vec<(Vec<u8>, Ipv4Addr)>, String> {
    let mut list: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: `list` is a valid out-pointer; the list is freed below.
    if unsafe { libc::getifaddrs(&mut list) } != 0 {
        return Err(format!("listing the interfaces: {}", std::io::Error::last_os_error()));
    }
    let mut found = Vec::new();
    let mut entry = list;
    while !entry.is_null() {
        // SAFETY: `entry` is an element of the list getifaddrs returned,
        // valid until freeifaddrs; its name is a C string and its address,
        // when not null, a sockaddr whose family says its type.
        let (name, address) = unsafe { (CStr::from_ptr((*entry).ifa_name), (*entry).ifa_addr) };
        // SAFETY: as above; an AF_INET address is a sockaddr_in.
        let ipv4 = unsafe {
            (!address.is_null() && i32::from((*address).sa_family) == libc::AF_INET)
                .then(|| Ipv4Addr::from(u32::from_be((*address.cast::<libc::sockaddr_in>()).sin_addr.s_addr)))
        };
        if let Some(ipv4) = ipv4 {
            found.push((name.to_bytes().to_vec(), ipv4));
        }
        // SAFETY: as above.
        entry = unsafe { (*entry).ifa_next };
    }
    // SAFETY: `list` came from getifaddrs and nothing borrowed from it is kept.
    unsafe { libc::freeifaddrs(list) };
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_pass_and_names_resolve() {
        assert_eq!(interface_address("10.1.2.3"), Ok(Ipv4Addr::new(10, 1, 2, 3)));
        assert_eq!(interface_address("lo"), Ok(Ipv4Addr::LOCALHOST));
        assert!(interface_address("no-such-if0").unwrap_err().contains("no-such-if0"));
    }

    /// The reference is the kernel's other answer: /sys/class/net/IF/mtu
    /// (this test runs in the namespace whose /sys it sees).
    #[test]
    fn the_mtu_of_each_interface_is_the_one_sysfs_shows() {
        let socket = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).expect("a socket on lo");
        let interfaces = ipv4_interfaces().expect("the interface list");
        assert!(interfaces.iter().any(|(name, _)| name == b"lo"), "{interfaces:?}");
        for (name, address) in interfaces {
            let name = String::from_utf8(name).expect("an ASCII name");
            let Ok(shown) = std::fs::read_to_string(format!("/sys/class/net/{name}/mtu")) else {
                println!("SKIPPED the MTU of {name}: /sys/class/net/{name}/mtu is unreadable here");
                continue;
            };
            let (found_name, mtu) = interface_mtu(address, &socket).expect("the MTU");
            // Another interface may hold the same address first.
            if found_name == name {
                assert_eq!(mtu, shown.trim().parse::<usize>().expect("a number in sysfs"), "{name} ({address})");
            }
        }
        assert!(interface_mtu(Ipv4Addr::new(192, 0, 2, 77), &socket).unwrap_err().contains("no interface holds 192.0.2.77"));
    }
}
