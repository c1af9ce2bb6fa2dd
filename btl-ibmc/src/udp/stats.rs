//! What one rank's udp endpoint has done and refused, as counters.

use std::sync::atomic::{AtomicU64, Ordering};

/// A snapshot of one endpoint's counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UdpStats {
    pub multicast_sent: u64,
    /// System calls that sent several multicast datagrams at once (UDP
    /// GSO), and receives that took several in at once (UDP GRO).
    pub segmented_sends: u64,
    pub coalesced_receives: u64,
    /// Multicast datagrams handed to `poll_multicast`'s callers' queue.
    pub multicast_received: u64,
    /// Reliable fragments sent for the first time.
    pub fragments_sent: u64,
    /// Records sent from inside a wait of this thread's own record (its
    /// idle hook reaching the transport again), sent right after it.
    pub records_deferred: u64,
    pub retransmissions: u64,
    /// Times a peer's retransmission timer ran out and resent a burst, and
    /// the longest timeout (backed off) that ran out before one, in
    /// microseconds (a gauge: the largest seen). Issue 36: which timer
    /// sets a lossy bcast's slow calls.
    pub timer_resends: u64,
    pub longest_timer_micros: u64,
    /// Round trips the reliable channel timed (ACKs whose newest fragment
    /// went once), which set its retransmission timeouts.
    pub rtt_samples: u64,
    pub acks_sent: u64,
    /// Reliable fragments that had arrived already, dropped.
    pub duplicates_dropped: u64,
    /// Datagrams whose source address and port are not those of the rank
    /// they name (from outside the job, or a rank posing as another), and
    /// datagrams too broken to name one from anywhere but a rank's socket:
    /// all that other jobs, runs or hosts can make this rank count.
    pub strangers_dropped: u64,
    /// Frames from a rank's address stamped with another communicator or nonce.
    pub wrong_job_dropped: u64,
    /// Frames from a rank's address whose tag does not verify under this
    /// communicator's key (forged, altered on the way, or sealed by
    /// another communicator with the same id): dropped before anything
    /// in them was believed.
    pub unauthenticated_dropped: u64,
    /// Authentic frames whose counter was taken in before (a replay, or
    /// an injected duplicate) or lies too far behind the sender's newest.
    pub replays_dropped: u64,
    /// Datagrams from a rank's address that are no frame of this backend
    /// or that it would never send (a fragment beyond the window included).
    pub malformed_dropped: u64,
    /// Puts a peer aimed outside this rank's window (a peer's bug), dropped.
    pub bad_puts_dropped: u64,
    /// Multicast datagrams dropped because nobody polled the queue.
    pub multicast_overflows: u64,
    pub injected_drops: u64,
    pub injected_duplicates: u64,
    pub injected_reorders: u64,
    /// Times a wait slept on the sockets, and of those, the sleeps that
    /// something arrived to end (the rest ran out their time).
    pub sleeps: u64,
    pub sleeps_woken: u64,
}

impl UdpStats {
    /// Every frame refused because of where it came from or what it held.
    pub fn refused(&self) -> u64 {
        self.strangers_dropped + self.refused_from_ranks() + self.replays_dropped
    }

    /// Refusals of what came from this communicator's own sockets' addresses:
    /// a bug, a stale communicator, or someone forging a rank's address;
    /// never another job's or run's traffic. Replays aside: an injected
    /// duplicate is one.
    pub fn refused_from_ranks(&self) -> u64 {
        self.wrong_job_dropped + self.malformed_dropped + self.bad_puts_dropped + self.unauthenticated_dropped
    }
}

#[derive(Default)]
pub(crate) struct Counters {
    pub(crate) multicast_sent: AtomicU64,
    pub(crate) segmented_sends: AtomicU64,
    pub(crate) coalesced_receives: AtomicU64,
    pub(crate) multicast_received: AtomicU64,
    pub(crate) fragments_sent: AtomicU64,
    pub(crate) records_deferred: AtomicU64,
    pub(crate) retransmissions: AtomicU64,
    pub(crate) timer_resends: AtomicU64,
    pub(crate) longest_timer_micros: AtomicU64,
    pub(crate) rtt_samples: AtomicU64,
    pub(crate) acks_sent: AtomicU64,
    pub(crate) duplicates_dropped: AtomicU64,
    pub(crate) strangers_dropped: AtomicU64,
    pub(crate) wrong_job_dropped: AtomicU64,
    pub(crate) unauthenticated_dropped: AtomicU64,
    pub(crate) replays_dropped: AtomicU64,
    pub(crate) malformed_dropped: AtomicU64,
    pub(crate) bad_puts_dropped: AtomicU64,
    pub(crate) multicast_overflows: AtomicU64,
    pub(crate) injected_drops: AtomicU64,
    pub(crate) injected_duplicates: AtomicU64,
    pub(crate) injected_reorders: AtomicU64,
    pub(crate) sleeps: AtomicU64,
    pub(crate) sleeps_woken: AtomicU64,
}

impl Counters {
    pub(crate) fn bump(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn snapshot(&self) -> UdpStats {
        let get = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        UdpStats {
            multicast_sent: get(&self.multicast_sent),
            segmented_sends: get(&self.segmented_sends),
            coalesced_receives: get(&self.coalesced_receives),
            multicast_received: get(&self.multicast_received),
            fragments_sent: get(&self.fragments_sent),
            records_deferred: get(&self.records_deferred),
            retransmissions: get(&self.retransmissions),
            timer_resends: get(&self.timer_resends),
            longest_timer_micros: get(&self.longest_timer_micros),
            rtt_samples: get(&self.rtt_samples),
            acks_sent: get(&self.acks_sent),
            duplicates_dropped: get(&self.duplicates_dropped),
            strangers_dropped: get(&self.strangers_dropped),
            wrong_job_dropped: get(&self.wrong_job_dropped),
            unauthenticated_dropped: get(&self.unauthenticated_dropped),
            replays_dropped: get(&self.replays_dropped),
            malformed_dropped: get(&self.malformed_dropped),
            bad_puts_dropped: get(&self.bad_puts_dropped),
            multicast_overflows: get(&self.multicast_overflows),
            injected_drops: get(&self.injected_drops),
            injected_duplicates: get(&self.injected_duplicates),
            injected_reorders: get(&self.injected_reorders),
            sleeps: get(&self.sleeps),
            sleeps_woken: get(&self.sleeps_woken),
        }
    }
}
