//! The root reads (and hashes) the next chunk on a thread of its own while
//! the current one is being broadcast: two buffers go round between them.

use crate::record::HASH_BYTES;
use std::fs::File;
use std::io::{self, Read};
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::thread::JoinHandle;

pub struct ReadAhead {
    full: Receiver<io::Result<Vec<u8>>>,
    empty: SyncSender<Vec<u8>>,
    /// Returns the hash of everything it read.
    thread: JoinHandle<[u8; HASH_BYTES]>,
}

impl ReadAhead {
    /// Reads `size` bytes of `file` in chunks of `chunk` bytes.
    pub fn start(mut file: File, size: u64, chunk: usize) -> io::Result<ReadAhead> {
        let (full_tx, full) = sync_channel::<io::Result<Vec<u8>>>(1);
        let (empty, empty_rx) = sync_channel::<Vec<u8>>(2);
        let first = size.min(chunk as u64) as usize;
        for _ in 0..2 {
            let _ = empty.send(vec![0u8; first]);
        }
        let thread = std::thread::Builder::new().name("fbcast-read".into()).spawn(move || {
            let mut hasher = blake3::Hasher::new();
            let mut offset = 0u64;
            while offset < size {
                let Ok(mut buf) = empty_rx.recv() else { break };
                let len = (size - offset).min(chunk as u64) as usize;
                buf.resize(len, 0);
                match file.read_exact(&mut buf) {
                    Ok(()) => {
                        hasher.update(&buf);
                        if full_tx.send(Ok(buf)).is_err() {
                            break;
                        }
                    }
                    Err(e) => {
                        let _ = full_tx.send(Err(e));
                        break;
                    }
                }
                offset += len as u64;
            }
            *hasher.finalize().as_bytes()
        })?;
        Ok(ReadAhead { full, empty, thread })
    }

    /// The next chunk, in order.
    pub fn next_chunk(&self) -> io::Result<Vec<u8>> {
        self.full.recv().unwrap_or_else(|_| Err(io::Error::other("the reading thread stopped")))
    }

    /// Hands a sent chunk's buffer back for reading.
    pub fn recycle(&self, buf: Vec<u8>) {
        let _ = self.empty.try_send(buf);
    }

    /// The hash of what was read (meaningful when every chunk was read).
    pub fn finish(self) -> Option<[u8; HASH_BYTES]> {
        drop(self.full);
        drop(self.empty);
        self.thread.join().ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_arrive_in_order_and_the_hash_covers_them() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let data: Vec<u8> = (0..100_003u32).map(|i| (i % 253) as u8).collect();
        std::fs::write(&path, &data).unwrap();
        let reader = ReadAhead::start(File::open(&path).unwrap(), data.len() as u64, 4096).unwrap();
        let mut back = Vec::new();
        while back.len() < data.len() {
            let chunk = reader.next_chunk().unwrap();
            assert!(chunk.len() == 4096 || back.len() + chunk.len() == data.len());
            back.extend_from_slice(&chunk);
            reader.recycle(chunk);
        }
        assert_eq!(back, data);
        assert_eq!(reader.finish(), Some(*blake3::hash(&data).as_bytes()));
    }

    #[test]
    fn a_short_file_is_a_read_error_and_stopping_early_ends_the_thread() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, vec![1u8; 5000]).unwrap();
        let reader = ReadAhead::start(File::open(&path).unwrap(), 9000, 4096).unwrap();
        assert_eq!(reader.next_chunk().unwrap().len(), 4096);
        assert_eq!(reader.next_chunk().unwrap_err().kind(), io::ErrorKind::UnexpectedEof);
        assert!(reader.next_chunk().is_err(), "nothing after the error");
        reader.finish();
        // a reader abandoned mid-file (the transfer failed) does not block
        std::fs::write(&path, vec![2u8; 1 << 20]).unwrap();
        let reader = ReadAhead::start(File::open(&path).unwrap(), 1 << 20, 4096).unwrap();
        reader.next_chunk().unwrap();
        let (done, finished) = std::sync::mpsc::channel();
        std::thread::spawn(move || done.send(reader.finish()).unwrap());
        let hash = finished.recv_timeout(std::time::Duration::from_secs(30)).expect("finish() did not return within 30 s");
        assert!(hash.is_some(), "the reading thread ended normally");
    }
}
