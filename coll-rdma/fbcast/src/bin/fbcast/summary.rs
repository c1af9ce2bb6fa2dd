//! Per-rank outcomes, gathered to the root and printed grouped by host.

use coll_rdma_fbcast::{ErrorCode, Failure, LocalReport};

/// Bytes of one rank's encoded outcome (MPI_Gather needs a fixed size).
pub const OUTCOME_BYTES: usize = 1024;
const HOST_MAX: usize = 255;
const HEADER: usize = 4 + 1 + 1 + 4 + 4 + 7 * 8 + 2 + 2;
const REASON_MAX: usize = OUTCOME_BYTES - HEADER - HOST_MAX;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RankOutcome {
    pub rank: i32,
    pub host: String,
    pub is_root: bool,
    pub report: LocalReport,
}

fn cut(text: &str, max: usize) -> &str {
    coll_rdma_fbcast::record::truncate_utf8(text, max)
}

impl RankOutcome {
    pub fn encode(&self) -> Vec<u8> {
        let r = &self.report;
        let host = cut(&self.host, HOST_MAX);
        let reason = r.failure.as_ref().map(|f| cut(&f.reason, REASON_MAX)).unwrap_or("");
        let mut out = Vec::with_capacity(OUTCOME_BYTES);
        out.extend_from_slice(&self.rank.to_le_bytes());
        out.push(self.is_root as u8);
        out.push(r.failure.is_some() as u8);
        out.extend_from_slice(&r.failure.as_ref().map_or(0, |f| f.code as i32).to_le_bytes());
        out.extend_from_slice(&r.shares_with.unwrap_or(-1).to_le_bytes());
        for n in [r.files_written, r.files_identical, r.bytes_written, r.dirs_created, r.files_sent, r.bytes_sent, r.not_regular_skipped] {
            out.extend_from_slice(&n.to_le_bytes());
        }
        out.extend_from_slice(&(host.len() as u16).to_le_bytes());
        out.extend_from_slice(&(reason.len() as u16).to_le_bytes());
        out.extend_from_slice(host.as_bytes());
        out.extend_from_slice(reason.as_bytes());
        out.resize(OUTCOME_BYTES, 0);
        out
    }

    pub fn decode(buf: &[u8]) -> Option<RankOutcome> {
        if buf.len() != OUTCOME_BYTES {
            return None;
        }
        let i32_at = |at: usize| i32::from_le_bytes(buf[at..at + 4].try_into().unwrap());
        let u64_at = |at: usize| u64::from_le_bytes(buf[at..at + 8].try_into().unwrap());
        let counts: Vec<u64> = (0..7).map(|i| u64_at(14 + 8 * i)).collect();
        let host_len = u16::from_le_bytes([buf[70], buf[71]]) as usize;
        let reason_len = u16::from_le_bytes([buf[72], buf[73]]) as usize;
        if host_len > HOST_MAX || reason_len > REASON_MAX {
            return None;
        }
        let host = std::str::from_utf8(&buf[HEADER..HEADER + host_len]).ok()?.to_string();
        let reason = std::str::from_utf8(&buf[HEADER + host_len..HEADER + host_len + reason_len]).ok()?.to_string();
        let failure = match buf[5] {
            0 => None,
            _ => Some(Failure::new(ErrorCode::from_i32(i32_at(6))?, reason)),
        };
        let shares = i32_at(10);
        Some(RankOutcome {
            rank: i32_at(0),
            host,
            is_root: buf[4] != 0,
            report: LocalReport {
                files_written: counts[0],
                files_identical: counts[1],
                bytes_written: counts[2],
                dirs_created: counts[3],
                files_sent: counts[4],
                bytes_sent: counts[5],
                not_regular_skipped: counts[6],
                shares_with: (shares >= 0).then_some(shares),
                failure,
            },
        })
    }

    /// What this rank did, in words.
    pub fn describe(&self) -> String {
        let r = &self.report;
        if let Some(f) = &r.failure {
            return format!("FAILED: {}", f.reason);
        }
        if self.is_root {
            let mut text = format!("root, sent {} ({})", files(r.files_sent), bytes(r.bytes_sent));
            if r.not_regular_skipped > 0 {
                text.push_str(&format!(", {} not regular files left out (links, devices...)", r.not_regular_skipped));
            }
            return text;
        }
        if let Some(leader) = r.shares_with {
            return format!("same destination file as rank {leader}, written there");
        }
        let mut parts = Vec::new();
        if r.files_written > 0 {
            parts.push(format!("written {} ({})", files(r.files_written), bytes(r.bytes_written)));
        }
        if r.files_identical > 0 {
            parts.push(format!("skipped as identical {}", files(r.files_identical)));
        }
        if r.dirs_created > 0 {
            parts.push(format!("{} created", plural(r.dirs_created, "directory", "directories")));
        }
        if parts.is_empty() { "nothing written".to_string() } else { parts.join(", ") }
    }
}

fn plural(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

fn files(n: u64) -> String {
    plural(n, "file", "files")
}

pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = n as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 { format!("{n} B") } else { format!("{value:.1} {}", UNITS[unit]) }
}

/// One line per host and outcome: `  host: ranks 1,3: written 1 file (64.0 MiB)`.
pub fn per_host_lines(outcomes: &[RankOutcome]) -> Vec<String> {
    let mut hosts: Vec<&str> = Vec::new();
    for o in outcomes {
        if !hosts.contains(&o.host.as_str()) {
            hosts.push(&o.host);
        }
    }
    let mut lines = Vec::new();
    for host in hosts {
        let mut groups: Vec<(String, Vec<i32>)> = Vec::new();
        for o in outcomes.iter().filter(|o| o.host == host) {
            let text = o.describe();
            match groups.iter_mut().find(|(t, _)| *t == text) {
                Some((_, ranks)) => ranks.push(o.rank),
                None => groups.push((text, vec![o.rank])),
            }
        }
        for (text, ranks) in groups {
            let list: Vec<String> = ranks.iter().map(i32::to_string).collect();
            let label = if ranks.len() == 1 { "rank" } else { "ranks" };
            lines.push(format!("  {host}: {label} {}: {text}", list.join(",")));
        }
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome(rank: i32, host: &str, report: LocalReport) -> RankOutcome {
        RankOutcome { rank, host: host.into(), is_root: rank == 0, report }
    }

    #[test]
    fn outcomes_round_trip_and_long_reasons_are_cut() {
        let failed = LocalReport {
            failure: Some(Failure::new(ErrorCode::Dest, "é".repeat(2000))),
            files_written: 3,
            bytes_written: 1 << 40,
            shares_with: Some(2),
            ..Default::default()
        };
        let o = outcome(5, "node-5", failed);
        let back = RankOutcome::decode(&o.encode()).unwrap();
        assert_eq!((back.rank, back.host.as_str(), back.is_root), (5, "node-5", false));
        assert_eq!(back.report.files_written, 3);
        assert_eq!(back.report.bytes_written, 1 << 40);
        assert_eq!(back.report.shares_with, Some(2));
        let reason = &back.report.failure.unwrap().reason;
        assert!(reason.len() <= REASON_MAX && reason.chars().all(|c| c == 'é'));
        let plain = outcome(0, "h", LocalReport { files_sent: 1, bytes_sent: 10, ..Default::default() });
        assert_eq!(RankOutcome::decode(&plain.encode()).unwrap(), plain);
        assert!(RankOutcome::decode(&[0u8; 10]).is_none());
        let mut bad = plain.encode();
        bad[71] = 0xff; // host length above 255
        assert!(RankOutcome::decode(&bad).is_none());
    }

    #[test]
    fn grouped_by_host_then_outcome() {
        let written = LocalReport { files_written: 1, bytes_written: 64 << 20, ..Default::default() };
        let identical = LocalReport { files_identical: 1, ..Default::default() };
        let failed = LocalReport { failure: Some(Failure::new(ErrorCode::Dest, "cannot create a temporary file in /x: Read-only file system")), ..Default::default() };
        let list = [
            outcome(0, "a", LocalReport { files_sent: 1, bytes_sent: 64 << 20, ..Default::default() }),
            outcome(1, "b", written.clone()),
            outcome(2, "a", identical),
            outcome(3, "b", written),
            outcome(4, "c", failed),
        ];
        assert_eq!(
            per_host_lines(&list),
            [
                "  a: rank 0: root, sent 1 file (64.0 MiB)",
                "  a: rank 2: skipped as identical 1 file",
                "  b: ranks 1,3: written 1 file (64.0 MiB)",
                "  c: rank 4: FAILED: cannot create a temporary file in /x: Read-only file system",
            ]
        );
    }

    #[test]
    fn byte_counts() {
        assert_eq!(bytes(512), "512 B");
        assert_eq!(bytes(1536), "1.5 KiB");
        assert_eq!(bytes(64 << 20), "64.0 MiB");
    }
}
