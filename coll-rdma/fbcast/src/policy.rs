//! What a destination does with the file the root announced, given what it
//! already holds and the overwrite policy.

use crate::error::ErrorCode;

/// The overwrite policy (the root's applies on every rank).
#[repr(u8)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Policy {
    /// Write unless the destination already holds the same contents.
    #[default]
    IfDifferent = 0,
    /// Never replace an existing file; one with the same contents is kept
    /// and counts as success.
    Never = 1,
    /// Always write, even over identical contents.
    Always = 2,
}

impl Policy {
    pub fn from_u8(value: u8) -> Option<Policy> {
        match value {
            0 => Some(Policy::IfDifferent),
            1 => Some(Policy::Never),
            2 => Some(Policy::Always),
            _ => None,
        }
    }

    /// The command line's names (`changed` and `if-different` are the same).
    pub fn parse(name: &str) -> Option<Policy> {
        match name {
            "changed" | "if-different" => Some(Policy::IfDifferent),
            "never" => Some(Policy::Never),
            "always" => Some(Policy::Always),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Policy::IfDifferent => "changed",
            Policy::Never => "never",
            Policy::Always => "always",
        }
    }
}

/// What the destination path holds now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Existing {
    Absent,
    /// A regular file of the announced size and content hash.
    SameContent,
    /// A regular file with other contents (or one that could not be read).
    Different,
    /// Something that is not a regular file (a directory, a device...).
    NotAFile,
    /// A symbolic link, which is never followed: the file replaces the
    /// link itself (its target stays untouched), or policy never refuses.
    Symlink,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Write,
    KeepIdentical,
    Refuse(ErrorCode),
}

pub fn decide(policy: Policy, existing: Existing) -> Action {
    match (existing, policy) {
        (Existing::Absent, _) => Action::Write,
        (Existing::NotAFile, _) => Action::Refuse(ErrorCode::Dest),
        (Existing::Symlink, Policy::Never) => Action::Refuse(ErrorCode::Exists),
        (Existing::Symlink, _) => Action::Write,
        (Existing::SameContent, Policy::Always) => Action::Write,
        (Existing::SameContent, _) => Action::KeepIdentical,
        (Existing::Different, Policy::Never) => Action::Refuse(ErrorCode::Exists),
        (Existing::Different, _) => Action::Write,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_policy_and_state() {
        use Action::*;
        use Existing::*;
        let table = [
            (Policy::IfDifferent, Absent, Write),
            (Policy::IfDifferent, SameContent, KeepIdentical),
            (Policy::IfDifferent, Different, Write),
            (Policy::IfDifferent, NotAFile, Refuse(ErrorCode::Dest)),
            (Policy::Never, Absent, Write),
            (Policy::Never, SameContent, KeepIdentical),
            (Policy::Never, Different, Refuse(ErrorCode::Exists)),
            (Policy::Never, NotAFile, Refuse(ErrorCode::Dest)),
            (Policy::Always, Absent, Write),
            (Policy::Always, SameContent, Write),
            (Policy::Always, Different, Write),
            (Policy::Always, NotAFile, Refuse(ErrorCode::Dest)),
            (Policy::IfDifferent, Symlink, Write),
            (Policy::Never, Symlink, Refuse(ErrorCode::Exists)),
            (Policy::Always, Symlink, Write),
        ];
        for (policy, existing, want) in table {
            assert_eq!(decide(policy, existing), want, "{policy:?} {existing:?}");
        }
    }

    #[test]
    fn names_round_trip() {
        for p in [Policy::IfDifferent, Policy::Never, Policy::Always] {
            assert_eq!(Policy::parse(p.name()), Some(p));
            assert_eq!(Policy::from_u8(p as u8), Some(p));
        }
        assert_eq!(Policy::parse("if-different"), Some(Policy::IfDifferent));
        assert_eq!(Policy::parse("sometimes"), None);
        assert_eq!(Policy::from_u8(3), None);
    }
}
