//! What coll rdma keeps per communicator: the saved fallbacks, the lazily
//! established transport, the collectives' precomputed schedules and the
//! counts reported at verbose level when the communicator is freed.

use std::ffi::c_int;

use btl_ibmc::shm::{self, ShmTransport};
use btl_ibmc::{Transport, WaitPolicy};
use ompi_sys as sys;
use tuning::choose_barrier_radix;

use super::params::{Settings, TransportChoice};
use super::saved::SavedCollectives;
use crate::barrier::DisseminationBarrier;
use crate::layout::WindowLayout;

enum Link {
    /// Set up on the first collective: Open MPI's collectives cannot be
    /// used while modules are being enabled.
    NotYet,
    Ready(ShmTransport),
    /// Every rank reached the same verdict, so all of them fall back.
    Unavailable,
}

#[derive(Default)]
struct Served {
    barriers: u64,
    barrier_fallbacks: u64,
}

pub struct CommState {
    cid: u32,
    rank: usize,
    size: usize,
    saved: SavedCollectives,
    transport_choice: TransportChoice,
    layout: WindowLayout,
    barrier: DisseminationBarrier,
    link: Link,
    served: Served,
}

/// How a rank waits: spin only while every rank of the node has a core.
fn wait_policy(settings: &Settings, local_ranks: usize) -> WaitPolicy {
    let cores = online_cores();
    let mut policy = WaitPolicy::for_occupancy(local_ranks, cores, settings.stall_warning);
    if let Some(polls) = settings.spin_polls {
        policy.spin_polls = polls;
    }
    policy
}

fn online_cores() -> usize {
    // SAFETY: sysconf has no preconditions. Online cores, not this
    // process's affinity mask: a rank bound to one core still has that core
    // to itself when the node is not oversubscribed.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    if n > 0 { n as usize } else { 1 }
}

impl CommState {
    /// The radix to use and a sentence saying why.
    pub fn barrier_radix(settings: &Settings, size: usize) -> (usize, String) {
        match settings.barrier_radix {
            Some(radix) => (radix, "set by coll_rdma_barrier_radix".to_string()),
            None => {
                let choice = choose_barrier_radix(size, &settings.model);
                (choice.radix, format!("automatic: {}", choice.reason))
            }
        }
    }

    pub fn new(cid: u32, rank: usize, size: usize, saved: SavedCollectives, settings: &Settings) -> Self {
        let (radix, _) = Self::barrier_radix(settings, size);
        let layout = WindowLayout::new(size, radix);
        let policy = wait_policy(settings, size);
        CommState {
            cid,
            rank,
            size,
            saved,
            transport_choice: settings.transport,
            layout,
            barrier: DisseminationBarrier::new(rank, size, radix, layout.barrier_offset, policy).with_context(format!("comm {cid}")),
            link: Link::NotYet,
            served: Served::default(),
        }
    }

    /// Establishes the transport collectively; every rank of the
    /// communicator calls this in the same collective call.
    fn connect(&mut self, comm: *mut sys::ompi_communicator_t) {
        // Only shared memory exists so far: auto and shm both mean it.
        let (TransportChoice::Auto | TransportChoice::Shm) = self.transport_choice;
        let exchange = self.saved.exchange(comm);
        self.link = match shm::establish(&exchange, self.rank, self.size, self.layout.window_len) {
            Ok(transport) => {
                tracing::info!(
                    "comm {} rank {}: transport shm ready ({} node-local ranks, window {} bytes, barrier radix {} in {} round(s))",
                    self.cid,
                    self.rank,
                    transport.size(),
                    self.layout.window_len,
                    self.barrier.radix(),
                    self.barrier.rounds()
                );
                Link::Ready(transport)
            }
            Err(why) => {
                tracing::info!(
                    "comm {} rank {}: transport unavailable ({why}); barrier falls back to the module underneath",
                    self.cid,
                    self.rank
                );
                Link::Unavailable
            }
        };
    }

    pub fn barrier(&mut self, comm: *mut sys::ompi_communicator_t) -> c_int {
        if let Link::NotYet = self.link {
            self.connect(comm);
        }
        match &self.link {
            Link::Ready(transport) => match self.barrier.run(transport) {
                Ok(()) => {
                    self.served.barriers += 1;
                    sys::OMPI_SUCCESS as c_int
                }
                Err(why) => {
                    tracing::error!("comm {} rank {}: barrier failed: {why}", self.cid, self.rank);
                    sys::OMPI_ERROR as c_int
                }
            },
            Link::Unavailable | Link::NotYet => {
                self.served.barrier_fallbacks += 1;
                self.saved.barrier(comm)
            }
        }
    }
}

impl Drop for CommState {
    fn drop(&mut self) {
        let transport = match self.link {
            Link::Ready(ref t) => t.name(),
            Link::Unavailable => "no transport",
            Link::NotYet => "no transport (never used)",
        };
        tracing::info!(
            "comm {} rank {}: served {} barrier(s) over {transport}, {} handed to the fallback",
            self.cid,
            self.rank,
            self.served.barriers,
            self.served.barrier_fallbacks
        );
    }
}
