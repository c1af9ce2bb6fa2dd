//! What one rank mapped, registered and asked the kernel for to run one
//! communicator, by purpose (issue 14: "report per-rank memory at setup").
//! Every figure is read from what the transport set up (the segment's
//! layout, the registered buffers' lengths, the queue pairs it holds, the
//! socket buffers the kernel granted), not derived again from parameters.

use std::fmt;

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MemoryFootprint {
    /// The node's shared segment this rank maps, whole: its header, every
    /// node-local rank's window and one ring per ordered pair of them.
    pub shm_segment_bytes: usize,
    pub shm_header_bytes: usize,
    /// Every node-local rank's window, each rounded up to whole pages.
    pub shm_windows_bytes: usize,
    /// Node-local ranks in the segment.
    pub shm_ranks: usize,
    /// One reliable ring per ordered pair of node-local ranks (reserved in
    /// /dev/shm at creation, like the rest of the segment).
    pub shm_rings_bytes: usize,
    pub verbs_queue_pairs: usize,
    /// The window registered with the adapter: an anonymous mapping of its
    /// own on verbs alone, counted in the total; on the hybrid it lies in
    /// the segment (`verbs_window_in_segment`), counted there.
    pub verbs_window_bytes: usize,
    pub verbs_window_in_segment: bool,
    /// Registered staging for outgoing puts and reliable messages.
    pub verbs_staging_bytes: usize,
    /// Registered receive buffers of the reliable channel (a ring of slots
    /// per peer).
    pub verbs_receive_buffer_bytes: usize,
    /// Registered bytes for the UD multicast group's sends and receives,
    /// and the completion sink every peer may write.
    pub verbs_multicast_bytes: usize,
    pub verbs_sink_bytes: usize,
    /// The udp transport's window (process memory).
    pub udp_window_bytes: usize,
    /// Usable receive buffer the kernel granted each of the two sockets
    /// (the smaller of the two), counted twice: kernel memory the
    /// communicator may hold in bursts, not mapped into the process.
    pub udp_socket_receive_buffer_bytes: usize,
}

impl MemoryFootprint {
    /// Bytes mapped into this process, registered memory included, each
    /// byte once.
    pub fn mapped_bytes(&self) -> usize {
        let own_window = if self.verbs_window_in_segment { 0 } else { self.verbs_window_bytes };
        self.shm_segment_bytes
            + own_window
            + self.verbs_staging_bytes
            + self.verbs_receive_buffer_bytes
            + self.verbs_multicast_bytes
            + self.verbs_sink_bytes
            + self.udp_window_bytes
    }

    /// Bytes registered with the adapter (pinned).
    pub fn registered_bytes(&self) -> usize {
        self.verbs_window_bytes + self.verbs_staging_bytes + self.verbs_receive_buffer_bytes + self.verbs_multicast_bytes + self.verbs_sink_bytes
    }

    /// Everything: mapped bytes and the kernel's socket buffers.
    pub fn total_bytes(&self) -> usize {
        self.mapped_bytes() + 2 * self.udp_socket_receive_buffer_bytes
    }

    /// This footprint with the shared-memory figures of `shm`.
    pub fn with_segment_of(self, shm: &MemoryFootprint) -> Self {
        MemoryFootprint {
            shm_segment_bytes: shm.shm_segment_bytes,
            shm_header_bytes: shm.shm_header_bytes,
            shm_windows_bytes: shm.shm_windows_bytes,
            shm_ranks: shm.shm_ranks,
            shm_rings_bytes: shm.shm_rings_bytes,
            ..self
        }
    }

    /// The segment's parts add up to it (the rings' end is page-rounded).
    pub fn segment_parts_fit(&self) -> bool {
        let parts = self.shm_header_bytes + self.shm_windows_bytes + self.shm_rings_bytes;
        parts <= self.shm_segment_bytes && self.shm_segment_bytes - parts < 4096
    }
}

impl fmt::Display for MemoryFootprint {
    /// One line: the total, then each part that is there.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} bytes in all", self.total_bytes())?;
        if self.shm_segment_bytes > 0 {
            write!(
                f,
                "; shared segment {} bytes mapped (header {}, {} window(s) {}, {} ring(s) {})",
                self.shm_segment_bytes,
                self.shm_header_bytes,
                self.shm_ranks,
                self.shm_windows_bytes,
                self.shm_ranks * self.shm_ranks,
                self.shm_rings_bytes
            )?;
        }
        if self.verbs_queue_pairs > 0 || self.registered_bytes() > 0 {
            write!(
                f,
                "; verbs {} queue pair(s), {} bytes registered (window {}{}, staging {}, receive buffers {}, multicast {}, sink {})",
                self.verbs_queue_pairs,
                self.registered_bytes(),
                self.verbs_window_bytes,
                if self.verbs_window_in_segment { " in the segment" } else { "" },
                self.verbs_staging_bytes,
                self.verbs_receive_buffer_bytes,
                self.verbs_multicast_bytes,
                self.verbs_sink_bytes
            )?;
        }
        if self.udp_window_bytes > 0 || self.udp_socket_receive_buffer_bytes > 0 {
            write!(
                f,
                "; udp window {} bytes, socket receive buffers 2 x {} bytes (kernel)",
                self.udp_window_bytes, self.udp_socket_receive_buffer_bytes
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_window_inside_the_segment_is_counted_once() {
        let hybrid = MemoryFootprint {
            shm_segment_bytes: 40960,
            verbs_window_bytes: 8192,
            verbs_window_in_segment: true,
            verbs_staging_bytes: 4096,
            verbs_queue_pairs: 3,
            ..MemoryFootprint::default()
        };
        assert_eq!((hybrid.mapped_bytes(), hybrid.registered_bytes()), (40960 + 4096, 8192 + 4096));
        let verbs = MemoryFootprint { verbs_window_in_segment: false, shm_segment_bytes: 0, ..hybrid.clone() };
        assert_eq!(verbs.mapped_bytes(), 8192 + 4096);
        let udp = MemoryFootprint { udp_window_bytes: 4096, udp_socket_receive_buffer_bytes: 1000, ..MemoryFootprint::default() };
        assert_eq!(udp.total_bytes(), 4096 + 2000);
        assert!(udp.to_string().starts_with("6096 bytes in all; udp window 4096 bytes"), "{udp}");
    }
}
