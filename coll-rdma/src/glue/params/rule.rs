//! What an integer parameter accepts, and what an unacceptable value turns
//! into: each rule is written once here, and the warning names the
//! parameter, the value and the fallback, so that a user sees at once what
//! was done instead.

/// The values an integer parameter accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Rule {
    /// Any value; the settings decide what it means.
    Unchecked,
    /// `auto` asks for the automatic choice; a value in `valid` fixes it;
    /// anything else warns and is automatic.
    AutoOr { auto: i32, valid: Span },
    /// A size limit: -1 never hands a message over, 0 or more is a byte
    /// count; anything else warns and never hands over.
    ByteLimit,
    /// A value outside `min..=max` warns and becomes the nearest end.
    Clamped { min: i32, max: i32 },
    /// A value below `min` warns and becomes the default; `requirement`
    /// says what is accepted, as the warning shows it.
    AtLeast { min: i32, requirement: &'static str },
    /// A value outside `min..=max` warns and becomes the default (where
    /// the nearest end would be as arbitrary as any other value).
    Within { min: i32, max: i32 },
    /// Testing switches: 0 or less is off, without a warning.
    PositiveOrOff,
}

/// The fixed values of an `AutoOr` parameter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Span {
    From(i32),
    Between(i32, i32),
}

impl Span {
    fn contains(self, value: i32) -> bool {
        match self {
            Span::From(min) => value >= min,
            Span::Between(min, max) => (min..=max).contains(&value),
        }
    }

    fn describe(self) -> String {
        match self {
            Span::From(min) => format!(">= {min}"),
            Span::Between(min, max) => format!("{min}..={max}"),
        }
    }
}

/// A checked value: `None` is the automatic choice, "never" or "off",
/// whichever the parameter's rule means by it.
pub(crate) type Checked = Option<i32>;

impl Rule {
    /// The checked value of `coll_rdma_<name>=value`, and the warning to
    /// print when the value was not acceptable.
    pub(crate) fn check(self, name: &str, value: i32, default: i32) -> (Checked, Option<String>) {
        match self {
            Rule::Unchecked => (Some(value), None),
            Rule::AutoOr { auto, .. } if value == auto => (None, None),
            Rule::AutoOr { valid, .. } if valid.contains(value) => (Some(value), None),
            Rule::AutoOr { auto, valid } => (
                None,
                Some(format!(
                    "coll_rdma_{name}={value} is invalid ({auto} = automatic, or {}); using the automatic choice",
                    valid.describe()
                )),
            ),
            Rule::ByteLimit if value == -1 => (None, None),
            Rule::ByteLimit if value >= 0 => (Some(value), None),
            Rule::ByteLimit => (
                None,
                Some(format!("coll_rdma_{name}={value} is invalid (-1 = never, or a byte count); never handing messages over")),
            ),
            Rule::Clamped { min, max } if (min..=max).contains(&value) => (Some(value), None),
            Rule::Clamped { min, max } => {
                let nearest = value.clamp(min, max);
                (Some(nearest), Some(format!("coll_rdma_{name}={value} is outside {min}..={max}; using {nearest}")))
            }
            Rule::AtLeast { min, .. } if value >= min => (Some(value), None),
            Rule::AtLeast { requirement, .. } => {
                (Some(default), Some(format!("coll_rdma_{name}={value} is invalid ({requirement}); using {default}")))
            }
            Rule::Within { min, max } if (min..=max).contains(&value) => (Some(value), None),
            Rule::Within { min, max } => {
                (Some(default), Some(format!("coll_rdma_{name}={value} is outside {min}..={max}; using {default}")))
            }
            Rule::PositiveOrOff => (Some(value).filter(|&n| n > 0), None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RADIX: Rule = Rule::AutoOr { auto: 0, valid: Span::Between(1, 64) };
    const POLLS: Rule = Rule::AutoOr { auto: -1, valid: Span::From(0) };

    #[test]
    fn auto_or_range_takes_the_auto_value_and_the_range() {
        assert_eq!(RADIX.check("barrier_radix", 0, 0), (None, None));
        assert_eq!(RADIX.check("barrier_radix", 1, 0), (Some(1), None));
        assert_eq!(RADIX.check("barrier_radix", 64, 0), (Some(64), None));
        assert_eq!(POLLS.check("spin_polls", -1, -1), (None, None));
        assert_eq!(POLLS.check("spin_polls", 0, -1), (Some(0), None));
    }

    #[test]
    fn auto_or_range_warns_outside_and_chooses_automatically() {
        assert_eq!(
            RADIX.check("barrier_radix", -3, 0),
            (
                None,
                Some("coll_rdma_barrier_radix=-3 is invalid (0 = automatic, or 1..=64); using the automatic choice".to_string())
            )
        );
        assert_eq!(RADIX.check("barrier_radix", 65, 0).0, None);
        assert_eq!(
            POLLS.check("spin_polls", -2, -1),
            (None, Some("coll_rdma_spin_polls=-2 is invalid (-1 = automatic, or >= 0); using the automatic choice".to_string()))
        );
    }

    #[test]
    fn byte_limit_is_never_at_minus_one_and_warns_below() {
        assert_eq!(Rule::ByteLimit.check("bcast_max_bytes", -1, 16384), (None, None));
        assert_eq!(Rule::ByteLimit.check("bcast_max_bytes", 0, 16384), (Some(0), None));
        assert_eq!(
            Rule::ByteLimit.check("bcast_max_bytes", -5, 16384),
            (None, Some("coll_rdma_bcast_max_bytes=-5 is invalid (-1 = never, or a byte count); never handing messages over".to_string()))
        );
    }

    #[test]
    fn clamped_values_become_the_nearest_end() {
        let port = Rule::Clamped { min: 1, max: 255 };
        assert_eq!(port.check("verbs_port", 7, 1), (Some(7), None));
        assert_eq!(port.check("verbs_port", 300, 1), (Some(255), Some("coll_rdma_verbs_port=300 is outside 1..=255; using 255".to_string())));
        assert_eq!(port.check("verbs_port", 0, 1), (Some(1), Some("coll_rdma_verbs_port=0 is outside 1..=255; using 1".to_string())));
    }

    #[test]
    fn at_least_falls_back_to_the_default() {
        let stall = Rule::AtLeast { min: 0, requirement: "seconds >= 0" };
        assert_eq!(stall.check("stall_warning", 0, 10), (Some(0), None));
        assert_eq!(
            stall.check("stall_warning", -1, 10),
            (Some(10), Some("coll_rdma_stall_warning=-1 is invalid (seconds >= 0); using 10".to_string()))
        );
    }

    #[test]
    fn within_falls_back_to_the_default_outside_its_range() {
        let ttl = Rule::Within { min: 1, max: 255 };
        assert_eq!(ttl.check("udp_ttl", 255, 1), (Some(255), None));
        assert_eq!(ttl.check("udp_ttl", 0, 1), (Some(1), Some("coll_rdma_udp_ttl=0 is outside 1..=255; using 1".to_string())));
        assert_eq!(ttl.check("udp_ttl", 256, 1), (Some(1), Some("coll_rdma_udp_ttl=256 is outside 1..=255; using 1".to_string())));
    }

    #[test]
    fn testing_switches_are_off_at_zero_or_below_without_a_warning() {
        assert_eq!(Rule::PositiveOrOff.check("test_setup_pause_s", 0, 0), (None, None));
        assert_eq!(Rule::PositiveOrOff.check("test_setup_pause_s", -4, 0), (None, None));
        assert_eq!(Rule::PositiveOrOff.check("test_setup_pause_s", 3, 0), (Some(3), None));
    }

    #[test]
    fn unchecked_values_pass_as_they_are() {
        assert_eq!(Rule::Unchecked.check("priority", -7, 40), (Some(-7), None));
    }
}
