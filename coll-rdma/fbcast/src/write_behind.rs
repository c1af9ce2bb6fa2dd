//! A receiver hashes and writes each chunk on a thread of its own while the
//! next one is being broadcast, as the root reads ahead (`read_ahead`): a
//! rank that hashed and wrote 4 MiB between two MPI_Bcast calls was away
//! from MPI for that long, and a transport whose receivers acknowledge
//! only from inside MPI (coll rdma over udp) stalled the root's window and
//! timed out waiting for it. Two buffers go round between the two threads.

use crate::record::HASH_BYTES;
use std::fs::File;
use std::io::{self, Write};
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::thread::JoinHandle;

const BUFFERS: usize = 2;

pub struct WriteBehind {
    full: SyncSender<Vec<u8>>,
    empty: Receiver<Vec<u8>>,
    /// The hash of every chunk submitted, and the first write error.
    thread: JoinHandle<([u8; HASH_BYTES], io::Result<()>)>,
}

impl WriteBehind {
    /// Writes the chunks submitted to `file`, in order, from its current
    /// offset; `chunk` is the usual buffer size.
    pub fn start(mut file: File, chunk: usize) -> io::Result<WriteBehind> {
        let (full, full_rx) = sync_channel::<Vec<u8>>(BUFFERS);
        let (empty_tx, empty) = sync_channel::<Vec<u8>>(BUFFERS);
        for _ in 0..BUFFERS {
            let _ = empty_tx.send(vec![0u8; chunk]);
        }
        let thread = std::thread::Builder::new().name("fbcast-write".into()).spawn(move || {
            let mut hasher = blake3::Hasher::new();
            let mut written = Ok(());
            for buf in full_rx {
                hasher.update(&buf);
                // after an error the rest is only hashed: the transfer goes on, and fails as a whole
                if written.is_ok() {
                    written = file.write_all(&buf);
                }
                let _ = empty_tx.try_send(buf);
            }
            (*hasher.finalize().as_bytes(), written)
        })?;
        Ok(WriteBehind { full, empty, thread })
    }

    /// A buffer of `len` bytes to receive the next chunk into; waits while
    /// both are still being written.
    pub fn buffer(&self, len: usize) -> Vec<u8> {
        // a writer that stopped reports why at finish; the chunk still needs room
        let mut buf = self.empty.recv().unwrap_or_default();
        buf.resize(len, 0);
        buf
    }

    /// Hands a received chunk over for hashing and writing.
    pub fn submit(&self, buf: Vec<u8>) {
        let _ = self.full.send(buf);
    }

    /// Waits for every chunk submitted to be written: their hash, and the
    /// first write error.
    pub fn finish(self) -> ([u8; HASH_BYTES], io::Result<()>) {
        drop(self.full);
        self.thread.join().unwrap_or_else(|_| ([0; HASH_BYTES], Err(io::Error::other("the writing thread stopped"))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_are_written_in_order_and_the_hash_covers_them() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let data: Vec<u8> = (0..100_003u32).map(|i| (i % 251) as u8).collect();
        let writer = WriteBehind::start(File::create(&path).unwrap(), 4096).unwrap();
        for piece in data.chunks(4096) {
            let mut buf = writer.buffer(piece.len());
            assert_eq!(buf.len(), piece.len());
            buf.copy_from_slice(piece);
            writer.submit(buf);
        }
        let (hash, written) = writer.finish();
        written.unwrap();
        assert_eq!(hash, *blake3::hash(&data).as_bytes());
        assert_eq!(std::fs::read(&path).unwrap(), data);
    }

    #[test]
    fn a_write_error_is_reported_at_finish_and_every_chunk_is_still_taken() {
        // /dev/full fails every write with ENOSPC, as a full disk does
        let Ok(full) = std::fs::OpenOptions::new().write(true).open("/dev/full") else {
            eprintln!("SKIPPED: no /dev/full here");
            return;
        };
        let writer = WriteBehind::start(full, 4096).unwrap();
        let data = vec![7u8; 5 * 4096];
        for piece in data.chunks(4096) {
            let mut buf = writer.buffer(piece.len());
            buf.copy_from_slice(piece);
            writer.submit(buf);
        }
        let (hash, written) = writer.finish();
        assert_eq!(written.unwrap_err().raw_os_error(), Some(libc::ENOSPC));
        assert_eq!(hash, *blake3::hash(&data).as_bytes(), "the chunks after the error were still taken in");
    }
}
