//! The parameter reference, docs/parameters.md, rendered from the table:
//! the rows' names, types, defaults, levels and help texts (what
//! `ompi_info` shows), between a fixed introduction and notes kept beside
//! this file. The committed file must equal the render; a unit test holds
//! it there, and `make params-doc` rewrites it.
//!
//! Invariant: every row of the table sits in exactly one group (a test
//! says which row is missing or repeated when the table changes).

use std::fmt::Write;

use ompi_sys as sys;

use super::table::{Id, Kind, Param, TABLE};

const INTRO: &str = include_str!("reference/intro.md");
const NOTES: &str = include_str!("reference/notes.md");

/// The reference's sections, each a heading and its rows in table order.
const GROUPS: &[(&str, &[Id])] = &[
    ("Selection and output", &[Id::Priority, Id::Verbose, Id::EventsFile]),
    ("Transport", &[Id::Transport, Id::VerbsDevice, Id::VerbsPort, Id::VerbsGidIndex, Id::VerbsMulticast, Id::VerbsProtection]),
    ("Schedule across nodes", &[Id::Hierarchy, Id::HierarchyQueuePairsMax]),
    ("Memory", &[Id::WindowMaxMib]),
    (
        "udp transport",
        &[
            Id::UdpInterface,
            Id::UdpGroupBase,
            Id::UdpPortRange,
            Id::UdpTtl,
            Id::UdpFragmentBytes,
            Id::UdpCwndInitial,
            Id::UdpSsthreshInitial,
            Id::UdpWindow,
            Id::UdpAckInterval,
            Id::UdpLossTolerance,
            Id::UdpRepairBackoff,
            Id::UdpSegmentationOffload,
            Id::UdpProtection,
            Id::UdpCipher,
        ],
    ),
    (
        "Barrier, waiting and self-tuning",
        &[
            Id::BarrierRadix,
            Id::SpinPolls,
            Id::StallWarning,
            Id::FaultTimeoutS,
            Id::ModelLatencyNs,
            Id::ModelPutGapNs,
            Id::Autotune,
            Id::AutotuneCalls,
        ],
    ),
    (
        "Allreduce and reduce",
        &[
            Id::AllreduceDegree,
            Id::AllreduceSegmentSize,
            Id::AllreduceExchangeMax,
            Id::AllreduceMaxBytes,
            Id::AllreduceParallelMinBytes,
            Id::RingSegmentSize,
            Id::UdpRingMaxBytes,
            Id::AllreduceRingMinBytes,
            Id::ReduceDegree,
            Id::ReduceSegmentSize,
            Id::ReduceMaxBytes,
            Id::ReduceParallelMinBytes,
            Id::ReduceRingMinBytes,
            Id::ReduceParallelSlicesMinBytes,
            Id::ReductionModelLatencyNs,
            Id::ReductionModelTransferPsPerByte,
            Id::ReductionModelCombinePsPerByte,
            Id::ReductionModelPutGapNs,
        ],
    ),
    (
        "Bcast",
        &[
            Id::BcastWindow,
            Id::BcastSlotSize,
            Id::BcastFragmentSize,
            Id::BcastCoRoots,
            Id::BcastAckInterval,
            Id::BcastTimeoutMs,
            Id::BcastNack,
            Id::BcastTailRepeat,
            Id::BcastParityPercent,
            Id::BcastMaxBytes,
            Id::BcastSingleCopyMinBytes,
            Id::BcastSingleCopyMaxBytes,
        ],
    ),
    (
        "Testing only",
        &[
            Id::TestPretendNodes,
            Id::TestRunningVersion,
            Id::TestModuleClassSize,
            Id::TestPanicAt,
            Id::TestThreadStopAt,
            Id::TestPackFailureAt,
            Id::TestSetupPauseS,
            Id::TestPretendNoCrossMemory,
            Id::TestUdpLossPercent,
            Id::TestUdpDuplicatePercent,
            Id::TestUdpReorderPercent,
        ],
    ),
];

/// `ompi_info`'s level as it prints it (1..=9; the enum counts from 0),
/// with the audience Open MPI gives each band of three.
fn level(level: sys::mca_base_var_info_lvl_t) -> String {
    let shown = level + 1;
    let audience = match shown {
        1..=3 => "user",
        4..=6 => "tuner",
        _ => "developer",
    };
    format!("{shown} ({audience})")
}

/// A table cell: a `|` would end the cell, a line break the row.
fn cell(text: &str) -> String {
    text.replace('|', "\\|").replace('\n', " ")
}

fn row(param: &Param) -> String {
    let (kind, default) = match param.kind {
        Kind::Int { default, .. } => ("int", default.to_string()),
        Kind::Text { default } => match default.to_str().unwrap_or("?") {
            "" => ("string", "(empty)".to_string()),
            text => ("string", format!("`{}`", cell(text))),
        },
    };
    let help = cell(param.help.to_str().unwrap_or("?"));
    format!("| `coll_rdma_{}` | {kind} | {default} | {} | {help} |\n", param.short_name(), level(param.level))
}

/// docs/parameters.md as the table, the introduction and the notes make it.
pub(crate) fn render() -> String {
    let mut out = String::from(INTRO);
    for (title, ids) in GROUPS {
        let _ = write!(out, "\n## {title}\n\n| parameter | type | default | level | help |\n|---|---|---|---|---|\n");
        for id in *ids {
            out.push_str(&row(&TABLE[*id as usize]));
        }
    }
    out.push('\n');
    out.push_str(NOTES);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const REFERENCE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/parameters.md");

    #[test]
    fn every_row_is_in_exactly_one_group() {
        for param in TABLE.iter() {
            let homes = GROUPS.iter().filter(|(_, ids)| ids.contains(&param.id)).count();
            assert_eq!(homes, 1, "coll_rdma_{} is in {homes} groups of reference.rs, not 1", param.short_name());
        }
    }

    #[test]
    fn rows_show_name_type_default_level_and_help() {
        let rendered = render();
        for param in TABLE.iter() {
            let line = rendered
                .lines()
                .find(|line| line.starts_with(&format!("| `coll_rdma_{}` |", param.short_name())))
                .unwrap_or_else(|| panic!("no row for {}", param.short_name()));
            let cells: Vec<&str> = line.split(" | ").collect();
            assert_eq!(cells.len(), 5, "{line}");
            match param.kind {
                Kind::Int { default, .. } => {
                    assert_eq!((cells[1], cells[2].parse::<i32>().ok()), ("int", Some(default)), "{line}")
                }
                Kind::Text { default } => {
                    assert_eq!(cells[1], "string", "{line}");
                    let shown = cells[2].trim_matches('`');
                    let expected = default.to_str().unwrap();
                    assert_eq!(shown, if expected.is_empty() { "(empty)" } else { expected }, "{line}");
                }
            }
            assert!(cells[3].starts_with(&(param.level + 1).to_string()), "{line}");
            assert_eq!(cells[4].trim_end_matches(" |"), param.help.to_str().unwrap(), "{line}");
        }
        assert_eq!(level(sys::OPAL_INFO_LVL_2), "2 (user)");
        assert_eq!(level(sys::OPAL_INFO_LVL_5), "5 (tuner)");
        assert_eq!(level(sys::OPAL_INFO_LVL_9), "9 (developer)");
    }

    /// docs/parameters.md is the render; with UPDATE_PARAMETER_REFERENCE=1
    /// (`make params-doc`) this test writes it instead of comparing.
    #[test]
    fn parameter_reference_is_current() {
        let rendered = render();
        if std::env::var_os("UPDATE_PARAMETER_REFERENCE").is_some_and(|value| value == "1") {
            std::fs::write(REFERENCE, &rendered).expect("writing docs/parameters.md");
            return;
        }
        let committed = std::fs::read_to_string(REFERENCE).unwrap_or_default();
        if committed != rendered {
            let first_difference = committed
                .lines()
                .zip(rendered.lines())
                .position(|(old, new)| old != new)
                .map_or_else(|| "its length".to_string(), |line| format!("line {}", line + 1));
            panic!(
                "docs/parameters.md differs from the parameter table (first at {first_difference}): run `make params-doc`"
            );
        }
    }
}
