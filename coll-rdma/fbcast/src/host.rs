//! This machine's name, for the per-host summary and destination keys.

/// gethostname(2), or "unknown" when it fails.
pub fn name() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: buf is writable for its whole length; gethostname
    // NUL-terminates within it when the name fits.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr() as *mut libc::c_char, buf.len() - 1) };
    if rc != 0 {
        return "unknown".to_string();
    }
    let len = buf.iter().position(|b| *b == 0).unwrap_or(buf.len() - 1);
    String::from_utf8_lossy(&buf[..len]).into_owned()
}
