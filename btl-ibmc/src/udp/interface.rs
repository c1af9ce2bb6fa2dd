//! Naming the interface to use: an IPv4 address as is, or an interface
//! name (`eth0`) resolved to its first IPv4 address, as users and
//! parameters say it.

use std::ffi::CStr;
use std::net::Ipv4Addr;

/// The IPv4 address of `name_or_address`.
pub fn interface_address(name_or_address: &str) -> Result<Ipv4Addr, String> {
    let wanted = name_or_address.trim();
    if let Ok(address) = wanted.parse::<Ipv4Addr>() {
        return Ok(address);
    }
    let mut list: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: `list` is a valid out-pointer; the list is freed below.
    if unsafe { libc::getifaddrs(&mut list) } != 0 {
        return Err(format!("listing the interfaces: {}", std::io::Error::last_os_error()));
    }
    let mut found = None;
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
        if let Some(ipv4) = ipv4.filter(|_| name.to_bytes() == wanted.as_bytes()) {
            found = Some(ipv4);
            break;
        }
        // SAFETY: as above.
        entry = unsafe { (*entry).ifa_next };
    }
    // SAFETY: `list` came from getifaddrs and nothing borrowed from it is kept.
    unsafe { libc::freeifaddrs(list) };
    found.ok_or_else(|| format!("no interface named {wanted:?} with an IPv4 address"))
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
}
