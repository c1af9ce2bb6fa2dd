//! A transport view that also serves the communicator's bcast while another
//! collective on it waits. Over datagram multicast a root returns before
//! its pieces are acknowledged; if it then waits in, say, an allreduce for a
//! rank that is still missing a lost piece, only the root's retransmission
//! can unblock that rank. The progress callback cannot do it (the module is
//! busy with the allreduce), so the allreduce's own waits must: their
//! `progress` calls reach the bcast through this view. Public so that the
//! fabric tests run the collectives as the glue does.

use std::cell::RefCell;

use btl_ibmc::{MulticastKind, Transport, TransportError};

use crate::bcast::Bcast;

pub struct WithBcastProgress<'a, T: Transport + ?Sized> {
    inner: &'a T,
    bcast: RefCell<&'a mut Bcast>,
}

impl<'a, T: Transport + ?Sized> WithBcastProgress<'a, T> {
    pub fn new(inner: &'a T, bcast: &'a mut Bcast) -> Self {
        WithBcastProgress { inner, bcast: RefCell::new(bcast) }
    }
}

impl<T: Transport + ?Sized> Transport for WithBcastProgress<'_, T> {
    fn name(&self) -> &'static str {
        self.inner.name()
    }
    fn rank(&self) -> usize {
        self.inner.rank()
    }
    fn size(&self) -> usize {
        self.inner.size()
    }
    fn window_len(&self) -> usize {
        self.inner.window_len()
    }
    fn put(&self, peer: usize, offset: usize, data: &[u8], flag_offset: usize, flag: u64) -> Result<(), TransportError> {
        self.inner.put(peer, offset, data, flag_offset, flag)
    }
    fn put_flag(&self, peer: usize, flag_offset: usize, value: u64) -> Result<(), TransportError> {
        self.inner.put_flag(peer, flag_offset, value)
    }
    fn local_flag(&self, flag_offset: usize) -> u64 {
        self.inner.local_flag(flag_offset)
    }
    fn set_local_flag(&self, flag_offset: usize, value: u64) {
        self.inner.set_local_flag(flag_offset, value)
    }
    fn read_local(&self, offset: usize, out: &mut [u8]) {
        self.inner.read_local(offset, out)
    }
    fn multicast_kind(&self) -> MulticastKind {
        self.inner.multicast_kind()
    }
    fn max_datagram(&self) -> usize {
        self.inner.max_datagram()
    }
    fn multicast(&self, datagram: &[u8]) -> Result<(), TransportError> {
        self.inner.multicast(datagram)
    }
    fn poll_multicast(&self, out: &mut Vec<u8>) -> Option<usize> {
        self.inner.poll_multicast(out)
    }
    fn multicast_nonce(&self) -> u64 {
        self.inner.multicast_nonce()
    }
    fn send_reliable(&self, peer: usize, message: &[u8]) -> Result<(), TransportError> {
        self.inner.send_reliable(peer, message)
    }
    fn poll_reliable(&self, out: &mut Vec<u8>) -> Option<usize> {
        self.inner.poll_reliable(out)
    }
    fn progress(&self) {
        self.inner.progress();
        // Not re-entrant: the bcast's own progress drives `inner` directly.
        if let Ok(mut bcast) = self.bcast.try_borrow_mut()
            && bcast.needs_side_progress(self.inner)
            && let Err(why) = bcast.progress(self.inner)
        {
            tracing::warn!("bcast progress during another collective failed: {why}");
        }
    }
    fn health(&self) -> Result<(), TransportError> {
        self.inner.health()
    }
    fn read_peer(&self, peer: usize, offset: usize, out: &mut [u8]) -> Result<(), TransportError> {
        self.inner.read_peer(peer, offset, out)
    }
    fn peer_flag(&self, peer: usize, flag_offset: usize) -> Result<u64, TransportError> {
        self.inner.peer_flag(peer, flag_offset)
    }
}
