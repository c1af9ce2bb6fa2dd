//! The two sockets of a udp endpoint, made with the options std does not
//! offer: the rank's own socket (bound to the interface's address, sends
//! multicast and unicast, receives unicast), and the group socket (bound
//! to the group and port, joined on the interface, receives multicast).
//! Both get a large receive buffer, since a burst of datagrams that does
//! not fit is lost.

use std::io;
use std::mem::{size_of, size_of_val};
use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::os::fd::{AsRawFd, FromRawFd, RawFd};
use std::time::Duration;

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

/// One receive: `len` bytes from `from`. `segment` is set when the kernel
/// handed over several datagrams of one segmented send at once (UDP GRO,
/// see [`accept_coalesced`]): they lie end to end in the buffer, each
/// `segment` bytes long but the last, which may be shorter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Received {
    pub(crate) len: usize,
    pub(crate) from: SocketAddrV4,
    pub(crate) segment: Option<usize>,
}

/// Takes one datagram (or one coalesced run of them) into `buffer`
/// without waiting; None when the socket is empty. A datagram longer
/// than `buffer` reports its full length (MSG_TRUNC), so the caller can
/// refuse it.
pub(crate) fn receive(socket: &UdpSocket, buffer: &mut [u8]) -> io::Result<Option<Received>> {
    // SAFETY: all-zero bytes are a valid sockaddr_in and msghdr.
    let mut source: libc::sockaddr_in = unsafe { std::mem::zeroed() };
    let mut iov = libc::iovec { iov_base: buffer.as_mut_ptr().cast(), iov_len: buffer.len() };
    // Room for the one control message asked for (UDP_GRO's int), aligned.
    let mut control = [0u64; 8];
    // SAFETY: as above.
    let mut header: libc::msghdr = unsafe { std::mem::zeroed() };
    header.msg_name = (&mut source as *mut libc::sockaddr_in).cast();
    header.msg_namelen = size_of::<libc::sockaddr_in>() as libc::socklen_t;
    header.msg_iov = &mut iov;
    header.msg_iovlen = 1;
    header.msg_control = control.as_mut_ptr().cast();
    header.msg_controllen = size_of_val(&control) as _;
    // SAFETY: every pointer in `header` is valid for the length given with it.
    let received = unsafe { libc::recvmsg(socket.as_raw_fd(), &mut header, libc::MSG_DONTWAIT | libc::MSG_TRUNC) };
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
    let mut segment = None;
    // SAFETY: the kernel filled `control` up to msg_controllen; the CMSG
    // macros stay inside it, and the data of a UDP_GRO message is an int.
    unsafe {
        let mut message = libc::CMSG_FIRSTHDR(&header);
        while !message.is_null() {
            if (*message).cmsg_level == libc::SOL_UDP && (*message).cmsg_type == libc::UDP_GRO {
                let size = std::ptr::read_unaligned(libc::CMSG_DATA(message).cast::<libc::c_int>());
                segment = usize::try_from(size).ok().filter(|&size| size > 0);
            }
            message = libc::CMSG_NXTHDR(&header, message);
        }
    }
    let from = SocketAddrV4::new(Ipv4Addr::from(u32::from_be(source.sin_addr.s_addr)), u16::from_be(source.sin_port));
    Ok(Some(Received { len: received as usize, from, segment }))
}

/// Sleeps until one of `sockets` has something to read, for at most
/// `longest` (nanosecond precision: ppoll, not poll's milliseconds). True
/// when one has, or a signal ended the sleep early (the caller looks again
/// either way); false when the time ran out.
pub(crate) fn sleep_until_readable(sockets: [&UdpSocket; 2], longest: Duration) -> io::Result<bool> {
    let mut watched = sockets.map(|socket| libc::pollfd { fd: socket.as_raw_fd(), events: libc::POLLIN, revents: 0 });
    let timeout = libc::timespec {
        tv_sec: libc::time_t::try_from(longest.as_secs()).unwrap_or(libc::time_t::MAX),
        tv_nsec: longest.subsec_nanos() as libc::c_long,
    };
    // SAFETY: `watched` holds `watched.len()` valid pollfds the kernel may
    // write `revents` into; `timeout` is a valid timespec it only reads; a
    // null signal mask keeps the thread's own.
    let rc = unsafe { libc::ppoll(watched.as_mut_ptr(), watched.len() as libc::nfds_t, &timeout, std::ptr::null()) };
    if rc < 0 {
        let error = io::Error::last_os_error();
        return if error.kind() == io::ErrorKind::Interrupted { Ok(true) } else { Err(error) };
    }
    Ok(rc > 0)
}

/// Asks the kernel to hand over the datagrams of one segmented send in
/// one receive (UDP_GRO, Linux 5.0): a receiver then takes up to 64 KiB
/// per system call instead of one datagram. False where the kernel does
/// not offer it; receives work either way.
pub(crate) fn accept_coalesced(socket: &UdpSocket) -> bool {
    set_option(socket.as_raw_fd(), libc::SOL_UDP, libc::UDP_GRO, &1).is_ok()
}

/// Most datagrams one segmented send may carry (the kernel's
/// UDP_MAX_SEGMENTS, 64 before Linux 6.10).
pub(crate) const MOST_SEGMENTS: usize = 64;

/// Sends `payload`, datagrams of `segment` bytes laid end to end (the last
/// may be shorter), to `to` in one system call: the kernel cuts it into
/// separate datagrams as late as it can (UDP GSO, UDP_SEGMENT, Linux 4.18),
/// on the network card where it offers that, so the stack runs once per
/// send rather than once per datagram. The caller keeps `payload` within
/// 65507 bytes and [`MOST_SEGMENTS`] datagrams.
pub(crate) fn send_segmented(socket: &UdpSocket, payload: &[u8], segment: u16, to: SocketAddrV4) -> io::Result<()> {
    let address = sockaddr(to);
    let mut iov = libc::iovec { iov_base: payload.as_ptr() as *mut libc::c_void, iov_len: payload.len() };
    let mut control = [0u64; 4];
    // SAFETY: all-zero bytes are a valid msghdr.
    let mut header: libc::msghdr = unsafe { std::mem::zeroed() };
    header.msg_name = (&address as *const libc::sockaddr_in).cast_mut().cast();
    header.msg_namelen = size_of::<libc::sockaddr_in>() as libc::socklen_t;
    header.msg_iov = &mut iov;
    header.msg_iovlen = 1;
    header.msg_control = control.as_mut_ptr().cast();
    // SAFETY: CMSG_SPACE only computes a length.
    header.msg_controllen = unsafe { libc::CMSG_SPACE(size_of::<u16>() as u32) } as _;
    debug_assert!(header.msg_controllen as usize <= size_of_val(&control));
    // SAFETY: `control` holds CMSG_SPACE(2) bytes, so the first header and
    // its two bytes of data fit; the kernel only reads `iov` and the address.
    let sent = unsafe {
        let message = libc::CMSG_FIRSTHDR(&header);
        (*message).cmsg_level = libc::SOL_UDP;
        (*message).cmsg_type = libc::UDP_SEGMENT;
        (*message).cmsg_len = libc::CMSG_LEN(size_of::<u16>() as u32) as _;
        std::ptr::write_unaligned(libc::CMSG_DATA(message).cast::<u16>(), segment);
        libc::sendmsg(socket.as_raw_fd(), &header, 0)
    };
    if sent < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
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

fn sockaddr(address: SocketAddrV4) -> libc::sockaddr_in {
    libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: address.port().to_be(),
        sin_addr: in_addr(*address.ip()),
        sin_zero: [0; 8],
    }
}

fn bind(fd: RawFd, address: SocketAddrV4) -> io::Result<()> {
    let raw = sockaddr(address);
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
