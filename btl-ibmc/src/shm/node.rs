//! What makes two processes "on the same node" for shared memory: the same
//! hostname and the same kernel boot. The boot id separates distinct hosts
//! that happen to share a hostname (cloned images, "localhost"); containers
//! on one host with separate /dev/shm still agree here and are caught when
//! attaching fails.

pub(crate) const HOSTNAME_BYTES: usize = 64;
pub(crate) const BOOT_ID_BYTES: usize = 40;
const BOOT_ID_PATH: &str = "/proc/sys/kernel/random/boot_id";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct NodeIdentity {
    pub(crate) hostname: [u8; HOSTNAME_BYTES],
    pub(crate) boot_id: [u8; BOOT_ID_BYTES],
}

impl NodeIdentity {
    pub(crate) fn current() -> Self {
        NodeIdentity { hostname: hostname(), boot_id: boot_id() }
    }

    /// The hostname for messages.
    pub(crate) fn host(&self) -> String {
        text_until_nul(&self.hostname)
    }
}

/// `bytes` up to the first NUL, as text.
pub(crate) fn text_until_nul(bytes: &[u8]) -> String {
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    String::from_utf8_lossy(&bytes[..end]).into_owned()
}

fn hostname() -> [u8; HOSTNAME_BYTES] {
    let mut buffer = [0u8; 256];
    // SAFETY: the buffer is writable for its full length, which is passed.
    let result = unsafe { libc::gethostname(buffer.as_mut_ptr().cast(), buffer.len()) };
    let mut padded = [0u8; HOSTNAME_BYTES];
    if result == 0 {
        // Longer names are truncated; the boot id still tells hosts apart.
        let len = buffer.iter().position(|&b| b == 0).unwrap_or(buffer.len()).min(HOSTNAME_BYTES);
        padded[..len].copy_from_slice(&buffer[..len]);
    }
    padded
}

fn boot_id() -> [u8; BOOT_ID_BYTES] {
    let mut padded = [0u8; BOOT_ID_BYTES];
    if let Ok(text) = std::fs::read_to_string(BOOT_ID_PATH) {
        let trimmed = text.trim().as_bytes();
        let len = trimmed.len().min(BOOT_ID_BYTES);
        padded[..len].copy_from_slice(&trimmed[..len]);
    }
    padded
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identity_is_stable_and_names_this_host() {
        let here = NodeIdentity::current();
        assert_eq!(here, NodeIdentity::current());
        assert!(!here.host().is_empty());
        assert!(!here.host().contains('\0'));
    }
}
