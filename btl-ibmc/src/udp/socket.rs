//! The two sockets of a udp endpoint, made with the options std does not
//! offer: the rank's own socket (bound to the interface's address, sends
//! multicast and unicast, receives unicast), and the group socket (bound
//! to the group and port, joined on the interface, receives multicast).
//! Both get a large receive buffer, since a burst of datagrams that does
//! not fit is lost.

use std::io;
use std::mem::size_of;
use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::os::fd::{AsRawFd, FromRawFd, RawFd};

/// The rank's own socket, bound to an ephemeral port of `interface`,
/// sending multicast through it with `ttl`, looped back to this host's
/// other members (ranks sharing a host).
pub(crate) fn open_own(interface: Ipv4Addr, ttl: u32, receive_buffer: usize) -> io::Result<(UdpSocket, usize)> {
    let socket = new_socket()?;
    let achieved = raise_receive_buffer(socket.as_raw_fd(), receive_buffer)?;
    bind(socket.as_raw_fd(), SocketAddrV4::new(interface, 0))?;
    set_option(socket.as_raw_fd(), libc::IPPROTO_IP, libc::IP_MULTICAST_IF, &in_addr(interface))?;
    socket.set_multicast_ttl_v4(ttl)?;
    socket.set_multicast_loop_v4(true)?;
    Ok((socket, achieved))
}

/// The group socket: every rank of the host binds the group's address and
/// port (SO_REUSEADDR), so each gets its own copy of every datagram, and
/// only this group's (binding the group address filters by destination,
/// and IP_MULTICAST_ALL off keeps out groups other sockets joined).
pub(crate) fn open_group(group: SocketAddrV4, interface: Ipv4Addr, receive_buffer: usize) -> io::Result<(UdpSocket, usize)> {
    let socket = new_socket()?;
    let fd = socket.as_raw_fd();
    set_option(fd, libc::SOL_SOCKET, libc::SO_REUSEADDR, &1)?;
    set_option(fd, libc::IPPROTO_IP, libc::IP_MULTICAST_ALL, &0)?;
    let achieved = raise_receive_buffer(fd, receive_buffer)?;
    bind(fd, group)?;
    socket.join_multicast_v4(group.ip(), &interface)?;
    Ok((socket, achieved))
}

/// The address this host would send to `group` from: the default for the
/// interface when none is configured (the glue also asks it for the route
/// towards the launcher's address).
pub fn route_source(group: SocketAddrV4) -> io::Result<Ipv4Addr> {
    let probe = UdpSocket::bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0))?;
    probe.connect(group)?;
    match probe.local_addr()? {
        std::net::SocketAddr::V4(address) if !address.ip().is_unspecified() => Ok(*address.ip()),
        other => Err(io::Error::other(format!("the route to {group} leaves from {other}, not an IPv4 interface"))),
    }
}

/// Takes one datagram into `buffer` without waiting: its length and
/// source, or None when the socket is empty. A datagram longer than
/// `buffer` reports its full length (MSG_TRUNC), so the caller can refuse it.
pub(crate) fn receive(socket: &UdpSocket, buffer: &mut [u8]) -> io::Result<Option<(usize, SocketAddrV4)>> {
    // SAFETY: all-zero bytes are a valid sockaddr_in.
    let mut source: libc::sockaddr_in = unsafe { std::mem::zeroed() };
    let mut source_len = size_of::<libc::sockaddr_in>() as libc::socklen_t;
    // SAFETY: the buffer and the address are valid for the lengths given.
    let received = unsafe {
        libc::recvfrom(
            socket.as_raw_fd(),
            buffer.as_mut_ptr().cast(),
            buffer.len(),
            libc::MSG_DONTWAIT | libc::MSG_TRUNC,
            (&mut source as *mut libc::sockaddr_in).cast(),
            &mut source_len,
        )
    };
    if received < 0 {
        let error = io::Error::last_os_error();
        return match error.kind() {
            io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => Ok(None),
            // An ICMP error of an earlier send. Linux reports these on an
            // unconnected UDP socket only with IP_RECVERR (not set), so a
            // peer's closed port is never noticed this way here.
            io::ErrorKind::ConnectionRefused => Ok(None),
            _ => Err(error),
        };
    }
    let from = SocketAddrV4::new(Ipv4Addr::from(u32::from_be(source.sin_addr.s_addr)), u16::from_be(source.sin_port));
    Ok(Some((received as usize, from)))
}

fn new_socket() -> io::Result<UdpSocket> {
    // SAFETY: no pointers; the result is checked.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` is a socket just created and owned by nobody else.
    Ok(unsafe { UdpSocket::from_raw_fd(fd) })
}

/// Asks for `bytes` of receive buffer, beyond net.core.rmem_max where the
/// process may (SO_RCVBUFFORCE, CAP_NET_ADMIN), and returns what the
/// kernel granted (it reports twice the usable size).
fn raise_receive_buffer(fd: RawFd, bytes: usize) -> io::Result<usize> {
    let wanted = libc::c_int::try_from(bytes).unwrap_or(libc::c_int::MAX);
    if set_option(fd, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, &wanted).is_err() {
        set_option(fd, libc::SOL_SOCKET, libc::SO_RCVBUF, &wanted)?;
    }
    let mut granted: libc::c_int = 0;
    let mut len = size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: `granted` is valid for `len` bytes.
    let rc = unsafe { libc::getsockopt(fd, libc::SOL_SOCKET, libc::SO_RCVBUF, (&mut granted as *mut libc::c_int).cast(), &mut len) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(usize::try_from(granted).unwrap_or(0) / 2)
}

fn bind(fd: RawFd, address: SocketAddrV4) -> io::Result<()> {
    let raw = libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: address.port().to_be(),
        sin_addr: in_addr(*address.ip()),
        sin_zero: [0; 8],
    };
    // SAFETY: `raw` is a valid sockaddr_in of the length given.
    let rc = unsafe { libc::bind(fd, (&raw as *const libc::sockaddr_in).cast(), size_of::<libc::sockaddr_in>() as libc::socklen_t) };
    if rc != 0 {
        let error = io::Error::last_os_error();
        return Err(io::Error::new(error.kind(), format!("binding {address}: {error}")));
    }
    Ok(())
}

fn in_addr(address: Ipv4Addr) -> libc::in_addr {
    libc::in_addr { s_addr: u32::from(address).to_be() }
}

fn set_option<T>(fd: RawFd, level: libc::c_int, name: libc::c_int, value: &T) -> io::Result<()> {
    // SAFETY: `value` is valid for size_of::<T>() bytes; the kernel checks
    // that the length suits the option.
    let rc = unsafe { libc::setsockopt(fd, level, name, (value as *const T).cast(), size_of::<T>() as libc::socklen_t) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
