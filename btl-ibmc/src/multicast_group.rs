//! What every datagram backend (verbs UD, udp) derives the same way: a
//! communicator's 32-bit multicast id, the IPv4 group it picks inside a
//! configured range, and the random nonce every datagram carries.

use std::net::Ipv4Addr;

/// A 32-bit multicast id from the bytes that single a communicator out
/// (FNV-1a, folded): the glue hashes the job and context id, the setup
/// mixes in something only this communicator's rank 0 has (where its
/// window is registered, the port its socket is bound to).
pub fn multicast_id_of<'a>(parts: impl IntoIterator<Item = &'a [u8]>) -> u32 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in parts.into_iter().flatten() {
        hash = (hash ^ u64::from(*byte)).wrapping_mul(0x0100_0000_01b3);
    }
    (hash ^ (hash >> 32)) as u32
}

/// The group of multicast id `id` in `base/prefix_len`: the base's prefix
/// and the id's low `32 - prefix_len` bits.
pub fn group_in_range(base: Ipv4Addr, prefix_len: u8, id: u32) -> Ipv4Addr {
    let prefix = u32::from(prefix_len.min(32));
    let host_mask = if prefix == 0 { u32::MAX } else { u32::MAX.checked_shr(prefix).unwrap_or(0) };
    Ipv4Addr::from((u32::from(base) & !host_mask) | (id & host_mask))
}

/// A communicator's multicast nonce: 64 bits from the kernel's random
/// source, so a sender that never saw the communicator's traffic cannot
/// guess it. It is no secret: frames carry it in clear, so anyone who can
/// read the link can copy it (docs/udp-transport.md says what that means). Rank 0 must
/// still take part in the setup exchange if that fails, so it then falls
/// back to a value that at least differs between communicators and runs.
pub(crate) fn random_nonce() -> u64 {
    let mut bytes = [0u8; 8];
    // SAFETY: `bytes` is writable for its full length.
    let filled = unsafe { libc::getrandom(bytes.as_mut_ptr().cast(), bytes.len(), 0) };
    if usize::try_from(filled) == Ok(bytes.len()) {
        return u64::from_ne_bytes(bytes);
    }
    tracing::warn!("getrandom failed ({}); the multicast nonce is guessable", std::io::Error::last_os_error());
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |elapsed| elapsed.as_nanos() as u64);
    crate::rng::splitmix64(nanos ^ (u64::from(std::process::id()) << 32))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_group_keeps_the_base_prefix_and_takes_the_id_low_bits() {
        assert_eq!(group_in_range(Ipv4Addr::new(239, 77, 0, 0), 16, 0x0001_0203), Ipv4Addr::new(239, 77, 2, 3));
        assert_eq!(group_in_range(Ipv4Addr::new(239, 0, 0, 0), 8, 0x0001_0203), Ipv4Addr::new(239, 1, 2, 3));
        assert_eq!(group_in_range(Ipv4Addr::new(239, 0, 0, 0), 32, 0x0001_0203), Ipv4Addr::new(239, 0, 0, 0));
    }

    #[test]
    fn ids_differ_with_any_part_and_nonces_with_every_draw() {
        let id = multicast_id_of([&b"job"[..], &[1, 0, 0, 0]]);
        assert_eq!(id, multicast_id_of([&b"job"[..], &[1, 0, 0, 0]]));
        assert_ne!(id, multicast_id_of([&b"job"[..], &[2, 0, 0, 0]]));
        assert_ne!(random_nonce(), random_nonce());
    }
}
