//! btl-ibmc, coll rdma's transport crate. The name is the design's: a byte
//! transfer layer ("btl", Open MPI's term) for InfiniBand with multicast;
//! it is a library linked into the component, not an Open MPI btl
//! component. It holds the transports (shared memory, verbs, the hybrid
//! of both, and udp for plain Ethernet), the reliable multicast substrate (`rmcast`) and waiting.
//! Collectives see only the capability traits of [`transport`]
//! ([`Windows`], [`Datagrams`], [`ReliableChannel`]...). The in-process
//! test `fabric` is built only for tests (`cfg(test)`, or the cargo
//! feature `fabric`).

#[cfg(any(test, feature = "fabric"))]
pub mod fabric;
pub mod cross_memory;
pub mod footprint;
#[cfg(feature = "verbs")]
pub mod hybrid;
pub mod idle;
pub mod multicast_group;
pub mod padded;
pub mod rmcast;
pub mod seal;
pub mod selected;
pub mod shm;
pub mod subset;
pub mod thread_token;
pub mod transport;
pub mod udp;
#[cfg(feature = "verbs")]
pub mod verbs;
#[cfg(feature = "verbs")]
pub mod verbs_providers;
pub mod wait;

mod poison;
mod rng;
mod rtt;
mod window;
mod words;
mod write_hint;

#[cfg(test)]
mod test_support;

pub use padded::put_word_padded;
#[cfg(any(test, feature = "fabric"))]
pub use fabric::{Fabric, FabricConfig, FabricEndpoint};
pub use seal::{Cipher, Protection};
pub use selected::SelectedTransport;
pub use thread_token::thread_token;
pub use footprint::MemoryFootprint;
pub use rmcast::{CongestionConfig, CongestionMode, ReliableMulticast, RmcastConfig, RmcastStats};
pub use cross_memory::{CrossMemory, CrossMemoryRefusal};
pub use shm::{ShmTransport, establish};
pub use subset::{Reach, Subset, SubsetView};
pub use udp::{UdpConfig, UdpFaults, UdpSetupError, UdpStats, UdpTransport};
#[cfg(feature = "verbs")]
pub use verbs::{VerbsConfig, VerbsSetupError, VerbsTransport};
#[cfg(feature = "verbs")]
pub use hybrid::HybridTransport;
pub use transport::{Datagrams, Endpoint, Exchange, MulticastKind, PeerReads, ReliableChannel, Sleep, Transport, TransportError, Windows};
pub use wait::{
    NoSideProgress, KERNEL_DEFAULT_SPIN_POLLS, PROCESS_DEFAULT_SPIN_POLLS, SideProgress, WaitPolicy, Waits, set_process_wait_policy, stalled_waits,
    wait_at_least, wait_for_any_peer_at_least, wait_for_peer_at_least,
};
