//! The waits inside a transport's own channels, here for room in a
//! shared-memory ring (the verbs send queue and staging take the same
//! path), follow the process's wait policy, which the Open MPI glue sets
//! from `coll_rdma_spin_polls`, `coll_rdma_stall_warning` and
//! `coll_rdma_fault_timeout_s`. A test binary of its own, since that
//! policy is process-wide: the tests here take turns.

use std::fmt::Write as _;
use std::sync::{Mutex, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

use btl_ibmc::fabric::{Fabric, FabricConfig};
use btl_ibmc::{ReliableChannel, ShmTransport, TransportError, WaitPolicy, establish, set_process_wait_policy};

/// More messages than a ring holds, so that the sender has to wait.
const MESSAGES: usize = 40;

static ONE_POLICY_AT_A_TIME: Mutex<()> = Mutex::new(());

fn two_shm_ranks() -> (ShmTransport, ShmTransport) {
    let endpoints = Fabric::new(2, 0, FabricConfig::default());
    let mut transports = thread::scope(|scope| {
        let handles: Vec<_> =
            endpoints.into_iter().enumerate().map(|(rank, endpoint)| scope.spawn(move || establish(&endpoint, rank, 2, 4096))).collect();
        handles.into_iter().map(|handle| handle.join().expect("setup panicked").expect("shared-memory setup failed")).collect::<Vec<_>>()
    });
    let receiver = transports.pop().expect("rank 1");
    (transports.pop().expect("rank 0"), receiver)
}

/// Rank 0 sends `MESSAGES` to rank 1 on a thread named "sender"; nobody
/// receives yet, so once the ring is full the sender waits for room.
fn start_sending(sender: ShmTransport) -> thread::JoinHandle<Result<(), TransportError>> {
    thread::Builder::new()
        .name("sender".into())
        .spawn(move || (0..MESSAGES).try_for_each(|index| sender.send_reliable(1, &[index as u8; 64])))
        .expect("cannot start the sender")
}

fn receive_everything(receiver: &ShmTransport) {
    let mut message = Vec::new();
    for _ in 0..MESSAGES {
        let started = Instant::now();
        while receiver.poll_reliable(&mut message).is_none() {
            assert!(started.elapsed() < Duration::from_secs(60), "a message never came");
            thread::yield_now();
        }
    }
}

#[test]
fn the_spin_polls_from_the_parameters_govern_a_wait_for_room_in_a_ring() {
    let _turn = ONE_POLICY_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    // A wait's clock starts when it stops spinning: one that is still
    // spinning never reaches its fault timeout (before, the ring's wait
    // spun a fixed 1000 polls whatever the policy, and gave up here).
    let fault_timeout = Duration::from_millis(200);
    set_process_wait_policy(&WaitPolicy { spin_polls: u32::MAX, kernel_spin_polls: u32::MAX, stall_warning: Duration::MAX, fault_timeout: Some(fault_timeout) });
    let (sender, receiver) = two_shm_ranks();
    let sending = start_sending(sender);
    thread::sleep(fault_timeout * 10);
    assert!(!sending.is_finished(), "the wait for room stopped spinning before its {} polls: {:?}", u32::MAX, sending.join());
    receive_everything(&receiver);
    assert_eq!(sending.join().expect("the sender panicked"), Ok(()));
}

#[test]
fn the_stall_warning_and_fault_timeout_from_the_parameters_govern_a_wait_for_room_in_a_ring() {
    let _turn = ONE_POLICY_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    capture_warnings();
    let fault_timeout = Duration::from_millis(600);
    set_process_wait_policy(&WaitPolicy { spin_polls: 0, kernel_spin_polls: 0, stall_warning: Duration::from_millis(100), fault_timeout: Some(fault_timeout) });
    let (sender, _receiver) = two_shm_ranks();
    let started = Instant::now();
    let failure = start_sending(sender).join().expect("the sender panicked").expect_err("a send to a rank that never receives succeeded");
    assert!(started.elapsed() >= fault_timeout, "gave up after {:?}, before the {fault_timeout:?} fault timeout", started.elapsed());
    let text = failure.to_string();
    assert!(text.contains("gave up after") && text.contains("room in the shared-memory ring from rank 0 to rank 1"), "{text}");
    // At the stall warning, then at every doubling: long before the
    // default warning (10 s), at least twice before the fault timeout.
    let warnings = lock(captured()).clone();
    let about_the_ring = warnings.iter().filter(|line| line.contains("has waited") && line.contains("s for room in the shared-memory ring")).count();
    assert!(about_the_ring >= 2, "{warnings:?}");
    // Named like every other wait's warning: the MPI tests tolerate a
    // slow wait on a loaded machine only by this form, and users filter
    // their logs by it.
    let named = warnings.iter().filter(|line| line.starts_with("rank 0 of 2 has waited ") && line.contains("for room in the shared-memory ring")).count();
    assert_eq!(named, about_the_ring, "{warnings:?}");
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn captured() -> &'static Mutex<Vec<String>> {
    static WARNINGS: Mutex<Vec<String>> = Mutex::new(Vec::new());
    &WARNINGS
}

/// Keeps the sender's warnings for the test to read.
fn capture_warnings() {
    static INSTALLED: OnceLock<()> = OnceLock::new();
    INSTALLED.get_or_init(|| {
        let _ = tracing::subscriber::set_global_default(WarningCapture);
    });
}

struct WarningCapture;

struct MessageText(String);

impl tracing::field::Visit for MessageText {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            let _ = write!(self.0, "{value:?}");
        }
    }
}

impl tracing::Subscriber for WarningCapture {
    fn enabled(&self, metadata: &tracing::Metadata<'_>) -> bool {
        *metadata.level() <= tracing::Level::WARN
    }

    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }

    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}

    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}

    fn event(&self, event: &tracing::Event<'_>) {
        let mut text = MessageText(String::new());
        event.record(&mut text);
        if thread::current().name() == Some("sender") {
            lock(captured()).push(text.0);
        } else {
            eprintln!("{}: {}", event.metadata().level(), text.0);
        }
    }

    fn enter(&self, _: &tracing::span::Id) {}

    fn exit(&self, _: &tracing::span::Id) {}
}
