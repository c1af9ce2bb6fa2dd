//! The permission bits fbcast gives what it writes: the root's, less
//! setuid and setgid (and sticky on files), less this process's umask, as
//! `cp` without `-p` gives a file it creates.
//!
//! Unlike `cp`, which rewrites an existing file in place and so keeps its
//! mode, owner and inode, fbcast renames a new file over it: a replaced
//! file gets these same bits (its old mode is not kept; never wider than
//! the source's less the umask), is owned by the writing user, and other
//! hard links to the old file keep the old contents. Existing directories
//! are left as they are.

use rustix::fs::Mode;

/// Bits of the root's mode a received file may keep.
pub const FILE_MODE_KEPT: u32 = 0o777;
/// Bits of the root's mode a created directory may keep (sticky included).
pub const DIR_MODE_KEPT: u32 = 0o1777;

pub fn file_mode(announced: u32, umask: u32) -> u32 {
    announced & FILE_MODE_KEPT & !(umask & 0o777)
}

pub fn dir_mode(announced: u32, umask: u32) -> u32 {
    announced & DIR_MODE_KEPT & !(umask & 0o777)
}

/// This process's umask, read without changing it where the kernel shows
/// it (/proc/self/status, Linux 4.7 and later): setting it to read it back
/// races with threads creating files meanwhile, so that is only the
/// fallback (set to 077 for the instant, the safer side).
pub fn current_umask() -> u32 {
    if let Some(mask) = umask_from_proc() {
        return mask;
    }
    let old = rustix::process::umask(Mode::from_raw_mode(0o077));
    rustix::process::umask(old);
    old.as_raw_mode() & 0o777
}

fn umask_from_proc() -> Option<u32> {
    parse_umask(&std::fs::read_to_string("/proc/self/status").ok()?)
}

fn parse_umask(status: &str) -> Option<u32> {
    let value = status.lines().find_map(|line| line.strip_prefix("Umask:"))?;
    u32::from_str_radix(value.trim(), 8).ok().filter(|m| *m <= 0o777)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn umask_077_gives_0600_files_and_0700_dirs() {
        assert_eq!(file_mode(0o666, 0o077), 0o600);
        assert_eq!(dir_mode(0o777, 0o077), 0o700);
        assert_eq!(file_mode(0o6755, 0o022), 0o755, "setuid and setgid dropped");
        assert_eq!(dir_mode(0o3777, 0o022), 0o1755, "sticky kept on directories, setgid dropped");
        assert_eq!(file_mode(0o644, 0), 0o644);
    }

    #[test]
    fn umask_is_read_from_status_lines() {
        assert_eq!(parse_umask("Name:\tx\nUmask:\t0027\nState:\tR\n"), Some(0o027));
        assert_eq!(parse_umask("Name:\tx\n"), None);
        assert_eq!(parse_umask("Umask:\t9\n"), None);
        // the live value matches the one the umask call reports
        let live = umask_from_proc().expect("Linux 4.7 or later");
        assert_eq!(current_umask(), live);
        let reported = rustix::process::umask(Mode::from_raw_mode(live)).as_raw_mode();
        assert_eq!(live, reported);
    }
}
