//! Issue 33, item 2, over real sockets: what a rank holds from a peer's
//! reliable channel is bounded whatever that peer's socket sends.

use super::{establish_all, loopback_config, loopback_multicast_refusal, pump_until};
use crate::test_support::test_seed;
use crate::transport::Endpoint;
use crate::udp::UdpFaults;
use crate::udp::engine::record_limits;
use crate::udp::frame::encode_data;

/// Rank 1's socket sends rank 0 in-order fragments of the agreed size
/// that never end a record. Rank 0 takes in as many as the record cap
/// holds, and the next one fails its endpoint with an error naming rank
/// 1; a fragment longer than agreed is dropped first, changing nothing.
/// Before, the record grew for as long as fragments came.
#[test]
fn a_fragment_stream_without_the_last_flag_fails_the_channel_at_the_record_cap() {
    skip_without_loopback_multicast!("a_fragment_stream_without_the_last_flag_fails_the_channel_at_the_record_cap");
    const WINDOW_LEN: usize = 64;
    let config = loopback_config(test_seed(), UdpFaults::default());
    let mut ranks = establish_all(2, WINDOW_LEN, &config).into_iter().map(|(_, transport)| transport);
    let (zero, one) = (ranks.next().unwrap(), ranks.next().unwrap());
    let limits = record_limits(&zero.config, WINDOW_LEN);
    let (to_zero, stamp) = (zero.local_address(), one.stamp());
    let mut frame = Vec::new();

    encode_data(stamp, 0, false, &vec![1; limits.fragment + 1], &mut frame);
    one.send_raw(to_zero, &frame);
    let stats = pump_until(&zero, 1, |stats| stats.malformed_dropped);
    assert_eq!(stats.malformed_dropped, 1, "{stats:?}");
    assert!(zero.health().is_ok(), "an oversized fragment failed the endpoint");

    let fitting = limits.record / limits.fragment;
    let fragment = vec![2; limits.fragment];
    let mut failed_at = None;
    for seq in 0..(4 * fitting as u64 + 8) {
        encode_data(stamp, seq, false, &fragment, &mut frame);
        one.send_raw(to_zero, &frame);
        // Loopback queues the datagram at once: this progress reads it.
        zero.progress();
        if zero.health().is_err() {
            failed_at = Some(seq);
            break;
        }
    }
    assert_eq!(failed_at, Some(fitting as u64), "{fitting} fragments of {} fit the {}-byte cap: {:?}", limits.fragment, limits.record, zero.stats());
    let error = zero.health().unwrap_err().to_string();
    assert!(error.contains("rank 1 sent a reliable record longer than"), "{error}");
}
