//! btl-ibmc: the transports under coll rdma and the substrate that later
//! carries reliable multicast. Collectives see only the capability traits of
//! [`transport`] ([`Windows`], [`Datagrams`], [`ReliableChannel`]...).

pub mod fabric;
#[cfg(feature = "verbs")]
pub mod hybrid;
pub mod idle;
pub mod padded;
pub mod rmcast;
pub mod selected;
pub mod shm;
pub mod transport;
#[cfg(feature = "verbs")]
pub mod verbs;
#[cfg(feature = "verbs")]
pub mod verbs_providers;
pub mod wait;

mod backoff;
mod poison;
mod rng;
mod window;
mod words;

#[cfg(test)]
mod test_support;

pub use padded::put_word_padded;
pub use fabric::{Fabric, FabricConfig, FabricEndpoint};
pub use selected::SelectedTransport;
pub use rmcast::{ReliableMulticast, RmcastConfig, RmcastStats};
pub use shm::{ShmTransport, establish};
#[cfg(feature = "verbs")]
pub use verbs::{VerbsConfig, VerbsSetupError, VerbsTransport};
#[cfg(feature = "verbs")]
pub use hybrid::HybridTransport;
pub use transport::{Datagrams, Endpoint, Exchange, MulticastKind, PeerReads, ReliableChannel, Transport, TransportError, Windows};
pub use wait::{DEFAULT_FAULT_TIMEOUT, NoSideProgress, SideProgress, WaitPolicy, Waits, set_process_wait_limits, stalled_waits, wait_at_least};
