//! Taking a cache line for writing ahead of the store: a put into a peer's
//! shared window is a store to a line the peer's core holds (it read its
//! slot there), and x86 commits stores in order, so the rank's next few
//! dozen stores (a collective's bookkeeping, the next non-blocking post)
//! wait behind that line's transfer. Asking for the line early, while the
//! rank does other work, hides the transfer (docs/design.md, "Write
//! hints").
//!
//! Invariants: a hint never changes memory or program behaviour (the
//! instruction cannot fault, whatever the address); it is issued only on a
//! CPU that says it has the instruction, checked once per process.

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::sync::atomic::{AtomicU8, Ordering};

    const UNKNOWN: u8 = 0;
    const PRESENT: u8 = 1;
    const ABSENT: u8 = 2;

    static PREFETCHW: AtomicU8 = AtomicU8::new(UNKNOWN);

    /// Whether the CPU has PREFETCHW (CPUID 8000_0001h, ECX bit 8).
    fn has_prefetchw() -> bool {
        match PREFETCHW.load(Ordering::Relaxed) {
            PRESENT => true,
            ABSENT => false,
            _ => {
                let present = (std::arch::x86_64::__cpuid(0x8000_0000).eax >= 0x8000_0001)
                    && std::arch::x86_64::__cpuid(0x8000_0001).ecx & (1 << 8) != 0;
                PREFETCHW.store(if present { PRESENT } else { ABSENT }, Ordering::Relaxed);
                present
            }
        }
    }

    #[inline]
    pub(super) fn take_line_for_writing(address: *const u8) {
        if has_prefetchw() {
            // SAFETY: PREFETCHW only moves a cache line: it reads and
            // writes no memory, cannot fault (an unmapped address is
            // ignored) and touches no register or flag; the CPU has it.
            unsafe { std::arch::asm!("prefetchw [{0}]", in(reg) address, options(nostack, readonly, preserves_flags)) };
        }
    }
}

/// Hints that this process will soon store into the line holding
/// `address`.
#[inline]
pub(crate) fn take_line_for_writing(address: *const u8) {
    #[cfg(target_arch = "x86_64")]
    x86::take_line_for_writing(address);
    #[cfg(not(target_arch = "x86_64"))]
    let _ = address;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hint_changes_no_byte_and_any_address_is_harmless() {
        let line = [0x5Au8; 128];
        take_line_for_writing(line.as_ptr());
        take_line_for_writing(line[64..].as_ptr());
        // Never mapped in a user process: a hint there must not fault.
        take_line_for_writing(std::ptr::null());
        take_line_for_writing(usize::MAX as *const u8);
        assert!(line.iter().all(|&byte| byte == 0x5A));
    }
}
