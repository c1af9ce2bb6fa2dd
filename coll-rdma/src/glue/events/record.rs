//! One event as one line of JSON: the common header (schema version, event
//! name, communicator, rank, size) followed by the event's own fields.
//! serde_json does the escaping, so a reason text holding quotes, control
//! characters or any Unicode stays one valid line.

use serde_json::{Map, Value};

/// The schema's version, the `v` of every line; docs/events.md says what
/// each version holds. Raise it when a field changes meaning or goes away
/// (adding fields or events keeps it).
pub(crate) const SCHEMA_VERSION: u32 = 1;

/// Which communicator an event is about, and this process's place in it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(in crate::glue) struct Origin {
    pub cid: u32,
    pub rank: usize,
    pub size: usize,
}

/// The line for event `name` from `origin` with `fields` (an object; any
/// other value is kept under `data`), without the newline. The header's
/// keys win over a field of the same name. Keys come out sorted (readers
/// must not rely on any order).
pub(super) fn encode(name: &str, origin: Origin, fields: Value) -> String {
    let mut line = Map::new();
    line.insert("v".into(), SCHEMA_VERSION.into());
    line.insert("event".into(), name.into());
    line.insert("cid".into(), origin.cid.into());
    line.insert("rank".into(), origin.rank.into());
    line.insert("size".into(), origin.size.into());
    match fields {
        Value::Object(fields) => {
            for (key, value) in fields {
                line.entry(key).or_insert(value);
            }
        }
        Value::Null => {}
        other => {
            line.insert("data".into(), other);
        }
    }
    Value::Object(line).to_string()
}

/// A byte count where `usize::MAX` means "no such length" (a path that is
/// off): `null` in the event.
pub(in crate::glue) fn bytes_or_null(bytes: usize) -> Value {
    if bytes == usize::MAX { Value::Null } else { bytes.into() }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const ORIGIN: Origin = Origin { cid: 7, rank: 2, size: 4 };

    fn parsed(line: &str) -> Value {
        assert!(!line.contains('\n'), "one event per line: {line}");
        serde_json::from_str(line).expect("every line is valid JSON")
    }

    #[test]
    fn header_and_fields() {
        let line = encode("comm_freed", ORIGIN, json!({"transport": "shm", "failed": false}));
        let expected = json!({"v": 1, "event": "comm_freed", "cid": 7, "rank": 2, "size": 4, "transport": "shm", "failed": false});
        assert_eq!(parsed(&line), expected);
        assert_eq!(expected["v"], SCHEMA_VERSION);
    }

    #[test]
    fn a_field_cannot_overwrite_the_header() {
        let value = parsed(&encode("fault", ORIGIN, json!({"v": 99, "rank": 0, "why": "x"})));
        assert_eq!((value["v"].as_u64(), value["rank"].as_u64(), value["why"].as_str()), (Some(1), Some(2), Some("x")));
    }

    #[test]
    fn reasons_with_quotes_controls_and_unicode_stay_one_line() {
        let reason = "datatype \"vec\\tor\"\nnot contiguous\u{1}; rank\u{e9} \u{1F600}";
        let line = encode("handover", ORIGIN, json!({ "reason": reason }));
        assert!(line.contains(r#"\"vec\\tor\"\nnot contiguous\u0001"#), "{line}");
        assert_eq!(parsed(&line)["reason"].as_str(), Some(reason));
    }

    #[test]
    fn other_values_go_under_data_and_null_adds_nothing() {
        assert_eq!(parsed(&encode("x", ORIGIN, json!([1, 2])))["data"], json!([1, 2]));
        let bare = parsed(&encode("x", ORIGIN, Value::Null));
        assert_eq!(bare.as_object().map(Map::len), Some(5));
    }

    #[test]
    fn lengths_that_are_off_are_null() {
        assert_eq!(bytes_or_null(usize::MAX), Value::Null);
        assert_eq!(bytes_or_null(16384), json!(16384));
    }
}
